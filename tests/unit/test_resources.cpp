// The resource guard's closed form (experiments/Resources.hpp) against the task graph the schedule
// builder really makes for the same point, folded (Fold.hpp) and not: its size, and its activities
// counted from the graph (one per compute task and transfer, and per flow-level collective
// message_count(), or its folded messages under a fold).
#include "calibration/TableCostModel.hpp"
#include "experiments/Bench.hpp"
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Resources.hpp"
#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::experiments;

namespace {

PointConfig point_of(const std::string& text)
{
  const auto path =
      std::filesystem::temp_directory_path() / ("ddlsim_resources_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  const PointConfig p = Experiment::load(path.string()).point(0);
  std::filesystem::remove(path);
  return p;
}

struct Built {
  double tasks      = 0;
  double activities = 0;
};

// The graph evaluate_point() simulates, under the point's fold (a collective's folded messages count).
Built build(const PointConfig& p)
{
  const auto cost = calibration::make_cost_model(p.profile);
  sim::PipelinePlan plan = plan_point(p, *cost).pipeline;
  const sim::Fold fold(plan.devices(), plan_fold(p).generators);
  plan.fold = fold.trivial() ? nullptr : &fold;
  sim::TaskGraph g = sim::build_schedule(plan);
  for (sim::TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == sim::TaskKind::collective)
      sim::resolve_collective(g.collective(id), p.cluster);  // NCCL's choice, as evaluate_point() makes it
  const sim::FoldedCollectives folded =
      plan.fold ? sim::FoldedCollectives(g, p.cluster.gpus_per_node, fold) : sim::FoldedCollectives();
  Built b{.tasks = static_cast<double>(g.size())};
  for (sim::TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == sim::TaskKind::collective) {
      const auto& c = g.collective(id);
      if (c.fidelity != sim::CollectiveFidelity::flow)
        continue;
      if (plan.fold == nullptr) {
        b.activities += static_cast<double>(sim::message_count(c, p.cluster.gpus_per_node));
        continue;
      }
      for (const sim::Message& m : folded.messages(id))
        b.activities += sim::is_join(m) ? 0 : 1;
    } else {
      b.activities += 1;
    }
  return b;
}

std::string experiment(const std::string& model, int nodes, int gpus, const std::string& training,
                       const std::string& parallelism)
{
  return "name: r\nmodel: " + model + "\ncluster: {name: c, nodes: " + std::to_string(nodes) +
         ", gpus_per_node: " + std::to_string(gpus) +
         ", gpu: {memory: 1TiB}, intra_node: {bandwidth: 300GBps}, nic: {bandwidth: 50GBps}, fabric: {latency: 2us}}\n"
         "calibration: h100-sxm\ntraining: {" +
         training + "}\nparallelism: {" + parallelism + "}\n";
}

} // namespace

TEST_CASE("the resource estimate equals the built graph's tasks and activities")
{
  const std::string moe = "{name: m, llama: {layers: 4, hidden: 256, heads: 4, ffn_hidden: 512, seq: 128, vocab: 1000, "
                          "moe: {experts: 8, top_k: 2, expert_ffn_hidden: 512, dense_layers: 1}}}";
  const std::vector<std::string> cases = {
      // GPipe and 1F1B pipelines with data parallelism, ring and hierarchical all-reduce
      experiment("gpt2-small", 2, 8, "global_batch: 64, micro_batch: 2", "schedule: gpipe, pp: 4, dp: 4"),
      experiment("gpt2-small", 2, 8, "global_batch: 64, micro_batch: 4",
                 "schedule: 1f1b, pp: 2, dp: 8, dp_collective: hierarchical"),
      // interleaved, two chunks per GPU
      experiment("gpt2-small", 1, 8, "global_batch: 64, micro_batch: 2",
                 "schedule: interleaved, pp: 4, dp: 2, virtual_stages: 3"),
      // flow-level tensor parallelism inside the node, tree all-reduce across replicas
      experiment("gpt2-small", 2, 4, "global_batch: 32, micro_batch: 2",
                 "schedule: 1f1b, pp: 2, dp: 2, tp: 2, dp_collective: tree"),
      // synchronised batch norm, and gradient buckets
      experiment("{name: rn, resnet: {depth: 50, image: 224, classes: 1000, normalization: sync_batch_norm}}", 1, 8,
                 "global_batch: 64, micro_batch: 4", "pp: 2, dp: 4"),
      experiment("resnet50", 1, 8, "global_batch: 64, micro_batch: 8", "pp: 1, dp: 8, dp_bucket: 25MiB"),
      // a first layer over the cap on its own (GPT-2's embedding, 77 MB; 38 MB per tensor rank): no cut
      // there, the bucket above it extends down (the guard counted one bucket too many)
      experiment("gpt2-small", 1, 8, "global_batch: 64, micro_batch: 2", "pp: 1, dp: 8, dp_bucket: 25MiB"),
      experiment("gpt2-small", 1, 8, "global_batch: 64, micro_batch: 2", "pp: 1, dp: 4, tp: 2, dp_bucket: 25MiB"),
      // analytic data-parallel collectives are timers: no activities
      experiment("gpt2-small", 1, 8, "global_batch: 64, micro_batch: 2", "pp: 2, dp: 4, dp_fidelity: analytic"),
      // expert parallelism: all-to-alls (six per experts layer under full recomputation), the experts'
      // gradients over their own groups, hybrid sharding, ZeRO-3 gathers, tensor parallelism with SP
      experiment(moe, 2, 4, "global_batch: 16, micro_batch: 2, recompute: full", "pp: 2, dp: 4, ep: 4, zero: 1"),
      experiment(moe, 2, 4, "global_batch: 16, micro_batch: 2", "dp: 8, ep: 2, zero: 2, zero_group: 4"),
      experiment(moe, 2, 4, "global_batch: 16, micro_batch: 2, recompute: selective",
                 "dp: 8, ep: 8, zero: 3, ep_collective: hierarchical"),
      experiment(moe, 2, 4, "global_batch: 16, micro_batch: 2, recompute: full",
                 "pp: 2, dp: 2, tp: 2, sequence_parallel: true, ep: 2"),
      // gradient buckets without the experts' gradients, which go to their own group
      experiment(moe, 2, 4, "global_batch: 16, micro_batch: 2", "dp: 8, ep: 4, dp_bucket: 1MiB"),
      // expert parallelism: all-to-alls across two nodes (auto: direct, NCCL's PXN) with uneven loads, and
      // hierarchical ones; the experts' gradients over their own groups with ZeRO
      experiment("mixtral-8x7b", 2, 8, "global_batch: 16, micro_batch: 1, seq: 1024, load_imbalance: 2.0",
                 "pp: 2, dp: 8, zero: 1, ep: 8"),
      experiment("mixtral-8x7b", 2, 8, "global_batch: 16, micro_batch: 1, seq: 1024",
                 "pp: 1, dp: 16, zero: 1, ep: 16, ep_collective: hierarchical"),
      // Megatron's asynchronous column-layer backward (two compute tasks per column layer): with and
      // without sequence parallelism, under full recomputation, beside userbuffers, beside ring attention
      experiment("llama3-8b", 2, 4, "global_batch: 16, micro_batch: 1, seq: 1024, framework: megatron",
                 "pp: 2, dp: 2, tp: 2, sequence_parallel: true"),
      experiment("llama3-8b", 2, 4, "global_batch: 16, micro_batch: 1, seq: 1024, framework: megatron, recompute: full",
                 "pp: 2, dp: 2, tp: 2"),
      experiment("llama3-8b", 2, 4, "global_batch: 16, micro_batch: 1, seq: 1024, framework: megatron",
                 "schedule: interleaved, pp: 2, virtual_stages: 2, dp: 2, tp: 2, sequence_parallel: true, "
                 "tp_comm_overlap: true"),
      experiment("llama3-8b", 2, 4, "global_batch: 16, micro_batch: 1, seq: 1024, framework: megatron",
                 "schedule: 1f1b, pp: 2, dp: 1, cp: 2, tp: 2, sequence_parallel: true"),
      // userbuffers' two collectives each (the guard counted one's messages)
      experiment("llama3-8b", 2, 4, "global_batch: 16, micro_batch: 1, seq: 1024, framework: megatron",
                 "schedule: 1f1b, pp: 2, dp: 2, tp: 2, sequence_parallel: true, tp_comm_overlap: true, "
                 "tp_backward_overlap: false"),
  };
  for (const auto& text : cases)
    for (const bool fold : {false, true}) {
      CAPTURE(text);
      CAPTURE(fold);
      PointConfig p = point_of(text);
      REQUIRE(p.is_valid());
      p.parallelism.fold_replicas = fold;
      const ResourceEstimate e = estimate_resources(p);
      const Built b            = build(p);
      CHECK(e.tasks == b.tasks);
      CHECK(e.activities == b.activities);
      CHECK(e.devices * plan_fold(p).factor() == p.parallelism.gpus());
      CHECK(e.memory_bytes > 24.0 * (1 << 20));
    }
}

TEST_CASE("a point over its limits is invalid, naming the key and the limit")
{
  auto text = experiment("gpt2-small", 1, 4, "global_batch: 4000000, micro_batch: 1", "schedule: 1f1b, pp: 4, dp: 1");
  PointConfig p = point_of(text);
  CHECK(p.is_valid()); // 1.4e7 activities: under the default 1e8
  p = point_of(text + "limits: {max_activities: 1e7}\n");
  REQUIRE(p.problems.size() == 1);
  CHECK(p.problems[0].key == "training.global_batch");
  CHECK(p.problems[0].line == 5); // training: {global_batch: ...}
  CHECK(p.problems[0].message.find("over limits.max_activities = 1e+07") != std::string::npos);
  p = point_of(text + "limits: {max_memory: 100MiB}\n");
  REQUIRE(p.problems.size() == 1);
  CHECK(p.problems[0].message.find("over limits.max_memory = 100.00 MiB") != std::string::npos);
}

TEST_CASE("evaluate_point refuses a point changed past its limits after it was resolved")
{
  // The micro-batch search changes global_batch and micro_batch of a resolved point; the guard of
  // Experiment::point() never saw the new values, so evaluation checks them (before any engine).
  PointConfig p =
      point_of(experiment("gpt2-small", 1, 4, "global_batch: 64, micro_batch: 1", "schedule: 1f1b, pp: 4, dp: 1") +
               "limits: {max_activities: 1e6}\n");
  REQUIRE(p.is_valid());
  p.training.global_batch = 4'000'000;
  const ResultRow row     = evaluate_point(p, {});
  CHECK(row.get("status") == "invalid");
  CHECK(row.get("message").find("over limits.max_activities = 1e+06") != std::string::npos);
  CHECK(std::stod(row.get("sim_activities_estimate")) > 1e6);
  CHECK(row.get("sim_activities").empty());
}

TEST_CASE("the CSV says which symmetries are folded exactly when the simulation folds them")
{
  const std::string analytic = "pp: 1, dp: 2, tp: 4, tp_fidelity: analytic";
  PointConfig p              = point_of(experiment("gpt2-small", 1, 8, "global_batch: 8, micro_batch: 4", analytic));
  FoldPlan f                 = plan_fold(p);
  CHECK(f.tp == 4);
  CHECK(f.replicas == 2);
  CHECK(describe_point(p).get("collective_fidelity") == "dp=flow;tp=analytic+aggregated;fold=tp4xdp2");
  p.parallelism.fold_replicas = false;
  CHECK(plan_fold(p).factor() == 1);
  CHECK(describe_point(p).get("collective_fidelity") == "dp=flow;tp=analytic;fold=off");
  // A straggler gives its GPU its own speed: neither its tensor ranks nor its replicas are alike.
  std::string text = experiment("gpt2-small", 1, 8, "global_batch: 8, micro_batch: 4", analytic);
  text.replace(text.find("fabric: {latency: 2us}"), 22, "fabric: {latency: 2us}, stragglers: [{gpu: 1, speed: 0.5}]");
  p = point_of(text);
  REQUIRE(p.is_valid());
  f = plan_fold(p);
  CHECK(f.factor() == 1);
  CHECK(describe_point(p).get("collective_fidelity") ==
        "dp=flow;tp=analytic;fold=none (tp: GPU 0 runs at speed 1, GPU 1 at 0.5; dp: GPU 1 runs at speed 0.5, GPU 5 at 1)");
  CHECK(f.note.find("dp: GPU 1 runs at speed") != std::string::npos);
}

TEST_CASE("ddlsim bench counts the devices of the fold the replay kept, from collective_fidelity")
{
  CHECK(folded_factor("dp=flow;tp=analytic+aggregated;fold=tp8xdp128") == 1024);
  CHECK(folded_factor("dp=flow;tp=analytic+aggregated;fold=tp8 (double_tree all_reduce over 128 GPUs: message 1 "
                      "(1048 -> 1040) has no image from its sender's representative; run apart, it met other traffic "
                      "on its links (grad s15->s14 mb3 at 17.8 s))") == 8);
  CHECK(folded_factor("dp=flow;tp=flow;fold=tp4xdp4 (dp: replicas alike in blocks of 4 (...))") == 16);
  CHECK(folded_factor("dp=flow;tp=flow;fold=dp64;ep=flow") == 64);
  CHECK(folded_factor("dp=flow;tp=flow;fold=none (tp: GPU 4 runs at speed 1, GPU 5 at 0.8)") == 1);
  CHECK(folded_factor("dp=flow;tp=flow;fold=off") == 1);
  CHECK(folded_factor("dp=flow") == 1);
}
