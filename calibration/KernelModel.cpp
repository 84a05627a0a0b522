#include "calibration/KernelModel.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

double optional_value(const CalibrationProfile& p, const std::string& name, double fallback)
{
  const Parameter* param = p.find(name);
  return param ? param->value : fallback;
}

// Split-K factors tried: cuBLAS splits K when the output tiles cannot fill the SMs.
constexpr std::array<int, 8> split_factors{1, 2, 3, 4, 6, 8, 12, 16};

} // namespace

const char* kernel_bound_name(KernelBound bound)
{
  switch (bound) {
  case KernelBound::compute:
    return "compute";
  case KernelBound::memory:
    return "memory";
  case KernelBound::launch_floor:
    return "launch floor";
  }
  return "compute";
}

std::optional<KernelModel> KernelModel::from_profile(const CalibrationProfile& profile)
{
  if (profile.gemm_tiles.tiles.empty())
    return std::nullopt;
  KernelModel m;
  m.profile_name_ = profile.name;
  for (const auto& entry : dtype_table.entries)
    m.peak_[static_cast<std::size_t>(entry.value)] = profile.sustained_peak(entry.value);
  m.tiles_ = profile.gemm_tiles.tiles;
  // profile.value() throws CalibrationError naming the profile and the missing parameter.
  const double sms = profile.value("sm_count");
  if (!(sms >= 1 && sms <= 1e6))
    throw CalibrationError("calibration profile '" + profile.name + "': sm_count must lie in [1, 1e6]");
  m.sm_count_           = static_cast<int>(std::lround(sms));
  m.gemm_efficiency_    = profile.value("gemm_efficiency");
  m.tile_k_bytes_       = profile.value("gemm_tile_k_bytes");
  m.pipeline_steps_     = profile.value("gemm_pipeline_steps");
  m.tile_intensity_     = profile.value("gemm_tile_intensity");
  m.gemv_max_rows_      = optional_value(profile, "gemv_max_rows", 0.0);
  m.compute_efficiency_ = optional_value(profile, "compute_efficiency", 1.0);
  m.memory_bandwidth_   = profile.value("memory_bandwidth") * optional_value(profile, "memory_efficiency", 1.0);
  m.overhead_           = optional_value(profile, "kernel_overhead", 0.0);
  m.floor_              = optional_value(profile, "kernel_launch_floor", 0.0);
  if (profile.find("attention_efficiency") && profile.find("special_function_rate")) {
    m.attention_efficiency_     = profile.value("attention_efficiency");
    m.special_function_rate_    = profile.value("special_function_rate") * optional_value(profile, "sustained_clock", 1.0);
    m.attention_block_          = optional_value(profile, "attention_block", 128.0);
    m.attention_block_overhead_ = optional_value(profile, "attention_block_overhead", 0.0);
    m.attention_backward_       = optional_value(profile, "attention_backward_efficiency", 1.0);
  }
  return m;
}

double KernelModel::peak(Dtype dtype) const
{
  const double p = peak_[static_cast<std::size_t>(dtype)];
  if (p <= 0)
    throw CalibrationError("calibration profile '" + profile_name_ + "' has no peak_flops_" +
                           std::string(dtype_table.name(dtype)) + " for this dtype");
  return p;
}

GemmEstimate KernelModel::gemm(const GemmDims& dims, Dtype dtype, double bytes) const
{
  const double element = dtype_bytes(dtype);
  const double m = std::max(1.0, dims.m), n = std::max(1.0, dims.n), k = std::max(1.0, dims.k);
  const double batch = std::max(1.0, dims.batch);
  const double p     = peak(dtype);
  if (bytes <= 0)
    bytes = element * batch * (m * k + k * n + m * n);
  GemmEstimate best;
  best.flop            = 2 * m * n * k * batch;
  best.memory_s        = bytes / memory_bandwidth_;
  const double tile_k  = std::max(1.0, tile_k_bytes_ / element);
  const double k_steps = std::ceil(k / tile_k);
  const double per_sm  = p / sm_count_ * gemm_efficiency_;
  double best_time     = std::numeric_limits<double>::infinity();
  for (const GemmTile& tile : tiles_) {
    const double tm = tile.m, tn = tile.n;
    // A tile's operands per multiply-add fall as tm tn / (tm + tn) grows; below the profile's
    // intensity the tile waits on them.
    const double intensity = std::min(1.0, tm * tn / (tm + tn) / tile_intensity_);
    const double t_step    = 2 * tm * tn * tile_k / (per_sm * intensity);
    const double tiles     = std::ceil(m / tm) * std::ceil(n / tn) * batch;
    for (int s : split_factors) {
      if (s > 1 && s > k_steps)
        break;
      const double ctas    = tiles * s;
      const double waves   = std::ceil(ctas / sm_count_);
      const double compute = waves * (std::ceil(k_steps / s) + pipeline_steps_) * t_step;
      const double split   = s > 1 ? 8 * m * n * batch * s / memory_bandwidth_ : 0.0;
      const double time    = std::max(compute, best.memory_s) + split;
      // Strictly faster wins: ties keep the earlier tile and the smaller split (deterministic).
      if (time < best_time) {
        best_time      = time;
        best.compute_s = compute;
        best.split_s   = split;
        best.tile      = tile;
        best.split_k   = s;
        best.ctas      = static_cast<long long>(std::min(ctas, 9e18)); // counts for display; no overflow
        best.waves     = static_cast<long long>(std::min(waves, 9e18));
        best.bound     = compute >= best.memory_s ? KernelBound::compute : KernelBound::memory;
      }
    }
  }
  // A skinny product: the libraries' matrix-vector kernels stream the operands at memory speed.
  if (std::min(m, n) <= gemv_max_rows_) {
    const double gemv = std::max(best.memory_s, best.flop / (p * compute_efficiency_));
    if (gemv < best_time) {
      best_time      = gemv;
      best.compute_s = best.flop / (p * compute_efficiency_);
      best.split_s   = 0;
      best.tile      = {};
      best.split_k   = 1;
      best.ctas      = 0;
      best.waves     = 0;
      best.bound     = best.compute_s >= best.memory_s ? KernelBound::compute : KernelBound::memory;
    }
  }
  if (best_time < floor_)
    best.bound = KernelBound::launch_floor;
  best.seconds    = overhead_ + std::max(floor_, best_time);
  best.efficiency = best.flop / (best.seconds * p);
  return best;
}

