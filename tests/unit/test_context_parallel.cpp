// Context parallelism without an engine: the bytes a GPU sends per iteration for the K/V of a
// grouped-query attention model, ring and all_gather, against their closed forms; the all_gather's
// collectives over each cp group around a whole attention layer; the tensor-parallel collectives on
// a cp rank's s/cp tokens; cp_algorithm's checks with file:line:key. The expected values come from
// the formulas, not from the simulator.
#include "experiments/Plan.hpp"
#include "experiments/Experiment.hpp"
#include "calibration/TableCostModel.hpp"
#include "sim/Collectives.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::experiments;

namespace {
// A Llama-shaped GQA model: 2 layers, hidden 1024, 16 heads of 64, 4 K/V heads, 1,024 tokens.
constexpr int layers = 2, hidden = 1024, heads = 16, kv_heads = 4, seq = 1024;
constexpr int micro_batches = 2, micro_batch = 2;

PointConfig point_of(int tp, int cp, const std::string& algorithm, const std::string& recompute = "none")
{
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_cp_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / ("exp" + std::to_string(counter++) + ".yaml");
  std::ofstream(path) << "name: t\n"
                         "model: {name: gqa, llama: {layers: "
                      << layers << ", hidden: " << hidden << ", heads: " << heads << ", kv_heads: " << kv_heads
                      << ", ffn_hidden: 2048, seq: " << seq
                      << ", vocab: 1000}}\n"
                         "cluster: {use: dgx-h100x8, gpus: "
                      << std::max(8, tp * cp)
                      << "}\n"
                         "calibration: h100-sxm\n"
                         "training: {global_batch: "
                      << micro_batches * micro_batch * std::max(1, 8 / (tp * cp)) << ", micro_batch: " << micro_batch
                      << ", dtype: bf16, recompute: " << recompute
                      << "}\n"
                         "parallelism: {dp: "
                      << std::max(1, 8 / (tp * cp)) << ", tp: " << tp << ", cp: " << cp
                      << ", cp_algorithm: " << algorithm << ", dp_collective: ring}\n";
  const PointConfig p = Experiment::load(path.string()).point(0);
  REQUIRE(p.problems.empty());
  return p;
}

sim::TaskGraph graph_of(const PointConfig& p)
{
  const auto cost = calibration::make_cost_model(p.profile);
  sim::TaskGraph g = sim::build_schedule(plan_point(p, *cost).pipeline);
  for (sim::TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == sim::TaskKind::collective)
      sim::resolve_collective(g.collective(id), p.cluster);
  return g;
}

// Bytes GPU 0 sends per iteration for context parallelism: its ring steps, or its share of the
// all-gathers and reduce-scatters as NCCL's ring sends them.
double context_bytes(const PointConfig& p)
{
  const sim::TaskGraph g = graph_of(p);
  double bytes = 0;
  for (sim::TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == sim::TaskKind::transfer && g.transfer(id).kind == sim::TransferKind::context &&
        g.transfer(id).src == 0)
      bytes += g.transfer(id).bytes;
    if (g.kind(id) == sim::TaskKind::collective && g.collective(id).role == sim::CollectiveRole::context)
      sim::for_each_send(g.collective(id), p.cluster.gpus_per_node, [&](int src, int, double b) {
        bytes += src == 0 ? b : 0.0;
      });
  }
  return bytes;
}
}  // namespace

TEST_CASE("context parallelism's K/V bytes per GPU: the GQA closed form of ring and all_gather")
{
  // Per attention layer and micro-batch, KV = 2 (kv_heads / tp, one when tp replicates them) x
  // head_dim x s x b x 2 bytes, in blocks of KV / cp. The ring sends cp - 1 blocks forward, 2 (cp - 1)
  // + 1 backward (K/V with dK/dV, then dK/dV home), cp - 1 more when the layer reruns its forward.
  // The all-gather sends (cp - 1) / cp of KV per collective: one forward; backward a gather (two
  // with the rerun) and a reduce-scatter.
  for (const int cp : {2, 4})
    for (const int tp : {1, 2, 8}) {
      if (tp * cp > 16)
        continue;
      for (const std::string recompute : {"none", "full"}) {
        CAPTURE(cp);
        CAPTURE(tp);
        CAPTURE(recompute);
        const double kv_per_rank = tp > kv_heads ? 1.0 : static_cast<double>(kv_heads) / tp;
        const double KV = 2 * kv_per_rank * (hidden / heads) * seq * micro_batch * 2;
        const double per = static_cast<double>(micro_batches) * layers;  // attention layers x micro-batches
        const bool rerun = recompute == "full";
        const double ring = per * KV / cp * ((cp - 1) + (rerun ? 3 : 2) * (cp - 1) + 1);
        const double gather = per * KV * (cp - 1) / cp * (1 + (rerun ? 2 : 1) + 1);
        CHECK(context_bytes(point_of(tp, cp, "ring", recompute)) == doctest::Approx(ring).epsilon(1e-12));
        CHECK(context_bytes(point_of(tp, cp, "all_gather", recompute)) == doctest::Approx(gather).epsilon(1e-12));
      }
    }
}

