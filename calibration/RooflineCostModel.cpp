#include "calibration/RooflineCostModel.hpp"

#include "calibration/EagerFit.hpp"
#include "common/Error.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <cstdio>

namespace ddlsim::calibration {
namespace {
double optional_value(const CalibrationProfile& p, const std::string& name, double fallback)
{
  const Parameter* param = p.find(name);
  return param ? param->value : fallback;
}
}  // namespace

RooflineCostModel::RooflineCostModel(const CalibrationProfile& profile) : profile_name_(profile.name)
{
  const double compute_eff = optional_value(profile, "compute_efficiency", 1.0);
  bool any_peak = false;
  for (const auto& entry : dtype_table.entries) {
    double peak = profile.sustained_peak(entry.value);
    flop_rate_[static_cast<std::size_t>(entry.value)] = peak * compute_eff;
    unaligned_rate_[static_cast<std::size_t>(entry.value)] = peak * optional_value(profile, "gemm_unaligned_efficiency", 0.0);
    any_peak = any_peak || peak > 0;
  }
  if (!any_peak)
    throw CalibrationError("calibration profile '" + profile.name + "' has no peak_flops_<dtype> parameter");
  memory_bandwidth_ = profile.value("memory_bandwidth") * optional_value(profile, "memory_efficiency", 1.0);
  overhead_ = optional_value(profile, "kernel_overhead", 0.0);
  floor_ = optional_value(profile, "kernel_launch_floor", 0.0);
  for (std::size_t a = 1; a < memory_access_count; ++a)
    access_efficiency_[a] = optional_value(
        profile, std::string("memory_efficiency_") + memory_access_name(static_cast<MemoryAccess>(a)), 1.0);
  kernels_ = KernelModel::from_profile(profile);
}

double RooflineCostModel::effective_flop_rate(Dtype dtype) const
{
  double rate = flop_rate_[static_cast<std::size_t>(dtype)];
  if (rate <= 0)
    throw CalibrationError("calibration profile '" + profile_name_ + "' has no peak_flops_" +
                           std::string(dtype_table.name(dtype)) + " for this dtype");
  return rate;
}

KernelWork RooflineCostModel::as_contiguous(const KernelWork& work) const
{
  KernelWork w = work;
  w.bytes /= access_efficiency_[static_cast<std::size_t>(work.access)];
  w.access = MemoryAccess::contiguous;
  return w;
}

double RooflineCostModel::seconds(const KernelWork& work) const
{
  if (work.kind == WorkKind::memory && work.access != MemoryAccess::contiguous)
    return seconds(as_contiguous(work));
  if (work.unaligned && work.flop > 0 && unaligned_rate_[static_cast<std::size_t>(work.dtype)] > 0)
    return std::max(floor_, work.flop / unaligned_rate_[static_cast<std::size_t>(work.dtype)]);
  if (kernels_) {
    const bool gemm_like =
        work.kind == WorkKind::gemm || work.kind == WorkKind::batched_gemm || work.kind == WorkKind::conv2d;
    if (gemm_like && work.gemm.m > 0 && work.flop > 0)
      return kernels_->gemm(work.gemm, work.dtype, work.bytes).seconds;
    if (work.kind == WorkKind::attention && work.flop > 0)
      return kernels_->attention(work.attention, work.flop, work.bytes, work.dtype).seconds;
  }
  const double compute = work.flop > 0 ? work.flop / effective_flop_rate(work.dtype) : 0.0;
  const double memory = work.bytes / memory_bandwidth_;
  return overhead_ + std::max(floor_, std::max(compute, memory));
}

std::string RooflineCostModel::describe() const
{
  std::string text =
      fmt::format("roofline({}: bf16 {:.4g} flop/s effective, memory {:.4g} B/s effective, overhead {:.3g} s)",
                  profile_name_, flop_rate_[static_cast<std::size_t>(Dtype::bf16)], memory_bandwidth_, overhead_);
  if (!kernels_)
    return text;
  return text + fmt::format(" + shape-aware kernels({} SMs, {} GEMM tiles)", kernels_->sm_count(), kernels_->tiles().size());
}

}  // namespace ddlsim::calibration
