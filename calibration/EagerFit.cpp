#include "calibration/EagerFit.hpp"

#include "calibration/TableCostModel.hpp"
#include "common/Statistics.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ddlsim::calibration {
namespace {

constexpr std::array<const char*, memory_access_count> access_names{"contiguous", "strided", "broadcast",
                                                                    "dropout",    "norm",    "reduction"};
constexpr double least_seconds = 10e-6;  // shorter kernels are launch-bound: their bandwidth says nothing

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// A traced GEMM record ("m=8192 n=50257 k=768 batch=1") that unaligned_gemm() says is.
bool unaligned_record(const traces::KernelRecord& k)
{
  if ((k.op != "gemm" && k.op != "batched_gemm") || (k.dtype != "bf16" && k.dtype != "fp16"))
    return false;
  double m = 0, n = 0, kk = 0, batch = 0;
  if (std::sscanf(k.shape.c_str(), "m=%lf n=%lf k=%lf batch=%lf", &m, &n, &kk, &batch) != 4)
    return false;
  return unaligned_gemm(m, n, kk, Dtype::bf16);
}

Parameter fitted(const std::string& name, double value, const std::string& unit, const std::string& source)
{
  Parameter p{.name = name, .value = value, .unit = unit, .description = {}, .source = source};
  for (const auto& spec : parameter_specs())
    if (spec.name == name)
      p.description = std::string(spec.help) + " (fitted)";
  return p;
}

}  // namespace

bool unaligned_gemm(double m, double n, double k, Dtype dtype)
{
  if (dtype != Dtype::bf16 && dtype != Dtype::fp16)
    return false;
  const double per_16_bytes = 16 / dtype_bytes(dtype);
  auto off = [&](double d) { return d >= 64 && std::fmod(d, per_16_bytes) != 0; };
  return off(m) || off(n) || off(k);
}

const char* memory_access_name(MemoryAccess access) { return access_names[static_cast<std::size_t>(access)]; }

std::optional<MemoryAccess> memory_access_of(const std::string& name)
{
  if (has(name, "dropout"))
    return MemoryAccess::dropout;
  if (has(name, "layer_norm") || has(name, "LayerNorm") || has(name, "GammaBeta") || has(name, "batch_norm") ||
      has(name, "bn_"))
    return MemoryAccess::norm;
  if (has(name, "softmax") || has(name, "SoftMax") || has(name, "reduce_kernel"))
    return MemoryAccess::reduction;
  if (has(name, "vectorized_elementwise_kernel"))
    return MemoryAccess::contiguous;
  if (has(name, "unrolled_elementwise_kernel"))
    return MemoryAccess::strided;
  if (has(name, "elementwise_kernel"))
    return MemoryAccess::broadcast;
  return std::nullopt;
}

bool eager_record(const traces::KernelRecord& k)
{
  return !k.cpu_op.empty() && (k.op == "pointwise" || unaligned_record(k));
}

EagerFit fit_eager(const std::vector<traces::KernelRecord>& kernels, const CalibrationProfile& profile,
                   const std::string& sources)
{
  EagerFit fit;
  const std::unique_ptr<CostModel> cost = make_cost_model(profile);
  std::array<std::vector<double>, memory_access_count> ratio;
  double unaligned_flop = 0, unaligned_peak_s = 0;  // their flop, and their seconds x peak
  int unaligned = 0;
  for (const auto& k : kernels) {
    if (!eager_record(k) || k.duration_s <= 0)
      continue;
    if (k.op != "pointwise") {
      const Parameter* peak = profile.find("peak_flops_" + k.dtype);
      if (peak != nullptr && k.flop > 0) {
        unaligned_flop += k.flop;
        unaligned_peak_s += k.duration_s * peak->value;
        ++unaligned;
      }
      continue;
    }
    const auto access = memory_access_of(k.name);
    if (!access || k.duration_s < least_seconds || k.bytes <= 0)
      continue;
    const double contiguous = cost->seconds({.flop = 0, .bytes = k.bytes, .dtype = Dtype::fp32, .kind = WorkKind::memory});
    ratio[static_cast<std::size_t>(*access)].push_back(contiguous / k.duration_s);
  }
  for (std::size_t a = 1; a < memory_access_count; ++a) {  // contiguous is the microbenchmark itself
    const std::string name = std::string("memory_efficiency_") + access_names[a];
    if (ratio[a].empty()) {
      fit.notes.push_back(name + " not fitted: no traced " + access_names[a] + " kernel of 10 us or more");
      continue;
    }
    const double m = std::min(1.0, median(ratio[a]));
    fit.parameters.push_back(fitted(name, m, "1",
                                    fmt::format("median of {} traced {} kernels of 10 us or more in {}: the "
                                                "pointwise microbenchmark's time for their bytes over theirs",
                                                ratio[a].size(), access_names[a], sources)));
  }
  if (unaligned == 0)
    fit.notes.push_back("gemm_unaligned_efficiency not fitted: no traced GEMM with an unaligned leading dimension");
  else
    fit.parameters.push_back(fitted("gemm_unaligned_efficiency", std::min(1.0, unaligned_flop / unaligned_peak_s), "1",
                                    fmt::format("{} traced GEMMs with a dimension of 64 or more off 16 bytes in {}: "
                                                "their flop / (their seconds x peak)",
                                                unaligned, sources)));
  return fit;
}

}  // namespace ddlsim::calibration