TEST_CASE("all_gather: the cp group gathers K/V before the whole attention layer and reduce-scatters dK/dV after")
{
  const PointConfig p = point_of(2, 4, "all_gather");
  const sim::TaskGraph g = graph_of(p);
  int gathers = 0, scatters = 0;
  const auto attention = [&](sim::TaskId id) {
    if (g.kind(id) != sim::TaskKind::compute)
      return false;
    const auto& c = g.compute(id);
    return c.layer_end == c.layer_begin + 1 && p.model.layers()[c.layer_begin].kind == models::LayerKind::attention;
  };
  for (sim::TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == sim::TaskKind::compute) {
      CHECK(g.compute(id).share == 1.0);  // no chunks: the layer runs whole
      continue;
    }
    CHECK(g.kind(id) != sim::TaskKind::transfer);  // no ring steps (pp 1)
    if (g.kind(id) != sim::TaskKind::collective || g.collective(id).role != sim::CollectiveRole::context)
      continue;
    const auto& c = g.collective(id);
    // Tensor rank t of the 4 consecutive replicas of a cp group (device = replica x tp + t).
    REQUIRE(c.group.size() == 4);
    for (std::size_t i = 1; i < c.group.size(); ++i)
      CHECK(c.group[i] == c.group[0] + 2 * static_cast<int>(i));
    // Forward: a gather that the attention waits for; backward: a gather before, a reduce-scatter
    // after the attention's backward.
    const bool gather = c.kind == sim::CollectiveKind::all_gather;
    CHECK((gather || (c.kind == sim::CollectiveKind::reduce_scatter && c.phase == sim::Phase::backward)));
    (gather ? gathers : scatters) += 1;
    bool before_attention = false, after_attention = false;
    for (sim::TaskId s : g.successors(id))
      before_attention |= attention(s);
    for (sim::TaskId b = 0; b < g.size(); ++b)
      if (attention(b)) {
        const auto& s = g.successors(b);
        after_attention |= std::find(s.begin(), s.end(), id) != s.end();
      }
    CHECK(before_attention == gather);
    CHECK(after_attention == !gather);
  }
  // Per micro-batch, attention layer and cp group (2 tensor ranks): 2 gathers and a reduce-scatter.
  CHECK(gathers == micro_batches * layers * 2 * 2);
  CHECK(scatters == micro_batches * layers * 2);
}

TEST_CASE("tensor-parallel collectives carry a cp rank's s/cp tokens")
{
  const auto cost = calibration::make_cost_model(point_of(2, 1, "ring").profile);
  const auto collectives = [&](int cp) {
    return plan_point(point_of(2, cp, "ring"), *cost).pipeline.stages.at(0).tp_collectives;
  };
  const auto one = collectives(1), four = collectives(4);
  REQUIRE(!one.empty());
  REQUIRE(one.size() == four.size());
  for (std::size_t i = 0; i < one.size(); ++i)
    CHECK(four[i].bytes_per_sample == doctest::Approx(one[i].bytes_per_sample / 4).epsilon(1e-12));
}

TEST_CASE("cp_algorithm: a value from its table and all_gather only with cp > 1")
{
  const std::string base = "name: t\nmodel: llama3-8b\ncluster: {use: dgx-h100, gpus: 2}\ncalibration: h100-sxm\n"
                           "training: {global_batch: 2, micro_batch: 1, seq: 256}\n";
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_cp_keys_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto load = [&](const std::string& parallelism) {
    const auto path = dir / "exp.yaml";
    std::ofstream(path) << base << "parallelism: {" << parallelism << "}\n";
    return Experiment::load(path.string()).point(0);
  };
  try {
    load("cp: 2, cp_algorithm: allgather");
    FAIL("cp_algorithm: allgather accepted");
  } catch (const ConfigError& e) {
    const std::string m = e.diagnostics().front().to_string();
    CHECK(m.find(":6: parallelism.cp_algorithm: ") != std::string::npos);
    CHECK(m.find("ring, all_gather") != std::string::npos);
  }
  const PointConfig one = load("dp: 2, cp_algorithm: all_gather");
  REQUIRE(one.problems.size() == 1);
  CHECK(one.problems.front().to_string().find(":6: parallelism.cp_algorithm: cp_algorithm: all_gather needs cp > 1") !=
        std::string::npos);
  CHECK(load("cp: 2, cp_algorithm: all_gather").problems.empty());
  CHECK(load("cp: 2").parallelism.cp_algorithm == sim::CpAlgorithm::ring);
  CHECK(load("dp: 2, cp_algorithm: ring").problems.empty());
}
