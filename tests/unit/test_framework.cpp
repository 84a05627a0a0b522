// Framework pytorch (sim/Framework.hpp) against the eager step it describes (docs/frameworks.md): the
// library kernels are the ideal ones, each memory-bound kernel's bytes follow the closed forms of the
// page, the operator counts add up per block, and the host prices them with the profile's parameters.
#include "calibration/EagerFit.hpp"
#include "calibration/HostModel.hpp"
#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "models/ModelLoader.hpp"
#include "sim/Framework.hpp"
#include "tests/unit/LayerNamed.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace ddlsim;
using namespace ddlsim::sim;
using calibration::HostOpKind;

namespace {

ComputeOptions eager(Dtype dtype = Dtype::bf16)
{
  ComputeOptions o;
  o.dtype = dtype;
  o.framework = Framework::pytorch;
  return o;
}

bool library(const KernelLaunch& k)
{
  return k.kind == models::KernelKind::gemm || k.kind == models::KernelKind::batched_gemm ||
         k.kind == models::KernelKind::conv2d;
}


double pointwise_bytes(const std::vector<KernelLaunch>& launches)
{
  double b = 0;
  for (const auto& k : launches)
    if (!library(k))
      b += k.work.bytes;
  return b;
}

double count(const HostOps& ops, HostOpKind kind) { return ops[static_cast<std::size_t>(kind)]; }

}  // namespace

TEST_CASE("pytorch keeps the ideal step's GEMMs and convolutions, launch for launch")
{
  for (const char* name : {"gpt2-small", "resnet50", "llama3-8b"}) {  // eager, convolutions, flash attention
    const models::Model m = models::load_model(name);
    for (Phase phase : {Phase::forward, Phase::backward}) {
      std::vector<KernelLaunch> ideal = range_launches(m, 0, m.size(), phase, 4, ComputeOptions{});
      std::vector<KernelLaunch> torch = range_launches(m, 0, m.size(), phase, 4, eager());
      std::erase_if(ideal, [](const KernelLaunch& k) { return !library(k); });
      std::erase_if(torch, [](const KernelLaunch& k) { return !library(k); });
      REQUIRE(ideal.size() == torch.size());
      for (std::size_t i = 0; i < ideal.size(); ++i) {
        CHECK(ideal[i].work.flop == torch[i].work.flop);
        CHECK(ideal[i].work.shape == torch[i].work.shape);
      }
      // and adds memory-bound work the ideal step does not have
      CHECK(pointwise_bytes(range_launches(m, 0, m.size(), phase, 4, eager())) >
            pointwise_bytes(range_launches(m, 0, m.size(), phase, 4, ComputeOptions{})));
    }
  }
}

TEST_CASE("eager attention moves the s x s scores as the page's closed form says")
{
  const models::Model m = models::load_model("gpt2-small");
  const std::size_t a = layer_named(m, "layer0.attention");
  const models::Layer& l = m.layers()[a];
  const double s = 1024, heads = 12, b = 3;
  const double S = heads * s * s, T = s * 768;
  // bf16 (d = 2), softmax in fp32 (r = 4), dropout's bool mask: scale 2d, mask d + r, softmax 2r, cast
  // r + d, dropout 2d + 1, heads merged 2d per output element
  const double forward = b * (S * (4 + 6 + 8 + 6 + 5) + T * 4);
  const double backward = b * (S * (5 + 6 + 12 + 6 + 4) + T * 4);
  CHECK(l.heads == 12);
  CHECK(pointwise_bytes(range_launches(m, a, a + 1, Phase::forward, 3, eager())) == doctest::Approx(forward));
  CHECK(pointwise_bytes(range_launches(m, a, a + 1, Phase::backward, 3, eager())) == doctest::Approx(backward));
}

