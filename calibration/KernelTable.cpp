#include "calibration/KernelTable.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

double interpolate(const std::vector<WorkTime>& points, double work)
{
  if (work <= points.front().work)
    return points.front().seconds;
  if (work >= points.back().work)
    return points.back().seconds;
  auto upper = std::upper_bound(points.begin(), points.end(), work,
                                [](double w, const WorkTime& p) { return w < p.work; });
  const WorkTime& hi = *upper;
  const WorkTime& lo = *(upper - 1);
  const double f = std::log(work / lo.work) / std::log(hi.work / lo.work);
  return lo.seconds * std::pow(hi.seconds / lo.seconds, f);
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

bool is_compute_op(const std::string& op) { return op == "gemm" || op == "batched_gemm" || op == "conv2d"; }

const char* KernelTable::work_unit() const { return is_compute_op(op) ? "flop" : "bytes"; }

double KernelTable::seconds(double work) const { return points.empty() ? 0.0 : interpolate(points, work); }

KernelTable fit_kernel_table(const std::string& op, const std::string& dtype, std::vector<WorkTime> samples)
{
  for (const WorkTime& s : samples)
    if (!(s.work > 0) || !(s.seconds > 0))
      throw std::invalid_argument("a " + op + " sample with work or time <= 0");
  std::sort(samples.begin(), samples.end(), [](const WorkTime& a, const WorkTime& b) { return a.work < b.work; });
  KernelTable table;
  table.op = op;
  table.dtype = dtype;
  std::map<std::string, std::vector<double>> by_shape;
  for (const WorkTime& s : samples)
    if (!s.shape.empty())
      by_shape[s.shape].push_back(s.seconds);
  for (auto& [shape, times] : by_shape)
    table.shapes[shape] = median(std::move(times));
  for (std::size_t i = 0; i < samples.size();) {
    std::size_t j = i;
    std::vector<double> times;
    for (; j < samples.size() && samples[j].work == samples[i].work; ++j)
      times.push_back(samples[j].seconds);
    table.points.push_back({samples[i].work, median(std::move(times)), {}});
    i = j;
  }
  if (table.points.size() < 2)
    throw std::invalid_argument(op + (dtype.empty() ? "" : " " + dtype) + ": needs at least 2 distinct work values");
  // Held out: predict each odd-indexed interior point from the even-indexed ones around it.
  std::vector<WorkTime> even;
  for (std::size_t i = 0; i < table.points.size(); i += 2)
    even.push_back(table.points[i]);
  std::vector<double> errors;
  for (std::size_t i = 1; i + 1 < table.points.size(); i += 2) {
    const WorkTime& p = table.points[i];
    errors.push_back(std::abs(interpolate(even, p.work) - p.seconds) / p.seconds);
  }
  if (errors.size() >= 2) {
    table.held_out_error = median(errors);
    table.max_held_out_error = *std::max_element(errors.begin(), errors.end());
  }
  return table;
}

}  // namespace ddlsim::calibration
