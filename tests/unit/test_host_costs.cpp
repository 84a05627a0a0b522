// Host costs of eager PyTorch: the operator kinds (calibration/HostModel.hpp), the host records the Kineto import
// makes of a training step (traces/HostActivity.hpp) on a fixture whose gaps and events give known numbers, their
// JSON lines, and the fit (calibration/HostFit.hpp): the profiler's cost per event, then each kind's cost.
#include "calibration/HostFit.hpp"
#include "calibration/HostModel.hpp"
#include "calibration/Profile.hpp"
#include "calibration/ProfileFit.hpp"
#include "common/Error.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoImporter.hpp"
#include "traces/TraceRecords.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {

const std::string fixture = std::string(DDLSIM_TEST_FIXTURES) + "/kineto_host_step.json";
constexpr double us = 1e-6;

const traces::HostOpRecord& op(const traces::TraceSet& set, const std::string& pass, const std::string& name)
{
  const auto it = std::find_if(set.host_ops.begin(), set.host_ops.end(),
                               [&](const traces::HostOpRecord& r) { return r.pass == pass && r.op == name; });
  REQUIRE(it != set.host_ops.end());
  return *it;
}

double value(const HostFit& fit, const std::string& name)
{
  for (const auto& p : fit.parameters)
    if (p.name == name)
      return p.value;
  FAIL("no parameter " << name);
  return 0;
}

std::string source(const HostFit& fit, const std::string& name)
{
  for (const auto& p : fit.parameters)
    if (p.name == name)
      return p.source;
  return "";
}

}  // namespace

TEST_CASE("host op kinds: aten ops and autograd nodes")
{
  const std::pair<const char*, HostOpKind> cases[] = {
      {"aten::linear", HostOpKind::gemm},
      {"aten::addmm", HostOpKind::gemm},
      {"aten::matmul", HostOpKind::gemm},
      {"aten::baddbmm", HostOpKind::gemm},
      {"autograd::engine::evaluate_function: AddmmBackward0", HostOpKind::gemm},
      {"MmBackward0", HostOpKind::gemm},
      {"BmmBackward0", HostOpKind::gemm},
      {"aten::scaled_dot_product_attention", HostOpKind::gemm},
      {"aten::conv2d", HostOpKind::conv},
      {"aten::cudnn_convolution", HostOpKind::conv},
      {"autograd::engine::evaluate_function: ConvolutionBackward0", HostOpKind::conv},
      {"aten::layer_norm", HostOpKind::norm},
      {"aten::batch_norm", HostOpKind::norm},
      {"aten::group_norm", HostOpKind::norm},
      {"aten::rms_norm", HostOpKind::norm},
      {"NativeLayerNormBackward0", HostOpKind::norm},
      {"CudnnBatchNormBackward0", HostOpKind::norm},
      {"NativeBatchNormBackward0", HostOpKind::norm},
      {"aten::view", HostOpKind::view},
      {"aten::reshape", HostOpKind::view},
      {"aten::t", HostOpKind::view},
      {"aten::transpose", HostOpKind::view},
      {"aten::split", HostOpKind::view},
      {"aten::slice", HostOpKind::view},
      {"aten::unsqueeze", HostOpKind::view},
      {"aten::expand", HostOpKind::view},
      {"aten::flatten", HostOpKind::view},
      {"aten::detach", HostOpKind::view},
      {"aten::alias", HostOpKind::view},
      {"aten::as_strided", HostOpKind::view},
      {"aten::contiguous", HostOpKind::view},
      {"ViewBackward0", HostOpKind::view},
      {"UnsafeViewBackward0", HostOpKind::view},
      {"TBackward0", HostOpKind::view},
      {"TransposeBackward0", HostOpKind::view},
      {"ExpandBackward0", HostOpKind::view},
      {"SplitBackward0", HostOpKind::view},
      {"ReshapeAliasBackward0", HostOpKind::view},
      {"SqueezeBackward1", HostOpKind::view},
      {"aten::softmax", HostOpKind::reduction},
      {"aten::_softmax", HostOpKind::reduction},
      {"aten::log_softmax", HostOpKind::reduction},
      {"aten::cross_entropy_loss", HostOpKind::reduction},
      {"aten::nll_loss", HostOpKind::reduction},
      {"aten::mean", HostOpKind::reduction},
      {"aten::sum", HostOpKind::reduction},
      {"aten::max_pool2d", HostOpKind::reduction},
      {"aten::adaptive_avg_pool2d", HostOpKind::reduction},
      {"aten::avg_pool2d", HostOpKind::reduction},
      {"SoftmaxBackward0", HostOpKind::reduction},
      {"LogSoftmaxBackward0", HostOpKind::reduction},
      {"NllLossBackward0", HostOpKind::reduction},
      {"MeanBackward1", HostOpKind::reduction},
      {"MaxPool2DWithIndicesBackward0", HostOpKind::reduction},
      {"aten::embedding", HostOpKind::gather},
      {"aten::index_select", HostOpKind::gather},
      {"aten::gather", HostOpKind::gather},
      {"autograd::engine::evaluate_function: EmbeddingBackward0", HostOpKind::gather},
      {"autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", HostOpKind::accumulate},
      {"torch::autograd::AccumulateGrad", HostOpKind::accumulate},
      {"aten::add", HostOpKind::elementwise},
      {"aten::add_", HostOpKind::elementwise},
      {"aten::relu_", HostOpKind::elementwise},
      {"aten::dropout", HostOpKind::elementwise},
      {"aten::to", HostOpKind::elementwise},
      {"aten::ones_like", HostOpKind::elementwise},
      {"aten::cat", HostOpKind::elementwise},
      {"ToCopyBackward0", HostOpKind::elementwise},
      {"AddBackward0", HostOpKind::elementwise},
      {"NativeDropoutBackward0", HostOpKind::elementwise},
      {"CatBackward0", HostOpKind::elementwise},
      {"aten::index_put_", HostOpKind::elementwise},
      {"", HostOpKind::elementwise},
  };
  for (const auto& [name, kind] : cases) {
    CAPTURE(name);
    CHECK(host_kind_name(host_op_kind(name)) == host_kind_name(kind));
  }
}

