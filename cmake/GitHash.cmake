# Run at every build (cmake -P, from the ddlsim_git_hash target): writes OUT, a header with the
# source tree's commit, and leaves it untouched while the commit is the same, so that `ddlsim
# --version` names the commit that was built, not the one CMake was configured at, without
# rebuilding anything when nothing changed. Inputs: SRC (the source tree), GIT (git, may be empty).
set(hash "unknown")
if(GIT AND EXISTS "${SRC}/.git")
  execute_process(COMMAND ${GIT} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE _hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _hash)
    set(hash "${_hash}")
  endif()
endif()
set(text "// Generated at build time by cmake/GitHash.cmake: do not edit.\n#pragma once\n\nnamespace ddlsim::config {\n/// The commit the binary was built from (git rev-parse --short=12 HEAD), or \"unknown\".\ninline constexpr const char* git_hash = \"${hash}\";\n}  // namespace ddlsim::config\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
