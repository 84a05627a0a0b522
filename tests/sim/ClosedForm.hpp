// What the closed-form schedule tests share (test_context_parallel, test_tp_overlap): one node of
// `gpus` GPUs with links of `bandwidth` B/s and no latency, a one-micro-batch GPipe plan without an
// optimizer step, and a collective's own time at analytic fidelity (sim::analytic_seconds).
#pragma once

#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"
#include "sim/Schedules.hpp"

#include <vector>

namespace ddlsim::sim::testing {

inline ClusterSpec one_node(int gpus, double bandwidth)
{
  ClusterSpec cluster;
  cluster.name = "test";
  cluster.gpus_per_node = gpus;
  cluster.gpu_memory = 1e12;
  cluster.intra_node = {.bandwidth = bandwidth, .latency = 0.0};
  return cluster;
}

inline PipelinePlan one_micro_batch()
{
  PipelinePlan plan;
  plan.schedule = ScheduleKind::gpipe;
  plan.micro_batches = 1;
  plan.micro_batch_size = 1;
  plan.optimizer_step = false;
  return plan;
}

/// The time of a ring collective of `bytes` over GPUs 0 .. gpus - 1 of one_node(gpus, bandwidth).
inline double analytic_collective(CollectiveKind kind, int gpus, double bytes, double bandwidth)
{
  const ClusterSpec cluster = one_node(gpus, bandwidth);
  CollectiveTask c{.kind = kind, .algorithm = CollectiveAlgorithm::ring, .fidelity = CollectiveFidelity::analytic,
                   .group = {}, .bytes = bytes};
  for (int d = 0; d < gpus; ++d)
    c.group.push_back(d);
  resolve_collective(c, cluster);
  return analytic_seconds(c, cluster);
}

/// Replays `g` on `cluster`, each compute task taking compute_seconds(task) (once per process: the
/// engine is a singleton).
template <typename ComputeSeconds>
ReplayResult replay_closed(TaskGraph& g, const ClusterSpec& cluster, ComputeSeconds compute_seconds)
{
  std::vector<double> seconds(g.size(), 0.0);
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == TaskKind::collective)
      resolve_collective(g.collective(id), cluster);
    else if (g.kind(id) == TaskKind::compute)
      seconds[id] = compute_seconds(g.compute(id));
  }
  return replay(g, cluster, seconds);
}

}  // namespace ddlsim::sim::testing
