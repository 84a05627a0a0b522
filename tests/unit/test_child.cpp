// common/Child.hpp: a child's text comes home whole, and a child dies with its parent (a sweep point
// killed for its timeout takes the replay it forked along).
#include "common/Child.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace ddlsim;

TEST_CASE("run_in_child brings the child's text home, however long")
{
  const std::string big(1 << 20, 'x');  // more than a pipe holds at once
  const ChildOutput out = run_in_child([&] { return big + "end"; });
  CHECK(WIFEXITED(out.status));
  CHECK(WEXITSTATUS(out.status) == 0);
  CHECK(out.text.size() == big.size() + 3);
  CHECK(out.text.substr(out.text.size() - 3) == "end");
  CHECK(out.usage.ru_maxrss > 0);
}

TEST_CASE("a child of run_in_child dies with its parent")
{
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t middle = ::fork();
  REQUIRE(middle >= 0);
  if (middle == 0) {  // the point process: its replay child reports its pid, then waits forever
    ::close(fds[0]);
    run_in_child([&] {
      const pid_t self = ::getpid();
      (void)!::write(fds[1], &self, sizeof self);
      for (;;)
        ::pause();
      return std::string();
    });
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t grandchild = 0;
  REQUIRE(::read(fds[0], &grandchild, sizeof grandchild) == static_cast<ssize_t>(sizeof grandchild));
  ::close(fds[0]);
  ::kill(middle, SIGKILL);  // as the sweep does at --point-timeout
  int status = 0;
  ::waitpid(middle, &status, 0);
  // The grandchild was reparented and killed; it is gone (or a zombie of init) within a second.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = ::kill(grandchild, 0) != 0 && errno == ESRCH;
    if (!gone) {
      char path[64];
      std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(grandchild));
      if (FILE* f = std::fopen(path, "r")) {
        int pid = 0;
        char name[64], state = 0;
        if (std::fscanf(f, "%d %63s %c", &pid, name, &state) == 3 && state == 'Z')
          gone = true;
        std::fclose(f);
      }
    }
    if (!gone)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
  if (!gone)
    ::kill(grandchild, SIGKILL);  // leave nothing behind when the check fails
}
