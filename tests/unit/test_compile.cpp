// Framework pytorch-compile (sim/FrameworkCompile.cpp) against the step docs/frameworks.md describes:
// the library kernels are eager PyTorch's (aligned by Inductor's padding), a fused chain moves its
// inputs and outputs once (closed form for GPT-2's dropout, residual add and layer norm), and the host
// pays a graph call and a launch per kernel, or a CUDA graph's replay.
#include "calibration/EagerFit.hpp"
#include "calibration/Profile.hpp"
#include "common/Error.hpp"
#include "experiments/Plan.hpp"
#include "models/ModelLoader.hpp"
#include "sim/Framework.hpp"
#include "sim/TaskGraph.hpp"
#include "tests/unit/LayerNamed.hpp"
#include "tests/unit/SmallLlama.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {

ComputeOptions with(Framework framework)
{
  ComputeOptions o;
  o.dtype     = Dtype::bf16;
  o.framework = framework;
  return o;
}

bool library(const KernelLaunch& k)
{
  return k.kind == models::KernelKind::gemm || k.kind == models::KernelKind::batched_gemm ||
         k.kind == models::KernelKind::conv2d;
}

double bytes_of(const std::vector<KernelLaunch>& launches, const models::Layer* layer)
{
  double b = 0;
  for (const auto& k : launches)
    if (!library(k) && k.layer == layer)
      b += k.work.bytes;
  return b;
}

} // namespace

TEST_CASE("pytorch-compile keeps eager PyTorch's library kernels, padded where cuBLAS would run unaligned")
{
  for (const char* name : {"gpt2-small", "resnet50", "llama3-8b"}) {
    const models::Model m = models::load_model(name);
    for (Phase phase : {Phase::forward, Phase::backward}) {
      std::vector<KernelLaunch> eager    = range_launches(m, 0, m.size(), phase, 2, with(Framework::pytorch));
      std::vector<KernelLaunch> compiled = range_launches(m, 0, m.size(), phase, 2, with(Framework::pytorch_compile));
      const auto unaligned =
          std::count_if(eager.begin(), eager.end(), [](const KernelLaunch& k) { return k.work.unaligned; });
      double eager_memory = 0;
      for (const auto& k : eager)
        eager_memory += library(k) ? 0 : k.work.bytes;
      double compiled_memory = 0;
      for (const auto& k : compiled)
        compiled_memory += library(k) ? 0 : k.work.bytes;
      std::erase_if(eager, [](const KernelLaunch& k) { return !library(k); });
      const std::size_t all = compiled.size();
      std::erase_if(compiled, [](const KernelLaunch& k) { return !library(k); });
      REQUIRE(eager.size() == compiled.size());
      for (std::size_t i = 0; i < eager.size(); ++i) {
        CHECK(eager[i].work.flop == compiled[i].work.flop);
        CHECK(eager[i].work.shape == compiled[i].work.shape);
        CHECK_FALSE(compiled[i].work.unaligned);
      }
      CHECK((std::string(name) == "gpt2-small") == (unaligned > 0)); // the LM head over 50,257 classes
      CHECK(compiled_memory < eager_memory);                         // the chains fused
      CHECK(all > compiled.size());
    }
  }
}

