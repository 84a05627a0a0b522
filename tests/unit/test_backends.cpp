// The execution backends' input and the host backend: the workload file's round trip and its
// errors, the TaskGraph -> workload conversion (a linear layer's forward is the GEMM (b, n, k), its
// backward the GEMMs (b, k, n) and (k, n, b), each 2 b n k flop), and the host running a workload.
#include "models/ModelLoader.hpp"
#include "sim/Schedules.hpp"
#include "sim/backends/FromTaskGraph.hpp"
#include "sim/backends/HostBackend.hpp"
#include "sim/backends/Workload.hpp"

#include "common/Error.hpp"

#include <doctest/doctest.h>

#include <sstream>

using namespace ddlsim;
using namespace ddlsim::backends;

namespace {
Workload two_devices()
{
  Workload w;
  w.label = "test";
  w.devices = 2;
  w.dtype = "fp32";
  calibration::BenchPoint g;
  g.op = calibration::BenchOp::gemm;
  g.dtype = "fp32";
  g.m = 32;
  g.n = 64;
  g.k = 48;
  calibration::BenchPoint p;
  p.op = calibration::BenchOp::pointwise;
  p.bytes = 4096;
  w.tasks.push_back({.kind = WorkTask::Kind::compute, .device = 0, .launches = {g, p}});
  w.tasks.push_back({.kind = WorkTask::Kind::transfer, .src = 0, .dst = 1, .bytes = 8192, .after = {0}});
  w.tasks.push_back({.kind = WorkTask::Kind::compute, .device = 1, .after = {1}, .launches = {g}});
  w.tasks.push_back({.kind = WorkTask::Kind::collective, .bytes = 1 << 20, .collective = "all_reduce", .group = {0, 1}, .after = {2}});
  return w;
}
}  // namespace

TEST_CASE("a workload survives its file round trip; bad files name the task and key")
{
  const Workload w = two_devices();
  std::stringstream text;
  write_workload(w, text);
  const Workload back = parse_workload(text.str(), "w.json");
  REQUIRE(back.tasks.size() == 4);
  CHECK(back.devices == 2);
  CHECK(back.tasks[0].launches.size() == 2);
  CHECK(back.tasks[0].launches[0].label() == "gemm fp32 m=32 n=64 k=48");
  CHECK(back.tasks[1].dst == 1);
  CHECK(back.tasks[3].group == std::vector<int>{0, 1});
  CHECK(back.tasks[3].after == std::vector<int>{2});

  std::string bad = text.str();
  bad.replace(bad.find("\"after\":[0]"), 11, "\"after\":[2]");
  CHECK_THROWS_WITH_AS(parse_workload(bad, "w.json"), "w.json: tasks[1].after: task 2 does not come before this one", TraceError);
  bad = text.str();
  bad.replace(bad.find("\"dst\":1"), 7, "\"dst\":5");
  CHECK_THROWS_WITH_AS(parse_workload(bad, "w.json"), "w.json: tasks[1].dst: device 5 outside [0, 2)", TraceError);
  CHECK_THROWS_AS(parse_workload("{\"format\":\"other\"}", "w.json"), TraceError);

  ExecutionResult r{.device = "d", .iterations_s = {0.3, 0.1, 0.2}, .notes = {"n"}};
  std::stringstream rt;
  write_execution_result(r, rt);
  const ExecutionResult rb = parse_execution_result(rt.str(), "r.json");
  CHECK(rb.median_s() == doctest::Approx(0.2));
  CHECK(rb.min_s() == doctest::Approx(0.1));
  CHECK(rb.max_s() == doctest::Approx(0.3));
  CHECK(rb.notes == std::vector<std::string>{"n"});
}

TEST_CASE("make_workload: a GPipe graph's tasks in topological order, a linear layer's launches at their shapes")
{
  const models::Model model = models::load_model("mlp-small");
  sim::PipelinePlan plan;
  plan.micro_batches = 3;
  plan.micro_batch_size = 4;
  const std::size_t half = model.layers().size() / 2;
  sim::StagePlan first, second;
  first.layers = {0, half};
  first.activation_bytes = 4096;
  second.layers = {half, model.layers().size()};
  plan.stages = {first, second};
  const sim::TaskGraph graph = sim::build_schedule(plan);
  const Workload w = make_workload(graph, model, {.dtype = Dtype::fp32}, "t");
  CHECK(w.tasks.size() == graph.size());
  CHECK(w.devices == 2);
  int transfers = 0;
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    for (int a : w.tasks[i].after)
      CHECK(a < static_cast<int>(i));
    transfers += w.tasks[i].kind == WorkTask::Kind::transfer;
  }
  CHECK(transfers == 2 * plan.micro_batches);  // activations forward, gradients back
  // Layer 0: linear 512 -> 1024 over b = 4 samples.
  const auto forward = sim::layer_launches(model.layers()[0], sim::Phase::forward, 4, Dtype::fp32);
  REQUIRE(forward.size() == 1);
  CHECK(sim::launch_point(forward[0]).shape_key() == "m=4 n=1024 k=512 batch=1");
  CHECK(forward[0].work.flop == doctest::Approx(2.0 * 4 * 1024 * 512));
  const auto backward = sim::layer_launches(model.layers()[0], sim::Phase::backward, 4, Dtype::fp32);
  REQUIRE(backward.size() == 2);
  // dX = dY W^T reads the weights transposed (nt), dW = X^T dY the activations (tn); the forward is nn.
  CHECK(sim::launch_point(forward[0]).layout == calibration::GemmLayout::nn);
  CHECK(sim::launch_point(backward[0]).shape_key() == "m=4 n=512 k=1024 batch=1 layout=nt");
  CHECK(sim::launch_point(backward[1]).shape_key() == "m=512 n=1024 k=4 batch=1 layout=tn");
  CHECK(backward[0].work.flop == doctest::Approx(2.0 * 4 * 1024 * 512));
  CHECK(backward[0].work.shape == "m=4 n=512 k=1024 batch=1 layout=nt");  // the cost model sees the shape too
  // The layout survives the workload file.
  std::stringstream file;
  write_workload(w, file);
  const Workload back = parse_workload(file.str(), "round trip");
  bool saw_nt = false, saw_tn = false;
  for (const auto& t : back.tasks)
    for (const auto& l : t.launches) {
      saw_nt |= l.layout == calibration::GemmLayout::nt;
      saw_tn |= l.layout == calibration::GemmLayout::tn;
    }
  CHECK(saw_nt);
  CHECK(saw_tn);
  CHECK_THROWS_AS(make_workload(graph, model, {.dtype = Dtype::fp32, .tp = 2}, "t"), ExecutionError);
}

TEST_CASE("the host backend runs a workload: compute, a transfer and an all-reduce on two threads")
{
  const ExecutionResult r = execute_on_host(two_devices(), {.warmup = 1, .iterations = 3});
  REQUIRE(r.iterations_s.size() == 3);
  for (double t : r.iterations_s)
    CHECK(t > 0);
  CHECK(r.device.rfind("host: ", 0) == 0);
}
