#include "cli/Plot.hpp"

#include "common/DataPath.hpp"
#include "common/Error.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace ddlsim::cli {
namespace {

// Runs argv (argv[0] looked up on PATH) with its output to stderr; its exit status, or -1.
int run(const std::vector<std::string>& args, bool quiet)
{
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    if (quiet) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
    } else {
      dup2(STDERR_FILENO, STDOUT_FILENO);  // the script prints the PNG's path: keep stdout for ddlsim
    }
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

}  // namespace

void draw_plot(const std::string& script, const std::string& csv, const std::string& png)
{
  std::vector<std::string> candidates;
  if (const char* chosen = std::getenv("DDLSIM_PYTHON"); chosen && *chosen) {
    candidates.emplace_back(chosen);  // the user's choice, and only it
  } else {
    candidates.emplace_back("python3");
    candidates.emplace_back("/usr/bin/python3");
  }
  std::string python;
  for (const auto& c : candidates)
    if (run({c, "-c", "import matplotlib"}, true) == 0) {
      python = c;
      break;
    }
  if (python.empty()) {
    std::string tried;
    for (const auto& c : candidates)
      tried += (tried.empty() ? "" : ", ") + c;
    throw Error("--plot needs a python3 with matplotlib (tried " + tried +
                "): apt-get install python3-matplotlib, or set DDLSIM_PYTHON; the CSV " + csv + " is written");
  }
  const std::string path = (data_dir() / "plots" / script).string();
  if (run({python, path, csv, "-o", png}, false) != 0)
    throw Error("plots/" + script + " could not draw " + csv + " (its message is above); the CSV is written");
}

}  // namespace ddlsim::cli
