// Roofline cost model: a kernel is limited either by arithmetic or by memory traffic.
//
//   seconds = kernel_overhead + max( flop / (peak_flops_<dtype> * compute_efficiency),
//                                   bytes / (memory_bandwidth * memory_efficiency) )
//
// Constants come from a CalibrationProfile (spec-sheet values for an analytic profile; fitted ones
// once calibration has run). compute_efficiency and memory_efficiency default to 1, kernel_overhead to 0.
//
// When the profile lists `gemm_tiles`, work that knows its shape is priced by the shape-aware model
// instead of one flat efficiency (KernelModel.hpp): GEMMs and convolutions by tile and wave
// quantization over the SMs, fused attention by head dimension and sequence, and every kernel at
// least the profile's kernel_launch_floor. Work without a shape keeps the formula above (with the floor).
// A GEMM with an unaligned leading dimension (KernelWork::unaligned) runs at peak x
// gemm_unaligned_efficiency where the profile has it, and memory-bound work of a slower access
// (KernelWork::access) as if it moved bytes / memory_efficiency_<access>.
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/KernelModel.hpp"
#include "calibration/Profile.hpp"

#include <array>
#include <optional>

namespace ddlsim::calibration {

class RooflineCostModel : public CostModel {
public:
  /// Throws CalibrationError when the profile has no memory_bandwidth or no peak rate at all.
  explicit RooflineCostModel(const CalibrationProfile& profile);

  double seconds(const KernelWork& work) const override;
  std::string describe() const override;

  /// Effective rate for a dtype (peak x efficiency), flop/s; throws CalibrationError when the profile has no peak for it.
  double effective_flop_rate(Dtype dtype) const;
  double effective_memory_bandwidth() const { return memory_bandwidth_; }
  /// Memory-bound work of a slower access (KernelWork::access) as the contiguous kernel that takes as long:
  /// its bytes over the profile's memory_efficiency_<access>.
  KernelWork as_contiguous(const KernelWork& work) const;
  /// True when the profile prices GEMMs with an unaligned leading dimension (gemm_unaligned_efficiency).
  bool prices_unaligned(Dtype dtype) const { return unaligned_rate_[static_cast<std::size_t>(dtype)] > 0; }
  /// The shape-aware model, when the profile describes one.
  const std::optional<KernelModel>& kernel_model() const { return kernels_; }

private:
  std::string profile_name_;
  std::array<double, 5> flop_rate_{};  // by Dtype; 0 = not in the profile
  std::array<double, memory_access_count> access_efficiency_{1, 1, 1, 1, 1, 1};  // memory_efficiency_<access>
  std::array<double, 5> unaligned_rate_{};  // by Dtype: peak x gemm_unaligned_efficiency; 0 = not priced apart
  double memory_bandwidth_ = 0;
  double overhead_ = 0;
  double floor_ = 0;
  std::optional<KernelModel> kernels_;
};

}  // namespace ddlsim::calibration