TEST_CASE("a fused chain reads its inputs and writes its outputs once: GPT-2's dropout, residual add, norm")
{
  // layer0.mlp_dropout, layer0.residual2, layer1.ln1: fc2's output (bf16) and the residual stream (fp32)
  // read; the new residual stream (fp32, for layer1.residual1) and the norm's output (bf16: only qkv
  // reads it, autocast's cast fused) written; the dropout's mask (a byte per element) saved. Backward:
  // the two outgoing gradients read, both inputs read again and their gradients written, the mask read,
  // and the norm's parameter gradients (dy and x read again) in a kernel of their own.
  const models::Model m   = models::load_model("gpt2-small");
  const std::size_t first = layer_named(m, "layer0.mlp_dropout");
  CHECK(m.layers()[first + 1].name == "layer0.residual2");
  CHECK(m.layers()[first + 2].name == "layer1.ln1");
  const double T = 1024.0 * 768, samples = 4;
  const auto forward = compiled_launches(m, 0, m.size(), Phase::forward, 4, with(Framework::pytorch_compile));
  CHECK(bytes_of(forward, &m.layers()[first]) == doctest::Approx(samples * T * (2 + 4 + 4 + 2 + 1)));
  CHECK(std::count_if(forward.begin(), forward.end(),
                      [&](const KernelLaunch& k) { return k.layer == &m.layers()[first]; }) == 1);
  const auto backward     = compiled_launches(m, 0, m.size(), Phase::backward, 4, with(Framework::pytorch_compile));
  const double accumulate = m.layers()[first + 2].parameters * 3 * 4; // AccumulateGrad of the norm's weight and bias
  CHECK(bytes_of(backward, &m.layers()[first]) ==
        doctest::Approx(samples * T * (4 + 2 + 2 * 2 + 2 * 4 + 1 + (2 + 4)) + accumulate));
  CHECK(std::count_if(backward.begin(), backward.end(),
                      [&](const KernelLaunch& k) { return k.layer == &m.layers()[first]; }) == 3);
}

TEST_CASE("the compiled host pays a graph call and a launch per kernel, or a CUDA graph's replay")
{
  calibration::CalibrationProfile p;
  p.name = "test";
  for (const auto& [name, value] : {std::pair<const char*, double>{"host_compiled_graph_s", 40e-6},
                                    {"host_compiled_kernel_s", 8e-6},
                                    {"host_graph_replay_s", 150e-6},
                                    {"host_accumulate_s", 3e-6},
                                    {"host_optimizer_tensor_s", 10e-6}})
    p.parameters[name] = {.name = name, .value = value, .unit = "s", .description = "", .source = "test"};
  const models::Model m = models::load_model("gpt2-small");
  const auto n          = static_cast<std::uint32_t>(m.size());
  TaskGraph g(1);
  g.add_compute(
      {.device = 0, .phase = Phase::forward, .micro_batch = 0, .samples = 2, .layer_begin = 0, .layer_end = n});
  g.add_compute(
      {.device = 0, .phase = Phase::backward, .micro_batch = 0, .samples = 2, .layer_begin = 0, .layer_end = n});
  ComputeOptions o   = with(Framework::pytorch_compile);
  const auto wrapper = [&](Phase phase) { // the kernels Inductor's wrapper launches: not AccumulateGrad
    const auto launches = compiled_launches(m, 0, m.size(), phase, 2, o);
    return static_cast<double>(
        std::count_if(launches.begin(), launches.end(), [](const KernelLaunch& k) { return !k.outside_graph; }));
  };
  const double fwd_kernels = wrapper(Phase::forward), bwd_kernels = wrapper(Phase::backward);
  CHECK(bwd_kernels < static_cast<double>(compiled_launches(m, 0, m.size(), Phase::backward, 2, o).size()));
  const double tensors = optimizer_tensors(m, 0, m.size());
  CHECK(tensors ==
        148); // GPT-2 small: two embeddings, 12 per layer (six weights, six biases or shifts), the last norm's 2
  std::vector<double> host = host_durations(g, m, o, p);
  CHECK(host[0] == doctest::Approx(40e-6 + fwd_kernels * 8e-6));
  CHECK(host[1] == doctest::Approx(40e-6 + bwd_kernels * 8e-6 + tensors * 3e-6));
  o.cuda_graphs = true;
  host          = host_durations(g, m, o, p);
  CHECK(host[0] == doctest::Approx(40e-6 + 150e-6));
  CHECK(host[1] == doctest::Approx(40e-6 + 150e-6 + tensors * 3e-6));
  p.parameters.erase("host_graph_replay_s");
  CHECK_THROWS_WITH_AS(host_durations(g, m, o, p), doctest::Contains("host_graph_replay_s"), CalibrationError);
}

