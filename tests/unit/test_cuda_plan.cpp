// The CUDA backend's plan, without a GPU: on which stream each NCCL call goes (one per communicator, so that
// data-parallel collectives and pipeline transfers overlap compute and each other as in the simulator), and the
// memory it allocates (the memory model's weights, gradients, optimizer state and activations) with every launch's
// operands placed in it.
#include "models/ModelLoader.hpp"
#include "sim/Schedules.hpp"
#include "sim/backends/FromTaskGraph.hpp"
#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/ExecutionPlan.hpp"

#include <doctest/doctest.h>

#include <set>
#include <sstream>

using namespace ddlsim;
using namespace ddlsim::backends;
using namespace ddlsim::backends::cuda;

namespace {

WorkTask compute(int device, std::vector<int> after)
{
  WorkTask t;
  t.kind = WorkTask::Kind::compute;
  t.device = device;
  t.after = std::move(after);
  calibration::BenchPoint p;
  p.op = calibration::BenchOp::pointwise;
  p.dtype = "bf16";
  p.bytes = 1 << 20;
  t.launches = {p};
  return t;
}

WorkTask transfer(int src, int dst, std::vector<int> after)
{
  WorkTask t;
  t.kind = WorkTask::Kind::transfer;
  t.src = src;
  t.dst = dst;
  t.bytes = 1 << 20;
  t.after = std::move(after);
  return t;
}

WorkTask collective(const char* kind, std::vector<int> group, std::vector<int> after)
{
  WorkTask t;
  t.kind = WorkTask::Kind::collective;
  t.collective = kind;
  t.group = std::move(group);
  t.bytes = 1 << 24;
  t.after = std::move(after);
  return t;
}

// The stream an NCCL signal is recorded on: its communicator's (-1 for the other lanes).
int stream_of(const ExecutionPlan& plan, int signal) { return plan.signals[static_cast<std::size_t>(signal)].communicator; }

}  // namespace

TEST_CASE("NCCL streams: one per communicator, so data-parallel collectives and pipeline transfers between ranks overlap")
{
  // pp 2 x dp 2 over two machines: stage 0 on rank 0 (devices 0, 1), stage 1 on rank 1 (devices 2, 3). Activations
  // cross ranks (ncclSend/Recv over the world communicator); each stage all-reduces its gradients in its dp group
  // and, as ZeRO would, gathers its parameters again in the same group.
  Workload w;
  w.devices = 4;
  w.dtype = "bf16";
  w.tasks = {compute(0, {}),                                // 0
             compute(1, {}),                                // 1
             transfer(0, 2, {0}),                           // 2
             transfer(1, 3, {1}),                           // 3
             compute(2, {2}),                               // 4
             compute(3, {3}),                               // 5
             collective("all_reduce", {2, 3}, {4, 5}),      // 6
             collective("all_reduce", {0, 1}, {0, 1}),      // 7
             collective("all_gather", {0, 1}, {7}),         // 8
             collective("reduce_scatter", {2, 3}, {6})};    // 9
  for (int rank : {0, 1}) {
    const ExecutionPlan plan = plan_execution(w, {.visible_gpus = 2, .ranks = 2, .rank = rank});
    REQUIRE(plan.communicators.size() == 3);
    CHECK(plan.communicators[0] == std::vector<int>{2, 3});
    CHECK(plan.communicators[1] == std::vector<int>{0, 1});
    CHECK(plan.communicators[2] == std::vector<int>{0, 1, 2, 3});  // the world, for the transfers
    CHECK(plan.world_communicator == 2);
    // Each GPU has a stream for each communicator it belongs to.
    CHECK(plan.nccl_streams[0] == std::vector<int>{1, 2});
    CHECK(plan.nccl_streams[2] == std::vector<int>{0, 2});
    // The transfers' send and receive go to the world's stream, the all-reduces to their group's: different streams,
    // so a pipeline send never waits behind a gradient all-reduce (the simulator lets them overlap).
    CHECK(stream_of(plan, plan.task_signal[2]) == 2);
    CHECK(stream_of(plan, plan.transfers[2].received) == 2);
    CHECK(stream_of(plan, plan.collectives[6].done[0]) == 0);
    CHECK(stream_of(plan, plan.collectives[7].done[1]) == 1);
    // One communicator's calls share its stream, in workload order (as NCCL requires).
    CHECK(stream_of(plan, plan.collectives[8].done[0]) == stream_of(plan, plan.collectives[7].done[0]));
    CHECK(stream_of(plan, plan.collectives[9].done[1]) == stream_of(plan, plan.collectives[6].done[1]));
    // Compute stays on its own lane.
    CHECK(plan.signals[static_cast<std::size_t>(plan.task_signal[0])].lane == Lane::compute);
    CHECK(stream_of(plan, plan.task_signal[0]) == -1);
  }
  // In one process, transfers are peer copies on the sender's transfer stream; the collectives keep their streams.
  const ExecutionPlan one = plan_execution(w, {.visible_gpus = 4});
  CHECK(one.world_communicator == -1);
  CHECK(one.communicators.size() == 2);
  CHECK(one.signals[static_cast<std::size_t>(one.task_signal[2])].lane == Lane::transfer);
  CHECK(stream_of(one, one.collectives[6].done[0]) != stream_of(one, one.collectives[7].done[0]));
}

