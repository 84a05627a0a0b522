// Framework megatron (sim/Framework.hpp, docs/frameworks.md#megatron) against the closed forms of the
// page: which part of the step is in which dtype, FP8 GEMMs with Transformer Engine's casts, the
// distributed optimizer's step, and the memory of fp32 gradients and FP8 weight copies.
#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"
#include "sim/Framework.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {

ComputeOptions with(Framework framework, Dtype dtype)
{
  ComputeOptions o;
  o.dtype = dtype;
  o.framework = framework;
  return o;
}

bool is_gemm(const KernelLaunch& k)
{
  return k.kind == models::KernelKind::gemm && k.work.kind != calibration::WorkKind::attention;
}

double total(const std::vector<KernelLaunch>& launches, bool gemms)
{
  double b = 0;
  for (const auto& k : launches)
    if (is_gemm(k) == gemms)
      b += k.work.bytes;
  return b;
}

}  // namespace

TEST_CASE("step dtypes: ideal keeps the training dtype everywhere, Megatron keeps bf16 weights and fp32 gradients")
{
  const StepDtypes ideal = step_dtypes(Framework::ideal, Dtype::fp8);
  CHECK((ideal.gemm == Dtype::fp8 && ideal.activations == Dtype::fp8 && ideal.weights == Dtype::fp8 &&
         ideal.gradients == Dtype::fp8));
  const StepDtypes fp8 = step_dtypes(Framework::megatron, Dtype::fp8);
  CHECK((fp8.gemm == Dtype::fp8 && fp8.activations == Dtype::bf16 && fp8.weights == Dtype::bf16 &&
         fp8.gradients == Dtype::fp32));
  CHECK(step_dtypes(Framework::megatron, Dtype::bf16).gradients == Dtype::fp32);
  const StepDtypes fp16 = step_dtypes(Framework::megatron_2021, Dtype::fp16);  // fp16 weights: fp16 gradients
  CHECK((fp16.gemm == Dtype::fp16 && fp16.activations == Dtype::fp16 && fp16.gradients == Dtype::fp16));
  CHECK(step_dtypes(Framework::megatron, Dtype::fp32).gradients == Dtype::fp32);
}

TEST_CASE("bf16 Megatron runs the ideal list's kernels; the optimizer reads fp32 gradients, clips and zeroes them")
{
  const models::Model m = models::load_model("gpt2-small");
  for (Phase phase : {Phase::forward, Phase::backward}) {
    const auto ideal = range_launches(m, 0, m.size(), phase, 4, with(Framework::ideal, Dtype::bf16));
    const auto meg = range_launches(m, 0, m.size(), phase, 4, with(Framework::megatron, Dtype::bf16));
    REQUIRE(ideal.size() == meg.size());
    for (std::size_t i = 0; i < ideal.size(); ++i)
      CHECK(ideal[i].work.bytes == meg[i].work.bytes);
  }
  const auto ideal = range_launches(m, 0, m.size(), Phase::optimizer, 0, with(Framework::ideal, Dtype::bf16));
  const auto meg = range_launches(m, 0, m.size(), Phase::optimizer, 0, with(Framework::megatron, Dtype::bf16));
  REQUIRE(ideal.size() == 1);
  REQUIRE(meg.size() == 3);  // the update, the gradient norm, the buffer zeroed
  const double params = ideal.front().work.flop / 10;
  CHECK(meg[0].work.bytes == doctest::Approx(ideal.front().work.bytes + params * (4 - 2)));
  CHECK(meg[1].work.bytes == doctest::Approx(params * 4));
  CHECK(meg[2].work.bytes == doctest::Approx(params * 4));
  const auto fp8 = range_launches(m, 0, m.size(), Phase::optimizer, 0, with(Framework::megatron, Dtype::fp8));
  REQUIRE(fp8.size() == 4);  // and each weight cast to FP8 and transposed once per step
  CHECK(fp8[3].work.bytes == doctest::Approx(params * (2 + 1 + 1)));
}

TEST_CASE("FP8 GEMMs read a byte per element at the FP8 rate; each forward input and backward gradient is cast")
{
  const models::Model m = models::load_model("llama3-8b");
  const int b = 2;  // samples, over the first transformer block's layers
  const auto range = m.blocks()[1].layers;
  for (Phase phase : {Phase::forward, Phase::backward}) {
    const auto bf16 = range_launches(m, range.begin, range.end, phase, b, with(Framework::megatron, Dtype::bf16));
    const auto fp8 = range_launches(m, range.begin, range.end, phase, b, with(Framework::megatron, Dtype::fp8));
    double cast = 0, expected_cast = 0, gemm_flop_bf16 = 0, gemm_flop_fp8 = 0;
    for (const auto& k : bf16)
      if (is_gemm(k)) {
        gemm_flop_bf16 += k.work.flop;
        if (k.pass != LaunchPass::backward_weight)  // the input (forward) or output gradient (backward)
          expected_cast += k.gemm.m * k.gemm.k * k.gemm.batch * (2 + 1 + 1);
      }
    for (const auto& k : fp8) {
      if (is_gemm(k)) {
        CHECK(k.work.dtype == Dtype::fp8);
        gemm_flop_fp8 += k.work.flop;
      }
    }
    CHECK(gemm_flop_fp8 == doctest::Approx(gemm_flop_bf16));
    CHECK(total(fp8, true) == doctest::Approx(total(bf16, true) / 2));
    cast = total(fp8, false) - total(bf16, false);
    CHECK(cast == doctest::Approx(expected_cast));
    CHECK(expected_cast > 0);
  }
}

TEST_CASE("the LM head stays bf16 under FP8: Megatron's own output layer, outside Transformer Engine")
{
  const models::Model m = models::load_model("llama3-8b");
  const auto head       = m.blocks().back().layers;
  for (Phase phase : {Phase::forward, Phase::backward}) {
    const auto bf16 = range_launches(m, head.begin, head.end, phase, 2, with(Framework::megatron, Dtype::bf16));
    const auto fp8  = range_launches(m, head.begin, head.end, phase, 2, with(Framework::megatron, Dtype::fp8));
    REQUIRE(bf16.size() == fp8.size()); // no cast kernels
    std::size_t gemms = 0;
    for (std::size_t i = 0; i < fp8.size(); ++i) {
      CHECK(fp8[i].work.dtype == bf16[i].work.dtype);
      CHECK(fp8[i].work.bytes == doctest::Approx(bf16[i].work.bytes));
      gemms += is_gemm(fp8[i]) ? 1 : 0;
    }
    CHECK(gemms > 0); // the head has its GEMMs: they are what stayed bf16
  }
}

TEST_CASE("Megatron's memory: bf16 weights, fp32 gradients, fp32 master and moments; FP8 adds two bytes of copies")
{
  const double p = 1e9;
  const models::TrainingState ideal =
      models::training_state(p, Dtype::bf16, models::Optimizer::adam, ZeroStage::none, 1);
  CHECK(ideal.total() == doctest::Approx(16 * p));
  const models::TrainingState meg =
      models::training_state(p, Dtype::bf16, models::Optimizer::adam, ZeroStage::none, 1, 4, 0);
  CHECK(meg.total() == doctest::Approx(18 * p));  // 2 + 4 + 12
  const models::TrainingState zero1 =
      models::training_state(p, Dtype::bf16, models::Optimizer::adam, ZeroStage::optimizer, 8, 4, 2);
  CHECK(zero1.weights == doctest::Approx(4 * p));
  CHECK(zero1.gradients == doctest::Approx(4 * p));
  CHECK(zero1.optimizer_state == doctest::Approx(12 * p / 8));
}
