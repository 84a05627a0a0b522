# Generates ${PROJECT_BINARY_DIR}/generated/ddlsim/config.hpp: the one place where build facts
# (version, git hash, data directory, optional features) reach the code.
find_package(Git QUIET)
set(DDLSIM_GIT_HASH "unknown")
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE _hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _hash)
    set(DDLSIM_GIT_HASH "${_hash}")
  endif()
endif()
set(DDLSIM_DATA_DIR "${PROJECT_SOURCE_DIR}")
if(DDLSIM_HAVE_CUDA)
  set(DDLSIM_HAVE_CUDA_01 1)
else()
  set(DDLSIM_HAVE_CUDA_01 0)
endif()
if(DDLSIM_HAVE_MPI)
  set(DDLSIM_HAVE_MPI_01 1)
else()
  set(DDLSIM_HAVE_MPI_01 0)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/config.hpp.in ${PROJECT_BINARY_DIR}/generated/ddlsim/config.hpp @ONLY)