TEST_CASE("memory: the memory model's regions, each launch's operands placed in them by role")
{
  const models::Model model = models::load_model("mlp-small");
  sim::PipelinePlan plan;
  plan.micro_batches = 2;
  plan.micro_batch_size = 8;
  sim::StagePlan all;
  all.layers = {0, model.layers().size()};
  plan.stages = {all};
  Workload w = make_workload(sim::build_schedule(plan), model, {.dtype = Dtype::bf16}, "t");
  REQUIRE(w.devices == 1);
  CHECK(std::any_of(w.tasks.begin(), w.tasks.end(), [](const WorkTask& t) { return t.phase == "optimizer"; }));

  // Without a memory model: each region as large as its largest operand.
  const ExecutionPlan bare = plan_execution(w, {.visible_gpus = 1});
  REQUIRE(bare.memory.size() == 1);
  CHECK_FALSE(bare.memory[0].from_model);
  CHECK(bare.memory[0].region_bytes[static_cast<std::size_t>(Region::weights)] > 0);

  // With one: the regions are the model's bytes (256-byte aligned), activations and scratch together.
  const double weights = 64e6, gradients = 64e6, optimizer = 384e6, activations = 96e6, workspace = 8e6;
  w.memory = {{.weights = weights, .gradients = gradients, .optimizer_state = optimizer, .activations = activations,
               .workspace = workspace, .reserve = 1 << 30}};
  std::stringstream file;  // the memory survives the workload file
  write_workload(w, file);
  w = parse_workload(file.str(), "round trip");
  REQUIRE(w.memory.size() == 1);
  CHECK(w.memory[0].optimizer_state == optimizer);
  const ExecutionPlan p = plan_execution(w, {.visible_gpus = 1});
  const DeviceMemoryPlan& m = p.memory[0];
  CHECK(m.from_model);
  CHECK(m.grown.empty());
  CHECK(m.simulated_bytes == doctest::Approx(weights + gradients + optimizer + activations + workspace + (1 << 30)));
  CHECK(m.region_bytes[static_cast<std::size_t>(Region::weights)] == 64000000);
  CHECK(m.region_bytes[static_cast<std::size_t>(Region::optimizer)] == 384000000);
  CHECK(m.region_bytes[static_cast<std::size_t>(Region::activations)] == 104000000);
  CHECK(static_cast<double>(m.total()) == doctest::Approx(weights + gradients + optimizer + activations + workspace).epsilon(1e-6));

  // Every operand lies inside its region; weights, weight gradients and the optimizer's state where they belong.
  int weight_reads = 0, gradient_writes = 0, optimizer_reads = 0;
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    const WorkTask& t = w.tasks[i];
    if (t.kind != WorkTask::Kind::compute) {
      CHECK(p.placement[i].empty());
      continue;
    }
    REQUIRE(p.placement[i].size() == t.launches.size());
    for (std::size_t l = 0; l < t.launches.size(); ++l) {
      const auto& launch = t.launches[l];
      const auto bytes = launch.operand_bytes();
      for (std::size_t o = 0; o < 3; ++o) {
        const OperandPlace& at = p.placement[i][l][o];
        CHECK(at.bytes == bytes[o]);
        CHECK(at.offset % 256 == 0);
        CHECK(at.offset + at.bytes <= m.region_bytes[static_cast<std::size_t>(at.region)]);
      }
      if (launch.op == calibration::BenchOp::gemm && launch.layout != calibration::GemmLayout::tn) {
        CHECK(p.placement[i][l][1].region == Region::weights);
        ++weight_reads;
      }
      if (launch.op == calibration::BenchOp::gemm && launch.layout == calibration::GemmLayout::tn) {
        CHECK(p.placement[i][l][2].region == Region::gradients);
        ++gradient_writes;
      }
      if (t.phase == "optimizer") {
        CHECK(p.placement[i][l][0].region == Region::optimizer);
        CHECK(p.placement[i][l][2].region == Region::optimizer);
        CHECK(p.placement[i][l][2].offset >= p.placement[i][l][0].offset + p.placement[i][l][0].bytes);
        ++optimizer_reads;
      }
    }
  }
  CHECK(weight_reads > 0);
  CHECK(gradient_writes > 0);
  CHECK(optimizer_reads > 0);
  // Consecutive launches write different memory: no launch's output lands where the launch before it read or
  // wrote, unless the region wrapped around.
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    if (w.tasks[i].kind != WorkTask::Kind::compute)
      continue;
    for (std::size_t l = 1; l < p.placement[i].size(); ++l) {
      const OperandPlace& out = p.placement[i][l][2];
      const OperandPlace& before = p.placement[i][l - 1][2];
      if (out.region == before.region && out.offset > 0)
        CHECK(out.offset >= before.offset + before.bytes);
    }
  }

  // A model smaller than an operand: the region grows to it, and the plan says so.
  w.memory[0].weights = 1000;
  const ExecutionPlan small = plan_execution(w, {.visible_gpus = 1});
  CHECK(small.memory[0].grown == std::vector<Region>{Region::weights});
  CHECK(small.memory[0].region_bytes[static_cast<std::size_t>(Region::weights)] > 1000);
}

