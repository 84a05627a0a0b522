// Shape-aware kernel costs (calibration/KernelModel.hpp): the acceptance figures against published
// measurements, and the model's quantization, floor and memory terms against closed forms.
#include "calibration/KernelModel.hpp"
#include "calibration/RooflineCostModel.hpp"
#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "models/ModelBuilder.hpp"
#include "models/ModelLoader.hpp"
#include "sim/OpCosts.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {

// A small made-up GPU whose numbers are easy to follow: 16 SMs, 100 TFLOP/s, 1 TB/s, one 128 x 128 tile.
CalibrationProfile toy_gpu()
{
  CalibrationProfile p;
  p.name   = "toy";
  auto set = [&](const std::string& name, double value) { p.parameters[name] = {name, value, "", "", ""}; };
  set("peak_flops_bf16", 100e12);
  set("memory_bandwidth", 1e12);
  set("memory_efficiency", 1.0);
  set("compute_efficiency", 0.5);
  set("kernel_overhead", 1e-6);
  set("kernel_launch_floor", 0.5e-6);
  set("sm_count", 16);
  set("gemm_efficiency", 0.8);
  set("gemm_tile_k_bytes", 128); // 64 bf16 elements of K per step
  set("gemm_pipeline_steps", 2);
  set("gemm_tile_intensity", 64);
  p.gemm_tiles.tiles = {{128, 128}};
  return p;
}

// One 128 x 128 x 64 step of the toy GPU: 2 x 128 x 128 x 64 flop at 100e12 / 16 x 0.8 flop/s per SM.
constexpr double toy_step = 2.0 * 128 * 128 * 64 / (100e12 / 16 * 0.8);

} // namespace

