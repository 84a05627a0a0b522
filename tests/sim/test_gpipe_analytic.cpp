// GPipe and 1F1B against their closed form (Huang et al. 2019; Narayanan et al. 2021): with K
// balanced stages, M micro-batches and no communication cost, one iteration takes
// (M + K - 1)(t_f + t_b) under either schedule and every GPU idles for a share (K - 1)/(M + K - 1) of it. The expected values are computed here from the formula, never by the
// simulator. One SimGrid engine per process: each TEST_CASE is its own CTest test.
#include "sim/Replay.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

namespace {
constexpr double t_f = 1.3e-3;
constexpr double t_b = 2.9e-3;

void check_pipeline(int k, int m, int dp, ScheduleKind schedule = ScheduleKind::gpipe)
{
  PipelinePlan plan;
  plan.schedule = schedule;
  plan.dp = dp;
  plan.micro_batches = m;
  plan.micro_batch_size = 1;
  for (int s = 0; s < k; ++s)  // zero bytes: no communication cost
    plan.stages.emplace_back().layers = {static_cast<std::size_t>(s), static_cast<std::size_t>(s + 1)};
  const TaskGraph graph = build_schedule(plan);
  std::vector<double> seconds(graph.size(), 0.0);
  for (TaskId id = 0; id < graph.size(); ++id)
    if (graph.kind(id) == TaskKind::compute)
      seconds[id] = graph.compute(id).phase == Phase::forward ? t_f : graph.compute(id).phase == Phase::backward ? t_b : 0.0;

  ClusterSpec cluster;
  cluster.name = "ideal";
  cluster.nodes = 1;
  cluster.gpus_per_node = k * dp;
  cluster.gpu_memory = 1e12;
  cluster.intra_node = {.bandwidth = 1e12, .latency = 0.0};
  const ReplayResult r = replay(graph, cluster, seconds);

  const double expected = (m + k - 1) * (t_f + t_b);
  const double bubble = static_cast<double>(k - 1) / (m + k - 1);
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-9));
  for (const auto& d : r.devices) {
    CHECK(d.compute_s == doctest::Approx(m * (t_f + t_b)).epsilon(1e-9));
    CHECK(d.exposed_comm_s == doctest::Approx(0.0));
    CHECK(d.idle_s / r.makespan_s == doctest::Approx(bubble).epsilon(1e-9));
  }
}
}  // namespace

TEST_CASE("gpipe K=1 M=1") { check_pipeline(1, 1, 1); }
TEST_CASE("gpipe K=2 M=4") { check_pipeline(2, 4, 1); }
TEST_CASE("gpipe K=3 M=5") { check_pipeline(3, 5, 1); }
TEST_CASE("gpipe K=4 M=16") { check_pipeline(4, 16, 1); }
TEST_CASE("gpipe K=8 M=32") { check_pipeline(8, 32, 1); }
TEST_CASE("gpipe K=4 M=8 dp=2") { check_pipeline(4, 8, 2); }
TEST_CASE("1f1b K=2 M=4") { check_pipeline(2, 4, 1, ScheduleKind::one_f_one_b); }
TEST_CASE("1f1b K=4 M=4") { check_pipeline(4, 4, 1, ScheduleKind::one_f_one_b); }
TEST_CASE("1f1b K=4 M=16") { check_pipeline(4, 16, 1, ScheduleKind::one_f_one_b); }
TEST_CASE("1f1b K=8 M=3") { check_pipeline(8, 3, 1, ScheduleKind::one_f_one_b); }
TEST_CASE("1f1b K=4 M=8 dp=2") { check_pipeline(4, 8, 2, ScheduleKind::one_f_one_b); }

// Interleaved 1F1B (Narayanan et al. 2021): K devices, v chunks each (a chunk's passes take t_f/v
// and t_b/v), M micro-batches: the bubble is (K-1)/(vM) of the ideal time M(t_f + t_b).
namespace {
void check_interleaved(int k, int v, int m)
{
  PipelinePlan plan;
  plan.schedule = ScheduleKind::interleaved;
  plan.virtual_stages = v;
  plan.micro_batches = m;
  for (int c = 0; c < k * v; ++c) {
    StagePlan chunk;
    chunk.layers = {static_cast<std::size_t>(c), static_cast<std::size_t>(c + 1)};
    plan.stages.push_back(chunk);
  }
  const TaskGraph graph = build_schedule(plan);
  std::vector<double> seconds(graph.size(), 0.0);
  for (TaskId id = 0; id < graph.size(); ++id)
    if (graph.kind(id) == TaskKind::compute)
      seconds[id] = graph.compute(id).phase == Phase::forward ? t_f / v : graph.compute(id).phase == Phase::backward ? t_b / v : 0.0;
  ClusterSpec cluster;
  cluster.name = "ideal";
  cluster.gpus_per_node = k;
  cluster.gpu_memory = 1e12;
  cluster.intra_node = {.bandwidth = 1e12, .latency = 0.0};
  const ReplayResult r = replay(graph, cluster, seconds);
  const double ideal = m * (t_f + t_b);
  CHECK(r.makespan_s == doctest::Approx(ideal * (1 + (k - 1.0) / (v * m))).epsilon(1e-9));
  for (const auto& d : r.devices)
    CHECK(d.compute_s == doctest::Approx(ideal).epsilon(1e-9));
}
}  // namespace

TEST_CASE("interleaved K=4 v=2 M=8") { check_interleaved(4, 2, 8); }
TEST_CASE("interleaved K=4 v=4 M=4") { check_interleaved(4, 4, 4); }
TEST_CASE("interleaved K=2 v=3 M=6") { check_interleaved(2, 3, 6); }
TEST_CASE("interleaved K=8 v=2 M=16") { check_interleaved(8, 2, 16); }
