// Cost model from measured lookup tables, with the roofline outside them.
//
// A GEMM or convolution whose exact shape was measured gets that shape's median time; a GEMM inside
// the measured (m, n, k) grid gets the grid's interpolation (GemmGrid). Otherwise, a kernel whose
// kind has a table in the profile (gemm, batched_gemm and conv2d by dtype, keyed by
// flop; memory-bound kernels by bytes, whatever their dtype) and whose work lies inside that table's
// measured range gets the table's log-log interpolated time. Everything else, including work beyond
// the largest or below the smallest measured point, gets the roofline time of the same profile (whose
// efficiencies `calibrate fit` fitted from the same records), so the model never extrapolates a table.
//
//   auto cost = make_cost_model(load_profile("my-h100.yaml"));   // tables when the profile has them
//   double t = cost->seconds({.flop = 2e12, .bytes = 5e7, .dtype = Dtype::bf16, .kind = WorkKind::gemm});
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/Profile.hpp"
#include "calibration/RooflineCostModel.hpp"

#include <array>
#include <memory>

namespace ddlsim::calibration {

class TableCostModel : public CostModel {
public:
  /// Uses the profile's kernel_tables for gemm, batched_gemm, conv2d and pointwise, and its roofline
  /// parameters for the rest. Throws CalibrationError as RooflineCostModel does.
  explicit TableCostModel(const CalibrationProfile& profile);

  double seconds(const KernelWork& work) const override;
  std::string describe() const override;

  /// The table that prices `work`, or nullptr when the roofline does (no table, or out of range).
  const KernelTable* table_for(const KernelWork& work) const;

private:
  RooflineCostModel roofline_;
  std::string profile_name_;
  std::vector<KernelTable> tables_;
  // Index into tables_ by (kind, dtype); -1 = none. Memory tables ignore the dtype.
  std::array<std::array<int, 5>, work_kind_count> index_{};
  std::vector<GemmGrid> grids_;  // per table (empty grids for non-GEMM tables)
};

/// The cost model a profile supports: TableCostModel when it has kernel tables, else the roofline.
std::unique_ptr<CostModel> make_cost_model(const CalibrationProfile& profile);

}  // namespace ddlsim::calibration
