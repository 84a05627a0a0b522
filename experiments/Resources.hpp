// Resource guard: what simulating a point would cost, estimated before anything is built, and the
// limits a point must stay under.
//
// A point with 10^9 micro-batches or a million-way ring all-reduce is well formed, but building its
// task graph would exhaust the machine long before SimGrid finished. estimate_resources() counts,
// in closed form and without building anything, the tasks, dependency edges and SimGrid activities
// the schedule builders (sim/Schedules.hpp, sim/ParameterServer.hpp) and the replay
// (sim/Replay.hpp) would make, and from them the simulator's memory. Experiment::point() compares
// the estimate with the experiment's `limits:` and reports a point over them as invalid (an
// `invalid` row in a sweep; exit 1 when no point is left), naming the limit and how to raise it.
//
//   limits: {max_activities: 1e8, max_memory: 16GiB}    # in the experiment file (these defaults)
//
//   ResourceEstimate e = estimate_resources(point);       // e.activities, e.memory_bytes
//
// The activity count is exact when every compute task has a positive duration, gradients fill
// the buckets as estimated and every collective group has the shape of the first (the shipped
// experiments: tests/cli/test_cli_run.py checks the estimate against the replay's count); it is
// an upper bound otherwise. Memory is a linear model fitted to the peak RSS of `ddlsim bench`.
#pragma once

#include <cstdint>
#include <string>

namespace ddlsim::experiments {

struct PointConfig;
struct FoldPlan;

/// The defaults of an experiment's `limits:`.
struct ResourceLimits {
  double max_activities   = 1e8;                 ///< SimGrid activities of one point (~2-5 minutes of simulation)
  double max_memory_bytes = 16.0 * (1ULL << 30); ///< the simulating process's memory
};

struct ResourceEstimate {
  double tasks        = 0; ///< task-graph nodes
  double edges        = 0; ///< task-graph dependencies
  double activities   = 0; ///< SimGrid activities (Execs and Comms; analytic collectives are timers)
  double devices      = 0; ///< simulated hosts
  double memory_bytes = 0; ///< the simulating process's peak memory
};

/// Estimates a valid point's cost (doubles: counts of absurd points exceed 64-bit integers), as
/// simulated under `fold` (Plan.hpp). By default: the best case, the fold plan_fold() plans
/// before the stages are known without guessing which all-reduces NCCL's tuner runs as trees (the
/// guards of a whole file and of the search, which must not refuse a point that would fold);
/// evaluate_point() estimates under the fold it plans with its stages, and again under the one it
/// keeps where a collective does not fold.
ResourceEstimate estimate_resources(const PointConfig& point, const FoldPlan* fold = nullptr);

/// Why `point`, at `cost`, is over its limits (which limit, the estimate, how to raise it); empty
/// when it is within them.
std::string over_limits(const PointConfig& point, const ResourceEstimate& cost);

} // namespace ddlsim::experiments
