// Fitting measured collective times into alpha-beta models per size regime.
//
// A collective of S bytes takes t = alpha + S / bandwidth within one regime (NCCL changes protocol
// and algorithm with size: LL for small messages, LL128, then Simple), so the sizes are split into
// at most three contiguous regimes, chosen to minimise the squared relative error of the fit; the
// number of regimes is chosen by the Bayesian information criterion, so noise does not add one.
// Each regime is fitted by weighted least squares on the relative error (weights 1/t^2), so that
// an 8-byte point counts as much as a 1-GiB one.
//
//   std::vector<SizeTime> points = {{1024, 12.5e-6}, {1 << 20, 30e-6}, ...};
//   std::vector<AlphaBetaFit> regimes = fit_regimes(points);
#pragma once

#include <span>
#include <vector>

namespace ddlsim::calibration {

struct SizeTime {
  double bytes = 0;
  double seconds = 0;
};

struct AlphaBetaFit {
  double alpha_s = 0;          ///< latency term
  double bandwidth = 0;        ///< B/s (infinite when the time does not grow with size)
  double min_bytes = 0;        ///< the regime's smallest and largest measured sizes
  double max_bytes = 0;
  int points = 0;
  double r2 = 0;               ///< weighted coefficient of determination
  double max_relative_error = 0;
  double seconds(double bytes) const { return alpha_s + (bandwidth > 0 ? bytes / bandwidth : 0.0); }
};

/// One alpha-beta line through `points` (at least 2, sizes not all equal). Throws
/// std::invalid_argument otherwise. Alpha is clamped at 0.
AlphaBetaFit fit_alpha_beta(std::span<const SizeTime> points);

/// Contiguous size regimes (at most `max_regimes`, each with at least `min_points` points) whose
/// alpha-beta fits minimise the total squared relative error. Points are sorted by size first.
std::vector<AlphaBetaFit> fit_regimes(std::vector<SizeTime> points, int max_regimes = 3, int min_points = 3);

/// Median relative error on held-out points: fit on every other point (by size), predict the rest.
double held_out_error(std::vector<SizeTime> points, int max_regimes = 3, int min_points = 3);

/// A measured kernel for the roofline fit: its work and time. `peak_flops` is the peak rate of
/// its dtype on this GPU (from the base profile).
struct KernelSample {
  double flop = 0;
  double bytes = 0;
  double peak_flops = 0;
  double seconds = 0;
};

struct RooflineFit {
  double compute_efficiency = 0;  ///< share of the peak rate compute-bound kernels reach
  double memory_efficiency = 0;   ///< share of the memory bandwidth memory-bound kernels reach
  double overhead_s = 0;          ///< fixed time per kernel
  int compute_bound = 0;          ///< kernels the fit classes as compute-bound
  int memory_bound = 0;
  double r2 = 0;
  double max_relative_error = 0;
};

/// Fits t = overhead + max(flop / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency))
/// by weighted least squares on the relative error, alternating between classing each kernel as
/// compute- or memory-bound and solving for the three constants. Needs kernels of both kinds.
/// Throws std::invalid_argument when the samples cannot determine them.
RooflineFit fit_roofline(std::span<const KernelSample> samples, double memory_bandwidth);

}  // namespace ddlsim::calibration