TEST_CASE("h100-sxm BF16 GEMM efficiency against published cuBLAS measurements")
{
  // Published (docs/kernels.md): cuBLAS BF16 on H100 SXM reaches 797.5 TFLOPS at 8192^3 (PyTorch 2.7,
  // zzc0721/torch-performance-test-data issue 79), 0.806 of the 989.4 TFLOPS dense peak, and 792.1
  // TFLOPS (80.1%) at its best shape (stas00/ml-engineering's Maximum Achievable Matmul FLOPS table).
  const CalibrationProfile h100 = load_profile("h100-sxm");
  const GemmEstimate big        = estimate_gemm(h100, {.m = 8192, .n = 8192, .k = 8192}, Dtype::bf16);
  CHECK(big.efficiency >= 0.6);
  CHECK(big.efficiency <= 0.85);
  CHECK(big.efficiency == doctest::Approx(797.5 / 989.4).epsilon(0.03));
  CHECK(big.bound == KernelBound::compute);
  // 1024 x 768 x 768 (GPT-2 small's projection at 1,024 tokens): 1.2 GFLOP, 48 tiles of 128 x 128
  // for 132 SMs. The same source measures 1024^3 at 176.6 TFLOPS (0.18 of the peak) and 2048^3 at
  // 676.6 (0.684): small GEMMs fill a fraction of the SMs for a few main-loop steps.
  const GemmEstimate small = estimate_gemm(h100, {.m = 1024, .n = 768, .k = 768}, Dtype::bf16);
  CHECK(small.efficiency < 0.45);
  CHECK(estimate_gemm(h100, {.m = 2048, .n = 2048, .k = 2048}, Dtype::bf16).efficiency ==
        doctest::Approx(676.6 / 989.4).epsilon(0.05));
  // Efficiency grows with size, as every published curve does up to 8192.
  double previous = 0;
  for (double s : {256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
    const double e = estimate_gemm(h100, {.m = s, .n = s, .k = s}, Dtype::bf16).efficiency;
    CHECK(e > previous);
    previous = e;
  }
}

TEST_CASE("a100-sxm BF16 GEMM: the best published shape's efficiency within 10%")
{
  // stas00/ml-engineering: 267.9 TFLOPS (85.9% of 312) at 6912 x 16384 x 2048 on A100 SXM.
  const GemmEstimate e = estimate_gemm(load_profile("a100-sxm"), {.m = 6912, .n = 16384, .k = 2048}, Dtype::bf16);
  CHECK(e.efficiency == doctest::Approx(267.9 / 312).epsilon(0.10));
}

TEST_CASE("wave quantization: one CTA more than the SMs costs a second wave")
{
  const KernelModel m = *KernelModel::from_profile(toy_gpu());
  // 16 tiles of 128 x 128 on 16 SMs: one wave of (k / 64 + 2) steps (k = 640: 10 steps).
  const GemmEstimate one = m.gemm({.m = 512, .n = 512, .k = 640}, Dtype::bf16);
  CHECK(one.ctas == 16);
  CHECK(one.waves == 1);
  CHECK(one.split_k == 1);
  CHECK(one.bound == KernelBound::compute);
  CHECK(one.compute_s == doctest::Approx((10 + 2) * toy_step).epsilon(1e-12));
  CHECK(one.seconds == doctest::Approx(1e-6 + (10 + 2) * toy_step).epsilon(1e-12));
  // 513 rows need a fifth row of tiles: 20 CTAs, two waves for 25% more work.
  const GemmEstimate two = m.gemm({.m = 513, .n = 512, .k = 640}, Dtype::bf16);
  CHECK(two.ctas == 20);
  CHECK(two.waves == 2);
  CHECK(two.seconds == doctest::Approx(1e-6 + 2 * (10 + 2) * toy_step).epsilon(1e-12));
  // Tile quantization: 385 rows cost as much as 512.
  CHECK(m.gemm({.m = 385, .n = 512, .k = 640}, Dtype::bf16).seconds == doctest::Approx(one.seconds).epsilon(1e-12));
}

TEST_CASE("split-K fills idle SMs when the tiles cannot, paying the fp32 partials' traffic")
{
  const KernelModel m = *KernelModel::from_profile(toy_gpu());
  // 4 output tiles and a long K (400 steps): a 4-way split fills the 16 SMs.
  const GemmEstimate e = m.gemm({.m = 256, .n = 256, .k = 64 * 400}, Dtype::bf16);
  CHECK(e.split_k == 4);
  CHECK(e.ctas == 16);
  CHECK(e.waves == 1);
  CHECK(e.bound == KernelBound::compute);
  CHECK(e.compute_s == doctest::Approx((100 + 2) * toy_step).epsilon(1e-12));
  CHECK(e.split_s == doctest::Approx(8.0 * 256 * 256 * 4 / 1e12).epsilon(1e-12));
  CHECK(e.seconds == doctest::Approx(1e-6 + (100 + 2) * toy_step + e.split_s).epsilon(1e-12));
}

TEST_CASE("memory-bound small shapes and the launch floor")
{
  CalibrationProfile slow_memory                      = toy_gpu();
  slow_memory.parameters["memory_bandwidth"].value    = 0.1e12;
  slow_memory.parameters["kernel_launch_floor"].value = 2e-6; // above a 3-step tile's 1.26 us
  const KernelModel m                                 = *KernelModel::from_profile(slow_memory);
  // A matrix-vector product streams its weights: 2 x (4096 x 4096 + 4096 + 4096) bytes at 0.1 TB/s.
  const GemmEstimate gemv = m.gemm({.m = 1, .n = 4096, .k = 4096}, Dtype::bf16);
  CHECK(gemv.bound == KernelBound::memory);
  CHECK(gemv.seconds == doctest::Approx(1e-6 + 2.0 * (4096.0 * 4096 + 2 * 4096) / 0.1e12).epsilon(1e-12));
  // A tiny GEMM runs for the launch floor, plus the gap.
  const GemmEstimate tiny = m.gemm({.m = 8, .n = 8, .k = 8}, Dtype::bf16);
  CHECK(tiny.bound == KernelBound::launch_floor);
  CHECK(tiny.compute_s == doctest::Approx(3 * toy_step).epsilon(1e-12));
  CHECK(tiny.seconds == doctest::Approx(1e-6 + 2e-6).epsilon(1e-12));
  // Memory-bound work without a shape gets the floor too.
  const RooflineCostModel cost(toy_gpu());
  CHECK(cost.seconds({.flop = 0, .bytes = 100, .dtype = Dtype::bf16, .kind = WorkKind::memory}) ==
        doctest::Approx(1.5e-6).epsilon(1e-12));
}

TEST_CASE("smaller tiles are limited by their operand traffic below the tile intensity")
{
  CalibrationProfile p = toy_gpu();
  p.gemm_tiles.tiles   = {{64, 64}};
  const KernelModel m  = *KernelModel::from_profile(p);
  // 64 x 64 has intensity 32: half of 64, so each of its steps runs at half the per-SM rate.
  const GemmEstimate e = m.gemm({.m = 256, .n = 256, .k = 640}, Dtype::bf16);
  const double step    = 2.0 * 64 * 64 * 64 / (100e12 / 16 * 0.8 * 0.5);
  CHECK(e.ctas == 16);
  CHECK(e.compute_s == doctest::Approx((10 + 2) * step).epsilon(1e-12));
}

TEST_CASE("fused attention on h100-sxm against FlashAttention-3's measured TFLOPS")
{
  const CalibrationProfile h100 = load_profile("h100-sxm");
  // pytorch/benchmark PR 2391: FA3 forward, BF16, head dim 128, 16 heads, batch x sequence = 16k,
  // non-causal, on H100: TFLOPS by sequence length (the profile's attention parameters are fitted to these).
  const std::pair<double, double> measured[] = {{512, 430.32}, {1024, 517.1}, {2048, 565.5},
                                                {4096, 590.2}, {8192, 614.2}, {16384, 620.7}};
  for (const auto& [seq, tflops] : measured) {
    const AttentionEstimate e =
        estimate_attention(h100, {.heads = 16 * (16384 / seq), .q = seq, .kv = seq, .head_dim = 128}, Dtype::bf16);
    CHECK(e.efficiency * 989.4 == doctest::Approx(tflops).epsilon(0.02));
  }
  // Out of the fit: head dim 256 at 16k, which the FA3 paper reports at up to 740 TFLOPS (Shah et al. 2024).
  const AttentionEstimate d256 =
      estimate_attention(h100, {.heads = 8, .q = 16384, .kv = 16384, .head_dim = 256}, Dtype::bf16);
  CHECK(d256.efficiency * 989.4 == doctest::Approx(740).epsilon(0.03));
  // Smaller head dimensions spend more of each score on the softmax's exponentials.
  const auto eff = [&](double d) {
    return estimate_attention(h100, {.heads = 16, .q = 8192, .kv = 8192, .head_dim = d}, Dtype::bf16).efficiency;
  };
  CHECK(eff(64) < eff(128));
  CHECK(eff(128) < eff(256));
  // Causal attention has half the KV blocks per query block: lower efficiency at short sequences.
  const AttentionDims full{.heads = 64, .q = 1024, .kv = 1024, .head_dim = 128};
  AttentionDims causal = full;
  causal.causal        = true;
  CHECK(estimate_attention(h100, causal, Dtype::bf16).efficiency <
        estimate_attention(h100, full, Dtype::bf16).efficiency);
  AttentionDims backward = full;
  backward.backward      = true;
  CHECK(estimate_attention(h100, backward, Dtype::bf16).efficiency ==
        doctest::Approx(0.8 * estimate_attention(h100, full, Dtype::bf16).efficiency).epsilon(0.01));
}

TEST_CASE("a profile without gemm_tiles keeps the flat roofline, exactly")
{
  CalibrationProfile p = toy_gpu();
  p.gemm_tiles.tiles.clear();
  CHECK_FALSE(KernelModel::from_profile(p).has_value());
  const RooflineCostModel flat(p);
  const KernelWork w{.flop  = 2e12,
                     .bytes = 1e6,
                     .dtype = Dtype::bf16,
                     .kind  = WorkKind::gemm,
                     .shape = {},
                     .gemm  = {.m = 10000, .n = 10000, .k = 10000}};
  CHECK(flat.seconds(w) == doctest::Approx(1e-6 + 2e12 / (100e12 * 0.5)).epsilon(1e-12));
  // And the host profile, whose times `ddlsim execute` fits, has none.
  CHECK_FALSE(KernelModel::from_profile(load_profile("host-cpu")).has_value());
}

TEST_CASE("measured tables still win inside their range over the shape-aware model")
{
  CalibrationProfile p = load_profile("h100-sxm");
  p.kernel_tables.push_back(fit_kernel_table("gemm", "bf16", {{1e9, 1e-5}, {1e12, 5e-3}}));
  const auto model = make_cost_model(p);
  const RooflineCostModel shapes(p);
  KernelWork inside{.flop  = 2.0 * 1024 * 1024 * 1024,
                    .bytes = 6.0 * 1024 * 1024,
                    .dtype = Dtype::bf16,
                    .kind  = WorkKind::gemm,
                    .shape = {},
                    .gemm  = {.m = 1024, .n = 1024, .k = 1024}};
  CHECK(model->seconds(inside) == doctest::Approx(p.kernel_tables.back().seconds(inside.flop)).epsilon(1e-12));
  CHECK(model->seconds(inside) != doctest::Approx(shapes.seconds(inside)));
  KernelWork outside = inside;
  outside.flop       = 2.0 * 16384 * 16384 * 16384;
  outside.gemm       = {.m = 16384, .n = 16384, .k = 16384};
  CHECK(model->seconds(outside) == doctest::Approx(shapes.seconds(outside)).epsilon(1e-12));
  // Fused attention never takes a GEMM table's time.
  p.kernel_tables.push_back(fit_kernel_table("batched_gemm", "bf16", {{1e6, 1e-6}, {1e15, 1.0}}));
  const auto with_batched = make_cost_model(p);
  const KernelWork flash{.flop      = 1e12,
                         .bytes     = 1e8,
                         .dtype     = Dtype::bf16,
                         .kind      = WorkKind::attention,
                         .shape     = {},
                         .gemm      = {},
                         .attention = {.heads = 32, .q = 4096, .kv = 4096, .head_dim = 128}};
  CHECK(with_batched->seconds(flash) == doctest::Approx(shapes.seconds(flash)).epsilon(1e-12));
}

TEST_CASE("gemm_tiles need the model's parameters, and bad tiles name their key")
{
  const std::string base = "name: p\nparameters:\n  peak_flops_bf16: {value: 100TFlops}\n"
                           "  memory_bandwidth: {value: 1TBps}\n";
  auto errors            = [](const std::string& text) {
    Diagnostics d("p.yaml");
    YamlMap m(YAML::Load(text), "", d);
    parse_profile(m);
    std::string all;
    for (const auto& e : d.list())
      all += e.to_string() + "\n";
    return all;
  };
  const std::string missing = errors(base + "gemm_tiles: {tiles: [[128, 128]]}\n");
  CHECK(missing.find("p.yaml:5: gemm_tiles: the shape-aware GEMM model needs parameters.sm_count") !=
        std::string::npos);
  const std::string bad = errors(base + "  sm_count: {value: 4}\n  gemm_efficiency: {value: 0.8}\n"
                                        "  gemm_tile_k_bytes: {value: 128B}\n  gemm_pipeline_steps: {value: 2}\n"
                                        "  gemm_tile_intensity: {value: 64}\ngemm_tiles:\n  tiles: [[128, 0], [64]]\n");
  CHECK(bad.find("gemm_tiles.tiles[0]: expected [rows, columns]") != std::string::npos);
  CHECK(bad.find("gemm_tiles.tiles[1]: expected [rows, columns]") != std::string::npos);
  // The shipped profile writes and reads back its tiles.
  const CalibrationProfile h100 = load_profile("h100-sxm");
  std::ostringstream out;
  write_profile(h100, out);
  Diagnostics d("round.yaml");
  YamlMap m(YAML::Load(out.str()), "", d);
  const CalibrationProfile back = parse_profile(m);
  CHECK(d.list().empty());
  REQUIRE(back.gemm_tiles.tiles.size() == h100.gemm_tiles.tiles.size());
  CHECK(back.gemm_tiles.tiles[0].m == h100.gemm_tiles.tiles[0].m);
  CHECK(estimate_gemm(back, {.m = 4096, .n = 4096, .k = 4096}, Dtype::bf16).seconds ==
        doctest::Approx(estimate_gemm(h100, {.m = 4096, .n = 4096, .k = 4096}, Dtype::bf16).seconds));
}

TEST_CASE("layer launches carry the GEMM each GPU runs: transposed in backward, split by tensor parallelism")
{
  models::ModelBuilder b("m", models::TensorShape::sequence(1024, 768));
  auto x                    = b.input();
  x                         = b.linear(x, 3072, true, "fc");
  const models::Model model = b.build();
  const models::Layer& fc   = model.layers()[0];
  const auto fwd            = sim::layer_launches(fc, sim::Phase::forward, 4, Dtype::bf16);
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].work.gemm.m == 4096);
  CHECK(fwd[0].work.gemm.n == 3072);
  CHECK(fwd[0].work.gemm.k == 768);
  const auto bwd = sim::layer_launches(fc, sim::Phase::backward, 4, Dtype::bf16);
  REQUIRE(bwd.size() == 2);
  CHECK(bwd[0].work.gemm.m == 4096); // dX = dY W^T: (m, k, n)
  CHECK(bwd[0].work.gemm.n == 768);
  CHECK(bwd[0].work.gemm.k == 3072);
  CHECK(bwd[1].work.gemm.m == 768); // dW = X^T dY: (k, n, m)
  CHECK(bwd[1].work.gemm.n == 3072);
  CHECK(bwd[1].work.gemm.k == 4096);
  // The grid's fully connected layer splits its output columns over tp.
  const auto split = sim::layer_launches(fc, sim::Phase::forward, 4, Dtype::bf16, 4);
  CHECK(split[0].work.gemm.n == 768);
  CHECK(split[0].work.flop == doctest::Approx(fwd[0].work.flop / 4));
}

