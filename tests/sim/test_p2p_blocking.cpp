// Pipeline sends overlapped, blocking or paired (PipelinePlan::p2p, sim::P2pSends) against closed
// forms. Two stages on one node, links of bandwidth B and no latency; a stage's forward takes f, its
// backward b (a chunk's f / v and b / v when interleaved), a transfer x = S / B (activations forward,
// their gradients back, S bytes each). Two micro-batches, derived by hand in the order each device
// runs its passes:
//   GPipe  (F0 F1 B1 B0 on both):        overlapped 3f + 2x + 3b; blocking 3f + 4x + 3b
//   1F1B   (stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1): overlapped 3f + 2x + 3b; blocking 3f + 3x + 3b
// Blocking GPipe, stage 0's F1 waits for F0's send and stage 1's second backward for the first's
// send; in 1F1B, stage 0's F1 waiting for F0's send is hidden (stage 1 is busy with B0), and stage 1's
// F1 waits for B0's gradient to arrive. Interleaved, 2 chunks per stage, 4 micro-batches (Megatron's
// order, sim::stream_order: stage 0 warms up with 4 forwards, stage 1 with 2): overlapped 4.5 (f + b)
// + 6x, blocking 4.5 (f + b) + 13x (a longest-path walk of the passes in that order, by a script; the
// same walk gives the two-micro-batch forms above). Paired, each steady-state forward's send waits for
// the backward after it and leaves with that backward's: both leave the GPU at once, share its link
// and take 2x each, so the makespan is blocking's, 4.5 (f + b) + 13x; what differs is when the
// forward's send leaves, which the last case checks. One engine per process.
#include "ClosedForm.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace ddlsim::sim;
using namespace ddlsim::sim::testing;

namespace {
constexpr double B = 100e9;  // B/s
constexpr double S = 200e6;  // bytes: x = 2 ms
constexpr double x = S / B;
constexpr double f = 5e-3;
constexpr double b = 9e-3;

PipelinePlan two_stages(ScheduleKind schedule, P2pSends p2p, int v = 1, int micro_batches = 2)
{
  PipelinePlan plan = one_micro_batch();
  plan.schedule = schedule;
  plan.virtual_stages = v;
  plan.micro_batches  = micro_batches;
  plan.p2p            = p2p;
  for (std::size_t s = 0; s < 2 * static_cast<std::size_t>(v); ++s) {
    StagePlan& stage = plan.stages.emplace_back();
    stage.layers = {s, s + 1};
    stage.activation_bytes = S;
  }
  return plan;
}

double makespan(ScheduleKind schedule, P2pSends p2p, int v = 1, int micro_batches = 2)
{
  TaskGraph g = build_schedule(two_stages(schedule, p2p, v, micro_batches));
  return replay_closed(g, one_node(2, B), [&](const ComputeTask& c) { return (c.phase == Phase::forward ? f : b) / v; })
      .makespan_s;
}
constexpr auto overlapped = P2pSends::overlapped;
constexpr auto blocking   = P2pSends::blocking;
}  // namespace

TEST_CASE("the graph is the same tasks either way: blocking only adds waits")
{
  for (ScheduleKind schedule : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    const TaskGraph one   = build_schedule(two_stages(schedule, overlapped));
    const TaskGraph other = build_schedule(two_stages(schedule, blocking));
    CHECK(one.size() == other.size());
    CHECK(one.size() == 8 + 4); // 2 stages x 2 micro-batches x 2 passes, 4 transfers
  }
  const TaskGraph one = build_schedule(two_stages(ScheduleKind::interleaved, overlapped, 2, 4));
  for (P2pSends p2p : {blocking, P2pSends::paired})
    CHECK(build_schedule(two_stages(ScheduleKind::interleaved, p2p, 2, 4)).size() == one.size());
}

TEST_CASE("GPipe, sends overlapped: 3f + 2x + 3b")
{
  CHECK(makespan(ScheduleKind::gpipe, overlapped) == doctest::Approx(3 * f + 2 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("GPipe, blocking sends: 3f + 4x + 3b")
{
  CHECK(makespan(ScheduleKind::gpipe, blocking) == doctest::Approx(3 * f + 4 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("1F1B, sends overlapped: 3f + 2x + 3b")
{
  CHECK(makespan(ScheduleKind::one_f_one_b, overlapped) == doctest::Approx(3 * f + 2 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("1F1B, blocking sends: 3f + 3x + 3b")
{
  CHECK(makespan(ScheduleKind::one_f_one_b, blocking) == doctest::Approx(3 * f + 3 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("interleaved, sends overlapped: 4.5 (f + b) + 6x")
{
  CHECK(makespan(ScheduleKind::interleaved, overlapped, 2, 4) == doctest::Approx(4.5 * (f + b) + 6 * x).epsilon(1e-9));
}

TEST_CASE("interleaved, blocking sends: 4.5 (f + b) + 13x")
{
  CHECK(makespan(ScheduleKind::interleaved, blocking, 2, 4) == doctest::Approx(4.5 * (f + b) + 13 * x).epsilon(1e-9));
}

TEST_CASE("interleaved, Megatron's paired sends: as blocking, 4.5 (f + b) + 13x (two sends share the link)")
{
  CHECK(makespan(ScheduleKind::interleaved, P2pSends::paired, 2, 4) ==
        doctest::Approx(4.5 * (f + b) + 13 * x).epsilon(1e-9));
}

TEST_CASE("interleaved, paired: a steady-state forward's send leaves as the backward after it ends")
{
  TaskGraph g = build_schedule(two_stages(ScheduleKind::interleaved, P2pSends::paired, 2, 4));
  const ReplayResult r =
      replay_closed(g, one_node(2, B), [](const ComputeTask& c) { return (c.phase == Phase::forward ? f : b) / 2; });
  // Stage 0 (chunks 0 and 2) runs F F F F (micro-batches 0 and 1 of each chunk), then pairs (F B) x 4
  // with the forwards of micro-batches 2 and 3, then B B B B. Per forward send of stage 0: whether it
  // left the moment one of stage 0's backwards ended (to the nanosecond) or its own forward did.
  std::vector<double> backward_ends, forward_ends;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::compute && g.compute(id).device == 0)
      (g.compute(id).phase == Phase::forward ? forward_ends : backward_ends).push_back(r.timings[id].end_s);
  auto at_one_of = [](double t, const std::vector<double>& ends) {
    return std::any_of(ends.begin(), ends.end(), [&](double e) { return std::abs(e - t) < 1e-9; });
  };
  int after_backward = 0, after_forward = 0;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::transfer && g.transfer(id).src == 0 && g.transfer(id).phase == Phase::forward) {
      after_backward += at_one_of(r.timings[id].start_s, backward_ends) ? 1 : 0;
      after_forward += at_one_of(r.timings[id].start_s, forward_ends) ? 1 : 0;
    }
  // The warm-up's four sent as they end, the steady state's four each with the backward after it
  // (blocking would send all eight as their forwards end).
  CHECK(after_forward == 4);
  CHECK(after_backward == 4);
}
