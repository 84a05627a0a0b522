// The data-parallel stream of ZeRO 1-2 (the distributed optimizer) against closed forms, on one node
// with links of bandwidth B and no latency, collectives at analytic fidelity (sim::analytic_seconds):
//  - the model chunks of a pipeline rank share one communicator: their gradient reductions and
//    parameter gathers queue one after another instead of running side by side unpriced;
//  - overlap_param_gather (Megatron's --overlap-param-gather): the gathers move from after the step
//    into the forward, bucket by bucket: one chunk of two buckets of X bytes, layers of t0 each,
//      forward start = AG(X); the second bucket's first layer starts at max(AG(X) + 2 t0, 2 AG(X)).
// One engine per process: one replay per test case.
#include "ClosedForm.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

using namespace ddlsim::sim;
using namespace ddlsim::sim::testing;

namespace {
constexpr double B = 100e9;  // B/s
constexpr double X = 64e6;   // bytes of a stage's (or a bucket's) parameters

PipelinePlan sharded(int pp, int v, int dp)
{
  PipelinePlan plan;
  plan.schedule = v > 1 ? ScheduleKind::interleaved : ScheduleKind::gpipe;
  plan.virtual_stages = v;
  plan.micro_batches = pp;
  plan.micro_batch_size = 1;
  plan.dp = dp;
  plan.zero             = ddlsim::ZeroStage::optimizer;
  plan.shard = dp;
  plan.dp_algorithm = CollectiveAlgorithm::ring;
  plan.dp_fidelity = CollectiveFidelity::analytic;
  for (int s = 0; s < pp * v; ++s) {
    StagePlan& stage = plan.stages.emplace_back();
    stage.layers = {static_cast<std::size_t>(2 * s), static_cast<std::size_t>(2 * s + 2)};
    stage.gradient_bytes = X;
    stage.activation_bytes = 1e3;
  }
  return plan;
}

struct Span {
  double start, end;
};

// Device 0's collectives of `role`, in start order.
std::vector<Span> spans(const TaskGraph& g, const ReplayResult& r, CollectiveRole role)
{
  std::vector<Span> out;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective && g.collective(id).role == role) {
      const auto& group = g.collective(id).group;
      if (std::find(group.begin(), group.end(), 0) != group.end())
        out.push_back({r.timings[id].start_s, r.timings[id].end_s});
    }
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  return out;
}

double layer_seconds(const ComputeTask& c, double t0)
{
  return c.phase == Phase::optimizer ? 0.0 : (c.layer_end - c.layer_begin) * t0 * (c.phase == Phase::backward ? 2 : 1);
}

// Forward: when device 0's first forward starts, and when layer `layer` of it starts.
struct Forward {
  double start = 1e9, layer_start = 1e9;
};

Forward first_forward(const TaskGraph& g, const ReplayResult& r, std::uint32_t layer)
{
  Forward f;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) != TaskKind::compute || g.compute(id).device != 0 || g.compute(id).phase != Phase::forward)
      continue;
    f.start = std::min(f.start, r.timings[id].start_s);
    if (g.compute(id).layer_begin == layer)
      f.layer_start = std::min(f.layer_start, r.timings[id].start_s);
  }
  return f;
}
}  // namespace