TEST_CASE("a convolution's passes are its implicit GEMMs")
{
  models::ModelBuilder b("c", models::TensorShape::picture(64, 56, 56));
  b.conv2d(b.input(),
           {.out_channels = 128, .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
           "conv");
  const models::Model model = b.build();
  const auto fwd            = sim::layer_launches(model.layers()[0], sim::Phase::forward, 8, Dtype::bf16);
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].work.gemm.m == 8.0 * 28 * 28); // N P Q
  CHECK(fwd[0].work.gemm.n == 128);           // K
  CHECK(fwd[0].work.gemm.k == 64.0 * 9);      // C R S
  CHECK(2 * fwd[0].work.gemm.m * fwd[0].work.gemm.n * fwd[0].work.gemm.k == doctest::Approx(fwd[0].work.flop));
  const auto bwd = sim::layer_launches(model.layers()[0], sim::Phase::backward, 8, Dtype::bf16);
  REQUIRE(bwd.size() == 2);
  CHECK(bwd[0].work.gemm.m == 8.0 * 56 * 56); // data gradient: N H W x C over K R S
  CHECK(bwd[0].work.gemm.n == 64);
  CHECK(bwd[0].work.gemm.k == 128.0 * 9);
  CHECK(bwd[1].work.gemm.m == 128); // weight gradient: K x C R S over N P Q
  CHECK(bwd[1].work.gemm.n == 64.0 * 9);
  CHECK(bwd[1].work.gemm.k == 8.0 * 28 * 28);
}

