#include "calibration/Fitter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

double squared_relative_error(const AlphaBetaFit& f, std::span<const SizeTime> points)
{
  double sum = 0;
  for (const auto& p : points) {
    const double e = (f.seconds(p.bytes) - p.seconds) / p.seconds;
    sum += e * e;
  }
  return sum;
}

}  // namespace

AlphaBetaFit fit_alpha_beta(std::span<const SizeTime> points)
{
  if (points.size() < 2)
    throw std::invalid_argument("an alpha-beta fit needs at least two points");
  // Weighted least squares of t = a + b S with weights 1/t^2 (relative errors).
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    if (!(p.seconds > 0) || !(p.bytes >= 0))
      throw std::invalid_argument("alpha-beta points need positive times and non-negative sizes");
    const double w = 1.0 / (p.seconds * p.seconds);
    sw += w;
    sx += w * p.bytes;
    sy += w * p.seconds;
    sxx += w * p.bytes * p.bytes;
    sxy += w * p.bytes * p.seconds;
  }
  const double det = sw * sxx - sx * sx;
  if (!(det > 0))
    throw std::invalid_argument("an alpha-beta fit needs at least two different sizes");
  double b = (sw * sxy - sx * sy) / det;
  double a = (sy - b * sx) / sw;
  if (a < 0) {  // a negative latency is not physical: refit the slope through the origin
    a = 0;
    b = sxy / sxx;
  }
  AlphaBetaFit f;
  f.alpha_s = a;
  f.bandwidth = b > 0 ? 1.0 / b : 0.0;
  f.points = static_cast<int>(points.size());
  f.min_bytes = std::numeric_limits<double>::infinity();
  const double mean = sy / sw;
  double ss_res = 0, ss_tot = 0;
  for (const auto& p : points) {
    const double w = 1.0 / (p.seconds * p.seconds);
    const double predicted = f.seconds(p.bytes);
    ss_res += w * (p.seconds - predicted) * (p.seconds - predicted);
    ss_tot += w * (p.seconds - mean) * (p.seconds - mean);
    f.max_relative_error = std::max(f.max_relative_error, std::abs(predicted - p.seconds) / p.seconds);
    f.min_bytes = std::min(f.min_bytes, p.bytes);
    f.max_bytes = std::max(f.max_bytes, p.bytes);
  }
  f.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1.0;
  return f;
}

std::vector<AlphaBetaFit> fit_regimes(std::vector<SizeTime> points, int max_regimes, int min_points)
{
  std::sort(points.begin(), points.end(), [](const SizeTime& a, const SizeTime& b) { return a.bytes < b.bytes; });
  const auto n = static_cast<int>(points.size());
  min_points = std::max(min_points, 2);
  if (n < min_points)
    throw std::invalid_argument("too few points to fit (" + std::to_string(n) + ")");
  auto span_of = [&](int i, int j) { return std::span<const SizeTime>(points.data() + i, static_cast<std::size_t>(j - i)); };
  // cost[i][j]: squared relative error of one fit over points [i, j); infinite when not fittable.
  // Computed once: the DP below reads each entry for every regime count.
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> cost_table(static_cast<std::size_t>(n + 1), std::vector<double>(static_cast<std::size_t>(n + 1), inf));
  for (int i = 0; i < n; ++i)
    for (int j = i + min_points; j <= n; ++j) {
      if (span_of(i, j).front().bytes == span_of(i, j).back().bytes)
        continue;
      try {
        cost_table[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
            squared_relative_error(fit_alpha_beta(span_of(i, j)), span_of(i, j));
      } catch (const std::invalid_argument&) {
      }
    }
  auto cost = [&](int i, int j) { return cost_table[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]; };
  const int regimes = std::max(1, max_regimes);
  // best[r][j]: least error of the first j points in r regimes.
  std::vector<std::vector<double>> best(static_cast<std::size_t>(regimes + 1), std::vector<double>(static_cast<std::size_t>(n + 1), inf));
  std::vector<std::vector<int>> cut(best.size(), std::vector<int>(static_cast<std::size_t>(n + 1), 0));
  best[0][0] = 0;
  for (int r = 1; r <= regimes; ++r)
    for (int j = 1; j <= n; ++j)
      for (int i = 0; i < j; ++i) {
        if (best[static_cast<std::size_t>(r - 1)][static_cast<std::size_t>(i)] == inf)
          continue;
        const double c = best[static_cast<std::size_t>(r - 1)][static_cast<std::size_t>(i)] + cost(i, j);
        if (c < best[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)]) {
          best[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)] = c;
          cut[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)] = i;
        }
      }
  // The number of regimes by the Bayesian information criterion: a regime (two coefficients and a
  // break) must pay for itself, so measurement noise does not split a regime.
  int chosen = 0;
  double chosen_score = inf;
  const double points_n = n;
  for (int r = 1; r <= regimes; ++r) {
    const double sse = best[static_cast<std::size_t>(r)][static_cast<std::size_t>(n)];
    if (sse == inf)
      continue;
    const double score = points_n * std::log(sse / points_n + 1e-12) + 3.0 * r * std::log(points_n);
    if (score < chosen_score) {
      chosen_score = score;
      chosen = r;
    }
  }
  if (chosen == 0)
    throw std::invalid_argument("the points cannot be fitted (sizes all equal?)");
  std::vector<AlphaBetaFit> fits(static_cast<std::size_t>(chosen));
  int end = n;
  for (int r = chosen; r >= 1; --r) {
    const int begin = cut[static_cast<std::size_t>(r)][static_cast<std::size_t>(end)];
    fits[static_cast<std::size_t>(r - 1)] = fit_alpha_beta(span_of(begin, end));
    end = begin;
  }
  return fits;
}