TEST_CASE("one graph call per pass: the tasks a collective splits a pass into run inside it")
{
  calibration::CalibrationProfile p;
  p.name = "test";
  for (const char* name : {"host_compiled_graph_s", "host_compiled_kernel_s", "host_accumulate_s"})
    p.parameters[name] = {.name = name, .value = 1e-6, .unit = "s", .description = "", .source = "test"};
  const models::Model m = models::load_model("gpt2-small");
  const auto half = static_cast<std::uint32_t>(m.size() / 2), n = static_cast<std::uint32_t>(m.size());
  TaskGraph g(1);
  g.add_compute(
      {.device = 0, .phase = Phase::forward, .micro_batch = 0, .samples = 2, .layer_begin = 0, .layer_end = half});
  g.add_compute(
      {.device = 0, .phase = Phase::forward, .micro_batch = 0, .samples = 2, .layer_begin = half, .layer_end = n});
  g.add_compute(
      {.device = 0, .phase = Phase::forward, .micro_batch = 1, .samples = 2, .layer_begin = 0, .layer_end = half});
  const ComputeOptions o         = with(Framework::pytorch_compile);
  const std::vector<double> host = host_durations(g, m, o, p);
  const auto kernels             = [&](std::size_t b, std::size_t e) {
    return static_cast<double>(compiled_launches(m, b, e, Phase::forward, 2, o).size()) * 1e-6;
  };
  CHECK(host[0] == doctest::Approx(1e-6 + kernels(0, half))); // the pass's call
  CHECK(host[1] == doctest::Approx(kernels(half, m.size()))); // the same pass: no second call
  CHECK(host[2] == doctest::Approx(1e-6 + kernels(0, half))); // the next micro-batch's call
}

TEST_CASE("recomputation reruns the forward inside the backward, as each PyTorch framework runs it")
{
  const models::Model m = models::load_model("gpt2-small");
  for (Framework f : {Framework::pytorch, Framework::pytorch_compile}) {
    ComputeOptions o   = with(f);
    const auto plain   = range_launches(m, 0, m.size(), Phase::backward, 2, o);
    const auto forward = range_launches(m, 0, m.size(), Phase::forward, 2, o);
    o.recompute        = models::Recompute::full;
    const auto rerun   = range_launches(m, 0, m.size(), Phase::backward, 2, o);
    CHECK(rerun.size() == plain.size() + forward.size());
    double flop = 0, expected = 0;
    for (const auto& k : rerun)
      flop += k.work.flop;
    for (const auto& k : plain)
      expected += k.work.flop;
    for (const auto& k : forward)
      expected += k.work.flop;
    CHECK(flop == doctest::Approx(expected));
  }
}

