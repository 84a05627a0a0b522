# Generates ${PROJECT_BINARY_DIR}/generated/ddlsim/config.hpp: the one place where configure-time
# facts (version, data directory, optional features) reach the code; the git hash is written at
# build time into generated/ddlsim/git_hash.hpp.
find_package(Git QUIET)
# The commit goes into its own header, written at every build (cmake/GitHash.cmake), not here at
# configure time: a build after a pull or a merge would otherwise report the configured commit.
add_custom_target(ddlsim_git_hash
                  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DGIT=${GIT_EXECUTABLE}
                          -DOUT=${PROJECT_BINARY_DIR}/generated/ddlsim/git_hash.hpp -P ${PROJECT_SOURCE_DIR}/cmake/GitHash.cmake
                  BYPRODUCTS ${PROJECT_BINARY_DIR}/generated/ddlsim/git_hash.hpp
                  VERBATIM)
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
