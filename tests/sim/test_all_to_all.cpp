// The all-to-all on the flow-level network against its closed forms (latency a, bandwidth B,
// buffer S per member, n members), which the simulator does not compute:
//   direct, one switch, uniform                   a + (n-1) S / (n B)
//   direct, one switch, busiest member at w x the mean (dispatch)  a + w (n-1) S / (n B)
//   direct, N nodes of m, one NIC per GPU         max(a + (m-1) S/(n B), a_n + (N-1) m S/(n B_n))
//   hierarchical, N nodes of m                    a + (m-1) S/(m B) + a_n + (N-1) S/(N B_n)
// and analytic fidelity as one timer of the same form; resolved by NCCL's tuner, its latencies and
// PXN's rails. One engine per process.
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2.3e-6;  // s
constexpr double B = 97e9;    // B/s

ClusterSpec nodes(int count, int gpus_per_node)
{
  ClusterSpec c;
  c.name = "test";
  c.nodes = count;
  c.gpus_per_node = gpus_per_node;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = B, .latency = a};
  c.nics_per_node = gpus_per_node;
  c.nic = {.bandwidth = B / 4, .latency = 3 * a};
  c.fabric_latency = a;
  return c;
}

ReplayResult run(const CollectiveTask& task, const ClusterSpec& c)
{
  TaskGraph g(c.nodes * c.gpus_per_node);
  g.add_collective(task);
  return replay(g, c, std::vector<double>(g.size(), 0.0));
}

CollectiveTask all_to_all(std::vector<int> group, double bytes)
{
  return {.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::direct, .group = std::move(group),
          .bytes = bytes};
}
}  // namespace

TEST_CASE("a uniform all-to-all over 8 GPUs on one switch takes a + (n-1) S/(nB)")
{
  const double S = 96e6, n = 8;
  const ReplayResult r = run(all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S), nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + (n - 1) * S / (n * B)).epsilon(1e-9));
  CHECK(r.activities == 8 * 7);
}

TEST_CASE("an all-to-all whose busiest member receives twice the mean takes twice the bandwidth term")
{
  const double S = 96e6, n = 8, w = 2;
  CollectiveTask c = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  c.member_load.assign(8, (n - w) / (n - 1));  // the others share the rest: the same bytes in all
  c.member_load[3] = w;
  const ReplayResult r = run(c, nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + w * (n - 1) * S / (n * B)).epsilon(1e-9));
}

TEST_CASE("a combine whose busiest member sends twice the mean takes twice the bandwidth term")
{
  const double S = 96e6, n = 8, w = 2;
  CollectiveTask c = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  c.member_load.assign(8, (n - w) / (n - 1));
  c.member_load[0] = w;
  c.load_at_source = true;
  CHECK(run(c, nodes(1, 8)).makespan_s == doctest::Approx(a + w * (n - 1) * S / (n * B)).epsilon(1e-9));
}

TEST_CASE("a direct all-to-all over 2 nodes of 4 is bound by the NICs: a_n + (N-1) m S/(n B_n)")
{
  const double S = 96e6, n = 8, m = 4, N = 2;
  const ClusterSpec c = nodes(2, 4);
  const CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  const double inter = 3 * a + a + (N - 1) * m * S / (n * (B / 4));
  REQUIRE(inter > a + (m - 1) * S / (n * B));
  const ReplayResult r = run(task, c);
  CHECK(r.makespan_s == doctest::Approx(inter).epsilon(1e-9));
  CHECK(r.makespan_s == doctest::Approx(analytic_seconds(task, c)).epsilon(1e-9));
}

TEST_CASE("a hierarchical all-to-all over 2 nodes of 4 takes a + (m-1) S/(mB) + a_n + (N-1) S/(N B_n)")
{
  const double S = 96e6, m = 4, N = 2;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.algorithm = CollectiveAlgorithm::hierarchical;
  const ReplayResult r = run(task, nodes(2, 4));
  CHECK(r.makespan_s ==
        doctest::Approx(a + (m - 1) * S / (m * B) + 4 * a + (N - 1) * S / (N * (B / 4))).epsilon(1e-9));
  CHECK(r.activities == 2 * 4 * 3 + 4 * 2 * 1);
}

TEST_CASE("an analytic all-to-all is one timer of its closed form")
{
  const double S = 96e6, n = 8;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.fidelity = CollectiveFidelity::analytic;
  const ReplayResult r = run(task, nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + (n - 1) * S / (n * B)).epsilon(1e-12));
  CHECK(r.activities == 0);
}

TEST_CASE("a calibrated flow-level all-to-all takes the measured alpha + S/bandwidth")
{
  const double S = 96e6, alpha = 17e-6, bandwidth = 41e9;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  const ClusterSpec c = nodes(1, 8);
  calibrate_collective(task, c, alpha, S / bandwidth);
  CHECK(run(task, c).makespan_s == doctest::Approx(alpha + S / bandwidth).epsilon(1e-6));
}