TEST_CASE("under recomputation the backward's host issues the rerun forward too, eager and compiled")
{
  calibration::CalibrationProfile p;
  p.name         = "test";
  const auto set = [&](const std::string& name, double value) {
    p.parameters[name] = {.name = name, .value = value, .unit = "s", .description = "", .source = "test"};
  };
  for (calibration::HostOpKind kind : calibration::host_op_kinds) {
    set(calibration::host_parameter(kind, false), 1e-6 * (1 + static_cast<double>(kind)));
    set(calibration::host_parameter(kind, true), 3e-6 * (1 + static_cast<double>(kind)));
  }
  set("host_compiled_graph_s", 40e-6);
  set("host_compiled_kernel_s", 8e-6);
  set("host_accumulate_s", 3e-6);
  const models::Model m = models::load_model("gpt2-small");
  const auto n          = static_cast<std::uint32_t>(m.size());
  const auto block      = m.blocks()[1].layers; // one transformer block: selective reruns its attention core
  TaskGraph g(1);
  g.add_compute(
      {.device = 0, .phase = Phase::backward, .micro_batch = 0, .samples = 2, .layer_begin = 0, .layer_end = n});
  g.add_compute({.device      = 0,
                 .phase       = Phase::backward,
                 .micro_batch = 1,
                 .samples     = 2,
                 .layer_begin = static_cast<std::uint32_t>(block.begin),
                 .layer_end   = static_cast<std::uint32_t>(block.end)});
  // Eager: the backward's autograd nodes, then each rerun run's forward operators at the forward's prices.
  ComputeOptions o = with(Framework::pytorch);
  const auto eager = [&](std::size_t b, std::size_t e, Phase phase) {
    return host_seconds(pytorch_host_ops(m, b, e, phase, Dtype::bf16), phase, p);
  };
  const double plain = host_durations(g, m, o, p)[0];
  CHECK(plain == doctest::Approx(eager(0, n, Phase::backward)));
  o.recompute = models::Recompute::full;
  CHECK(host_durations(g, m, o, p)[0] == doctest::Approx(plain + eager(0, n, Phase::forward)));
  o.recompute     = models::Recompute::selective;
  const auto runs = recomputed_runs(m, block.begin, block.end, o.recompute);
  REQUIRE(!runs.empty());
  double rerun = 0;
  for (const auto& [first, last] : runs) {
    CHECK(models::reruns_forward(o.recompute, m.layers()[first]));
    rerun += eager(first, last, Phase::forward);
  }
  CHECK(rerun > 0);
  CHECK(host_durations(g, m, o, p)[1] == doctest::Approx(eager(block.begin, block.end, Phase::backward) + rerun));
  // Compiled: the backward graph's wrapper launches the recomputed forward's kernels as well.
  o                  = with(Framework::pytorch_compile);
  const auto wrapper = [&](Phase phase) {
    const auto launches = compiled_launches(m, 0, n, phase, 2, o);
    return static_cast<double>(
        std::count_if(launches.begin(), launches.end(), [](const KernelLaunch& k) { return !k.outside_graph; }));
  };
  const double tensors = optimizer_tensors(m, 0, n);
  const double fwd = wrapper(Phase::forward), bwd = wrapper(Phase::backward);
  CHECK(host_durations(g, m, o, p)[0] == doctest::Approx(40e-6 + bwd * 8e-6 + tensors * 3e-6));
  o.recompute = models::Recompute::full;
  CHECK(host_durations(g, m, o, p)[0] == doctest::Approx(40e-6 + (bwd + fwd) * 8e-6 + tensors * 3e-6));
}

TEST_CASE("a tensor-parallel GPU accumulates its share of a divided embedding, a norm's whole weight")
{
  const models::Model m       = models::load_model("gpt2-small");
  const std::size_t embedding = layer_named(m, "embedding"), norm = layer_named(m, "layer0.ln1");
  CHECK(models::tp_divides(m.layers()[embedding].tp));
  CHECK_FALSE(models::tp_divides(m.layers()[norm].tp));
  ComputeOptions one = with(Framework::pytorch_compile), two = one;
  two.tp                 = 2;
  const auto accumulated = [&](const ComputeOptions& o, std::size_t begin, std::size_t end) {
    double b = 0;
    for (const auto& k : compiled_launches(m, begin, end, Phase::backward, 1, o))
      b += k.outside_graph ? k.work.bytes : 0;
    return b;
  };
  CHECK(accumulated(one, embedding, embedding + 2) == doctest::Approx(m.layers()[embedding].parameters * 12));
  CHECK(accumulated(two, embedding, embedding + 2) == doctest::Approx(m.layers()[embedding].parameters * 6));
  CHECK(accumulated(two, norm, norm + 1) == doctest::Approx(m.layers()[norm].parameters * 12));
}

