#include "calibration/KernelTable.hpp"

#include "common/Statistics.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
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
  if (op == "gemm") {
    const std::vector<double> grid_errors = GemmGrid(table.shapes).held_out_errors();
    if (!grid_errors.empty()) {
      table.grid_held_out_error = median(grid_errors);
      table.max_grid_held_out_error = *std::max_element(grid_errors.begin(), grid_errors.end());
    }
  }
  return table;
}

bool parse_gemm_shape(const std::string& key, long long& m, long long& n, long long& k, long long& batch)
{
  int used = 0;
  return std::sscanf(key.c_str(), "m=%lld n=%lld k=%lld batch=%lld%n", &m, &n, &k, &batch, &used) == 4 &&
         static_cast<std::size_t>(used) == key.size() && m > 0 && n > 0 && k > 0 && batch > 0;
}

GemmGrid::GemmGrid(const std::map<std::string, double>& shapes)
{
  std::set<double> values[3];
  for (const auto& [key, seconds] : shapes) {
    long long m = 0, n = 0, k = 0, batch = 0;
    if (!parse_gemm_shape(key, m, n, k, batch) || batch != 1 || !(seconds > 0))
      continue;
    times_[{m, n, k}] = seconds;
    values[0].insert(static_cast<double>(m));
    values[1].insert(static_cast<double>(n));
    values[2].insert(static_cast<double>(k));
  }
  for (int a = 0; a < 3; ++a)
    axis_[a].assign(values[a].begin(), values[a].end());
}

double GemmGrid::at(std::size_t i, std::size_t j, std::size_t l) const
{
  auto it = times_.find({static_cast<long long>(axis_[0][i]), static_cast<long long>(axis_[1][j]), static_cast<long long>(axis_[2][l])});
  return it == times_.end() ? -1.0 : it->second;
}

double GemmGrid::seconds(double m, double n, double k) const
{
  if (times_.empty())
    return -1.0;
  const double q[3] = {m, n, k};
  std::size_t lo[3];
  double f[3];
  for (int a = 0; a < 3; ++a) {
    const auto& ax = axis_[a];
    if (q[a] < ax.front() || q[a] > ax.back())
      return -1.0;
    std::size_t hi = static_cast<std::size_t>(std::lower_bound(ax.begin(), ax.end(), q[a]) - ax.begin());
    if (ax[hi] == q[a]) {  // on a grid value: no interpolation along this axis
      lo[a] = hi;
      f[a] = 0;
      continue;
    }
    lo[a] = hi - 1;
    f[a] = std::log(q[a] / ax[lo[a]]) / std::log(ax[hi] / ax[lo[a]]);
  }
  double log_t = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double weight = 1;
    std::size_t idx[3];
    for (int a = 0; a < 3; ++a) {
      const bool upper = (corner >> a) & 1;
      weight *= upper ? f[a] : 1 - f[a];
      idx[a] = lo[a] + (upper ? 1 : 0);
    }
    if (weight == 0)
      continue;
    const double t = at(idx[0], idx[1], idx[2]);
    if (t <= 0)
      return -1.0;  // a corner was not measured
    log_t += weight * std::log(t);
  }
  return std::exp(log_t);
}

std::vector<double> GemmGrid::held_out_errors() const
{
  std::vector<double> errors;
  for (const auto& [shape, seconds] : times_) {
    for (int a = 0; a < 3; ++a) {
      const auto& ax = axis_[a];
      const double v = static_cast<double>(shape[static_cast<std::size_t>(a)]);
      const std::size_t i = static_cast<std::size_t>(std::lower_bound(ax.begin(), ax.end(), v) - ax.begin());
      if (i == 0 || i + 1 >= ax.size())
        continue;
      std::array<long long, 3> below = shape, above = shape;
      below[static_cast<std::size_t>(a)] = static_cast<long long>(ax[i - 1]);
      above[static_cast<std::size_t>(a)] = static_cast<long long>(ax[i + 1]);
      auto b = times_.find(below), c = times_.find(above);
      if (b == times_.end() || c == times_.end())
        continue;
      const double f = std::log(v / ax[i - 1]) / std::log(ax[i + 1] / ax[i - 1]);
      const double predicted = b->second * std::pow(c->second / b->second, f);
      errors.push_back(std::abs(predicted - seconds) / seconds);
    }
  }
  return errors;
}

}  // namespace ddlsim::calibration
