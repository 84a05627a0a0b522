// A host that issues a GPU's kernels (ReplayOptions::host_start_s, sim/Framework.hpp) against the rule
// it stands for: on one GPU running 1F1B over M micro-batches, task i is issued from H_{i-1} to H_i
// (the host's running total) and runs t_i on the GPU; it starts at max(end_{i-1}, H_{i-1}) and ends at
// max(start + t_i, H_i). Host-bound, the iteration is the host's total; GPU-bound, the GPU's; in
// between, the recurrence, computed here, never by the simulator. One engine per test case.
#include "sim/Replay.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddlsim::sim;

namespace {

struct Costs {
  double gpu_f, gpu_b, host_f, host_b;
};

// Replays M micro-batches on one GPU; returns the makespan and what the recurrence gives.
std::pair<double, double> replay_fed(int m, Costs c)
{
  PipelinePlan plan;
  plan.schedule = ScheduleKind::one_f_one_b;
  plan.micro_batches = m;
  plan.micro_batch_size = 1;
  plan.stages.emplace_back().layers = {0, 1};
  const TaskGraph graph = build_schedule(plan);
  std::vector<double> seconds(graph.size(), 0.0);
  ReplayOptions options;
  options.host_start_s.assign(graph.size(), 0.0);
  options.host_end_s.assign(graph.size(), 0.0);
  double host = 0, end = 0;
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::compute || graph.compute(id).phase == Phase::optimizer)
      continue;
    const bool fwd = graph.compute(id).phase == Phase::forward;
    seconds[id] = fwd ? c.gpu_f : c.gpu_b;
    options.host_start_s[id] = host;
    host += fwd ? c.host_f : c.host_b;
    options.host_end_s[id] = host;
    end = std::max(std::max(end, options.host_start_s[id]) + seconds[id], host);  // the rule, in id order
  }
  ClusterSpec cluster;
  cluster.name = "one";
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  cluster.gpu_memory = 1e12;
  cluster.intra_node = {.bandwidth = 1e12, .latency = 0.0};
  return {replay(graph, cluster, seconds, options).makespan_s, end};
}

}  // namespace

TEST_CASE("host-bound: the iteration is the host's time")
{
  const auto [makespan, rule] = replay_fed(8, {.gpu_f = 1e-3, .gpu_b = 2e-3, .host_f = 5e-3, .host_b = 7e-3});
  CHECK(makespan == doctest::Approx(8 * (5e-3 + 7e-3)).epsilon(1e-12));
  CHECK(makespan == doctest::Approx(rule).epsilon(1e-12));
}

TEST_CASE("GPU-bound: the iteration is the GPU's time")
{
  const auto [makespan, rule] = replay_fed(8, {.gpu_f = 5e-3, .gpu_b = 9e-3, .host_f = 1e-3, .host_b = 2e-3});
  CHECK(makespan == doctest::Approx(8 * (5e-3 + 9e-3)).epsilon(1e-12));
  CHECK(makespan == doctest::Approx(rule).epsilon(1e-12));
}

TEST_CASE("host and GPU each the slower in turn: the recurrence")
{
  // Forward host-bound, backward GPU-bound: neither total alone.
  const auto [makespan, rule] = replay_fed(5, {.gpu_f = 1e-3, .gpu_b = 6e-3, .host_f = 4e-3, .host_b = 1e-3});
  CHECK(makespan > 5 * (4e-3 + 1e-3));
  CHECK(makespan > 5 * (1e-3 + 6e-3));
  CHECK(makespan == doctest::Approx(rule).epsilon(1e-12));
}
