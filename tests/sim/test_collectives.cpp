// Collective algorithms on the flow-level network against their closed forms (latency a, bandwidth
// B, buffer S), and analytic fidelity against the same forms:
//   tree all-reduce, full binary tree of depth D, C chunks   2 (D + C - 1)(a + 2 S/(C B))
//   hierarchical all-reduce, N nodes of m GPUs               2 (m-1)(a + S/(m B)) + 2 (N-1)(a_n + S/(m N B_n))
//   ring all-gather over n GPUs                              (n-1)(a + S/(n B))
// and DDP-style gradient buckets overlapped with backward: with n_b buckets whose backward takes
// t_b each and whose all-reduce takes t_ar each, the iteration is
//   t_f + n_b t_b + t_ar             when t_b >= t_ar (every bucket but the last hidden)
//   t_f + t_b + n_b t_ar             when t_b <  t_ar (communication-bound)
// The expected values come from these formulas, not from the simulator. One engine per process.
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"
#include "tests/sim/TestClusters.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2.3e-6;  // s
constexpr double B = 97e9;    // B/s

ClusterSpec nodes(int count, int gpus_per_node)
{
  return testing::test_nodes(count, gpus_per_node, B, a, gpus_per_node, B / 4);
}

ReplayResult run(const TaskGraph& g, const ClusterSpec& c) { return replay(g, c, std::vector<double>(g.size(), 0.0)); }

// One stage, dp replicas, one micro-batch: forward t_f, then the backward in `buckets` equal
// segments of t_b, each followed by its bucket's all-reduce of `bytes`.
ReplayResult run_buckets(int buckets, double t_f, double t_b, double bytes)
{
  PipelinePlan plan;
  plan.dp = 2;
  plan.micro_batches = 1;
  plan.optimizer_step = false;
  StagePlan stage;
  stage.layers = {0, static_cast<std::size_t>(buckets)};
  for (int i = buckets - 1; i >= 0; --i)
    stage.buckets.push_back({.layer = static_cast<std::size_t>(i), .bytes = bytes});
  plan.stages.push_back(stage);
  const TaskGraph g = build_schedule(plan);
  std::vector<double> seconds(g.size(), 0.0);
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::compute) {
      const auto& c = g.compute(id);
      seconds[id] = c.phase == Phase::forward ? t_f : t_b * (c.layer_end - c.layer_begin);
    }
  return replay(g, nodes(1, 2), seconds);
}
}  // namespace

TEST_CASE("tree all-reduce over a full binary tree of 7 GPUs matches 2(D+C-1)(a + 2S/(CB))")
{
  const double S = 8.0 * 1024 * 1024;  // two 4 MiB chunks
  TaskGraph g(7);
  g.add_collective({.algorithm = CollectiveAlgorithm::tree, .group = {0, 1, 2, 3, 4, 5, 6}, .bytes = S});
  const double depth = 2, chunks = 2;
  REQUIRE(tree_chunks(S) == 2);
  const double expected = 2 * (depth + chunks - 1) * (a + 2 * S / (chunks * B));
  CHECK(run(g, nodes(1, 7)).makespan_s == doctest::Approx(expected).epsilon(1e-9));
}

// The tree at other sizes (siblings send each chunk together, so every hop of a level shares its
// parent's link alike). With a sibling pair at the deepest level D every hop takes a + 2x (x = S/(KB))
// and the tree is paced like a full one: 2(D + K - 1)(a + 2x). With n = 2^D the deepest level holds
// one member, whose hop takes a + x: 2(D a + (2D - 1) x + (K - 1)(a + 2x)).
namespace {
double tree_closed_form(int n, double S)
{
  const double D = std::floor(std::log2(n)), K = tree_chunks(S), x = S / (K * B);
  const bool power_of_two = (n & (n - 1)) == 0;
  return power_of_two ? 2 * (D * a + (2 * D - 1) * x + (K - 1) * (a + 2 * x)) : 2 * (D + K - 1) * (a + 2 * x);
}

void check_tree(int n, double S)
{
  TaskGraph g(n);
  CollectiveTask c{.algorithm = CollectiveAlgorithm::tree, .group = {}, .bytes = S};
  for (int i = 0; i < n; ++i)
    c.group.push_back(i);
  g.add_collective(c);
  const double expected = tree_closed_form(n, S);
  CHECK(run(g, nodes(1, n)).makespan_s == doctest::Approx(expected).epsilon(1e-9));
  CHECK(analytic_seconds(c, nodes(1, n)) == doctest::Approx(expected).epsilon(1e-9));
}
}  // namespace

