// The cost-model interface: how long one GPU takes for a unit of compute work.
//
// The simulator asks a CostModel for the duration of every compute op; implementations are the
// roofline model below (spec-sheet or fitted constants) and, later, measured lookup tables.
//
//   RooflineCostModel gpu(load_profile("h100-sxm"));
//   double t = gpu.seconds({.flop = 2.0 * 4096 * 4096 * 4096, .bytes = 3 * 4096.0 * 4096 * 2, .dtype = Dtype::bf16});
#pragma once

#include "common/Dtype.hpp"

#include <string>

namespace ddlsim::calibration {

/// Work of one layer pass (or a fused group of kernels) on one GPU.
struct KernelWork {
  double flop = 0;   ///< floating-point operations
  double bytes = 0;  ///< bytes moved to and from device memory
  Dtype dtype = Dtype::fp32;
};

class CostModel {
public:
  virtual ~CostModel() = default;
  /// Seconds one GPU needs for `work` (>= 0). Throws CalibrationError when the profile lacks what
  /// this work needs (e.g. no peak rate for its dtype).
  virtual double seconds(const KernelWork& work) const = 0;
  /// One line saying what the model is, for logs and CSV provenance.
  virtual std::string describe() const = 0;
};

}  // namespace ddlsim::calibration