double held_out_error(std::vector<SizeTime> points, int max_regimes, int min_points)
{
  std::sort(points.begin(), points.end(), [](const SizeTime& a, const SizeTime& b) { return a.bytes < b.bytes; });
  std::vector<SizeTime> train, test;
  for (std::size_t i = 0; i < points.size(); ++i)
    (i % 2 == 0 ? train : test).push_back(points[i]);
  if (test.empty())
    return 0;
  const auto fits = fit_regimes(train, max_regimes, min_points);
  std::vector<double> errors;
  for (const auto& p : test) {
    const AlphaBetaFit* f = &fits.front();
    for (const auto& candidate : fits)
      if (p.bytes >= candidate.min_bytes)
        f = &candidate;
    errors.push_back(std::abs(f->seconds(p.bytes) - p.seconds) / p.seconds);
  }
  std::sort(errors.begin(), errors.end());
  return errors[errors.size() / 2];
}

RooflineFit fit_roofline(std::span<const KernelSample> samples, double memory_bandwidth)
{
  if (samples.size() < 3 || !(memory_bandwidth > 0))
    throw std::invalid_argument("a roofline fit needs at least three kernels and a memory bandwidth");
  for (const auto& k : samples)
    if (!(k.seconds > 0) || k.flop < 0 || k.bytes < 0 || (k.flop > 0 && !(k.peak_flops > 0)))
      throw std::invalid_argument("roofline samples need positive times and a peak rate for their flop");
  // Unknowns x = (overhead, 1/compute_efficiency, 1/memory_efficiency); with each kernel's bound
  // fixed, t = x0 + x1 c or t = x0 + x2 m is linear (c = flop/peak, m = bytes/bandwidth).
  double a = 1 / 0.7, b = 1 / 0.8, o = 0;
  std::vector<bool> compute(samples.size(), false);
  for (int iteration = 0; iteration < 100; ++iteration) {
    bool changed = iteration == 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double c = samples[i].flop > 0 ? samples[i].flop / samples[i].peak_flops : 0.0;
      const double m = samples[i].bytes / memory_bandwidth;
      const bool is_compute = a * c >= b * m;
      changed = changed || is_compute != compute[i];
      compute[i] = is_compute;
    }
    if (!changed)
      break;
    // Normal equations of the weighted problem (weights 1/t^2), 3 x 3.
    double n[3][3] = {}, r[3] = {};
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double w = 1 / (samples[i].seconds * samples[i].seconds);
      const double row[3] = {1.0, compute[i] ? samples[i].flop / samples[i].peak_flops : 0.0,
                             compute[i] ? 0.0 : samples[i].bytes / memory_bandwidth};
      for (int p = 0; p < 3; ++p) {
        r[p] += w * row[p] * samples[i].seconds;
        for (int q = 0; q < 3; ++q)
          n[p][q] += w * row[p] * row[q];
      }
    }
    // Solve by Gaussian elimination; a class with no kernel leaves its coefficient undetermined.
    if (n[1][1] <= 0 || n[2][2] <= 0)
      throw std::invalid_argument("the roofline fit needs both compute-bound and memory-bound kernels");
    double x[3];
    for (int p = 0; p < 3; ++p)
      for (int q = p + 1; q < 3; ++q) {
        const double f = n[q][p] / n[p][p];
        for (int k = p; k < 3; ++k)
          n[q][k] -= f * n[p][k];
        r[q] -= f * r[p];
      }
    for (int p = 2; p >= 0; --p) {
      x[p] = r[p];
      for (int k = p + 1; k < 3; ++k)
        x[p] -= n[p][k] * x[k];
      x[p] /= n[p][p];
    }
    o = std::max(0.0, x[0]);
    a = x[1];
    b = x[2];
    if (!(a > 0) || !(b > 0))
      throw std::invalid_argument("the roofline fit found no positive efficiency");
  }
  RooflineFit fit{.compute_efficiency = 1 / a, .memory_efficiency = 1 / b, .overhead_s = o};
  double mean = 0, wsum = 0;
  for (const auto& k : samples) {
    const double w = 1 / (k.seconds * k.seconds);
    mean += w * k.seconds;
    wsum += w;
  }
  mean /= wsum;
  double ss_res = 0, ss_tot = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& k = samples[i];
    const double predicted = o + std::max(k.flop > 0 ? a * k.flop / k.peak_flops : 0.0, b * k.bytes / memory_bandwidth);
    const double w = 1 / (k.seconds * k.seconds);
    ss_res += w * (k.seconds - predicted) * (k.seconds - predicted);
    ss_tot += w * (k.seconds - mean) * (k.seconds - mean);
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(predicted - k.seconds) / k.seconds);
    (compute[i] ? fit.compute_bound : fit.memory_bound)++;
  }
  fit.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1.0;
  return fit;
}

}  // namespace ddlsim::calibration