TEST_CASE("ZeRO 1: the chunks of a pipeline rank reduce and gather on one stream, one after another")
{
  // pp 2 with 2 virtual stages: chunks 0 and 2 on rank 0; dp 2, gradients reduced after the backward.
  PipelinePlan plan = sharded(2, 2, 2);
  TaskGraph g = build_schedule(plan);
  const ReplayResult r = replay_closed(g, one_node(4, B), [](const ComputeTask& c) { return layer_seconds(c, 1e-3); });
  const double rs = analytic_collective(CollectiveKind::reduce_scatter, 2, X, B);
  const double ag = analytic_collective(CollectiveKind::all_gather, 2, X, B);
  REQUIRE(ag > X / 2 / B * 0.5);  // it moves the bytes: not a zero-time timer
  const std::vector<Span> reduced = spans(g, r, CollectiveRole::gradients);
  const std::vector<Span> gathered = spans(g, r, CollectiveRole::parameters);
  REQUIRE(reduced.size() == 2);
  REQUIRE(gathered.size() == 2);
  for (const auto* list : {&reduced, &gathered})
    for (const Span& s : *list)
      CHECK(s.end - s.start == doctest::Approx(list == &reduced ? rs : ag).epsilon(1e-9));
  // Each starts once the one before it on the stream is through: the gathers after both reductions.
  CHECK(reduced[1].start >= reduced[0].end - 1e-12);
  CHECK(gathered[0].start >= reduced[1].end - 1e-12);
  CHECK(gathered[1].start >= gathered[0].end - 1e-12);
  CHECK(r.makespan_s >= gathered[0].start + 2 * ag - 1e-12);
}

TEST_CASE("overlap_param_gather: the second bucket's gather hides under the first bucket's layers")
{
  PipelinePlan plan = sharded(1, 1, 2);
  plan.overlap_param_gather = true;
  plan.stages[0].layers = {0, 4};
  plan.stages[0].gradient_bytes = 2 * X;
  plan.stages[0].buckets = {{.layer = 2, .bytes = X}, {.layer = 0, .bytes = X}};  // from the stage's end
  const double ag = analytic_collective(CollectiveKind::all_gather, 2, X, B);
  const double t0 = ag;  // two layers of t0 outlast the second gather
  TaskGraph g = build_schedule(plan);
  const ReplayResult r = replay_closed(g, one_node(2, B), [&](const ComputeTask& c) { return layer_seconds(c, t0); });
  const Forward f = first_forward(g, r, 2);
  CHECK(f.start == doctest::Approx(ag).epsilon(1e-9));
  CHECK(f.layer_start == doctest::Approx(ag + 2 * t0).epsilon(1e-9));
  // Every gather is in the forward: none after the step.
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective && g.collective(id).role == CollectiveRole::parameters)
      CHECK(g.collective(id).phase == Phase::forward);
}

TEST_CASE("overlap_param_gather: short layers wait for the second bucket's gather")
{
  PipelinePlan plan = sharded(1, 1, 2);
  plan.overlap_param_gather = true;
  plan.stages[0].layers = {0, 4};
  plan.stages[0].gradient_bytes = 2 * X;
  plan.stages[0].buckets = {{.layer = 2, .bytes = X}, {.layer = 0, .bytes = X}};
  const double ag = analytic_collective(CollectiveKind::all_gather, 2, X, B);
  const double t0 = ag / 10;
  TaskGraph g = build_schedule(plan);
  const ReplayResult r = replay_closed(g, one_node(2, B), [&](const ComputeTask& c) { return layer_seconds(c, t0); });
  const Forward f = first_forward(g, r, 2);
  CHECK(f.start == doctest::Approx(ag).epsilon(1e-9));
  CHECK(f.layer_start == doctest::Approx(2 * ag).epsilon(1e-9));
}

TEST_CASE("without overlap_param_gather the gather follows the step")
{
  PipelinePlan plan = sharded(1, 1, 2);
  plan.stages[0].layers = {0, 4};
  plan.stages[0].gradient_bytes = 2 * X;
  plan.stages[0].buckets = {{.layer = 2, .bytes = X}, {.layer = 0, .bytes = X}};
  const double ag = analytic_collective(CollectiveKind::all_gather, 2, 2 * X, B);
  TaskGraph g = build_schedule(plan);
  const ReplayResult r = replay_closed(g, one_node(2, B), [&](const ComputeTask& c) { return layer_seconds(c, 1e-3); });
  CHECK(first_forward(g, r, 2).start == 0.0);
  const std::vector<Span> gathered = spans(g, r, CollectiveRole::parameters);
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0].end == doctest::Approx(r.makespan_s).epsilon(1e-12));
  CHECK(gathered[0].end - gathered[0].start == doctest::Approx(ag).epsilon(1e-9));
}
