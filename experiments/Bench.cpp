#include "experiments/Bench.hpp"

#include "common/Error.hpp"
#include "sim/BareDag.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ddlsim::experiments {
namespace {

// Runs `work` (which returns a line of text) in a child; returns that text, its wall time and peak RSS.
template <typename Work> BenchMeasurement in_child(Work work, std::string& text)
{
  int fds[2];
  if (::pipe(fds) != 0)
    throw Error("cannot create a pipe for the benchmark child");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error("cannot fork the benchmark child");
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = work();
    } catch (const std::exception& e) {
      out = std::string("error\x1f") + e.what();
    }
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
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  struct rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  BenchMeasurement m;
  m.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.max_rss_bytes = static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports kilobytes
  if (!WIFEXITED(status) || text.empty())
    throw Error("the benchmark child died without a result");
  return m;
}

}  // namespace

BenchMeasurement measure_point(const PointConfig& point, const EvaluateOptions& options)
{
  std::string text;
  BenchMeasurement m = in_child([&] { return evaluate_point(point, options).serialize(); }, text);
  const auto row = ResultRow::deserialize(text);
  if (!row)
    throw Error("the benchmark child sent no result: " + text);
  m.status = row->get("status");
  m.message = row->get("message");
  if (!row->get("sim_activities").empty())
    m.activities = std::stoull(row->get("sim_activities"));
  if (!row->get("iteration_time_s").empty())
    m.simulated_s = std::stod(row->get("iteration_time_s"));
  // Simulated devices: GPUs, or tensor-parallel groups when they are folded into one device.
  const bool folded = row->get("collective_fidelity").find("+aggregated") != std::string::npos;
  m.devices = point.parallelism.gpus() / (folded ? point.parallelism.tp : 1);
  return m;
}

BenchMeasurement measure_bare_dag(std::uint64_t activities, int hosts)
{
  std::string text;
  BenchMeasurement m = in_child(
      [&] {
        const sim::BareDagResult r = sim::run_bare_dag(activities, hosts);
        std::ostringstream out;
        out << "ok\x1f" << r.activities << '\x1f' << r.makespan_s;
        return out.str();
      },
      text);
  std::istringstream in(text);
  std::string status, count, makespan;
  std::getline(in, status, '\x1f');
  std::getline(in, count, '\x1f');
  std::getline(in, makespan, '\x1f');
  m.status = status;
  if (status != "ok")
    throw Error("bare SimGrid DAG failed: " + count);
  m.activities = std::stoull(count);
  m.simulated_s = std::stod(makespan);
  m.devices = hosts;
  return m;
}

}  // namespace ddlsim::experiments
