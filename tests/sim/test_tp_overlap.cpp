// Tensor-parallel communication overlap (Transformer Engine's userbuffers, PipelinePlan::tp_comm_overlap)
// against closed forms, on one node of tp GPUs with links of bandwidth B and no latency, one micro-batch:
// layer 0 (t0), layer 1 a row-parallel linear layer (forward t_l, backward 2 t_l) whose output is
// reduce-scattered in forward and whose output gradient is all-gathered before its backward
// (sequence parallelism), layer 2 (t0).
//   blocking: forward t_l + RS(X); backward AG(X) + 2 t_l;
//   overlapped: (tp - 1) / tp of the collective beside the layer, the last chunk after both:
//     forward max(t_l, RS((tp - 1) X / tp)) + RS(X / tp); backward max(2 t_l, AG(...)) + AG(X / tp).
// RS and AG are the collectives' own time (analytic fidelity, sim::analytic_seconds). One engine per process.
#include "ClosedForm.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddlsim::sim;
using namespace ddlsim::sim::testing;

namespace {
constexpr double B = 100e9;  // B/s
constexpr double X = 64e6;   // bytes of layer 1's output per micro-batch (the whole tensor)
constexpr double t0 = 0.5e-3;

struct Spans {
  double forward = 0;   // layer 1's forward and its collective: the forward pass less layers 0 and 2
  double backward = 0;  // layer 1's backward and its collective: likewise
};

Spans run(int tp, double t_l, bool overlap, bool overlappable = true)
{
  PipelinePlan plan = one_micro_batch();
  plan.tp = tp;
  plan.tp_comm_overlap = overlap;
  plan.tp_algorithm = CollectiveAlgorithm::ring;
  plan.tp_fidelity = CollectiveFidelity::analytic;
  StagePlan& stage = plan.stages.emplace_back();
  stage.layers = {0, 3};
  stage.tp_collectives = {
      {.layer = 1, .phase = Phase::forward, .kind = CollectiveKind::reduce_scatter, .bytes_per_sample = X,
       .overlappable = overlappable},
      {.layer = 1, .phase = Phase::backward, .kind = CollectiveKind::all_gather, .bytes_per_sample = X,
       .before = true, .overlappable = overlappable}};
  TaskGraph g = build_schedule(plan);
  const ReplayResult r = replay_closed(g, one_node(tp, B), [&](const ComputeTask& c) {
    double t = 0;
    for (std::uint32_t l = c.layer_begin; l < c.layer_end; ++l)
      t += l == 1 ? (c.phase == Phase::forward ? t_l : 2 * t_l) : t0;
    return t;
  });
  // Each pass from its first layer's start to its last layer's end, less layers 0 and 2 (however
  // the pass is cut into compute tasks).
  Spans s;
  double forward_start = 1e9, forward_end = 0, backward_start = 1e9, backward_end = 0;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) != TaskKind::compute || g.compute(id).device != 0)
      continue;
    const ComputeTask& c = g.compute(id);
    const TaskTiming& t = r.timings[id];
    double& start = c.phase == Phase::forward ? forward_start : backward_start;
    double& end = c.phase == Phase::forward ? forward_end : backward_end;
    start = std::min(start, t.start_s);
    end = std::max(end, t.end_s);
  }
  s.forward = forward_end - forward_start - 2 * t0;
  s.backward = backward_end - backward_start - 2 * t0;
  return s;
}

double collective_seconds(CollectiveKind kind, int tp, double bytes) { return analytic_collective(kind, tp, bytes, B); }

void check_blocking(int tp, double t_l, bool overlappable)
{
  const double rs = collective_seconds(CollectiveKind::reduce_scatter, tp, X);
  const double ag = collective_seconds(CollectiveKind::all_gather, tp, X);
  REQUIRE(rs > (tp - 1) * X / tp / B * 0.5);  // it moves the bytes: not a zero-time timer
  // Without the option, or (with it) a collective Transformer Engine does not overlap: it blocks.
  const Spans s = run(tp, t_l, !overlappable, overlappable);
  CHECK(s.forward == doctest::Approx(t_l + rs).epsilon(1e-9));
  CHECK(s.backward == doctest::Approx(ag + 2 * t_l).epsilon(1e-9));
}

void check_overlapped(int tp, double t_l)
{
  const double ahead = (tp - 1.0) / tp;
  const Spans s = run(tp, t_l, true);
  const double forward = std::max(t_l, collective_seconds(CollectiveKind::reduce_scatter, tp, X * ahead)) +
                         collective_seconds(CollectiveKind::reduce_scatter, tp, X / tp);
  const double backward = std::max(2 * t_l, collective_seconds(CollectiveKind::all_gather, tp, X * ahead)) +
                          collective_seconds(CollectiveKind::all_gather, tp, X / tp);
  CHECK(s.forward == doctest::Approx(forward).epsilon(1e-9));
  CHECK(s.backward == doctest::Approx(backward).epsilon(1e-9));
  CHECK(s.forward < t_l + collective_seconds(CollectiveKind::reduce_scatter, tp, X));
}
}  // namespace

// RS of 64 MB over tp 4 at 100 GB/s: 3/4 x 64 MB / 100 GB/s = 480 us in all. One replay per test case.
TEST_CASE("tp_comm_overlap tp 4: the GEMM hides all but the last chunk") { check_overlapped(4, 2e-3); }
TEST_CASE("tp_comm_overlap tp 4: a short GEMM leaves the rest of the collective exposed") { check_overlapped(4, 0.1e-3); }
TEST_CASE("tp_comm_overlap tp 8: the GEMM hides all but the last chunk") { check_overlapped(8, 2e-3); }
TEST_CASE("tp_comm_overlap tp 2: a short GEMM leaves the rest of the collective exposed") { check_overlapped(2, 0.1e-3); }
TEST_CASE("tp_comm_overlap off: the collectives block") { check_blocking(4, 2e-3, true); }
TEST_CASE("tp_comm_overlap on but a collective it does not overlap: it blocks") { check_blocking(4, 2e-3, false); }
