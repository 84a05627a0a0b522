#include "experiments/SweepRunner.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/core.h>
#include <map>
#include <memory>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ddlsim::experiments {
namespace {

struct Child {
  std::size_t index;
  int fd;
  std::string output;
  std::chrono::steady_clock::time_point started;
  bool timed_out = false;
  int progress_fd = -1;      // the child's progress reports, when asked for
  std::string progress;      // what came of them so far (lines)
};

// A progress report as one line of text, and back.
std::string progress_line(const sim::ReplayProgress& p)
{
  char text[160];
  std::snprintf(text, sizeof text, "%.17g %llu %.17g %.17g\n", p.simulated_s,
                static_cast<unsigned long long>(p.activities), p.estimated_activities, p.wall_s);
  return text;
}

void write_all(int fd, const std::string& text)
{
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    done += static_cast<std::size_t>(n);
  }
}

// Child side: simulate, send the row, and leave without running the parent's exit handlers.
// Progress goes to `progress_fd` (when >= 0), never blocking the simulation.
[[noreturn]] void run_child(const PointConfig& point, EvaluateOptions options, int fd, int progress_fd)
{
  if (progress_fd >= 0) {
    ::fcntl(progress_fd, F_SETFL, ::fcntl(progress_fd, F_GETFL) | O_NONBLOCK);
    options.replay.on_progress = [progress_fd](const sim::ReplayProgress& p) {
      const std::string line = progress_line(p);
      [[maybe_unused]] const ssize_t n = ::write(progress_fd, line.data(), line.size());  // dropped when full
    };
  }
  // Test hook (tests/cli/test_cli_sweep.py): DDLSIM_CRASH_POINT=N makes point N's process abort, as
  // a crashing simulation would, so that the test sees the sweep report it and go on.
  if (const char* crash = std::getenv("DDLSIM_CRASH_POINT"); crash && std::to_string(point.index) == crash)
    std::abort();
  std::string text;
  try {
    text = evaluate_point(point, options).serialize();
  } catch (const std::exception& e) {
    text = failed_row(point.index, point.experiment, Status::error, e.what()).serialize();
  }
  write_all(fd, text);
  ::close(fd);
  ::_exit(0);
}

std::string describe_exit(int status)
{
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "simulation process killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status))
    return "simulation process exited with code " + std::to_string(WEXITSTATUS(status)) + " without a result";
  return "simulation process ended abnormally";
}

}  // namespace

