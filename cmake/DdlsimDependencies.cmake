# Every dependency comes from a Debian 12 package; one lookup mechanism per package.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SimGrid REQUIRED IMPORTED_TARGET simgrid>=3.32)   # libsimgrid-dev ships only a .pc file
find_package(yaml-cpp REQUIRED)                                     # libyaml-cpp-dev
find_package(Boost 1.74 REQUIRED)                                   # libboost-graph-dev (header-only part)
find_package(CLI11 2.1 CONFIG REQUIRED)                             # libcli11-dev (header-only): the command line
find_package(fmt 9 REQUIRED)                                        # libfmt-dev: text formatting
find_package(Protobuf 3.21 REQUIRED)                                # libprotobuf-dev + protobuf-compiler: Chakra ET
find_package(simdjson 3.0 REQUIRED)                                 # libsimdjson-dev: JSON of trace import
if(DDLSIM_BUILD_TESTS)
  find_package(doctest REQUIRED)                                    # doctest-dev
endif()
# Optional: `ddlsim run --mpi` spreads one sweep over MPI ranks (libopenmpi-dev). Only the C API,
# called from C++ (the project enables no C compiler; the deprecated C++ bindings are skipped).
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  set(DDLSIM_HAVE_MPI ON)
else()
  set(DDLSIM_HAVE_MPI OFF)
endif()
# Optional: the `ddlsim` executable allocates through tcmalloc (libgoogle-perftools-dev) when it is
# found. SimGrid creates and frees a few objects per message and timer, and glibc's malloc took a
# quarter of a flow-level point's time (docs/performance.md); the simulated numbers do not depend
# on the allocator. Not under sanitizers or in the fuzz build: ASan brings its own malloc.
option(DDLSIM_TCMALLOC "Link the ddlsim executable with tcmalloc when it is found" ON)
set(DDLSIM_ALLOCATOR "glibc malloc")
string(TOUPPER "${CMAKE_BUILD_TYPE}" _ddlsim_config)
set(_ddlsim_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_ddlsim_config}} ${CMAKE_EXE_LINKER_FLAGS}")
get_directory_property(_ddlsim_options COMPILE_OPTIONS)
if(DDLSIM_TCMALLOC AND NOT DDLSIM_FUZZ AND NOT "${_ddlsim_flags} ${_ddlsim_options}" MATCHES "-fsanitize")
  find_library(DDLSIM_TCMALLOC_LIBRARY NAMES tcmalloc_minimal)
  if(DDLSIM_TCMALLOC_LIBRARY)
    set(DDLSIM_ALLOCATOR "tcmalloc")
  endif()
endif()