TEST_CASE("pad_mm copies the unaligned operand only: GPT-2's head pads its weight, not the activations")
{
  const models::Model m = models::load_model("gpt2-small");
  const auto launches   = compiled_launches(m, 0, m.size(), Phase::forward, 8, with(Framework::pytorch_compile));
  int padded            = 0;
  for (std::size_t i = 1; i < launches.size(); ++i) {
    const KernelLaunch& gemm = launches[i];
    if (gemm.kind != models::KernelKind::gemm ||
        !calibration::unaligned_gemm(gemm.gemm.m, gemm.gemm.n, gemm.gemm.k, Dtype::bf16))
      continue;
    // C[8192 x 50257] = A[8192 x 768] B[768 x 50257]: B (the tied embedding) is padded, read and written.
    CHECK(gemm.gemm.n == 50257);
    CHECK(launches[i - 1].kind == models::KernelKind::pointwise);
    CHECK(launches[i - 1].work.bytes == doctest::Approx(2 * 2 * gemm.gemm.k * gemm.gemm.n));
    ++padded;
  }
  CHECK(padded == 1); // the head's forward GEMM, and no other
}

TEST_CASE("FSDP's mixed precision: no autocast casts, the unit's copies around its collectives")
{
  // Llama 3 8B under ZeRO 3 over 8 GPUs (torchtitan's fully_shard, param_dtype bf16, reduce_dtype fp32):
  // each block's weights gathered before its forward and its backward, its gradients reduce-scattered.
  const models::Model m = models::load_model("llama3-8b");
  for (Framework f : {Framework::pytorch, Framework::pytorch_compile}) {
    ComputeOptions autocast = with(f), fsdp = autocast;
    fsdp.zero  = ZeroStage::parameters;
    fsdp.shard = 8;
    CHECK_FALSE(fsdp_params(autocast));
    CHECK(fsdp_params(fsdp));
    const std::size_t q = layer_named(m, "layer3.qkv");
    const auto block    = m.layers()[q].block;
    std::size_t begin = q, end = q;
    while (begin > 0 && m.layers()[begin - 1].block == block)
      --begin;
    while (end < m.size() && m.layers()[end].block == block)
      ++end;
    double unsharded = 0;
    for (std::size_t l = begin; l < end; ++l)
      unsharded += m.held_parameters(l, {begin, end}, 1);
    const auto copies = [&](Phase phase) {
      std::vector<double> bytes;
      for (const auto& k : range_launches(m, begin, end, phase, 1, fsdp))
        if (k.outside_graph)
          bytes.push_back(k.work.bytes);
      return bytes;
    };
    const std::vector<double> forward = copies(Phase::forward), backward = copies(Phase::backward);
    // The all-gather's inputs (the fp32 shard cast to bf16, then copied into the gather's buffer), its copy-out.
    REQUIRE(forward.size() == 3);
    CHECK(forward[0] == doctest::Approx(unsharded / 8 * 6));
    CHECK(forward[1] == doctest::Approx(unsharded / 8 * 4));
    CHECK(forward[2] == doctest::Approx(unsharded * 4));
    REQUIRE(backward.size() == 5); // gathered again; the gradients cast into the reduce-scatter, the shard accumulated
    CHECK(backward[3] == doctest::Approx(unsharded * 6));
    CHECK(backward[4] == doctest::Approx(unsharded / 8 * 12));
    // A recomputed forward runs on the weights the backward gathered: no copies of its own.
    ComputeOptions full      = fsdp;
    full.recompute           = models::Recompute::full;
    std::size_t rerun_copies = 0;
    for (const auto& k : range_launches(m, begin, end, Phase::backward, 1, full))
      rerun_copies += k.outside_graph ? 1 : 0;
    CHECK(rerun_copies == 5);
    // One GPU in the shard group is no FSDP: autocast, as torchtitan without data parallelism.
    ComputeOptions alone = fsdp;
    alone.shard          = 1;
    CHECK_FALSE(fsdp_params(alone));
    // No weight cast: the forward's other memory-bound bytes are below autocast's by at least the casts.
    double cast = 0, with_autocast = 0, without = 0;
    for (std::size_t l = begin; l < end; ++l)
      cast += m.layers()[l].kind == models::LayerKind::linear ? m.layers()[l].parameters * 6 : 0;
    for (const auto& k : range_launches(m, begin, end, Phase::forward, 1, autocast))
      with_autocast += library(k) ? 0 : k.work.bytes;
    for (const auto& k : range_launches(m, begin, end, Phase::forward, 1, fsdp))
      without += library(k) || k.outside_graph ? 0 : k.work.bytes;
    CHECK(with_autocast - without >= cast);
  }
}

