# MPI support: decides DDPH_WITH_MPI for the MPI communicator
# (plugins/comm_mpi) and its tests. Each of those folders includes it: the
# MPI::MPI_C target FindMPI makes is visible only in the folder that found it,
# and the folder sees the decision as `if(DDPH_WITH_MPI)`.
#
#   -DDDPH_WITH_MPI=AUTO (default)  on when CMake's FindMPI finds MPI for C
#   -DDDPH_WITH_MPI=ON              MPI must be found, or configuring fails
#   -DDDPH_WITH_MPI=OFF             nothing MPI is looked for or built
#
# The tests also need a launcher (MPIEXEC_EXECUTABLE, i.e. mpirun); without
# one they are reported as skipped.
set(DDPH_WITH_MPI AUTO CACHE STRING "Build the MPI communicator: AUTO (when MPI is found), ON or OFF")
set_property(CACHE DDPH_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DDPH_WITH_MPI}" _ddph_mpi_request)

if(_ddph_mpi_request STREQUAL "AUTO")
  find_package(MPI COMPONENTS C QUIET)
elseif(DDPH_WITH_MPI)
  find_package(MPI COMPONENTS C REQUIRED)
else()
  set(MPI_C_FOUND FALSE)
endif()

if(MPI_C_FOUND)
  set(DDPH_WITH_MPI ON)
  set(_ddph_mpi_said "ddphooks: MPI on (MPI ${MPI_C_VERSION}; launcher: ${MPIEXEC_EXECUTABLE})")
else()
  set(DDPH_WITH_MPI OFF)
  set(_ddph_mpi_said "ddphooks: MPI off (DDPH_WITH_MPI=${_ddph_mpi_request}; install libopenmpi-dev)")
endif()
get_property(_ddph_mpi_told GLOBAL PROPERTY DDPH_MPI_TOLD)
if(NOT _ddph_mpi_told)
  message(STATUS "${_ddph_mpi_said}")
  set_property(GLOBAL PROPERTY DDPH_MPI_TOLD TRUE)
endif()