TEST_CASE("SDPA's flash attention moves no s x s tensor: K and V repeated per group, heads merged")
{
  // Llama 3 8B (FlashAttention, 32 query and 8 K/V heads of 128): under PyTorch, SDPA's flash backend
  // as Hugging Face's sdpa and torchtitan call it, after repeat_kv; the fused kernel is the ideal one.
  const models::Model m = models::load_model("llama3-8b");
  const std::size_t a = layer_named(m, "layer0.attention");
  const models::Layer& l = m.layers()[a];
  REQUIRE(l.kv_heads == 8);
  const double s = 8192, b = 2, T = s * 4096, kv = s * 1024;
  // forward: K and V read at 8 heads, written at 32 (2 bytes each), the heads merged (2d per element)
  CHECK(pointwise_bytes(range_launches(m, a, a + 1, Phase::forward, 2, eager())) ==
        doctest::Approx(b * (2 * (kv + T) * 2 + T * 4)));
  // backward: the merge's copy back, the repeated K and V gradients summed per group
  CHECK(pointwise_bytes(range_launches(m, a, a + 1, Phase::backward, 2, eager())) ==
        doctest::Approx(b * (T * 4 + 2 * (T + kv) * 2)));
  CHECK(pointwise_bytes(range_launches(m, a, a + 1, Phase::forward, 2, eager())) < b * 32 * s * s);
  // (the fused kernel itself is the ideal step's: the first test case, over the whole model)
  // its operators: the SDPA op, views and transposes, repeat_kv's two copies and the merge
  const HostOps f = pytorch_host_ops(m, a, a + 1, Phase::forward, Dtype::bf16);
  CHECK(count(f, HostOpKind::gemm) == 1);
  CHECK(count(f, HostOpKind::elementwise) == 3);
  CHECK(count(f, HostOpKind::reduction) == 0);
}

TEST_CASE("Llama's RMSNorm, SwiGLU and RoPE run as their eager Python: the page's closed forms")
{
  const models::Model m = models::load_model("llama3-8b");
  const double s = 8192, b = 2, h = 4096, f = 14336;
  auto bytes = [&](const std::string& name, Phase phase) {
    const std::size_t i = layer_named(m, name);
    return pointwise_bytes(range_launches(m, i, i + 1, phase, 2, eager()));
  };
  // Under autocast the embedding of fp32 weights makes the residual stream fp32 (din = dout = 4): no
  // casts; pow 8, mean 4, x * rsqrt 8, * weight 8 per element, + eps and rsqrt 8 per token each.
  const double n = s * h;
  CHECK(bytes("layer0.attention_norm", Phase::forward) == doctest::Approx(b * (n * 28 + 2 * s * 8)));
  // backward: dy * w 8, the weight's reduction 8, d/dx 8, d/drsqrt 8, mean 4, pow 12, the sum 12;
  // the weight's gradient accumulated (12 bytes per weight, once)
  CHECK(bytes("layer0.attention_norm", Phase::backward) == doctest::Approx(b * (n * 60 + 2 * s * 8) + 12 * h));
  // In bf16 (fp32 training aside): silu 2d, the product 3d; backward three kernels of 3d (e = s x f)
  CHECK(bytes("layer0.mlp_swiglu", Phase::forward) == doctest::Approx(b * s * f * 5 * 2));
  CHECK(bytes("layer0.mlp_swiglu", Phase::backward) == doctest::Approx(b * s * f * 9 * 2));
  // RoPE on Q (32 heads) and K (8) of 128: q * cos 2d, -x2 d, cat 2d, * sin 2d, + 3d; backward 10d
  const double rotated = s * (32 + 8) * 128;
  CHECK(bytes("layer0.rope", Phase::forward) == doctest::Approx(b * rotated * 10 * 2));
  CHECK(bytes("layer0.rope", Phase::backward) == doctest::Approx(b * rotated * 10 * 2));
  // their operators, as the page's table lists them
  const std::size_t norm = layer_named(m, "layer0.attention_norm"), rope = layer_named(m, "layer0.rope");
  const HostOps nf = pytorch_host_ops(m, norm, norm + 1, Phase::forward, Dtype::bf16);
  CHECK(count(nf, HostOpKind::elementwise) == 7);
  CHECK(count(nf, HostOpKind::reduction) == 1);
  CHECK(count(pytorch_host_ops(m, rope, rope + 1, Phase::forward, Dtype::bf16), HostOpKind::elementwise) == 12);
  // a batch norm keeps its own operators: 1 norm and num_batches_tracked's add
  const models::Model r = models::load_model("resnet50");
  const auto bn = std::find_if(r.layers().begin(), r.layers().end(),
                               [](const models::Layer& l) { return l.kind == models::LayerKind::batch_norm; });
  REQUIRE(bn != r.layers().end());
  const auto b0 = static_cast<std::size_t>(bn - r.layers().begin());
  const HostOps bf = pytorch_host_ops(r, b0, b0 + 1, Phase::forward, Dtype::bf16);
  CHECK(count(bf, HostOpKind::norm) == 1);
  CHECK(count(bf, HostOpKind::elementwise) == 1);
  CHECK(count(bf, HostOpKind::reduction) == 0);
}