TEST_CASE("micro-batch 1 is no longer nearly as efficient as 16 per sample")
{
  // GPT-2 small on h100-sxm: with one flat efficiency a sample's GEMMs cost the same at every
  // micro-batch size; with tile and wave quantization and the launch floor, micro-batch 1 (1,024
  // rows) costs clearly more per sample than 16 (16,384 rows).
  const models::Model model = models::load_model("gpt2-small");
  const RooflineCostModel h100(load_profile("h100-sxm"));
  auto per_sample = [&](int mb) {
    return (sim::range_seconds(model, 0, model.size(), sim::Phase::forward, mb, {}, h100) +
            sim::range_seconds(model, 0, model.size(), sim::Phase::backward, mb, {}, h100)) /
           mb;
  };
  CHECK(per_sample(1) > 1.15 * per_sample(16));
}

TEST_CASE("normalisation kernels move the bytes and launch the kernels the libraries do")
{
  // 1,024 tokens of 768 features (E elements per sample), bf16: every tensor read or written once
  // counts E x 2 bytes; fp32 statistics per token are counted as elements (docs/kernels.md).
  const double E = 1024.0 * 768, rows = 1024, h = 768, d = 2;
  auto passes = [&](models::Normalization kind, int groups, const models::TensorShape& in) {
    models::ModelBuilder b("n", in);
    b.norm(b.input(), kind, "norm", groups);
    const models::Model m = b.build();
    return std::make_pair(sim::layer_launches(m.layers()[0], sim::Phase::forward, 1, Dtype::bf16),
                          sim::layer_launches(m.layers()[0], sim::Phase::backward, 1, Dtype::bf16));
  };
  const auto seq = models::TensorShape::sequence(1024, 768);
  // LayerNorm: one fused forward (read x, write y, mean and rstd per token, gamma and beta read);
  // backward dx (read dy, x, statistics; write dx; gamma read) and dgamma/dbeta (read dy, x; write both).
  const auto [ln_f, ln_b] = passes(models::Normalization::layer_norm, 0, seq);
  REQUIRE(ln_f.size() == 1);
  CHECK(ln_f[0].work.bytes == doctest::Approx((2 * E + 2 * rows + 2 * h) * d));
  REQUIRE(ln_b.size() == 2);
  CHECK(ln_b[0].work.bytes == doctest::Approx((3 * E + 2 * rows + h) * d));
  CHECK(ln_b[1].work.bytes == doctest::Approx((2 * E + 2 * rows + 2 * h) * d));
  // RMSNorm: the same kernels without the mean and the shift.
  const auto [rms_f, rms_b] = passes(models::Normalization::rms_norm, 0, seq);
  REQUIRE(rms_f.size() == 1);
  CHECK(rms_f[0].work.bytes == doctest::Approx((2 * E + rows + h) * d));
  REQUIRE(rms_b.size() == 2);
  CHECK(rms_b[0].work.bytes + rms_b[1].work.bytes == doctest::Approx((5 * E + 2 * rows + 2 * h) * d));
  CHECK(rms_f[0].work.flop < ln_f[0].work.flop);
  // Images: 64 channels of 56 x 56. BatchNorm (cuDNN): one launch per pass, x read twice and y
  // written (3), backward 5; GroupNorm (PyTorch): moments then normalisation, 3 and 5 transfers in
  // two launches each, plus the per-group statistics and per-channel parameters.
  const auto img = models::TensorShape::picture(64, 56, 56);
  const double I = 64.0 * 56 * 56, C = 64, G = 32;
  const auto [bn_f, bn_b] = passes(models::Normalization::batch_norm, 0, img);
  REQUIRE(bn_f.size() == 1);
  REQUIRE(bn_b.size() == 1);
  CHECK(bn_f[0].work.bytes == doctest::Approx((3 * I + 2 * C) * d));
  CHECK(bn_b[0].work.bytes == doctest::Approx((5 * I + 4 * C) * d));
  const auto [gn_f, gn_b] = passes(models::Normalization::group_norm, 32, img);
  REQUIRE(gn_f.size() == 2);
  REQUIRE(gn_b.size() == 2);
  CHECK(gn_f[0].work.bytes + gn_f[1].work.bytes == doctest::Approx((3 * I + 2 * G + 2 * C + 2 * C) * d));
  CHECK(gn_b[0].work.bytes + gn_b[1].work.bytes == doctest::Approx((5 * I + 2 * C + 2 * C + 4 * C) * d));
  // So on h100-sxm, GroupNorm costs more than BatchNorm (a second launch per pass), and a layer norm's
  // forward less than a batch norm's over as many elements (one read of x fewer).
  const RooflineCostModel h100(load_profile("h100-sxm"));
  auto seconds = [&](const std::vector<sim::KernelLaunch>& launches) {
    double t = 0;
    for (const auto& l : launches)
      t += h100.seconds(l.work);
    return t;
  };
  CHECK(seconds(gn_f) > seconds(bn_f));
  CHECK(seconds(gn_b) > seconds(bn_b));
}
