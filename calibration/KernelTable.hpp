// Measured lookup tables: the time of one op (GEMM, convolution, memory-bound kernel, copy) as a
// function of its work, from microbenchmarks, interpolated in log space.
//
// A table holds, for one op and dtype, points (work, seconds) sorted by work: work is the flop of
// compute ops (gemm, batched_gemm, conv2d) and the bytes moved of memory ops (pointwise, copies).
// Between two points the time is interpolated linearly in (log work, log seconds), so a kernel whose
// time grows as work^p between them is reproduced exactly; outside the table the cost model falls
// back to the roofline fit (TableCostModel.hpp), because extrapolating a table's last slope would
// carry launch-bound behaviour into compute-bound sizes.
//
//   KernelTable t = fit_kernel_table("gemm", "bf16", samples);   // samples: {work, seconds} per run
//   double s = t.covers(2e12) ? t.seconds(2e12) : roofline(...);
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::calibration {

struct WorkTime {
  double work = 0;  ///< flop or bytes, > 0
  double seconds = 0;
  std::string shape{};  ///< shape key of the measured kernel (BenchPoint::shape_key), may be empty
};

struct KernelTable {
  std::string op;     ///< gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h
  std::string dtype;  ///< fp32, tf32, fp16, bf16 for compute ops; empty for memory ops (any dtype)
  std::string source; ///< the trace files it was fitted from
  std::vector<WorkTime> points;  ///< sorted by work, distinct work values, seconds > 0 (shapes merged)
  /// Median seconds of each measured shape: a kernel of exactly that shape gets its own time, since
  /// shapes of equal flop differ (a 4 x 1024 x 1024 GEMM streams its weights; a 256 x 256 x 64 one
  /// computes). Empty for memory ops.
  std::map<std::string, double> shapes;
  double held_out_error = -1;    ///< median relative error predicting every other point; -1 when too few
  double max_held_out_error = -1;
  /// GEMM tables whose shapes form a grid (GemmGrid): median and largest relative error predicting
  /// each interior grid shape from its two neighbours along each axis; -1 without a grid.
  double grid_held_out_error = -1;
  double max_grid_held_out_error = -1;

  /// "flop" for compute ops, "bytes" for memory ops: what `work` counts.
  const char* work_unit() const;
  bool covers(double work) const { return !points.empty() && work >= points.front().work && work <= points.back().work; }
  /// Seconds at `work` by log-log interpolation (the end point's time outside the table).
  double seconds(double work) const;
};

/// GEMM shapes measured on a grid (m, n and k values with every combination measured, batch 1), and
/// the time of a shape between grid values by trilinear interpolation of log time in (log m, log n,
/// log k): a kernel whose time is a power law of m, n and k within a grid cell is reproduced
/// exactly. This is what prices a GEMM whose exact shape was not measured, before the flop table.
class GemmGrid {
public:
  /// From a table's `shapes` ("m=4 n=1024 k=1024 batch=1" keys; other keys are ignored).
  explicit GemmGrid(const std::map<std::string, double>& shapes);
  /// Seconds of (m, n, k) when it lies within the grid and the eight measured shapes around it
  /// exist; -1 otherwise.
  double seconds(double m, double n, double k) const;
  /// Relative errors of predicting each measured shape that has measured neighbours on both sides
  /// along an axis from those two (one error per such shape and axis).
  std::vector<double> held_out_errors() const;
  bool empty() const { return times_.empty(); }

private:
  std::vector<double> axis_[3];                          // sorted distinct m, n, k values
  std::map<std::array<long long, 3>, double> times_;     // measured (m, n, k) -> seconds
  double at(std::size_t i, std::size_t j, std::size_t l) const;
};

/// Parses a GEMM shape key ("m=4 n=1024 k=1024 batch=1"); false when `key` is not one.
bool parse_gemm_shape(const std::string& key, long long& m, long long& n, long long& k, long long& batch);

/// True for ops whose work is flop (gemm, batched_gemm, conv2d); false for memory ops.
bool is_compute_op(const std::string& op);

/// A table from measured (work, seconds) samples: the median time at each distinct work value
/// (several shapes or runs with the same work merge), the median time of each shape, and the
/// held-out error of interpolating
/// every other point from its neighbours. Throws std::invalid_argument with fewer than 2 distinct
/// work values, or a sample with work or seconds <= 0.
KernelTable fit_kernel_table(const std::string& op, const std::string& dtype, std::vector<WorkTime> samples);

}  // namespace ddlsim::calibration