namespace {

// What per-op checkpointing adds to the backward of `block` (2 samples) under `framework`: the
// launches after those of the backward without recomputation.
std::vector<KernelLaunch> op_rerun(const models::Model& m, models::StageRange block, Framework framework)
{
  ComputeOptions o    = with(framework);
  const auto backward = [&](models::Recompute r) {
    o.recompute = r;
    return range_launches(m, block.begin, block.end, Phase::backward, 2, o);
  };
  const auto plain = backward(models::Recompute::none), op = backward(models::Recompute::selective_op);
  REQUIRE(op.size() > plain.size());
  return {op.begin() + static_cast<std::ptrdiff_t>(plain.size()), op.end()};
}

} // namespace

TEST_CASE("per-op checkpointing reruns a block's forward but its kept ops: wk, wo and w3, no SDPA")
{
  // torchtitan's selective_ac_option "op" over a Llama block (wq wk wv wo w1 w3 w2: mm 1-7, the odd
  // ones kept, and SDPA's output): its backward reruns the even matmuls and every other kernel.
  const double s = 1024, h = 1024, kv = 256, f = 2816, samples = 2;
  const models::Model m = small_llama(2);
  const auto block      = m.blocks()[1].layers;
  const std::vector<KernelLaunch> rerun = op_rerun(m, block, Framework::pytorch);
  double gemm = 0, pointwise = 0;
  for (const auto& k : rerun) {
    CHECK(k.pass == LaunchPass::forward);
    CHECK(k.kind != models::KernelKind::batched_gemm); // SDPA's output is kept
    CHECK_FALSE(k.work.unaligned);                     // whole features: 256 of 1,536 (wk), not 255.99...
    (k.kind == models::KernelKind::gemm ? gemm : pointwise) +=
        k.kind == models::KernelKind::gemm ? k.work.flop : k.work.bytes;
  }
  CHECK(gemm == doctest::Approx(2 * samples * s * h * (kv + h + f)));
  // Every memory-bound kernel of the forward again (SDPA's copies included), recomputing.
  ComputeOptions again = with(Framework::pytorch);
  again.recompute      = models::Recompute::none;
  again.recomputing    = true;
  double forward       = 0;
  for (const auto& k : pytorch_launches(m, block.begin, block.end, Phase::forward, 2, again))
    forward += library(k) ? 0.0 : k.work.bytes;
  CHECK(pointwise == doctest::Approx(forward));
  // The ideal kernel list (parameter servers' compute, execute's workloads) reruns the same GEMMs.
  ComputeOptions ideal  = with(Framework::ideal);
  const auto ideal_gemm = [&](models::Recompute r) {
    ideal.recompute = r;
    double flop     = 0;
    for (const auto& k : range_launches(m, block.begin, block.end, Phase::backward, 2, ideal))
      flop += k.kind == models::KernelKind::gemm ? k.work.flop : 0.0;
    return flop;
  };
  CHECK(ideal_gemm(models::Recompute::selective_op) - ideal_gemm(models::Recompute::none) ==
        doctest::Approx(2 * samples * s * h * (kv + h + f)));
  // The host reruns every operator of the block (a kept op is still dispatched), and nothing of the
  // embedding's block, which torchtitan does not checkpoint.
  const auto runs = recomputed_runs(m, 0, block.end, models::Recompute::selective_op);
  REQUIRE(runs.size() == 1);
  CHECK(runs.front() == std::pair<std::size_t, std::size_t>{block.begin, block.end});
  // Each block is its own checkpoint: two blocks, two runs.
  const auto two = recomputed_runs(m, 0, m.blocks()[2].layers.end, models::Recompute::selective_op);
  CHECK(two == std::vector<std::pair<std::size_t, std::size_t>>{
                   {block.begin, block.end}, {m.blocks()[2].layers.begin, m.blocks()[2].layers.end}});
}

