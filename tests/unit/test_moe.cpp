// Mixtures of experts under expert parallelism, without an engine: the load model's closed forms,
// the dispatched bytes (tokens x top_k x hidden x dtype per GPU, times the kept share and (ep-1)/ep
// leaving it), the busiest GPU's expert compute, expert parameters and their optimizer state over
// their own group, the expert gradients' reduction groups, and the checks with file:line:key.
#include "experiments/Plan.hpp"
#include "experiments/Experiment.hpp"
#include "calibration/TableCostModel.hpp"
#include "models/ExpertLoad.hpp"
#include "models/ModelLoader.hpp"
#include "sim/Collectives.hpp"
#include "sim/OpCosts.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::experiments;

namespace {
const std::string fixtures = DDLSIM_TEST_FIXTURES;

std::string write_moe_experiment(const std::string& text)
{
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_moe_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / ("exp" + std::to_string(counter++) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

// A small Llama-shaped mixture of experts (4 experts, top-k as given) on one node of `gpus` H100s.
std::string moe_experiment(const std::string& moe, const std::string& parallelism, int gpus = 4,
                           const std::string& training = "")
{
  return "name: t\n"
         "model: {name: tiny-moe, llama: {layers: 2, hidden: 256, heads: 4, ffn_hidden: 512, seq: 128, vocab: 1000,\n"
         "        moe: {experts: 4, expert_ffn_hidden: 512, " +
         moe +
         "}}}\n"
         "cluster: {use: dgx-h100, gpus: " +
         std::to_string(gpus) +
         "}\n"
         "calibration: h100-sxm\n"
         "training: {global_batch: " +
         std::to_string(2 * gpus) + ", micro_batch: 2" + training +
         "}\n"
         "parallelism: {" +
         parallelism + "}\n";
}

PointConfig point_of(const std::string& text)
{
  const Experiment exp = Experiment::load(write_moe_experiment(text));
  return exp.point(0);
}

// Bytes the dispatch all-to-alls of one forward pass move, per GPU on average.
double dispatched_bytes_per_gpu(const PointConfig& p)
{
  const auto cost = calibration::make_cost_model(p.profile);
  const PointPlan plan = plan_point(p, *cost);
  const sim::TaskGraph g = sim::build_schedule(plan.pipeline);
  double bytes = 0;
  for (sim::TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == sim::TaskKind::collective && g.collective(id).role == sim::CollectiveRole::expert_dispatch &&
        g.collective(id).phase == sim::Phase::forward)
      sim::for_each_send(g.collective(id), p.cluster.gpus_per_node, [&](int, int, double b) { bytes += b; });
  return bytes / g.device_count();
}
}  // namespace

TEST_CASE("expert load: the busiest expert at L x the mean and the others sharing the rest and capacity dropping the excess")
{
  models::Layer l;
  l.kind = models::LayerKind::moe;
  l.experts = 8;
  l.load_imbalance = 1;
  models::ExpertLoad u = models::expert_load(l, 8);
  CHECK(u.kept == 1);
  CHECK(u.busiest() == 1);
  for (double w : u.rank_load)
    CHECK(w == doctest::Approx(1));
  l.load_imbalance = 2;
  // One expert per GPU: the busiest GPU's load is the busiest expert's.
  models::ExpertLoad e8 = models::expert_load(l, 8);
  CHECK(e8.rank_load.front() == doctest::Approx(2));
  CHECK(e8.rank_load.back() == doctest::Approx(6.0 / 7));
  // Two experts per GPU: the busy one and one at (8 - 2)/7 of the mean.
  CHECK(models::expert_load(l, 4).busiest() == doctest::Approx((2 + 6.0 / 7) / 2));
  // ep 1: the GPU holds every expert, no imbalance between GPUs.
  CHECK(models::expert_load(l, 1).busiest() == doctest::Approx(1));
  // ep 16: each expert over two GPUs, both shards of the busy one at 2.
  models::ExpertLoad e16 = models::expert_load(l, 16);
  CHECK(e16.shards == 2);
  CHECK(e16.rank_load[0] == doctest::Approx(2));
  CHECK(e16.rank_load[1] == doctest::Approx(2));
  CHECK(e16.rank_load[2] == doctest::Approx((16 - 4) / 14.0));
  // Capacity 1.5: the busy expert keeps 1.5 of its 2, 0.5 / 8 of all copies are dropped.
  l.capacity_factor = 1.5;
  models::ExpertLoad c = models::expert_load(l, 8);
  CHECK(c.kept == doctest::Approx(1 - 0.5 / 8));
  CHECK(c.busiest() == doctest::Approx(1.5));
  double sum = 0;
  for (double w : c.rank_load)
    sum += w;
  CHECK(sum / 8 == doctest::Approx(c.kept));
  CHECK(models::expert_parallel_fits(8, 4));
  CHECK(models::expert_parallel_fits(8, 16));
  CHECK_FALSE(models::expert_parallel_fits(8, 3));
  CHECK_FALSE(models::expert_parallel_fits(8, 12));
  CHECK_THROWS_AS(models::expert_load(l, 3), std::invalid_argument);
}

TEST_CASE("dispatched bytes are b s top_k h d x kept x (ep-1)/ep per GPU and MoE layer: top_k and capacity change them")
{
  const double b = 2, s = 128, h = 256, d = 2, ep = 4, layers = 2;
  auto formula = [&](double k, double kept) { return layers * b * s * k * h * d * kept * (ep - 1) / ep; };
  const std::string par = "dp: 4, ep: 4";
  CHECK(dispatched_bytes_per_gpu(point_of(moe_experiment("top_k: 2", par))) == doctest::Approx(formula(2, 1)));
  CHECK(dispatched_bytes_per_gpu(point_of(moe_experiment("top_k: 1", par))) == doctest::Approx(formula(1, 1)));
  // The busiest of 4 experts at 2 x the mean, capacity 1: it keeps 1, the others (4 - 2)/3 each.
  const double kept = (1 + 3 * (2.0 / 3)) / 4;
  CHECK(dispatched_bytes_per_gpu(point_of(moe_experiment("top_k: 2, load_imbalance: 2, capacity_factor: 1", par))) ==
        doctest::Approx(formula(2, kept)));
  // Imbalance alone moves bytes to the busy GPU; the total stays.
  CHECK(dispatched_bytes_per_gpu(point_of(moe_experiment("top_k: 2, load_imbalance: 2", par))) ==
        doctest::Approx(formula(2, 1)));
  // The run's training.capacity_factor and load_imbalance replace the model's.
  const PointConfig run = point_of(moe_experiment("top_k: 2", par, 4, ", load_imbalance: 2, capacity_factor: 1"));
  CHECK(dispatched_bytes_per_gpu(run) == doctest::Approx(formula(2, kept)));
  CHECK(dropped_tokens(run) == doctest::Approx(layers * 8 * s * 2 * (1 - kept)));
}

TEST_CASE("imbalance 2 doubles the busiest GPU's expert compute")
{
  auto experts_seconds = [](const std::string& moe) {
    const PointConfig p = point_of(moe_experiment(moe, "dp: 4, ep: 4"));
    const auto cost = calibration::make_cost_model(p.profile);
    const PointPlan plan = plan_point(p, *cost);
    const sim::TaskGraph g = sim::build_schedule(plan.pipeline);
    const auto seconds = sim::compute_durations(g, p.model, *cost, compute_options(p));
    std::vector<double> per_device(4, 0.0);
    for (sim::TaskId id = 0; id < g.size(); ++id)
      if (g.kind(id) == sim::TaskKind::compute && g.compute(id).phase != sim::Phase::optimizer &&
          p.model.layers()[g.compute(id).layer_begin].kind == models::LayerKind::moe) {
        REQUIRE(g.compute(id).layer_end == g.compute(id).layer_begin + 1);  // the experts on their own
        per_device[static_cast<std::size_t>(g.compute(id).device)] += seconds[id];
      }
    return per_device;
  };
  const auto uniform = experts_seconds("top_k: 2");
  const auto busy = experts_seconds("top_k: 2, load_imbalance: 2");
  CHECK(uniform[0] > 0);
  CHECK(busy[0] == doctest::Approx(2 * uniform[0]));                 // ep rank 0 holds the busiest expert
  CHECK(busy[1] == doctest::Approx((4 - 2) / 3.0 * uniform[1]));     // the others share the rest
}

// Full recomputation reruns each block's forward before its backward, the experts layer's dispatch
// and combine included (Megatron-Core checkpoints the whole transformer layer): GPU 0's backward of
// micro-batch 0 goes, per experts layer, recomputed dispatch (d), recomputed combine (c), the combine's
// backward (c), the experts (E), the dispatch's backward (d).
TEST_CASE("full recomputation reruns each experts layer's dispatch and combine before its backward")
{
  auto backward_order = [](const std::string& recompute) {
    const PointConfig p = point_of(moe_experiment("top_k: 2", "dp: 4, ep: 4", 4, ", recompute: " + recompute));
    REQUIRE(p.is_valid());
    const auto cost = calibration::make_cost_model(p.profile);
    const sim::TaskGraph g = sim::build_schedule(plan_point(p, *cost).pipeline);
    std::string order;
    for (sim::TaskId id = 0; id < g.size(); ++id)
      if (g.kind(id) == sim::TaskKind::compute) {
        const auto& c = g.compute(id);
        if (c.device == 0 && c.phase == sim::Phase::backward && c.micro_batch == 0 &&
            p.model.layers()[c.layer_begin].kind == models::LayerKind::moe)
          order += 'E';
      } else if (g.kind(id) == sim::TaskKind::collective) {
        const auto& c = g.collective(id);
        if (c.group.front() == 0 && c.phase == sim::Phase::backward && c.micro_batch == 0 &&
            (c.role == sim::CollectiveRole::expert_dispatch || c.role == sim::CollectiveRole::expert_combine))
          order += c.role == sim::CollectiveRole::expert_dispatch ? 'd' : 'c';
      }
    return order;
  };
  CHECK(backward_order("none") == "cEdcEd");       // two MoE layers, the last one's backward first
  CHECK(backward_order("selective") == "cEdcEd");  // the attention core only
  CHECK(backward_order("full") == "dccEddccEd");
}

TEST_CASE("experts' parameters over ep GPUs with their optimizer state and gradients over dp x cp / ep")
{
  const PointConfig one = point_of(moe_experiment("top_k: 2", "dp: 8, zero: 1", 8));
  const PointConfig four = point_of(moe_experiment("top_k: 2", "dp: 8, zero: 1, ep: 4", 8));
  REQUIRE(one.is_valid());
  REQUIRE(four.is_valid());
  const auto cost = calibration::make_cost_model(four.profile);
  const PointPlan p1 = plan_point(one, *cost), p4 = plan_point(four, *cost);
  double experts = 0;
  for (const auto& l : four.model.layers())
    experts += l.kind == models::LayerKind::moe ? l.parameters : 0.0;
  const double dense = four.model.parameter_count() - experts;
  CHECK(p1.stage_memory[0].parameters == doctest::Approx(dense + experts));
  CHECK(p4.stage_memory[0].parameters == doctest::Approx(dense + experts / 4));
  // bf16 + Adam: 12 bytes of state per parameter, dense over 8 replicas, the experts over 8 / 4.
  CHECK(p4.stage_memory[0].optimizer_state == doctest::Approx(dense * 12 / 8 + experts / 4 * 12 / 2));
  CHECK(p4.stage_memory[0].weights == doctest::Approx((dense + experts / 4) * 2));
  // The experts' gradients are reduce-scattered over replicas {e, e + 4}, the dense ones over all 8.
  const sim::TaskGraph g = sim::build_schedule(p4.pipeline);
  std::set<std::vector<int>> expert_groups;
  bool dense_over_all = false;
  for (sim::TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == sim::TaskKind::collective && g.collective(id).role == sim::CollectiveRole::gradients) {
      const auto& c = g.collective(id);
      if (c.group.size() == 8 && c.bytes == doctest::Approx(dense * 2))
        dense_over_all = true;
      if (c.group.size() == 2) {
        CHECK(c.bytes == doctest::Approx(experts / 4 * 2));
        expert_groups.insert(c.group);
      }
    }
  CHECK(dense_over_all);
  CHECK(expert_groups == std::set<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

// An expert split over two GPUs (ep = 2 x experts): each shard receives every copy routed to its
// expert, whole (b s k h per sample and GPU in all, twice ep = experts' rows at half the width). Its
// dispatch send buffer is twice as large too (every copy goes to both shards), and so is the receive
// buffer: per MoE layer and sample, b s k h d more stashed input, and a workspace of 2 (1 + 1) s k h d
// instead of (1 + 1) s k h d.
TEST_CASE("an expert split over two GPUs keeps every routed token's input and doubles the dispatch buffers")
{
  auto memory = [](int ep) {
    const PointConfig p = point_of(moe_experiment("top_k: 2", "schedule: 1f1b, dp: 8, ep: " + std::to_string(ep), 8));
    REQUIRE(p.is_valid());
    const auto cost = calibration::make_cost_model(p.profile);
    return plan_point(p, *cost).stage_memory.at(0);
  };
  const double b = 2, s = 128, k = 2, h = 256, d = 2, moe_layers = 2;
  const models::MemoryBreakdown whole = memory(4), split = memory(8);
  CHECK(split.activations - whole.activations == doctest::Approx(moe_layers * b * s * k * h * d));
  CHECK(split.workspace - whole.workspace == doctest::Approx(b * 2 * s * k * h * d));
}

// With sequence parallelism every activation of a layer is split over the tp = 2 tensor ranks (each
// keeps its s/tp tokens, Korthikanti et al. 2022) except the experts' input: the dispatched copies are
// gathered over the tensor-parallel group before the experts (Megatron-Core's token_dispatcher.py:
// permute -> A2A(EP) -> AG(TP) with ep > 1; the all-gather dispatcher's gather over TP x EP with
// ep 1), so each rank keeps all b s k h of them. Against tp 1 on as many replicas, a stage keeps half
// of everything plus the other half of that input: b s k h d (1 - 1/tp) more per MoE layer and micro-
// batch in flight (selective recomputation keeps it too), once for the one block full recomputation
// rebuilds. The dispatch buffers (workspace) stay s/tp tokens: the all-to-all moves each rank's share.
TEST_CASE("with sequence parallelism the experts keep the dispatched tokens gathered over tp, whole")
{
  const double b = 2, s = 128, k = 2, h = 256, d = 2, t = 2, moe_layers = 2;
  const double gathered = b * s * k * h * d * (1 - 1 / t);
  for (const std::string recompute : {"none", "selective", "full"})
    for (int ep : {1, 2}) {
      CAPTURE(recompute);
      CAPTURE(ep);
      auto memory = [&](int tp) {
        const std::string par = "schedule: 1f1b, dp: 2, ep: " + std::to_string(ep) + ", tp: " + std::to_string(tp) +
                                (tp > 1 ? ", sequence_parallel: true" : "");
        const PointConfig p =
            point_of(moe_experiment("top_k: 2", par, 2 * tp, ", recompute: " + recompute));
        REQUIRE(p.is_valid());
        const auto cost = calibration::make_cost_model(p.profile);
        return plan_point(p, *cost).stage_memory.at(0);
      };
      const models::MemoryBreakdown one = memory(1), two = memory(2);
      const double expected = recompute == "full" ? gathered : moe_layers * gathered;
      CHECK(two.activations - one.activations / t == doctest::Approx(expected));
    }
}

TEST_CASE("expert parallelism's bad input gives file:line:key")
{
  auto problem = [](const std::string& text) {
    const PointConfig p = point_of(text);
    REQUIRE_FALSE(p.problems.empty());
    return p.problems.front().to_string();
  };
  // Experts not divisible by ep (nor a divisor of it), ep not dividing dp x cp, tp without SP.
  std::string m = problem(moe_experiment("top_k: 2", "dp: 4, ep: 3"));
  CHECK(m.find(":7: parallelism.ep: ep = 3 neither divides the 4 experts") != std::string::npos);
  m = problem(moe_experiment("top_k: 2", "dp: 2, ep: 4", 2));
  CHECK(m.find(":7: parallelism.ep: ep = 4 does not divide dp x cp = 2") != std::string::npos);
  m = problem(moe_experiment("top_k: 2", "dp: 2, tp: 2, ep: 2"));
  CHECK(m.find("needs sequence_parallel: true") != std::string::npos);
  m = problem("name: t\nmodel: llama3-8b\ncluster: {use: dgx-h100, gpus: 2}\ncalibration: h100-sxm\n"
              "training: {global_batch: 2, micro_batch: 1, seq: 256}\nparallelism: {dp: 2, ep: 2}\n");
  CHECK(m.find(":6: parallelism.ep: expert parallelism spreads a mixture of experts") != std::string::npos);
  // The run's load_imbalance above the experts: its own key and line, not the model's.
  m = problem(moe_experiment("top_k: 2", "dp: 4, ep: 4", 4, ", load_imbalance: 5"));
  CHECK(m.find(":6: training.load_imbalance: ") != std::string::npos);
  CHECK(m.find("at most the 4 experts") != std::string::npos);
  // Below 1: one error, at the run's key.
  try {
    point_of(moe_experiment("top_k: 2", "dp: 4", 4, ", load_imbalance: 0.5"));
    FAIL("load_imbalance 0.5 accepted");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics().front().to_string().find(":6: training.load_imbalance: ") != std::string::npos);
  }
  // top_k above the experts: the model's own key, with its line.
  try {
    point_of(moe_experiment("top_k: 5", "dp: 4"));
    FAIL("top_k > experts accepted");
  } catch (const ConfigError& e) {
    CHECK(e.diagnostics().front().to_string().find(":3: model.llama.moe.top_k: top_k = 5 is more than the 4 experts") !=
          std::string::npos);
  }
}
