# Helpers shared by src/, tests/ and bench/.
#
# Every concern in src/<name>/ is one static library, magicpig_<name>, made of the .cpp files
# in that folder and in the subfolders named by SUBDIRS (a concern with parts, such as
# attention/lsh and attention/kernels; other subfolders, such as parallel/mpi, are added by hand). Files named *_avx2.cpp / *_avx512.cpp are compiled with the matching -m flags
# only; everything else stays baseline x86-64 so the binary runs on any CPU. The flag lists are
# what src/common/cpu.cpp checks before it selects Isa::Avx2 / Isa::Avx512.
set(MAGICPIG_AVX2_FLAGS "-mavx2;-mfma;-mf16c;-mpopcnt")
set(MAGICPIG_AVX512_FLAGS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;${MAGICPIG_AVX2_FLAGS}")
# out := the .cpp files of folder `name` and of its listed subfolders, under the current source dir.
function(magicpig_sources out name)
  set(globs ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  foreach(sub ${ARGN})
    list(APPEND globs ${CMAKE_CURRENT_SOURCE_DIR}/${name}/${sub}/*.cpp)
  endforeach()
  file(GLOB srcs CONFIGURE_DEPENDS ${globs})
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()

function(magicpig_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;LIBS;SUBDIRS" ${ARGN})
  magicpig_sources(srcs ${name} ${ARG_SUBDIRS})
  if(NOT srcs)  # a concern with headers only (or not written yet)
    add_library(magicpig_${name} INTERFACE)
    target_include_directories(magicpig_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(magicpig_${name} INTERFACE ${ARG_DEPS} ${ARG_LIBS} OpenMP::OpenMP_CXX Threads::Threads)
    return()
  endif()
  add_library(magicpig_${name} STATIC ${srcs})
  target_include_directories(magicpig_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(magicpig_${name} PUBLIC ${ARG_DEPS} ${ARG_LIBS} OpenMP::OpenMP_CXX Threads::Threads)
  foreach(f ${srcs})
    if(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${MAGICPIG_AVX2_FLAGS}")
    elseif(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${MAGICPIG_AVX512_FLAGS}")
    endif()
  endforeach()
endfunction()

# One GoogleTest executable per test folder tests/<name>/ (and its SUBDIRS, which mirror
# src/<name>/'s), registered with CTest.
function(magicpig_test name)
  cmake_parse_arguments(ARG "" "" "DEPS;SUBDIRS" ${ARGN})
  magicpig_sources(srcs ${name} ${ARG_SUBDIRS})
  if(NOT srcs)
    return()
  endif()
  add_executable(test_${name} ${srcs})
  target_link_libraries(test_${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(test_${name} PRIVATE
    MAGICPIG_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    MAGICPIG_BINARY_DIR="${PROJECT_BINARY_DIR}")
  foreach(f ${srcs})
    if(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${MAGICPIG_AVX2_FLAGS}")
    endif()
  endforeach()
  gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${name})
endfunction()