AttentionEstimate KernelModel::attention(const AttentionDims& dims, double flop, double bytes, Dtype dtype) const
{
  const double p = peak(dtype);
  AttentionEstimate out;
  double efficiency = compute_efficiency_;
  if (attention_efficiency_ > 0 && dims.head_dim > 0 && dims.q > 0 && dims.kv > 0) {
    // Each score costs 4 d flop of matrix products (QK^T and PV) and one exponential (softmax).
    efficiency          = 1.0 / (1.0 / attention_efficiency_ + p / (4 * dims.head_dim * special_function_rate_));
    const double blocks = std::ceil(dims.kv / attention_block_);
    const double per_query_block = dims.causal ? (blocks + 1) / 2 : blocks;
    efficiency *= per_query_block / (per_query_block + attention_block_overhead_);
    const double ctas = std::max(1.0, std::ceil(dims.heads)) * std::ceil(dims.q / attention_block_);
    efficiency *= ctas / (sm_count_ * std::ceil(ctas / sm_count_));
    if (dims.backward)
      efficiency *= attention_backward_;
  }
  const double compute = flop / (p * efficiency);
  const double memory  = bytes / memory_bandwidth_;
  const double time    = std::max(compute, memory);
  out.bound            = time < floor_       ? KernelBound::launch_floor
                         : compute >= memory ? KernelBound::compute
                                             : KernelBound::memory;
  out.seconds          = overhead_ + std::max(floor_, time);
  out.efficiency       = flop / (out.seconds * p);
  return out;
}

double KernelModel::other(double flop, double bytes, Dtype dtype) const
{
  const double compute = flop > 0 ? flop / (peak(dtype) * compute_efficiency_) : 0.0;
  return overhead_ + std::max(floor_, std::max(compute, bytes / memory_bandwidth_));
}

namespace {

void check_dims(std::initializer_list<double> dims)
{
  for (double d : dims)
    if (!(d >= 1) || !std::isfinite(d))
      throw std::invalid_argument("every dimension must be a number >= 1");
}

} // namespace

GemmEstimate estimate_gemm(const CalibrationProfile& profile, const GemmDims& dims, Dtype dtype)
{
  check_dims({dims.m, dims.n, dims.k, dims.batch});
  if (auto model = KernelModel::from_profile(profile))
    return model->gemm(dims, dtype);
  // The flat roofline of a profile without gemm_tiles.
  GemmEstimate e;
  const double peak = profile.sustained_peak(dtype);
  if (peak <= 0)
    throw CalibrationError("calibration profile '" + profile.name + "' has no peak_flops_" +
                           std::string(dtype_table.name(dtype)) + " for this dtype");
  const double bandwidth = profile.value("memory_bandwidth") * optional_value(profile, "memory_efficiency", 1.0);
  e.flop                 = 2 * dims.m * dims.n * dims.k * dims.batch;
  e.compute_s            = e.flop / (peak * optional_value(profile, "compute_efficiency", 1.0));
  e.memory_s = dtype_bytes(dtype) * dims.batch * (dims.m * dims.k + dims.k * dims.n + dims.m * dims.n) / bandwidth;
  const double floor = optional_value(profile, "kernel_launch_floor", 0.0);
  const double time  = std::max(e.compute_s, e.memory_s);
  e.bound            = time < floor                ? KernelBound::launch_floor
                       : e.compute_s >= e.memory_s ? KernelBound::compute
                                                   : KernelBound::memory;
  e.seconds          = optional_value(profile, "kernel_overhead", 0.0) + std::max(floor, time);
  e.efficiency       = e.flop / (e.seconds * peak);
  return e;
}

AttentionEstimate estimate_attention(const CalibrationProfile& profile, const AttentionDims& dims, Dtype dtype)
{
  check_dims({dims.heads, dims.q, dims.kv, dims.head_dim});
  const double flop =
      4 * dims.heads * dims.q * dims.kv * dims.head_dim * (dims.causal ? 0.5 : 1.0) * (dims.backward ? 2.5 : 1.0);
  const double bytes =
      dtype_bytes(dtype) * dims.heads * dims.head_dim * (2 * dims.q + 2 * dims.kv) * (dims.backward ? 2.0 : 1.0);
  std::optional<KernelModel> model = KernelModel::from_profile(profile);
  if (!model)
    throw CalibrationError("calibration profile '" + profile.name +
                           "' has no shape-aware kernel model (gemm_tiles and its parameters)");
  return model->attention(dims, flop, bytes, dtype);
}

} // namespace ddlsim::calibration