void run_sweep(const PointSource& points, const SweepOptions& options, const PointProgressCallback& on_point_progress)
{
  std::map<pid_t, Child> running;
  std::size_t next = 0;
  std::size_t done = 0;
  const std::size_t jobs = static_cast<std::size_t>(std::max(1, options.jobs));
  auto finished          = [&](std::size_t index, const ResultRow& row) {
    if (options.on_row)
      options.on_row(index, row);
    ++done;
    if (options.on_progress)
      options.on_progress(done, points.count);
  };

  while (next < points.count || !running.empty()) {
    while (running.size() < jobs && next < points.count) {
      const std::size_t i = next++;
      if (!points.valid(i)) { // nothing to simulate: no process needed
        finished(i, evaluate_point(points.point(i), options.evaluate));
        continue;
      }
      int fds[2];
      int progress[2] = {-1, -1};
      if (::pipe(fds) != 0 || (on_point_progress && ::pipe(progress) != 0))
        throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
      std::fflush(nullptr);  // or buffered output would be written twice
      const pid_t pid = ::fork();
      if (pid < 0)
        throw Error(std::string("cannot fork a simulation process: ") + std::strerror(errno));
      if (pid == 0) {
        ::close(fds[0]);
        if (progress[0] >= 0)
          ::close(progress[0]);
        run_child(points.point(i), options.evaluate, fds[1], progress[1]);
      }
      ::close(fds[1]);
      if (progress[1] >= 0)
        ::close(progress[1]);
      running.emplace(pid, Child{i, fds[0], {}, std::chrono::steady_clock::now(), false, progress[0], {}});
    }
    if (running.empty())
      continue;

    std::vector<pollfd> polls;
    std::vector<pid_t> pids;
    for (const auto& [pid, child] : running) {
      polls.push_back({child.fd, POLLIN, 0});
      pids.push_back(pid);
    }
    const std::size_t results = polls.size();  // then the progress pipes, in the same order
    for (const auto& [pid, child] : running)
      polls.push_back({child.progress_fd, POLLIN, 0});
    // Wake up for the first child to pass the time limit, if there is one.
    int wait_ms = -1;
    if (options.point_timeout_s > 0) {
      const auto now = std::chrono::steady_clock::now();
      double soonest = options.point_timeout_s;
      for (auto& [pid, child] : running) {
        const double left = options.point_timeout_s - std::chrono::duration<double>(now - child.started).count();
        if (left <= 0 && !child.timed_out) {
          child.timed_out = true;
          ::kill(pid, SIGKILL);  // its pipe then closes, and it is collected below
        }
        soonest = std::min(soonest, std::max(left, 0.0));
      }
      wait_ms = static_cast<int>(soonest * 1000) + 1;
    }
    if (::poll(polls.data(), polls.size(), wait_ms) < 0 && errno != EINTR)
      throw Error(std::string("poll failed: ") + std::strerror(errno));
    for (std::size_t k = results; k < polls.size(); ++k) {
      if (polls[k].revents == 0 || polls[k].fd < 0)
        continue;
      Child& child = running.at(pids[k - results]);
      char buf[4096];
      const ssize_t n = ::read(child.progress_fd, buf, sizeof buf);
      if (n <= 0) {  // the child is done with it
        if (n == 0 || errno != EINTR) {
          ::close(child.progress_fd);
          child.progress_fd = -1;
        }
        continue;
      }
      child.progress.append(buf, static_cast<std::size_t>(n));
      // The last whole line is the latest report.
      const std::size_t end = child.progress.rfind('\n');
      if (end == std::string::npos)
        continue;
      const std::size_t before = end == 0 ? std::string::npos : child.progress.rfind('\n', end - 1);
      const std::size_t start = before == std::string::npos ? 0 : before + 1;
      sim::ReplayProgress p;
      unsigned long long activities = 0;
      if (std::sscanf(child.progress.c_str() + start, "%lg %llu %lg %lg", &p.simulated_s, &activities,
                      &p.estimated_activities, &p.wall_s) == 4) {
        p.activities = activities;
        on_point_progress(child.index,
                          {p, std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count()});
      }
      child.progress.erase(0, end + 1);
    }
    for (std::size_t k = 0; k < results; ++k) {
      if (polls[k].revents == 0)
        continue;
      Child& child = running.at(pids[k]);
      char buf[65536];
      const ssize_t n = ::read(child.fd, buf, sizeof buf);
      if (n > 0) {
        child.output.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      // End of file: the child is done; collect it.
      ::close(child.fd);
      if (child.progress_fd >= 0)
        ::close(child.progress_fd);
      int status = 0;
      while (::waitpid(pids[k], &status, 0) < 0 && errno == EINTR) {
      }
      auto row         = ResultRow::deserialize(child.output);
      const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!row || !clean || child.timed_out) {
        row = describe_point(points.point(child.index));
        row->set("status", std::string("error"));
        row->set("message", child.timed_out ? fmt::format("simulation process ran past --point-timeout {:g} s and was "
                                                          "killed",
                                                          options.point_timeout_s)
                                            : describe_exit(status));
      }
      const std::size_t index = child.index;
      running.erase(pids[k]);
      finished(index, *row);
    }
  }
}

PointSource point_source(const Experiment& exp, const PointList& list)
{
  auto shared = std::make_shared<const PointList>(list);
  // A point is built again where it runs; its inputs (model, cluster, profile files) were read when
  // the sweep was checked. One that no longer builds (a file changed or removed since) becomes an
  // invalid point whose row says why, and the sweep goes on.
  auto build = [&exp, shared](std::size_t k) {
    const std::size_t index = shared->index[k];
    try {
      return exp.point(index);
    } catch (const ConfigError& e) {
      PointConfig p;
      p.index      = index;
      p.experiment = exp.get_name();
      p.problems   = e.diagnostics();
      return p;
    }
  };
  return {.count = list.index.size(), .point = build, .valid = [shared](std::size_t k) {
            return static_cast<bool>(shared->valid[k]);
          }};
}

std::vector<ResultRow> run_sweep(const std::vector<PointConfig>& points, const SweepOptions& options,
                                 const PointProgressCallback& on_point_progress)
{
  std::vector<ResultRow> rows(points.size());
  SweepOptions collect = options;
  collect.on_row       = [&](std::size_t index, const ResultRow& row) {
    rows[index] = row;
    if (options.on_row)
      options.on_row(index, row);
  };
  const PointSource source{.count = points.size(),
                           .point = [&](std::size_t k) { return points[k]; },
                           .valid = [&](std::size_t k) { return points[k].is_valid(); }};
  run_sweep(source, collect, on_point_progress);
  return rows;
}

SweepCheck check_sweep(const Experiment& exp, const SweepCheckReport& report)
{
  const PointList list = exp.point_list();
  SweepCheck check{.points = list.index.size()};
  for (const std::size_t index : list.index) {
    const PointConfig p = exp.point(index);
    if (!p.is_valid()) {
      if (report)
        report(p, nullptr);
      continue;
    }
    ++check.valid;
    if (const MemoryVerdict verdict = check_memory(p); !verdict.fits()) {
      ++check.oom;
      if (report)
        report(p, &verdict);
    }
  }
  return check;
}

}  // namespace ddlsim::experiments
