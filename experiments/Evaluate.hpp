// Simulating one resolved configuration into one CSV row.
//
//   evaluate_point  plan (experiments/Plan.hpp), refuse what does not fit in memory (status oom), build
//                   the TaskGraph, cost its compute tasks, replay it on SimGrid, and fill the row
//   describe_point  the row's configuration columns, without simulating
//
// evaluate_point runs SimGrid, whose engine is a per-process singleton: call it once per process
// (the sweep runner forks a child per point).
#pragma once

#include "experiments/Plan.hpp"
#include "experiments/ResultRow.hpp"
#include "experiments/TimelineView.hpp"
#include "sim/Replay.hpp"

#include <functional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// What a point simulates, just before the replay: its task graph (tensor-parallel groups folded
/// when the point folds them), the cluster it runs on, each compute task's seconds, and the row's
/// configuration and memory columns (`ddlsim export chakra` writes it out).
struct PointWorkload {
  const sim::TaskGraph& graph;
  const sim::ClusterSpec& cluster;
  const std::vector<double>& compute_seconds;
  const ResultRow& row;
};

struct EvaluateOptions {
  /// replay.on_progress, when set, sees the point's progress with the resource guard's estimate of
  /// its activities (ReplayProgress::estimated_activities).
  sim::ReplayOptions replay;
  std::string trace_dir;  ///< when set, write <trace_dir>/<experiment>_<config_id>.json (Chrome trace)
  TimelineView trace_view;  ///< what that timeline draws (--trace-ranks, --trace-window, --trace-counters)
  /// Every kernel at this fraction of its rows, activation transfers likewise (sim::ComputeOptions::scale).
  double work_scale = 1;
  /// When set, evaluate_point hands the point's workload to it instead of replaying it (no SimGrid
  /// engine is created) and returns the row without timing columns.
  std::function<void(const PointWorkload&)> on_workload;
};

/// The cluster of tensor-parallel groups (tp_aggregate): every tp GPUs become one device with tp times
/// their links (and the NICs they use).
sim::ClusterSpec aggregate_cluster(const sim::ClusterSpec& c, int tp);

/// Times `task` by the profile's measured curve of its operation and group, when one matches
/// (docs/collectives.md: the group size, and whether the group spans nodes; interpolated between
/// measured group sizes). `gpus_per_device` > 1 when each simulated device stands for that many GPUs
/// (tp aggregation): the task then carries their summed bytes, and each GPU's own collective is
/// measured at its share. Returns whether a curve timed it; else `missing` says which curve was missing.
bool apply_measured_collective(sim::CollectiveTask& task, const sim::ClusterSpec& cluster,
                               const calibration::CalibrationProfile& profile, int gpus_per_device,
                               std::string* missing = nullptr);

/// Times a point-to-point transfer by the profile's measured send/recv curve of the same spread
/// (inside a node, or across nodes), when there is one. Returns whether a curve timed it.
bool apply_measured_transfer(sim::TransferTask& transfer, const sim::ClusterSpec& cluster,
                             const calibration::CalibrationProfile& profile);

/// The configuration columns of a point's row (status left empty).
ResultRow describe_point(const PointConfig& point);

/// A row for point `index` that failed before it could be resolved or simulated.
ResultRow failed_row(std::size_t index, const std::string& experiment, Status status, const std::string& message);

/// Simulates a point (once per process). Never throws for a bad configuration: the row says
/// invalid, oom or error with a message.
ResultRow evaluate_point(const PointConfig& point, const EvaluateOptions& options);

}  // namespace ddlsim::experiments
