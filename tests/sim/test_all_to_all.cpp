// The all-to-all on the flow-level network against its closed forms (latency a, bandwidth B,
// buffer S per member, n members), which the simulator does not compute:
//   direct, one switch, uniform                   a + (n-1) S / (n B)
//   direct, one switch, busiest member at w x the mean (dispatch)  a + w (n-1) S / (n B)
//   direct, N nodes of m, one NIC per GPU         max(a + (m-1) S/(n B), a_n + (N-1) m S/(n B_n))
//   hierarchical, N nodes of m                    a + (m-1) S/(m B) + a_n + (N-1) S/(N B_n)
// and analytic fidelity as one timer of the same form; resolved by NCCL's tuner, its latencies and
// PXN's rails. One engine per process.
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"
#include "tests/sim/TestClusters.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2.3e-6;  // s
constexpr double B = 97e9;    // B/s

ClusterSpec nodes(int count, int gpus_per_node)
{
  return testing::test_nodes(count, gpus_per_node, B, a, gpus_per_node, B / 4);
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

// A whole expert-parallel point, as `ddlsim run` simulates it (experiments/Evaluate.hpp: built, resolved
// by NCCL's tuner, replayed): an MoE model with 8 experts, ep 16 over two DGX H100 nodes (each expert
// split over two GPUs, ranks 0 and 1 of node 0 holding the busiest), load_imbalance 2: w = 2 on ranks
// 0 and 1, o = (16 - 2 w)/14 on the 14 others. Per micro-batch and experts layer, the forward's dispatch
// and the combine's backward load the busy GPUs as receivers; the forward's combine and the dispatch's
// backward as senders. u = S/16 (S: each GPU's send buffer), m = 8 GPUs per node, N = 2 nodes,
// NVLink B_i = 450 GB/s, NICs B_n = 400 Gb/s (8 per node), NCCL's Simple p2p constants: t0 = 8.4 us
// fixed, 3.4 us per NVLink step, 14 us + the fabric's 2 us per network step (a_n = 16 us):
//   direct, receivers busy:      t0 + a_n + m w u / B_n            (NIC of the busy GPU's rail)
//   direct, senders busy (PXN):  t0 + a_n + (2 w + 6 o) u / B_n    (node 0's every NIC carries its
//                                                                   members' blocks for that rail)
//   hierarchical, receivers busy: 2 t0 + 3.4 us + (m-1)(w + o) u / B_i + a_n + m w u / B_n
//   hierarchical, senders busy:   2 t0 + 3.4 us + N (m-1) w u / B_i + a_n + (2 w + 6 o) u / B_n
// Each all-to-all of the replay takes its own closed form. Before the fix, the tuner's cache (keyed
// without the loads' direction) made every combine a dispatch: both took the receivers' time (the
// hierarchical exchange of experiments/moe.yaml, 3.09 ms instead of 2.09 ms per combine).
namespace {
struct ExpertPointTimes {
  int receivers = 0, senders = 0;  // all-to-alls with the busy GPUs receiving, sending
};

ExpertPointTimes check_expert_point(const std::string& algorithm)
{
  const auto path =
      std::filesystem::temp_directory_path() / ("ddlsim_a2a_point_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path)
      << "name: a2a\n"
         "model: {name: moe, llama: {layers: 2, hidden: 1024, heads: 8, ffn_hidden: 2048, seq: 4096, vocab: 1000,\n"
         "        moe: {experts: 8, top_k: 2, expert_ffn_hidden: 2048}}}\n"
         "cluster: {use: dgx-h100x128, gpus: 16}\n"
         "calibration: h100-sxm\n"
         "training: {global_batch: 32, micro_batch: 1, load_imbalance: 2.0}\n"
         "parallelism: {schedule: 1f1b, pp: 1, dp: 16, tp: 1, ep: 16, ep_collective: "
      << algorithm << "}\n";
  const ddlsim::experiments::PointConfig point = ddlsim::experiments::Experiment::load(path.string()).point(0);
  std::filesystem::remove(path);
  const ClusterSpec& cl = point.cluster;
  REQUIRE(cl.gpus_per_node == 8);
  REQUIRE(cl.nodes == 2);
  REQUIRE(cl.intra_node.bandwidth == doctest::Approx(450e9));
  REQUIRE(cl.nic.bandwidth == doctest::Approx(50e9));
  REQUIRE(cl.nics_per_node == 8);
  REQUIRE(cl.fabric_latency == doctest::Approx(2e-6));
  const double n = 16, m = 8, N = 2, w = 2, o = (n - 2 * w) / 14, Bi = 450e9, Bn = 50e9;
  const double t0 = 8.4e-6, ai = 3.4e-6, an = 14e-6 + 2e-6;
  const bool hierarchical = algorithm == "hierarchical";
  ExpertPointTimes times;
  ddlsim::experiments::EvaluateOptions options;
  options.on_workload = [&](const ddlsim::experiments::PointWorkload& work) {
    const ReplayResult r = replay(work.graph, work.cluster, work.compute_seconds);
    for (TaskId id = 0; id < work.graph.size(); ++id) {
      if (work.graph.kind(id) != TaskKind::collective || work.graph.collective(id).kind != CollectiveKind::all_to_all)
        continue;
      const CollectiveTask& c = work.graph.collective(id);
      REQUIRE(c.protocol == CollectiveProtocol::simple);
      const double u = c.bytes / n;
      // The busy GPUs send in the forward's combine and the dispatch's backward.
      const bool senders = (c.phase == Phase::forward) == (c.role == CollectiveRole::expert_combine);
      const double nic = (senders ? 2 * w + (m - 2) * o : m * w) * u / Bn;
      const double nvlink = (senders ? N * (m - 1) * w : (m - 1) * (w + o)) * u / Bi;
      const double expected = hierarchical ? 2 * t0 + ai + nvlink + an + nic : t0 + an + nic;
      CHECK(r.timings[id].end_s - r.timings[id].start_s == doctest::Approx(expected).epsilon(1e-9));
      ++(senders ? times.senders : times.receivers);
    }
  };
  ddlsim::experiments::evaluate_point(point, options);
  return times;
}
}  // namespace

TEST_CASE("an expert-parallel point over two nodes at load 2: each direct all-to-all takes its closed form")
{
  const ExpertPointTimes t = check_expert_point("direct");
  CHECK(t.receivers == 2 * 2 * 2);  // 2 layers x 2 micro-batches x (dispatch, combine's backward)
  CHECK(t.senders == 2 * 2 * 2);
}

TEST_CASE("an expert-parallel point over two nodes at load 2: each hierarchical all-to-all takes its closed form")
{
  const ExpertPointTimes t = check_expert_point("hierarchical");
  CHECK(t.receivers == 2 * 2 * 2);
  CHECK(t.senders == 2 * 2 * 2);
}