// NCCL's p2p path, resolved (Collectives.hpp: resolve_collective): Simple for 96 MB, the ring's fixed
// latency 8.4 us before the exchange, network steps of 14 us plus the fabric's latency, and PXN: a
// combine's busy sender (w times the mean, the others o = (n - w)/(n - 1)) on node 0 of 2 nodes of
// 4 hands each remote block to its node-mate on the destination's rail, so NIC r of node 0 carries
// the blocks of all four members for rail r of node 1, (w + 3 o) S/n, instead of the busy GPU's own
// NIC carrying its 4 w S/n:
//   8.4 us + 14 us + a + (w + 3 o) S / (n B_n)
TEST_CASE("a resolved combine over two nodes: NCCL's latencies, and PXN spreads the busy sender over the rails")
{
  const double S = 96e6, n = 8, w = 2, o = (n - w) / (n - 1);
  const ClusterSpec c = nodes(2, 4);
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.algorithm = CollectiveAlgorithm::automatic;
  task.member_load.assign(8, o);
  task.member_load[0] = w;
  task.load_at_source = true;
  resolve_collective(task, c);
  REQUIRE(task.protocol == CollectiveProtocol::simple);
  REQUIRE(task.channels == 4);
  const double expected = 8.4e-6 + 14e-6 + a + (w + 3 * o) * S / (n * (B / 4));
  REQUIRE(expected < 8.4e-6 + 14e-6 + a + 4 * w * S / (n * (B / 4)));  // what its own NIC would take
  const ReplayResult r = run(task, c);
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-9));
  CHECK(r.makespan_s == doctest::Approx(analytic_seconds(task, c)).epsilon(1e-9));
  CHECK(r.activities == 8 * 7);
}

// A fitted curve is of the uniform all-to-all (nccl-tests' alltoall_perf): a busiest member at w x the
// mean still takes w times the measured bandwidth term, at flow level and in closed form.
TEST_CASE("a calibrated all-to-all whose busiest member receives twice the mean takes alpha + 2 S/bandwidth")
{
  const double S = 96e6, alpha = 17e-6, bandwidth = 41e9, n = 8, w = 2;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.member_load.assign(8, (n - w) / (n - 1));
  task.member_load[5] = w;
  const ClusterSpec c = nodes(1, 8);
  calibrate_collective(task, c, alpha, S / bandwidth);
  CHECK(run(task, c).makespan_s == doctest::Approx(alpha + w * S / bandwidth).epsilon(1e-6));
  CHECK(analytic_seconds(task, c) == doctest::Approx(alpha + w * S / bandwidth).epsilon(1e-9));
}

// An experts layer under expert parallelism (Schedules.hpp): one stage, 4 replicas = one ep group on
// one switch, one micro-batch, only the experts layer computes (t_f forward, t_b backward at uniform
// load). Its dispatch and combine, forward and backward, are four all-to-alls of S bytes per member;
// the busiest rank at load w receives (dispatch) or sends (combine) w S/n per peer and computes w
// times as long, so the iteration is
//   4 (a + w (n-1) S/(n B)) + w (t_f + t_b) + 2 (n-1) a
// (the last term: the ring all-reduce of the stage's zero dense gradient bytes, latency only).
// Imbalance 2 doubles the expert phase: everything but the latencies.
namespace {
double expert_iteration(double w, bool recompute = false)
{
  const double S = 48e6, n = 4, t_f = 3e-3, t_b = 6e-3;
  PipelinePlan plan;
  plan.dp = 4;
  plan.ep = 4;
  plan.expert_recompute = recompute;
  plan.micro_batches = 1;
  plan.optimizer_step = false;
  const double others = (n - w) / (n - 1);
  plan.expert_load = {w, others, others, others};
  plan.expert_compute = plan.expert_load;
  StagePlan stage;
  stage.layers = {0, 3};  // router, experts, combine
  stage.exchanges.push_back({.layer = 1, .bytes_per_sample = S});
  plan.stages.push_back(stage);
  const TaskGraph g = build_schedule(plan);
  std::vector<double> seconds(g.size(), 0.0);
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::compute && g.compute(id).layer_begin == 1 && g.compute(id).layer_end == 2)
      seconds[id] = (g.compute(id).phase == Phase::forward ? t_f : t_b) * g.compute(id).share;
  const ReplayResult r = replay(g, nodes(1, 4), seconds);
  const double exchanges = recompute ? 6 : 4;
  const double expected = exchanges * (a + w * (n - 1) * S / (n * B)) + w * (t_f + t_b) + 2 * (n - 1) * a;
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-9));
  return r.makespan_s - exchanges * a - 2 * (n - 1) * a;  // the expert phase: exchanges' bytes and compute
}
}  // namespace

// Full recomputation reruns the forward before the backward, its dispatch and combine included:
// six all-to-alls, 6 (a + w (n-1) S/(nB)) + w (t_f + t_b) + 2 (n-1) a (t_b holding the recomputed
// forward, as the cost model's backward does).
TEST_CASE("an experts layer under full recomputation: six all-to-alls")
{
  const double phase = expert_iteration(2, true);
  CHECK(phase == doctest::Approx(2 * (6 * 3.0 / 4 * 48e6 / B + 9e-3)).epsilon(1e-9));
}

TEST_CASE("an experts layer at uniform load: four all-to-alls and its compute")
{
  const double phase = expert_iteration(1);
  CHECK(phase == doctest::Approx(4 * 3.0 / 4 * 48e6 / B + 9e-3).epsilon(1e-9));
}

TEST_CASE("an experts layer whose busiest GPU has twice the mean load: the expert phase twice as long")
{
  const double phase = expert_iteration(2);
  CHECK(phase == doctest::Approx(2 * (4 * 3.0 / 4 * 48e6 / B + 9e-3)).epsilon(1e-9));
}
