// Context parallelism's time against closed forms, on one node of cp GPUs with links of bandwidth B
// and no latency, one attention layer (layer 1) after a layer of t0 seconds, one micro-batch:
//   ring, forward: the attention runs in cp chunks of c = t_f / cp; hop j sends a K/V block of
//     KV / cp bytes (tau = KV / (cp B)) as soon as the previous arrived, so chunk j starts at
//     max(end of chunk j - 1, j tau): the layer takes c + (cp - 1) max(c, tau) after layer 0;
//   ring, backward: each hop carries K/V and the dK/dV the sender's chunk before it updated (2 tau),
//     and a last hop returns the dK/dV home (tau), which layer 0's backward waits for: the hops do
//     not overlap the chunks, cp c_b + (2 cp - 1) tau;
//   all_gather (Llama 3): the layer waits for the all-gather of its K/V (KV bytes over the cp group),
//     then runs whole: AG + t_f; its backward all-gathers again and reduce-scatters dK/dV after:
//     AG + t_b + RS.
// AG and RS are the collectives' own time (analytic fidelity: a timer of the closed form
// sim::analytic_seconds gives); the rest comes from the formulas. One engine per process.
#include "ClosedForm.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddlsim::sim;
using namespace ddlsim::sim::testing;

namespace {
constexpr double B = 100e9;       // B/s
constexpr double KV = 64e6;       // bytes of K and V of the micro-batch's sequence on a GPU
constexpr double t0 = 0.7e-3;     // s: layer 0, forward and backward
constexpr double t_b_of_f = 2.0;  // the attention's backward over its forward

struct Spans {
  double forward = 0;   // end of layer 0's forward to the attention's last forward task
  double backward = 0;  // end of the forward (the attention's) to the start of layer 0's backward
};

Spans run(int cp, CpAlgorithm algorithm, double t_f)
{
  PipelinePlan plan = one_micro_batch();
  plan.dp = cp;  // the replicas: one cp group
  plan.cp = cp;
  plan.cp_algorithm = algorithm;
  plan.dp_algorithm = CollectiveAlgorithm::ring;
  plan.dp_fidelity = CollectiveFidelity::analytic;
  StagePlan& stage = plan.stages.emplace_back();
  stage.layers = {0, 2};
  stage.rings = {{.layer = 1, .kv_bytes_per_sample = KV}};
  TaskGraph g = build_schedule(plan);

  const ReplayResult r = replay_closed(g, one_node(cp, B), [&](const ComputeTask& c) {
    const double attention = (c.phase == Phase::forward ? t_f : t_b_of_f * t_f) * c.share;
    return c.layer_begin == 0 ? t0 : attention;
  });
  double layer0_forward_end = 0, attention_forward_end = 0, layer0_backward_start = 0;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) != TaskKind::compute || g.compute(id).device != 0)
      continue;
    const ComputeTask& c = g.compute(id);
    const TaskTiming& t = r.timings[id];
    if (c.phase == Phase::forward)
      (c.layer_begin == 0 ? layer0_forward_end : attention_forward_end) =
          std::max(c.layer_begin == 0 ? layer0_forward_end : attention_forward_end, t.end_s);
    else if (c.phase == Phase::backward && c.layer_begin == 0)
      layer0_backward_start = t.start_s;
  }
  return {attention_forward_end - layer0_forward_end, layer0_backward_start - attention_forward_end};
}

double collective_seconds(CollectiveKind kind, int cp) { return analytic_collective(kind, cp, KV, B); }

void check_ring(int cp, double t_f)
{
  const Spans s = run(cp, CpAlgorithm::ring, t_f);
  const double c = t_f / cp, tau = KV / cp / B, c_b = t_b_of_f * c;
  CHECK(s.forward == doctest::Approx(c + (cp - 1) * std::max(c, tau)).epsilon(1e-9));
  CHECK(s.backward == doctest::Approx(cp * c_b + (2 * cp - 1) * tau).epsilon(1e-9));
}

void check_all_gather(int cp, double t_f)
{
  const Spans s = run(cp, CpAlgorithm::all_gather, t_f);
  const double gather = collective_seconds(CollectiveKind::all_gather, cp);
  const double scatter = collective_seconds(CollectiveKind::reduce_scatter, cp);
  REQUIRE(gather > (cp - 1) * KV / cp / B * 0.5);  // it moves the K/V: not a zero-time timer
  CHECK(s.forward == doctest::Approx(gather + t_f).epsilon(1e-9));
  CHECK(s.backward == doctest::Approx(gather + t_b_of_f * t_f + scatter).epsilon(1e-9));
}
}  // namespace

// tau = 64 MB / cp / 100 GB/s: 320 us at cp 2, 160 us at cp 4.
TEST_CASE("ring attention cp 2: hops hidden under chunks longer than a hop") { check_ring(2, 2e-3); }
TEST_CASE("ring attention cp 2: chunks shorter than a hop wait for it") { check_ring(2, 0.2e-3); }
TEST_CASE("ring attention cp 4: hops hidden under chunks longer than a hop") { check_ring(4, 2e-3); }
TEST_CASE("ring attention cp 4: chunks shorter than a hop wait for it") { check_ring(4, 0.2e-3); }
TEST_CASE("all_gather cp 2: the K/V gather then the whole attention") { check_all_gather(2, 2e-3); }
TEST_CASE("all_gather cp 4: the K/V gather then the whole attention") { check_all_gather(4, 2e-3); }
