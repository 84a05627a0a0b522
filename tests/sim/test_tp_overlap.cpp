// Tensor-parallel communication overlap against closed forms: Transformer Engine's userbuffers
// (PipelinePlan::tp_comm_overlap) first, Megatron's asynchronous column-layer backward
// (PipelinePlan::tp_backward_overlap) below. Userbuffers, on one node of tp GPUs with links of bandwidth B and no
// latency, one micro-batch: layer 0 (t0), layer 1 a row-parallel linear layer (forward t_l, backward 2 t_l) whose
// output is reduce-scattered in forward and whose output gradient is all-gathered before its backward (sequence
// parallelism), layer 2 (t0).
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

// Megatron's asynchronous column-parallel backward (PipelinePlan::tp_backward_overlap), same node and
// links. Layer 1 is now a column-parallel linear layer whose backward is two parts (ComputePart): the
// input gradient's (its GEMM, t_l; 2 t_l when it also holds a recomputed forward) and the weight
// gradient's GEMM (t_l). With sequence parallelism its input, of which each GPU kept its s/tp shard,
// is all-gathered beside the first part (the second needs it), and the input gradient reduce-scattered
// once the gather is through, beside the second; without it the input gradient is all-reduced beside
// the second:
//   blocking: AG(X) + t_first + t_l + RS(X)
//   async:    max(t_first, AG(X)) + max(t_l, R(X)), R the reduce-scatter or the all-reduce
namespace {
struct Column {
  int tp                 = 4;
  double t_l             = 2e-3;
  bool async             = true;
  bool sequence_parallel = true;
  bool recompute         = false;
};

// Layer 1's backward span on device 0: from layer 2's backward end to layer 0's backward start.
double column_backward(const Column& c)
{
  PipelinePlan plan        = one_micro_batch();
  plan.tp                  = c.tp;
  plan.tp_backward_overlap = c.async;
  plan.tp_algorithm        = CollectiveAlgorithm::ring;
  plan.tp_fidelity         = CollectiveFidelity::analytic;
  StagePlan& stage         = plan.stages.emplace_back();
  stage.layers             = {0, 3};
  if (c.sequence_parallel)
    stage.tp_collectives = {{.layer            = 1,
                             .phase            = Phase::backward,
                             .kind             = CollectiveKind::all_gather,
                             .bytes_per_sample = X,
                             .before           = true,
                             .beside           = TpBeside::input_gradient},
                            {.layer            = 1,
                             .phase            = Phase::backward,
                             .kind             = CollectiveKind::reduce_scatter,
                             .bytes_per_sample = X,
                             .beside           = TpBeside::weight_gradient}};
  else
    stage.tp_collectives = {{.layer            = 1,
                             .phase            = Phase::backward,
                             .kind             = CollectiveKind::all_reduce,
                             .bytes_per_sample = X,
                             .beside           = TpBeside::weight_gradient}};
  TaskGraph g          = build_schedule(plan);
  const double first   = (c.recompute ? 2 : 1) * c.t_l; // the input gradient's part
  const ReplayResult r = replay_closed(g, one_node(c.tp, B), [&](const ComputeTask& task) {
    const double parts[] = {first + c.t_l, first, c.t_l}; // whole, input gradient, weight gradient
    double t = 0;
    for (std::uint32_t l = task.layer_begin; l < task.layer_end; ++l)
      t += l == 1 && task.phase == Phase::backward ? parts[static_cast<int>(task.part)] : t0;
    return t;
  });
  double layer2_end = 0, layer0_start = 1e9;
  int layer1_tasks = 0;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) != TaskKind::compute || g.compute(id).device != 0 || g.compute(id).phase != Phase::backward)
      continue;
    const ComputeTask& task = g.compute(id);
    if (task.layer_begin == 1 && task.layer_end == 2)
      ++layer1_tasks;
    if (task.layer_end == 3)
      layer2_end = r.timings[id].end_s;
    if (task.layer_begin == 0)
      layer0_start = r.timings[id].start_s;
  }
  CHECK(layer1_tasks == (c.async ? 2 : 1)); // the layer's backward is its own task (two when async)
  return layer0_start - layer2_end;
}