TEST_CASE("tree all-reduce over 3 GPUs (full, depth 1, one chunk)") { check_tree(3, 3e6); }
TEST_CASE("tree all-reduce over 4 GPUs (a power of two, one chunk)") { check_tree(4, 3e6); }
TEST_CASE("tree all-reduce over 4 GPUs (a power of two, three chunks)") { check_tree(4, 12.0 * 1024 * 1024); }
TEST_CASE("tree all-reduce over 6 GPUs (a pair at depth 2, three chunks)") { check_tree(6, 12.0 * 1024 * 1024); }
TEST_CASE("tree all-reduce over 8 GPUs (a power of two, 16 chunks)") { check_tree(8, 200e6); }
TEST_CASE("tree all-reduce over 12 GPUs (pairs at depth 3, one chunk)") { check_tree(12, 1e6); }
TEST_CASE("tree all-reduce over 15 GPUs (full, depth 3, five chunks)") { check_tree(15, 20.0 * 1024 * 1024); }
TEST_CASE("tree all-reduce over 16 GPUs (a power of two, two chunks)") { check_tree(16, 8.0 * 1024 * 1024); }
TEST_CASE("tree all-reduce over 33 GPUs (one pair at depth 5, one chunk)") { check_tree(33, 2e6); }

TEST_CASE("hierarchical all-reduce over 2 nodes of 4 GPUs matches its three-phase closed form")
{
  const double S = 64e6, m = 4, n = 2;
  TaskGraph g(8);
  g.add_collective({.algorithm = CollectiveAlgorithm::hierarchical, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S});
  const ClusterSpec c = nodes(2, 4);
  const double inter_latency = 3 * a + a;
  const double expected = 2 * (m - 1) * (a + S / (m * B)) + 2 * (n - 1) * (inter_latency + S / (m * n * (B / 4)));
  const ReplayResult r = run(g, c);
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-9));
  // A flat ring over the same GPUs crosses the slow fabric with the whole buffer: slower.
  const double ring = 2 * (2 * n * m - 1) * inter_latency + 2 * (2 * n * m - 1) / (2 * n * m) * S / (B / 4);
  CHECK(r.makespan_s < ring);
}

TEST_CASE("ring all-gather over 6 GPUs matches (n-1)(a + S/(nB))")
{
  const double S = 30e6, n = 6;
  TaskGraph g(6);
  g.add_collective({.kind = CollectiveKind::all_gather, .group = {0, 1, 2, 3, 4, 5}, .bytes = S});
  const ReplayResult r = run(g, nodes(1, 6));
  CHECK(r.makespan_s == doctest::Approx((n - 1) * (a + S / (n * B))).epsilon(1e-9));
  CHECK(r.activities == 5 * 6);
}

TEST_CASE("analytic fidelity is one timer of the closed form")
{
  const double S = 64e6;
  TaskGraph g(8);
  g.add_collective({.algorithm = CollectiveAlgorithm::hierarchical, .fidelity = CollectiveFidelity::analytic,
                    .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S});
  const ReplayResult r = run(g, nodes(2, 4));
  const double expected = 2 * 3 * (a + S / (4 * B)) + 2 * 1 * (4 * a + S / (8 * (B / 4)));
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-12));
  CHECK(r.activities == 0);
}

// The replay caches closed forms by a hash of some fields and a comparison of all: collectives
// alike but for fields the hash leaves out (the bandwidth factor, the protocol's step latencies)
// must each get their own closed form, one after the other on the same GPUs.
TEST_CASE("analytic collectives that differ only in fields the cache's hash leaves out keep their own times")
{
  const double S = 64e6;
  const CollectiveTask first{.algorithm = CollectiveAlgorithm::ring, .fidelity = CollectiveFidelity::analytic,
                             .group = {0, 1, 2, 3}, .bytes = S};
  CollectiveTask slower = first, later = first;
  slower.bandwidth_factor = 0.5;
  later.intra_step_latency_s = 10 * a;
  TaskGraph g(4);
  const TaskId x = g.add_collective(first);
  const TaskId y = g.add_collective(slower);
  const TaskId z = g.add_collective(later);
  const TaskId w = g.add_collective(first);  // the first again, after the others
  g.add_dependency(x, y);
  g.add_dependency(y, z);
  g.add_dependency(z, w);
  const ClusterSpec c = nodes(1, 4);
  const ReplayResult r = run(g, c);
  auto took = [&](TaskId id) { return r.timings[id].end_s - r.timings[id].start_s; };
  CHECK(took(x) == doctest::Approx(analytic_seconds(first, c)).epsilon(1e-12));
  CHECK(took(y) == doctest::Approx(analytic_seconds(slower, c)).epsilon(1e-12));
  CHECK(took(z) == doctest::Approx(analytic_seconds(later, c)).epsilon(1e-12));
  CHECK(took(w) == doctest::Approx(analytic_seconds(first, c)).epsilon(1e-12));
  // The three closed forms differ (the test would prove nothing otherwise): the ring's 2(n-1)
  // steps of a + S/(nB) at full and at half bandwidth, and with 10a per step.
  CHECK(analytic_seconds(first, c) == doctest::Approx(6 * (a + S / (4 * B))).epsilon(1e-9));
  CHECK(analytic_seconds(slower, c) == doctest::Approx(6 * (a + S / (4 * B * 0.5))).epsilon(1e-9));
  CHECK(analytic_seconds(later, c) == doctest::Approx(6 * (10 * a + S / (4 * B))).epsilon(1e-9));
}

