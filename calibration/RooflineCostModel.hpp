// Roofline cost model: a kernel is limited either by arithmetic or by memory traffic.
//
//   seconds = kernel_overhead + max( flop / (peak_flops_<dtype> * compute_efficiency),
//                                   bytes / (memory_bandwidth * memory_efficiency) )
//
// Constants come from a CalibrationProfile (spec-sheet values for an analytic profile; fitted ones
// once calibration has run). compute_efficiency and memory_efficiency default to 1, kernel_overhead to 0.
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/Profile.hpp"

#include <array>

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

private:
  std::string profile_name_;
  std::array<double, 5> flop_rate_{};  // by Dtype; 0 = not in the profile
  double memory_bandwidth_ = 0;
  double overhead_ = 0;
};

}  // namespace ddlsim::calibration