TEST_CASE("per-op checkpointing under torch.compile reruns the compiled block's fused kernels but its kept ops")
{
  // The same policy as eager (wk, wo and w3 rerun, SDPA kept), over the block's fused kernels: every
  // memory-bound kernel of the compiled forward again, and the rerun matmuls' flop.
  const double s = 1024, h = 1024, kv = 256, f = 2816, samples = 2;
  const models::Model m = small_llama(2);
  const auto block      = m.blocks()[1].layers;
  double gemm = 0, pointwise = 0;
  for (const auto& k : op_rerun(m, block, Framework::pytorch_compile)) {
    CHECK(k.pass == LaunchPass::forward);
    CHECK(k.kind != models::KernelKind::batched_gemm);
    (k.kind == models::KernelKind::gemm ? gemm : pointwise) +=
        k.kind == models::KernelKind::gemm ? k.work.flop : k.work.bytes;
  }
  CHECK(gemm == doctest::Approx(2 * samples * s * h * (kv + h + f)));
  ComputeOptions again = with(Framework::pytorch_compile);
  again.recompute      = models::Recompute::none;
  again.recomputing    = true;
  double forward = 0, eager = 0;
  for (const auto& k : compiled_launches(m, block.begin, block.end, Phase::forward, 2, again))
    forward += library(k) ? 0.0 : k.work.bytes;
  CHECK(pointwise == doctest::Approx(forward));
  // Fused: fewer bytes than eager PyTorch reruns for the same block.
  again.framework = Framework::pytorch;
  for (const auto& k : pytorch_launches(m, block.begin, block.end, Phase::forward, 2, again))
    eager += library(k) ? 0.0 : k.work.bytes;
  CHECK(forward < eager);
}

TEST_CASE("per-op checkpointing with tensor parallelism reruns the all-reduces, not the reduce-scatters")
{
  // torchtitan's policy keeps the reduce-scatters' outputs and no other collective's. Without
  // sequence parallelism a block's row layers (wo, w2) all-reduce their output: rerun. With it, the
  // column layers' input gathers are rerun, but their backward gathers that input again anyway (for
  // the weight gradient): the one gather serves both, so nothing is added; the reduce-scatters are
  // kept. Full recomputation reruns every forward collective.
  const models::Model m = small_llama(2);
  const models::StageRange all{0, m.size()};
  auto count = [&](bool sp, models::Recompute r, Phase phase, CollectiveKind kind, bool recomputed) {
    const auto list = experiments::tensor_collectives(m, all, 2.0, sp, 1, r);
    return std::count_if(list.begin(), list.end(), [&](const TpCollective& c) {
      return c.phase == phase && c.kind == kind && c.recomputed == recomputed;
    });
  };
  using models::Recompute;
  const auto reduces        = count(false, Recompute::none, Phase::forward, CollectiveKind::all_reduce, false);
  std::size_t block_reduces = 0; // the blocks' row layers: wo and w2 of each
  for (const TpCollective& c : experiments::tensor_collectives(m, all, 2.0, false, 1, Recompute::none))
    block_reduces += c.phase == Phase::forward && c.kind == CollectiveKind::all_reduce &&
                     models::op_checkpointed(m, m.blocks()[m.layers()[c.layer].block].layers);
  CHECK(block_reduces == 4);
  CHECK(count(false, Recompute::selective_op, Phase::backward, CollectiveKind::all_reduce, true) ==
        static_cast<long>(block_reduces));
  CHECK(count(false, Recompute::full, Phase::backward, CollectiveKind::all_reduce, true) == reduces);
  for (CollectiveKind kind : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
    CHECK(count(true, Recompute::selective_op, Phase::backward, kind, true) == 0);
    CHECK(count(true, Recompute::full, Phase::backward, kind, true) ==
          count(true, Recompute::none, Phase::forward, kind, false));
  }
  CHECK(count(true, Recompute::none, Phase::backward, CollectiveKind::all_gather, false) >= 4); // the re-gathers
}