TEST_CASE("gradient buckets are hidden behind a long backward")
{
  const int buckets = 4;
  const double bytes = 40e6;
  const double t_ar = 2 * (a + bytes / 2 / B);  // ring of 2: 2(n-1)(a + S/(nB))
  const double t_f = 1e-3, t_b = 3 * t_ar;
  const ReplayResult r = run_buckets(buckets, t_f, t_b, bytes);
  CHECK(r.makespan_s == doctest::Approx(t_f + buckets * t_b + t_ar).epsilon(1e-9));
}

TEST_CASE("gradient buckets are exposed when the backward is short")
{
  const int buckets = 4;
  const double bytes = 40e6;
  const double t_ar = 2 * (a + bytes / 2 / B);
  const double t_f = 1e-3, t_b = t_ar / 5;
  const ReplayResult r = run_buckets(buckets, t_f, t_b, bytes);
  CHECK(r.makespan_s == doctest::Approx(t_f + t_b + buckets * t_ar).epsilon(1e-9));
}

// Measured collectives (calibrate_collective): a fitted curve t = alpha + S / bandwidth replaces the
// links' latency and bandwidth, so the uncontended time is the measured one whatever the algorithm.
// alpha and bandwidth here are made up, unrelated to the links of the test cluster.
namespace {
constexpr double alpha_fit = 17e-6;   // s
constexpr double bw_fit = 41e9;       // B/s, the "measured" algorithm bandwidth

ReplayResult run_calibrated(CollectiveAlgorithm algorithm, CollectiveFidelity fidelity, double S, const ClusterSpec& c,
                            std::vector<int> group)
{
  TaskGraph g(c.nodes * c.gpus_per_node);
  CollectiveTask task{.algorithm = algorithm, .fidelity = fidelity, .group = std::move(group), .bytes = S};
  calibrate_collective(task, c, alpha_fit, S / bw_fit);
  g.add_collective(task);
  return run(g, c);
}
}  // namespace

TEST_CASE("a calibrated flow-level ring all-reduce takes the measured alpha + S/bandwidth")
{
  const double S = 96e6;
  const ReplayResult r = run_calibrated(CollectiveAlgorithm::ring, CollectiveFidelity::flow, S, nodes(1, 8),
                                        {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(r.makespan_s == doctest::Approx(alpha_fit + S / bw_fit).epsilon(1e-6));
}

TEST_CASE("a calibrated flow-level tree all-reduce takes the measured alpha + S/bandwidth")
{
  const double S = 24.0 * 1024 * 1024;
  const ReplayResult r = run_calibrated(CollectiveAlgorithm::tree, CollectiveFidelity::flow, S, nodes(1, 7),
                                        {0, 1, 2, 3, 4, 5, 6});
  CHECK(r.makespan_s == doctest::Approx(alpha_fit + S / bw_fit).epsilon(1e-6));
}

TEST_CASE("a calibrated flow-level hierarchical all-reduce takes the measured alpha + S/bandwidth")
{
  const double S = 64e6;
  const ReplayResult r = run_calibrated(CollectiveAlgorithm::hierarchical, CollectiveFidelity::flow, S, nodes(2, 4),
                                        {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(r.makespan_s == doctest::Approx(alpha_fit + S / bw_fit).epsilon(1e-6));
}

TEST_CASE("a calibrated analytic all-gather takes the measured alpha + S/bandwidth")
{
  const double S = 30e6;
  TaskGraph g(6);
  CollectiveTask task{.kind = CollectiveKind::all_gather, .fidelity = CollectiveFidelity::analytic,
                      .group = {0, 1, 2, 3, 4, 5}, .bytes = S};
  calibrate_collective(task, nodes(1, 6), alpha_fit, S / bw_fit);
  g.add_collective(task);
  CHECK(run(g, nodes(1, 6)).makespan_s == doctest::Approx(alpha_fit + S / bw_fit).epsilon(1e-12));
}

TEST_CASE("two calibrated all-reduces sharing one GPU's links contend: each takes longer than measured alone")
{
  // Rings {0,1,2,3} and {0,4,5,6} both use GPU 0's up- and down-links; two flows share each.
  const double S = 80e6;
  const ClusterSpec c = nodes(1, 7);
  TaskGraph g(7);
  for (std::vector<int> group : {std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 4, 5, 6}}) {
    CollectiveTask task{.group = std::move(group), .bytes = S};
    calibrate_collective(task, c, alpha_fit, S / bw_fit);
    g.add_collective(task);
  }
  const ReplayResult r = run(g, c);
  // Every step of both rings crosses GPU 0's links with the other ring's step: twice as long.
  CHECK(r.makespan_s == doctest::Approx(alpha_fit + 2 * S / bw_fit).epsilon(1e-6));
}
