# Every dependency comes from a Debian 12 package; one lookup mechanism per package.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SimGrid REQUIRED IMPORTED_TARGET simgrid>=3.32)   # libsimgrid-dev ships only a .pc file
find_package(yaml-cpp REQUIRED)                                     # libyaml-cpp-dev
find_package(Boost 1.74 REQUIRED)                                   # libboost-graph-dev (header-only part)
if(DDLSIM_BUILD_TESTS)
  find_package(doctest REQUIRED)                                    # doctest-dev
endif()
