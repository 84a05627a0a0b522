// Calibration from profiler traces recorded with shapes (traces/KernelShapes.hpp): each kernel's work
// from the CPU op that launched it, and `calibrate fit`'s GEMM model, poor-fit refusal and its account
// of unusable records (calibration/ProfileFit.hpp).
#include "calibration/KernelModel.hpp"
#include "calibration/Microbench.hpp"
#include "calibration/ProfileFit.hpp"
#include "common/Error.hpp"
#include "traces/KinetoImporter.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include <map>
#include <random>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {

const traces::KernelRecord& named(const traces::TraceSet& set, const std::string& prefix, int nth = 0)
{
  for (const auto& k : set.kernels)
    if (k.name.rfind(prefix, 0) == 0 && nth-- == 0)
      return k;
  FAIL("no kernel named " << prefix);
  return set.kernels.front();
}

} // namespace

TEST_CASE("kernels of a trace recorded with shapes carry their op's work")
{
  const traces::TraceSet set = traces::import_kineto(std::string(DDLSIM_TEST_FIXTURES) + "/kineto_shapes.json");
  REQUIRE(set.kernels.size() == 16);
  // aten::addmm (bias, [64, 128], [128, 256]) in bf16, linked by its External id inside aten::linear:
  // 2 m n k flop, (m k + k n + m n) x 2 bytes; its split-K reduction is auxiliary.
  const auto& addmm = named(set, "sm90_xmma_gemm");
  CHECK(addmm.cpu_op == "aten::addmm");
  CHECK(addmm.op == "gemm");
  CHECK(addmm.dtype == "bf16");
  CHECK(addmm.flop == 2.0 * 64 * 256 * 128);
  CHECK(addmm.bytes == 2.0 * (64 * 128 + 128 * 256 + 64 * 256));
  CHECK(named(set, "void cublasLt::splitKreduce").unusable.find("auxiliary") == 0);
  // aten::mm [512, 1024] x [1024, 256] in fp32, linked through its runtime call (an older trace): the
  // shape key is the microbenchmarks' own, so traced GEMMs fill the same tables.
  const auto& mm = named(set, "ampere_sgemm_128x64");
  CHECK(mm.cpu_op == "aten::mm");
  CHECK(mm.dtype == "fp32");
  CHECK(mm.flop == 2.0 * 512 * 256 * 1024);
  BenchPoint p;
  p.op = BenchOp::gemm;
  p.m  = 512;
  p.n  = 256;
  p.k  = 1024;
  CHECK(mm.shape == p.shape_key());
  // float operands on TF32 tensor cores (cutlass s1688) are tf32 work.
  CHECK(named(set, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm").dtype == "tf32");
  // aten::bmm [16, 128, 64] x [16, 64, 128] in fp16: a batched GEMM.
  const auto& bmm = named(set, "ampere_fp16_s16816gemm");
  CHECK(bmm.op == "batched_gemm");
  CHECK(bmm.dtype == "fp16");
  CHECK(bmm.flop == 2.0 * 16 * 128 * 128 * 64);
  // aten::cudnn_convolution 8 x 64 x 56 x 56, 128 filters 3 x 3, stride 2, pad 1 (Concrete Inputs):
  // 28 x 28 out, 2 N K P Q C R S flop; input, output and weights once.
  const auto& conv = named(set, "sm80_xmma_fprop_implicit_gemm_bf16bf16");
  CHECK(conv.op == "conv2d");
  CHECK(conv.flop == 2.0 * 8 * 128 * 28 * 28 * 64 * 9);
  CHECK(conv.bytes == 2.0 * (8.0 * 64 * 56 * 56 + 8.0 * 128 * 28 * 28 + 128.0 * 64 * 9));
  BenchPoint c;
  c.op   = BenchOp::conv2d;
  c.conv = {.n = 8, .c = 64, .h = 56, .w = 56, .k = 128, .r = 3, .s = 3, .stride = 2, .pad = 1};
  CHECK(conv.shape == c.shape_key());
  CHECK(named(set, "void cudnn::ops::nchwToNhwc").unusable.find("auxiliary") == 0);
  // Its backward: the dgrad and wgrad kernels, each a pass of the forward's flop.
  const auto& wgrad = named(set, "sm80_xmma_wgrad");
  const auto& dgrad = named(set, "sm80_xmma_dgrad");
  CHECK(wgrad.flop == conv.flop);
  c.pass = ConvPass::backward_filter;
  CHECK(wgrad.shape == c.shape_key());
  c.pass = ConvPass::backward_data;
  CHECK(dgrad.shape == c.shape_key());
  // What carries no work says why.
  std::map<std::string, std::string> why;
  for (const auto& k : set.kernels)
    if (k.flop == 0 && k.op != "pointwise")
      why[k.name] = k.unusable;
  // A memory-bound op moves its inputs and writes its first (in place): add_ of two 1,024-float tensors
  const auto add = std::find_if(set.kernels.begin(), set.kernels.end(), [](const auto& k) {
    return k.name.find("CUDAFunctorOnSelf_add") != std::string::npos;
  });
  REQUIRE(add != set.kernels.end());
  CHECK(add->op == "pointwise");
  CHECK(add->bytes == 3 * 1024 * 4);
  CHECK(add->unusable.empty());
  CHECK(why.at("sm80_xmma_fprop_implicit_gemm_bf16").find("without stride and padding") != std::string::npos);
  CHECK(why.at("ampere_sgemm_64x64_nn") == "no Input Dims: record with record_shapes=True");
  CHECK(why.at("dgemm_kernel").find("no ddlsim dtype") == 0);
  CHECK(why.at("void orphan_kernel()").find("no CPU op") == 0);
  CHECK(why.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL").find("NCCL kernel") == 0);
  CHECK(why.begin()->second.size() > 0);
}

TEST_CASE("calibrate fit fills GEMM and convolution tables from traced kernels and says what it could not use")
{
  const traces::TraceSet set = traces::import_kineto(std::string(DDLSIM_TEST_FIXTURES) + "/kineto_shapes.json");
  const FitResult fit        = fit_profile(load_profile("h100-sxm"), set,
                                           {.name            = "traced",
                                            .base            = "h100-sxm",
                                            .sources         = "kineto_shapes.json",
                                            .command         = "test",
                                            .date            = "2026-01-01",
                                            .accept_poor_fit = true});
  std::map<std::string, const KernelTable*> tables;
  for (const auto& t : fit.profile.kernel_tables)
    tables[t.op + " " + t.dtype] = &t;
  REQUIRE(tables.count("conv2d bf16"));
  CHECK(tables.at("conv2d bf16")->shapes.count("n=8 c=64 h=56 w=56 k=128 r=3 s=3 stride=2 pad=1 fwd"));
  std::string notes;
  for (const auto& n : fit.notes)
    notes += n + "\n";
  CHECK(notes.find("7 of 16 kernel records carry no work") != std::string::npos);
  CHECK(notes.find("auxiliary kernel") != std::string::npos);
  // a traced memory-bound kernel fits the eager efficiencies (EagerFit.hpp), never the tables
  CHECK(tables.count("pointwise ") == 0);
}

TEST_CASE("calibrate fit recovers the GEMM model's efficiency, and refuses a poor fit unless accepted")
{
  // GEMM records timed by the h100-sxm model itself at gemm_efficiency 0.7: the fit must find 0.7.
  CalibrationProfile truth                  = load_profile("h100-sxm");
  truth.parameters["gemm_efficiency"].value = 0.7;
  const KernelModel model                   = *KernelModel::from_profile(truth);
  traces::TraceSet set;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> size(1, 64);
  for (int i = 0; i < 40; ++i) {
    const double m = 64.0 * size(rng), n = 64.0 * size(rng), k = 64.0 * size(rng);
    traces::KernelRecord r;
    r.name  = "gemm";
    r.op    = "gemm";
    r.dtype = "bf16";
    r.flop  = 2 * m * n * k;
    r.bytes = 2 * (m * k + k * n + m * n);
    char key[96];
    std::snprintf(key, sizeof key, "m=%.0f n=%.0f k=%.0f batch=1", m, n, k);
    r.shape      = key;
    r.duration_s = model.gemm({.m = m, .n = n, .k = k}, Dtype::bf16, r.bytes).seconds;
    set.kernels.push_back(r);
  }
  const FitOptions options{.name = "fit", .base = "h100-sxm", .sources = "s", .command = "c", .date = "d"};
  const FitResult exact = fit_profile(load_profile("h100-sxm"), set, options);
  CHECK(exact.profile.value("gemm_efficiency") == doctest::Approx(0.7).epsilon(1e-3));
  CHECK(exact.profile.find("gemm_efficiency")->source.find("fit of 40 GEMM records") == 0);
  // Times scattered by a factor up to 4 either way: R^2 far below 0.9, refused with the reason.
  std::uniform_real_distribution<double> scatter(-1.4, 1.4);
  for (auto& r : set.kernels)
    r.duration_s *= std::exp(scatter(rng));
  try {
    fit_profile(load_profile("h100-sxm"), set, options);
    FAIL("a poor fit was accepted");
  } catch (const CalibrationError& e) {
    CHECK(std::string(e.what()).find("the GEMM model (gemm_efficiency)") != std::string::npos);
    CHECK(std::string(e.what()).find("--accept-poor-fit") != std::string::npos);
  }
  FitOptions accept      = options;
  accept.accept_poor_fit = true;
  const FitResult poor   = fit_profile(load_profile("h100-sxm"), set, accept);
  bool noted             = false;
  for (const auto& n : poor.notes)
    noted = noted || n.find("accepted poor fits") == 0;
  CHECK(noted);
}

TEST_CASE("a collective fit below R^2 0.9 is refused")
{
  traces::TraceSet set;
  // Times that do not grow with size: alternately fast and slow.
  const double times[] = {1e-3, 5e-3, 1e-3, 6e-3, 1.5e-3};
  double bytes         = 1e6;
  for (double t : times) {
    set.collectives.push_back({.collective = "all_reduce",
                               .bytes      = bytes,
                               .dtype      = "float",
                               .group_size = 2,
                               .duration_s = t,
                               .source     = "kernel",
                               .name       = "nccl"});
    bytes *= 2;
  }
  const FitOptions options{.name = "fit", .base = "h100-sxm", .sources = "s", .command = "c", .date = "d"};
  CHECK_THROWS_WITH_AS(fit_profile(load_profile("h100-sxm"), set, options),
                       doctest::Contains("all_reduce over 2 ranks"), CalibrationError);
}