TEST_CASE("host parameters: one per kind and pass, all in the profile's table")
{
  CHECK(host_parameter(HostOpKind::conv, false) == "host_forward_conv_s");
  CHECK(host_parameter(HostOpKind::gemm, true) == "host_backward_gemm_s");
  CHECK(host_parameter(HostOpKind::accumulate, false) == "host_accumulate_s");
  CHECK(host_parameter(HostOpKind::accumulate, true) == "host_accumulate_s");
  std::set<std::string> names;
  for (const HostOpKind kind : host_op_kinds)
    for (const bool backward : {false, true})
      names.insert(host_parameter(kind, backward));
  names.insert("host_optimizer_tensor_s");
  names.insert("host_profiler_event_s");
  CHECK(names.size() == 17);
  for (const auto& name : names) {
    CAPTURE(name);
    const auto specs = parameter_specs();
    const auto it = std::find_if(specs.begin(), specs.end(), [&](const ParameterSpec& s) { return s.name == name; });
    REQUIRE(it != specs.end());
    CHECK(it->dimension == Dimension::time);
    CHECK(!it->help.empty());
  }
}

TEST_CASE("host records of a training step: each top-level op to the next, its events, the step")
{
  const traces::TraceSet set = traces::import_kineto(fixture);
  // Forward on the main thread, after zero_grad (ends at 10 us) and before Optimizer.step (400 us).
  const auto& conv = op(set, "forward", "aten::conv2d");
  CHECK(conv.count == 2);
  CHECK(conv.seconds == doctest::Approx(90 * us));  // 20 -> 70 and 100 -> 140
  CHECK(conv.events == 6);                          // op, nested op, launch; op, launch, driver launch
  CHECK(conv.max_s == doctest::Approx(50 * us));
  CHECK(op(set, "forward", "aten::view").seconds == doctest::Approx(10 * us));
  CHECK(op(set, "forward", "aten::relu_").events == 2);
  const auto& last = op(set, "forward", "aten::ones_like");  // the last: its own duration, not up to the backward
  CHECK(last.seconds == doctest::Approx(5 * us));
  // Backward on the autograd thread: node names without the engine's prefix.
  const auto& conv_back = op(set, "backward", "ConvolutionBackward0");
  CHECK(conv_back.count == 2);
  CHECK(conv_back.seconds == doctest::Approx(60 * us));
  CHECK(conv_back.events == 6);
  const auto& accumulate = op(set, "backward", "torch::autograd::AccumulateGrad");
  CHECK(accumulate.count == 3);
  CHECK(accumulate.seconds == doctest::Approx(26 * us));  // 10 + 10 + its own 6
  CHECK(accumulate.events == 3);
  CHECK(op(set, "backward", "ReluBackward0").seconds == doctest::Approx(10 * us));
  CHECK(set.host_ops.size() == 7);  // aten::to on a third thread and the optimizer's op are not timed
  CHECK(std::all_of(set.host_ops.begin(), set.host_ops.end(), [](const auto& r) { return r.kind.empty(); }));

  REQUIRE(set.host_steps.size() == 1);
  const traces::HostStepRecord& s = set.host_steps.front();
  CHECK(s.trace == fixture);
  CHECK(s.steps == 1);
  CHECK(s.backward_passes == 1);
  CHECK(s.host_span_s == doctest::Approx(450 * us));
  CHECK(s.span_s == doctest::Approx(460 * us));
  CHECK(s.gpu_span_s == doctest::Approx(420 * us));
  CHECK(s.gpu_busy_s == doctest::Approx(92 * us));  // the memset and kernel that overlap count once
  CHECK(s.host_events == 26);
  CHECK(s.optimizer_s == doctest::Approx(60 * us));
  CHECK(s.optimizer_events == 4);
  CHECK(s.parameter_tensors == 3);  // the fused op lists no shapes: the AccumulateGrad nodes
  CHECK(s.parameter_tensors_from == "AccumulateGrad nodes");
  REQUIRE(s.threads.size() == 3);
  CHECK(s.threads[0].thread == "1/10");
  CHECK(s.threads[0].role == "main");
  CHECK(s.threads[0].busy_s == doctest::Approx(135 * us));
  CHECK(s.threads[0].events == 14);
  CHECK(s.threads[0].ops == 6);
  CHECK(s.threads[1].role == "other");
  CHECK(s.threads[2].role == "autograd");
  CHECK(s.threads[2].busy_s == doctest::Approx(61 * us));
  CHECK(s.threads[2].events == 11);

  // The streamed reader and the whole tree agree, and the records survive their JSON lines.
  std::ostringstream text, streamed, whole, again;
  text << std::ifstream(fixture).rdbuf();
  traces::write_jsonl(set, streamed);
  traces::write_jsonl(traces::import_kineto(traces::parse_json(text.str(), fixture), fixture), whole);
  CHECK(streamed.str() == whole.str());
  std::istringstream in(streamed.str());
  traces::write_jsonl(traces::read_jsonl(in, "host.jsonl"), again);
  CHECK(again.str() == streamed.str());
}

