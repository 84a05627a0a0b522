#include "common/Child.hpp"

#include "common/Error.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ddlsim {

ChildOutput run_in_child(const std::function<std::string()>& work)
{
  int fds[2];
  if (::pipe(fds) != 0)
    throw Error("cannot create a pipe for a child process");
  std::fflush(nullptr);  // or buffered output would be written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("cannot fork a child process");
  }
  if (pid == 0) {
    // Dies with its parent (a sweep's point killed for its timeout takes its replay with it).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    ::close(fds[0]);
    const std::string out = work();
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0 && errno != EINTR)
        break;
      if (n > 0)
        done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildOutput result;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    result.text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  while (::wait4(pid, &result.status, 0, &result.usage) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace ddlsim