TEST_CASE("under tensor parallelism a GPU runs its share of the eager kernels, as of the GEMMs")
{
  // Llama 3 8B on tp 4: attention, RoPE and SwiGLU run on a quarter of the heads and columns; the
  // RMSNorm runs whole on every GPU unless sequence parallelism splits its tokens.
  const models::Model m = models::load_model("llama3-8b");
  auto bytes            = [&](const std::string& name, Phase phase, int tp, bool sp) {
    ComputeOptions o    = eager();
    o.tp                = tp;
    o.sequence_parallel = sp;
    const std::size_t i = layer_named(m, name);
    return pointwise_bytes(range_launches(m, i, i + 1, phase, 2, o));
  };
  for (const Phase phase : {Phase::forward, Phase::backward}) {
    for (const char* name : {"layer0.attention", "layer0.rope", "layer0.mlp_swiglu"})
      CHECK(bytes(name, phase, 4, false) == doctest::Approx(bytes(name, phase, 1, false) / 4));
    const double norm = bytes("layer0.attention_norm", phase, 1, false);
    CHECK(norm > 0);
    CHECK(bytes("layer0.attention_norm", phase, 4, false) == doctest::Approx(norm));
    CHECK(bytes("layer0.attention_norm", phase, 4, true) == doctest::Approx(norm / 4));
  }
}

TEST_CASE("autocast casts each linear's fp32 weight once per forward, and its gradient back")
{
  const models::Model m = models::load_model("gpt2-small");
  const std::size_t fc = layer_named(m, "layer3.fc1");
  const models::Layer& l = m.layers()[fc];
  const double w = l.parameters;  // 768 x 3072 + 3072
  CHECK(w == 768.0 * 3072 + 3072);
  // its input is the layer norm's fp32 output: cast too (4 + 2 bytes per element)
  const double x = 1024.0 * 768;
  CHECK(pointwise_bytes(range_launches(m, fc, fc + 1, Phase::forward, 2, eager())) == doctest::Approx(6 * w + 2 * 6 * x));
  // backward: the weight gradient cast (6 per weight) and accumulated (12), the input's gradient cast
  // back to fp32 (6 per element), the bias gradient's reduction over the bf16 output (2 per element)
  const double y = 1024.0 * 3072;
  CHECK(pointwise_bytes(range_launches(m, fc, fc + 1, Phase::backward, 2, eager())) ==
        doctest::Approx(18 * w + 2 * 6 * x + 2 * 2 * y));
}

TEST_CASE("only the GEMMs over the 50,257 classes are unaligned")
{
  const models::Model m = models::load_model("gpt2-small");
  for (Phase phase : {Phase::forward, Phase::backward})
    for (const auto& k : range_launches(m, 0, m.size(), phase, 2, eager())) {
      const bool vocabulary = k.gemm.n == 50257 || k.gemm.k == 50257;
      CHECK(k.work.unaligned == (library(k) && vocabulary));
    }
  const models::Model r = models::load_model("resnet50");  // 1,000 classes: a multiple of 8
  for (const auto& k : range_launches(r, 0, r.size(), Phase::forward, 2, eager()))
    CHECK_FALSE(k.work.unaligned);
}

TEST_CASE("GPT-2's operators per block add up to the page's table")
{
  const models::Model m = models::load_model("gpt2-small");
  const auto& blocks = m.blocks();
  const auto block = std::find_if(blocks.begin(), blocks.end(), [](const models::Block& b) { return b.name == "layer5"; });
  REQUIRE(block != blocks.end());
  const HostOps f = pytorch_host_ops(m, block->layers.begin, block->layers.end, Phase::forward, Dtype::bf16);
  const HostOps b = pytorch_host_ops(m, block->layers.begin, block->layers.end, Phase::backward, Dtype::bf16);
  // forward: 2 layer norms, 4 linears (gemm + 2 views), attention (2 gemm, 15 view, 9 elementwise, 1
  // reduction), Python GELU (8), 2 dropouts, 2 residual adds
  CHECK(count(f, HostOpKind::gemm) == 6);
  CHECK(count(f, HostOpKind::view) == 4 * 2 + 15);
  CHECK(count(f, HostOpKind::elementwise) == 9 + 8 + 2 + 2);
  CHECK(count(f, HostOpKind::norm) == 2);
  CHECK(count(f, HostOpKind::reduction) == 1);
  // backward: a weight and a bias per linear and norm accumulated (12, as AccumulateGrad nodes in the trace)
  CHECK(count(b, HostOpKind::accumulate) == 12);
  CHECK(count(b, HostOpKind::gemm) == 6);
  // a cast node per linear parameter (8) and per fp32 input (qkv and fc1 read the layer norms' output,
  // fc2 the GELU's: autocast's pow makes it fp32), attention's 8, the GELU's 8, 2 dropouts, 2 adds
  CHECK(count(b, HostOpKind::elementwise) == 8 + 3 + 8 + 8 + 2 + 2);
  // fp32 training runs no autocast: no cast nodes, the rest alike
  const HostOps f32 = pytorch_host_ops(m, block->layers.begin, block->layers.end, Phase::forward, Dtype::fp32);
  const HostOps b32 = pytorch_host_ops(m, block->layers.begin, block->layers.end, Phase::backward, Dtype::fp32);
  CHECK(f32 == f);
  CHECK(count(b32, HostOpKind::elementwise) == 8 + 8 + 2 + 2);
  CHECK(count(b32, HostOpKind::accumulate) == 12);
}