TEST_CASE("host records: micro-batches, the fused optimizer's tensor list, no optimizer at all")
{
  // Two micro-batches: the forward's last op before each backward stops at its own end, the backward's last node
  // before the second forward too; the fused optimizer lists its 2 tensors.
  const std::string text = R"({"traceEvents": [
    {"cat": "user_annotation", "name": "Optimizer.zero_grad#SGD.zero_grad", "tid": 1, "ts": 0, "dur": 5},
    {"cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 10, "dur": 5},
    {"cat": "cpu_op", "name": "aten::sum", "tid": 1, "ts": 20, "dur": 4},
    {"cat": "cpu_op", "name": "autograd::engine::evaluate_function: SumBackward0", "tid": 2, "ts": 40, "dur": 3},
    {"cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddmmBackward0", "tid": 2, "ts": 50, "dur": 7},
    {"cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 100, "dur": 5},
    {"cat": "cpu_op", "name": "aten::sum", "tid": 1, "ts": 110, "dur": 4},
    {"cat": "cpu_op", "name": "autograd::engine::evaluate_function: SumBackward0", "tid": 2, "ts": 130, "dur": 3},
    {"cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddmmBackward0", "tid": 2, "ts": 140, "dur": 7},
    {"cat": "user_annotation", "name": "Optimizer.step#SGD.step", "tid": 1, "ts": 200, "dur": 20},
    {"cat": "cpu_op", "name": "aten::_fused_adamw_", "tid": 1, "ts": 205, "dur": 10,
     "args": {"Input Dims": [[[4, 3], [4]], [[4, 3], [4]]]}}]})";
  const traces::TraceSet set = traces::import_kineto(traces::parse_json(text, "mb.json"), "mb.json");
  CHECK(op(set, "forward", "aten::linear").seconds == doctest::Approx(20 * us));    // 10 -> 20, 100 -> 110
  CHECK(op(set, "forward", "aten::sum").seconds == doctest::Approx(8 * us));        // own durations: 4 + 4
  CHECK(op(set, "backward", "SumBackward0").seconds == doctest::Approx(20 * us));   // 40 -> 50, 130 -> 140
  CHECK(op(set, "backward", "AddmmBackward0").seconds == doctest::Approx(14 * us)); // 50 -> 57 (cut at 100), 7
  REQUIRE(set.host_steps.size() == 1);
  CHECK(set.host_steps.front().backward_passes == 2);
  CHECK(set.host_steps.front().parameter_tensors == 2);
  CHECK(set.host_steps.front().parameter_tensors_from == "fused optimizer input");
  CHECK(set.host_steps.front().gpu_busy_s == 0);

  // An inference trace: no optimizer, one thread, every top-level op forward; no GPU.
  const traces::TraceSet inference = traces::import_kineto(
      traces::parse_json(R"({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 8, "dur": 2}]})",
                         "i.json"),
      "i.json");
  CHECK(op(inference, "forward", "aten::linear").seconds == doctest::Approx(8 * us));
  CHECK(inference.host_steps.front().steps == 0);
  CHECK(inference.host_steps.front().parameter_tensors == 0);
  // No CPU op: no host record.
  CHECK(traces::import_kineto(std::string(DDLSIM_TEST_FIXTURES) + "/kineto_small.json").host_steps.empty());
}