double column_closed_form(const Column& c)
{
  const double gather = c.sequence_parallel ? collective_seconds(CollectiveKind::all_gather, c.tp, X) : 0.0;
  const double reduce =
      collective_seconds(c.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, c.tp, X);
  const double first = c.recompute ? 2 * c.t_l : c.t_l;
  if (!c.async)
    return gather + first + c.t_l + reduce;
  return std::max(first, gather) + std::max(c.t_l, reduce);
}

void check_column(const Column& c)
{
  const double span = column_backward(c);
  CHECK(span == doctest::Approx(column_closed_form(c)).epsilon(1e-9));
}
} // namespace

// AG and RS of 64 MB over tp 4 at 100 GB/s: 480 us each; the all-reduce 960 us.
TEST_CASE("tp_backward_overlap: long GEMMs hide the gather and the reduce-scatter")
{
  check_column({});
  CHECK(column_closed_form({}) == doctest::Approx(2 * 2e-3));
}
TEST_CASE("tp_backward_overlap: short GEMMs leave the rest exposed")
{
  check_column({.t_l = 0.1e-3});
}
TEST_CASE("tp_backward_overlap: without sequence parallelism the all-reduce hides under the weight gradient")
{
  check_column({.tp = 8, .t_l = 0.5e-3, .sequence_parallel = false});
}
TEST_CASE("tp_backward_overlap: a recomputed forward goes with the input gradient")
{
  check_column({.t_l = 0.2e-3, .recompute = true});
}
TEST_CASE("tp_backward_overlap off: the collectives block")
{
  check_column({.t_l = 0.1e-3, .async = false});
}

// A pipeline stage whose backward pass ends with the column layer: its input gradient goes to the
// stage before once the all-reduce is through, not when the weight gradient's GEMM ends. Stage 0 holds
// layer 0, stage 1 layers 1-2 (tp 4 each, 8 GPUs); the activations between them are empty, so the
// send takes no time: stage 0's backward starts t_l + AR(X) after stage 1's layer 2, not 2 t_l.
TEST_CASE("tp_backward_overlap: a pass ending with the column layer sends once its reduction is through")
{
  const int tp             = 4;
  const double t_l         = 0.1e-3;
  PipelinePlan plan        = one_micro_batch();
  plan.tp                  = tp;
  plan.tp_backward_overlap = true;
  plan.tp_algorithm        = CollectiveAlgorithm::ring;
  plan.tp_fidelity         = CollectiveFidelity::analytic;
  plan.stages.resize(2);
  plan.stages[0].layers         = {0, 1};
  plan.stages[1].layers         = {1, 3};
  plan.stages[1].tp_collectives = {{.layer            = 1,
                                    .phase            = Phase::backward,
                                    .kind             = CollectiveKind::all_reduce,
                                    .bytes_per_sample = X,
                                    .beside           = TpBeside::weight_gradient}};
  TaskGraph g                   = build_schedule(plan);
  const ReplayResult r          = replay_closed(g, one_node(2 * tp, B), [&](const ComputeTask& task) {
    return task.layer_begin == 1 && task.phase == Phase::backward ? (task.part == ComputePart::whole ? 2 : 1) * t_l
                                                                           : t0;
  });
  double layer2_end = 0, layer0_start = 1e9;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) != TaskKind::compute || g.compute(id).phase != Phase::backward)
      continue;
    const ComputeTask& task = g.compute(id);
    if (task.device == tp && task.layer_end == 3 && task.layer_begin == 2)
      layer2_end = r.timings[id].end_s;
    if (task.device == 0 && task.layer_begin == 0)
      layer0_start = r.timings[id].start_s;
  }
  const double reduce = collective_seconds(CollectiveKind::all_reduce, tp, X);
  REQUIRE(reduce > 2 * t_l);
  CHECK(layer0_start - layer2_end == doctest::Approx(t_l + reduce).epsilon(1e-9));
}