TEST_CASE("the host prices each operator with the profile's parameter, and names a missing one")
{
  calibration::CalibrationProfile p;
  p.name = "test";
  const std::array<double, 8> forward{1e-6, 2e-6, 3e-6, 4e-6, 5e-6, 6e-6, 7e-6, 8e-6};
  for (HostOpKind kind : calibration::host_op_kinds) {
    const std::size_t i = static_cast<std::size_t>(kind);
    p.parameters[calibration::host_parameter(kind, false)] = {
        .name = "", .value = forward[i], .unit = "s", .description = "", .source = "test"};
    p.parameters[calibration::host_parameter(kind, true)] = {
        .name = "", .value = 10 * forward[i], .unit = "s", .description = "", .source = "test"};
  }
  HostOps ops{};
  ops[static_cast<std::size_t>(HostOpKind::gemm)] = 3;
  ops[static_cast<std::size_t>(HostOpKind::view)] = 2;
  CHECK(host_seconds(ops, Phase::forward, p) == doctest::Approx(3 * 1e-6 + 2 * 5e-6));
  CHECK(host_seconds(ops, Phase::backward, p) == doctest::Approx(3 * 1e-5 + 2 * 5e-5));
  p.parameters.erase("host_forward_view_s");
  CHECK_THROWS_WITH_AS(host_seconds(ops, Phase::forward, p), doctest::Contains("host_forward_view_s"),
                       CalibrationError);
}

TEST_CASE("a slower memory access costs what a contiguous kernel of bytes / efficiency costs")
{
  calibration::CalibrationProfile p = calibration::load_profile("h200-measured");
  p.parameters["memory_efficiency_broadcast"] = {
      .name = "memory_efficiency_broadcast", .value = 0.5, .unit = "1", .description = "", .source = "test"};
  const auto cost = calibration::make_cost_model(p);
  using calibration::KernelWork;
  const KernelWork broadcast{.flop = 0, .bytes = 1e9, .dtype = Dtype::fp32, .kind = calibration::WorkKind::memory,
                             .access = calibration::MemoryAccess::broadcast};
  const KernelWork contiguous{.flop = 0, .bytes = 2e9, .dtype = Dtype::fp32, .kind = calibration::WorkKind::memory};
  CHECK(cost->seconds(broadcast) == doctest::Approx(cost->seconds(contiguous)));
  // an access the profile has no efficiency for is priced as contiguous
  KernelWork norm = broadcast;
  norm.access = calibration::MemoryAccess::norm;
  KernelWork same = broadcast;
  same.access = calibration::MemoryAccess::contiguous;
  CHECK(cost->seconds(norm) == doctest::Approx(cost->seconds(same)));
}

TEST_CASE("an unaligned GEMM runs at gemm_unaligned_efficiency of the peak; aligned ones keep the tables")
{
  calibration::CalibrationProfile p = calibration::load_profile("h200-measured");
  const double peak = p.value("peak_flops_bf16");
  const auto tables = calibration::make_cost_model(p);
  p.parameters["gemm_unaligned_efficiency"] = {
      .name = "gemm_unaligned_efficiency", .value = 0.125, .unit = "1", .description = "", .source = "test"};
  const auto cost = calibration::make_cost_model(p);
  const models::Model m = models::load_model("gpt2-small");
  for (const auto& k : range_launches(m, 0, m.size(), Phase::forward, 8, eager())) {
    if (!library(k))
      continue;
    if (k.work.unaligned)
      CHECK(cost->seconds(k.work) == doctest::Approx(k.work.flop / (0.125 * peak)));
    else
      CHECK(cost->seconds(k.work) == tables->seconds(k.work));
  }
  CHECK(calibration::unaligned_gemm(8192, 50257, 768, Dtype::bf16));
  CHECK_FALSE(calibration::unaligned_gemm(1000, 2048, 2, Dtype::bf16));  // a weight gradient over 2 rows
  CHECK_FALSE(calibration::unaligned_gemm(8192, 50257, 768, Dtype::fp32));
}