TEST_CASE("host records: the profiler's stall at each thread's first CUDA call is no operator's cost")
{
  // The main thread waits 1,038 us inside aten::copy_ before its first launch; another thread is silent 845 us
  // after its first CUDA call. Later silences before a CUDA call are not stalls.
  const std::string text = R"({"traceEvents": [
    {"cat": "user_annotation", "name": "Optimizer.zero_grad#AdamW.zero_grad", "tid": 1, "ts": 0, "dur": 5},
    {"cat": "cpu_op", "name": "aten::conv2d", "tid": 1, "ts": 10, "dur": 1100},
    {"cat": "cpu_op", "name": "aten::copy_", "tid": 1, "ts": 12, "dur": 1090},
    {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 1050, "dur": 10},
    {"cat": "cuda_runtime", "name": "cudaStreamIsCapturing", "tid": 2, "ts": 50, "dur": 5},
    {"cat": "cpu_op", "name": "aten::empty", "tid": 2, "ts": 900, "dur": 2},
    {"cat": "cpu_op", "name": "aten::relu", "tid": 1, "ts": 1200, "dur": 1000},
    {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 1, "ts": 2150, "dur": 3},
    {"cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "tid": 1, "ts": 3000, "dur": 20}]})";
  traces::TraceSet set = traces::import_kineto(traces::parse_json(text, "stall.json"), "stall.json");
  const auto& conv = op(set, "forward", "aten::conv2d");
  CHECK(conv.seconds == doctest::Approx(1190 * us));
  CHECK(conv.stall_s == doctest::Approx(1038 * us));
  CHECK(op(set, "forward", "aten::relu").stall_s == 0);
  CHECK(set.host_steps.front().profiler_stall_s == doctest::Approx((1038 + 845) * us));
  const HostFit fit = fit_host_costs(set);
  CHECK(value(fit, "host_forward_conv_s") == doctest::Approx(152 * us));
  CHECK(source(fit, "host_forward_conv_s").find("1.038 ms of profiler stalls") != std::string::npos);
  // With the untraced step: the stalls are the profiler's, not its events'.
  set.host_steps.front().untraced_step_s = 3020 * us - (1038 + 845) * us - set.host_steps.front().host_events * us;
  CHECK(value(fit_host_costs(set), "host_profiler_event_s") == doctest::Approx(1 * us));
}

TEST_CASE("host fit: the profiler's cost per event, then each kind's cost per op")
{
  traces::TraceSet records = traces::import_kineto(fixture);
  classify_host_ops(records.host_ops);
  CHECK(op(records, "forward", "aten::conv2d").kind == "conv");
  CHECK(op(records, "backward", "torch::autograd::AccumulateGrad").kind == "accumulate");

  SUBCASE("without the untraced step: nothing removed")
  {
    const HostFit fit = fit_host_costs(records);
    CHECK(value(fit, "host_profiler_event_s") == 0);
    CHECK(source(fit, "host_profiler_event_s").find("no untraced step time") != std::string::npos);
    CHECK(value(fit, "host_forward_conv_s") == doctest::Approx(45 * us));
    CHECK(value(fit, "host_optimizer_tensor_s") == doctest::Approx(20 * us));
  }
  SUBCASE("a host-bound trace 52 us slower than its untraced step: 2 us per event of 26")
  {
    records.host_steps.front().untraced_step_s = 398 * us;  // GPU busy 92 of 460 us: host-bound
    const HostFit fit = fit_host_costs(records);
    CHECK(value(fit, "host_profiler_event_s") == doctest::Approx(2 * us));
    CHECK(value(fit, "host_forward_conv_s") == doctest::Approx(39 * us));         // (90 - 6 x 2) / 2
    CHECK(value(fit, "host_forward_view_s") == doctest::Approx(8 * us));          // (10 - 1 x 2) / 1
    CHECK(value(fit, "host_forward_elementwise_s") == doctest::Approx(9.5 * us)); // (20 + 5 - 3 x 2) / 2
    CHECK(value(fit, "host_backward_conv_s") == doctest::Approx(24 * us));        // (60 - 6 x 2) / 2
    CHECK(value(fit, "host_backward_elementwise_s") == doctest::Approx(6 * us));  // (10 - 2 x 2) / 1
    CHECK(value(fit, "host_accumulate_s") == doctest::Approx(20.0 / 3 * us));     // (26 - 3 x 2) / 3
    CHECK(value(fit, "host_optimizer_tensor_s") == doctest::Approx(52.0 / 3 * us)); // (60 - 4 x 2) / 3
    // Kinds no trace holds: the median of their pass's fitted kinds.
    CHECK(value(fit, "host_forward_gemm_s") == doctest::Approx(9.5 * us));  // median of 39, 8, 9.5
    CHECK(value(fit, "host_backward_norm_s") == doctest::Approx(15 * us));  // median of 24 and 6
    CHECK(source(fit, "host_forward_gemm_s").find("no gemm op in the traces") != std::string::npos);
    CHECK(source(fit, "host_forward_conv_s").find("kineto_host_step.json") != std::string::npos);
    CHECK(fit.parameters.size() == 20); // and torch.compile's three, published: no compiled graph in the traces
    CHECK(value(fit, "host_compiled_kernel_s") == doctest::Approx(9.1 * us));
    CHECK(source(fit, "host_compiled_graph_s").find("published, not fitted") != std::string::npos);
    CHECK(source(fit, "host_graph_replay_s").find("pytorch/pytorch issue 150488") != std::string::npos);
  }
  SUBCASE("a GPU-bound trace does not measure the profiler")
  {
    records.host_steps.front().untraced_step_s = 398 * us;
    records.host_steps.front().gpu_busy_s = 400 * us;
    const HostFit fit = fit_host_costs(records);
    CHECK(value(fit, "host_profiler_event_s") == 0);
    CHECK(source(fit, "host_profiler_event_s").find("GPU busy 87%") != std::string::npos);
  }
  SUBCASE("a correction larger than the time: 0, said so")
  {
    records.host_steps.front().untraced_step_s = 10 * us;  // 17 us per event
    const HostFit fit = fit_host_costs(records);
    CHECK(value(fit, "host_forward_view_s") == 0);
    CHECK(source(fit, "host_forward_view_s").starts_with("0 (clamped"));
  }
  CHECK(fit_host_costs(traces::TraceSet{}).parameters.empty());
}

TEST_CASE("calibrate fit --host-only keeps the base profile and adds the host costs")
{
  traces::TraceSet records = traces::import_kineto(fixture);
  records.provenance["import_command"] = "ddlsim calibrate import step.json -o host.jsonl";
  CalibrationProfile base = load_profile("h200-measured");
  const std::size_t tables = base.kernel_tables.size();
  const FitOptions options{.name = "pytorch-test", .base = "h200-measured", .sources = "host.jsonl",
                           .command = "ddlsim calibrate fit host.jsonl --host-only", .date = "2026-11-28"};
  const FitResult fit = fit_host_profile(base, records, options);
  const CalibrationProfile& p = fit.profile;
  CHECK(p.name == "pytorch-test");
  CHECK(p.kernel_tables.size() == tables);
  CHECK(p.value("gemm_efficiency") == base.value("gemm_efficiency"));
  CHECK(p.find("gemm_efficiency")->source == base.find("gemm_efficiency")->source);
  CHECK(p.value("host_forward_conv_s") == doctest::Approx(45 * us));
  CHECK(p.provenance.at("command") ==
        "ddlsim calibrate import step.json -o host.jsonl; ddlsim calibrate fit host.jsonl --host-only");
  CHECK(p.provenance.at("base_command") == base.provenance.at("command"));
  CHECK(p.provenance.at("base_profile") == "h200-measured");
  // Written and read back: every host parameter with its unit.
  std::ostringstream yaml;
  write_profile(p, yaml);
  CHECK(yaml.str().find("host_accumulate_s: {value: ") != std::string::npos);

  const FitOptions none{.name = "x", .base = "h200-measured", .sources = "", .command = "", .date = ""};
  CHECK_THROWS_AS(fit_host_profile(base, traces::TraceSet{}, none), CalibrationError);
}
