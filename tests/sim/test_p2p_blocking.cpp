// Pipeline sends overlapped or blocking (PipelinePlan::overlap_p2p_comm) against closed forms. Two
// stages on one node, links of bandwidth B and no latency, two micro-batches; a stage's forward takes
// f, its backward b, a transfer x = S / B (activations forward, their gradients back, S bytes each).
//   GPipe  (F0 F1 B0 B1 on both):        overlapped 3f + 2x + 3b; blocking 3f + 4x + 3b
//   1F1B   (stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1): overlapped 3f + 2x + 3b; blocking 3f + 3x + 3b
// Blocking, stage 0's F1 waits for F0's send and stage 1's next pass for B0's; in 1F1B stage 1's
// F1 waited for the activations anyway, so one transfer less is exposed than in GPipe. Derived by
// hand in the order each device runs its passes. One engine per process.
#include "ClosedForm.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;
using namespace ddlsim::sim::testing;

namespace {
constexpr double B = 100e9;  // B/s
constexpr double S = 200e6;  // bytes: x = 2 ms
constexpr double x = S / B;
constexpr double f = 5e-3;
constexpr double b = 9e-3;

PipelinePlan two_stages(ScheduleKind schedule, bool overlap)
{
  PipelinePlan plan = one_micro_batch();
  plan.schedule = schedule;
  plan.micro_batches = 2;
  plan.overlap_p2p_comm = overlap;
  for (std::size_t s = 0; s < 2; ++s) {
    StagePlan& stage = plan.stages.emplace_back();
    stage.layers = {s, s + 1};
    stage.activation_bytes = S;
  }
  return plan;
}

double makespan(ScheduleKind schedule, bool overlap)
{
  TaskGraph g = build_schedule(two_stages(schedule, overlap));
  return replay_closed(g, one_node(2, B), [](const ComputeTask& c) { return c.phase == Phase::forward ? f : b; })
      .makespan_s;
}
}  // namespace

TEST_CASE("the graph is the same tasks either way: blocking only adds waits")
{
  for (ScheduleKind schedule : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    const TaskGraph overlapped = build_schedule(two_stages(schedule, true));
    const TaskGraph blocking = build_schedule(two_stages(schedule, false));
    CHECK(overlapped.size() == blocking.size());
    CHECK(overlapped.size() == 8 + 4);  // 2 stages x 2 micro-batches x 2 passes, 4 transfers
  }
}

TEST_CASE("GPipe, sends overlapped: 3f + 2x + 3b")
{
  CHECK(makespan(ScheduleKind::gpipe, true) == doctest::Approx(3 * f + 2 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("GPipe, blocking sends: 3f + 4x + 3b")
{
  CHECK(makespan(ScheduleKind::gpipe, false) == doctest::Approx(3 * f + 4 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("1F1B, sends overlapped: 3f + 2x + 3b")
{
  CHECK(makespan(ScheduleKind::one_f_one_b, true) == doctest::Approx(3 * f + 2 * x + 3 * b).epsilon(1e-9));
}

TEST_CASE("1F1B, blocking sends: 3f + 3x + 3b")
{
  CHECK(makespan(ScheduleKind::one_f_one_b, false) == doctest::Approx(3 * f + 3 * x + 3 * b).epsilon(1e-9));
}