TEST_CASE("operand regions by role: weights read, weight gradients written, activations, the optimizer's state")
{
  calibration::BenchPoint g;
  g.op = calibration::BenchOp::gemm;
  g.m = 8;
  g.n = 16;
  g.k = 32;
  g.dtype = "bf16";
  CHECK(launch_operand_regions(g, "forward") == std::array<Region, 3>{Region::activations, Region::weights, Region::activations});
  g.layout = calibration::GemmLayout::nt;  // dX = dY W^T
  CHECK(launch_operand_regions(g, "backward")[1] == Region::weights);
  g.layout = calibration::GemmLayout::tn;  // dW = X^T dY
  CHECK(launch_operand_regions(g, "backward")[2] == Region::gradients);
  calibration::BenchPoint attention = g;
  attention.op = calibration::BenchOp::batched_gemm;
  CHECK(launch_operand_regions(attention, "backward") ==
        std::array<Region, 3>{Region::activations, Region::activations, Region::activations});
  calibration::BenchPoint conv;
  conv.op = calibration::BenchOp::conv2d;
  conv.pass = calibration::ConvPass::backward_filter;
  CHECK(launch_operand_regions(conv, "backward")[1] == Region::gradients);
  conv.pass = calibration::ConvPass::backward_data;
  CHECK(launch_operand_regions(conv, "backward")[1] == Region::weights);
  calibration::BenchPoint adam;
  adam.op = calibration::BenchOp::pointwise;
  CHECK(launch_operand_regions(adam, "optimizer")[0] == Region::optimizer);
  CHECK(launch_operand_regions(adam, "forward")[0] == Region::activations);
  CHECK(std::string(region_name(Region::gradients)) == "gradients");
}

TEST_CASE("--cuda-graph: one device's compute stream on one GPU, after a warm-up")
{
  Workload one;
  one.devices = 1;
  one.dtype = "bf16";
  one.tasks = {compute(0, {}), compute(0, {0})};
  const ExecutionPlan plan = plan_execution(one, {.visible_gpus = 1});
  CHECK(cuda_graph_refusal(one, plan, 1).empty());
  CHECK(cuda_graph_refusal(one, plan, 0).find("warm-up") != std::string::npos);

  Workload two = one;  // two devices mapped onto one GPU: two compute streams
  two.devices = 2;
  two.tasks = {compute(0, {}), compute(1, {})};
  const ExecutionPlan mapped = plan_execution(two, {.visible_gpus = 1, .map_devices = true});
  CHECK(cuda_graph_refusal(two, mapped, 1).find("2 device(s)") != std::string::npos);

  Workload pipeline = two;  // a transfer between them, on two GPUs
  pipeline.tasks = {compute(0, {}), transfer(0, 1, {0}), compute(1, {1})};
  const ExecutionPlan spread = plan_execution(pipeline, {.visible_gpus = 2});
  CHECK(cuda_graph_refusal(pipeline, spread, 1).find("transfers or collectives") != std::string::npos);
}
