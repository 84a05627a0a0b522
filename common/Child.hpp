// Running work in a forked child process and bringing its result home as text: what one process
// cannot do twice (SimGrid's engine is one per process) or should measure alone (`ddlsim bench`).
//
//   ChildOutput out = run_in_child([&] { return result.serialize(); });
//   if (!WIFEXITED(out.status) || out.text.empty()) ...
#pragma once

#include <functional>
#include <string>

#include <sys/resource.h>

namespace ddlsim {

struct ChildOutput {
  std::string text;        ///< all the child wrote
  int status = 0;          ///< as waitpid gives it
  struct rusage usage {};  ///< the child's, with the children it waited for (ru_maxrss: the largest)
};

/// Forks after flushing stdio; the child calls `work` (which must not throw: a child has nowhere to
/// throw to, so it encodes failures in its text), writes what it returns to a pipe and leaves with
/// _exit(0); the parent reads everything and waits for it. Throws ddlsim::Error when the pipe or the
/// child cannot be made.
ChildOutput run_in_child(const std::function<std::string()>& work);

}  // namespace ddlsim
