// Speed benchmarks: how long one simulated point takes and how much memory it needs, next to a
// bare SimGrid workload of the same size (sim/BareDag.hpp), so that ddlsim's overhead over
// SimGrid is a measured ratio. Each measurement runs in a forked child (SimGrid's engine is a
// per-process singleton); its wall time and peak resident memory are the child's own.
//
// Scenarios are experiment files in bench/ (`ddlsim bench --list`); the benchmark simulates their
// point 0.
//
//   BenchMeasurement m = measure_point(Experiment::load("bench/gpt3-175b-1024.yaml").point(0), {});
//   BenchMeasurement bare = measure_bare_dag(m.activities, m.devices);
#pragma once

#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"

#include <cstdint>
#include <string>

namespace ddlsim::experiments {

struct BenchMeasurement {
  double wall_time_s = 0;          ///< the child's whole run (model, plan, platform, replay)
  double max_rss_bytes = 0;        ///< the child's peak resident memory
  std::uint64_t activities = 0;    ///< SimGrid activities
  int devices = 0;                 ///< simulated devices (hosts)
  double simulated_s = 0;          ///< simulated iteration time (0 for the bare DAG: its own makespan)
  std::string status;              ///< the point's status ("ok", "oom", ...)
  std::string message;
};

/// Simulates `point` in a child process. Throws ddlsim::Error when the child cannot be started or
/// dies without a result.
BenchMeasurement measure_point(const PointConfig& point, const EvaluateOptions& options);

/// Runs the bare SimGrid DAG with `activities` activities on `hosts` hosts in a child process.
BenchMeasurement measure_bare_dag(std::uint64_t activities, int hosts);

}  // namespace ddlsim::experiments
