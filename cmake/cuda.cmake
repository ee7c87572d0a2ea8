# MAGICPIG_CUDA = AUTO | ON | OFF decides whether the CUDA sources are compiled; the result is
# MAGICPIG_WITH_CUDA. AUTO turns CUDA on when an nvcc is found, so a machine without the
# toolkit still builds everything else. No GPU is needed to build: only to run.
set(MAGICPIG_WITH_CUDA OFF)
if(NOT MAGICPIG_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(MAGICPIG_WITH_CUDA ON)
  elseif(MAGICPIG_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MAGICPIG_CUDA=ON but no CUDA compiler (nvcc) was found; put nvcc on PATH "
                        "or set CMAKE_CUDA_COMPILER, or configure with -DMAGICPIG_CUDA=OFF")
  elseif(NOT MAGICPIG_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "MAGICPIG_CUDA must be AUTO, ON or OFF (got '${MAGICPIG_CUDA}')")
  endif()
endif()

if(MAGICPIG_WITH_CUDA)
  # Turing and later (what nvcc 13 still targets) as machine code, plus Hopper PTX so that
  # newer GPUs JIT-compile it. Override with -DCMAKE_CUDA_ARCHITECTURES=90 for a faster build.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90")
  endif()
  enable_language(CUDA)
  # C++17 for .cu files: CMake 3.25 does not know nvcc 13's C++20 flag. CUDA code includes
  # only headers that stay within C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "magicpig: CUDA on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "magicpig: CUDA off (MAGICPIG_CUDA=${MAGICPIG_CUDA})")
endif()
