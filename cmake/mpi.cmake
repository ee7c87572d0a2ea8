# MAGICPIG_MPI = AUTO | ON | OFF decides whether context-parallel decoding (src/parallel) is built
# on MPI; the result is MAGICPIG_WITH_MPI. AUTO turns it on when find_package(MPI) finds a C++
# MPI (Debian: libopenmpi-dev), so a machine without one still builds everything else and
# `--context-parallel` then says that this build has no MPI.
set(MAGICPIG_WITH_MPI OFF)
if(NOT MAGICPIG_MPI STREQUAL "OFF")
  if(NOT MAGICPIG_MPI MATCHES "^(AUTO|ON)$")
    message(FATAL_ERROR "MAGICPIG_MPI must be AUTO, ON or OFF (got '${MAGICPIG_MPI}')")
  endif()
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(MAGICPIG_WITH_MPI ON)
    find_program(MAGICPIG_MPIEXEC NAMES ${MPIEXEC_EXECUTABLE} mpirun mpiexec)
  elseif(MAGICPIG_MPI STREQUAL "ON")
    message(FATAL_ERROR "MAGICPIG_MPI=ON but no C++ MPI was found (Debian: apt-get install openmpi-bin "
                        "libopenmpi-dev), or configure with -DMAGICPIG_MPI=OFF")
  endif()
endif()
if(MAGICPIG_WITH_MPI)
  message(STATUS "magicpig: MPI on (MPI ${MPI_CXX_VERSION}; launcher ${MAGICPIG_MPIEXEC})")
else()
  message(STATUS "magicpig: MPI off (MAGICPIG_MPI=${MAGICPIG_MPI})")
endif()
