#include "models/Partition.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace ddlsim::models {
namespace {

void check_sizes(std::size_t n, int stages)
{
  if (stages < 1 || static_cast<std::size_t>(stages) > n)
    throw std::invalid_argument("cannot split " + std::to_string(n) + " blocks into " + std::to_string(stages) +
                                " non-empty stages");
}

// Stage speeds: one positive value per stage, or all 1.
std::vector<double> stage_speeds(const std::vector<double>& speeds, int stages)
{
  if (speeds.empty())
    return std::vector<double>(static_cast<std::size_t>(stages), 1.0);
  if (speeds.size() != static_cast<std::size_t>(stages))
    throw std::invalid_argument("one speed per stage expected: " + std::to_string(speeds.size()) + " for " +
                                std::to_string(stages) + " stages");
  for (double v : speeds)
    if (!(v > 0))
      throw std::invalid_argument("stage speeds must be positive");
  return speeds;
}

std::vector<double> prefix_sums(const std::vector<double>& costs)
{
  std::vector<double> prefix(costs.size() + 1, 0.0);
  for (std::size_t i = 0; i < costs.size(); ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  return prefix;
}

}  // namespace

std::optional<std::vector<StageRange>> partition_optimal(const std::vector<double>& costs, int stages,
                                                         const StageFits& fits, const std::vector<double>& speeds)
{
  const std::size_t n = costs.size();
  check_sizes(n, stages);
  const auto k_count = static_cast<std::size_t>(stages);
  const std::vector<double> prefix = prefix_sums(costs);
  const std::vector<double> speed = stage_speeds(speeds, stages);

  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: smallest possible slowest-stage cost when the first i blocks form k stages that fit.
  std::vector<std::vector<double>> best(k_count + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(k_count + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t k = 1; k <= k_count; ++k)
    for (std::size_t i = k; i <= n - (k_count - k); ++i)
      for (std::size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == inf)
          continue;
        const double candidate = std::max(best[k - 1][j], (prefix[i] - prefix[j]) / speed[k - 1]);
        if (candidate < best[k][i] && (!fits || fits(static_cast<int>(k - 1), {j, i}))) {
          best[k][i] = candidate;
          cut[k][i] = j;
        }
      }
  if (best[k_count][n] == inf)
    return std::nullopt;

  std::vector<StageRange> ranges(k_count);
  std::size_t end = n;
  for (std::size_t k = k_count; k >= 1; --k) {
    ranges[k - 1] = {cut[k][end], end};
    end = cut[k][end];
  }
  return ranges;
}

std::optional<std::vector<StageRange>> partition_balanced(const std::vector<double>& costs, int stages,
                                                          const StageFits& fits, const std::vector<double>& speeds)
{
  const std::size_t n = costs.size();
  check_sizes(n, stages);
  const auto k_count = static_cast<std::size_t>(stages);
  const std::vector<double> prefix = prefix_sums(costs);
  const std::vector<double> speed = stage_speeds(speeds, stages);
  const std::vector<double> speed_prefix = prefix_sums(speed);
  std::vector<StageRange> ranges;
  std::size_t begin = 0;
  for (std::size_t k = 0; k + 1 < k_count; ++k) {
    // Leave at least one block for each later stage; cut nearest to the (k+1)/K share of the time.
    const std::size_t last_end = n - (k_count - k - 1);
    const double target = prefix[n] * speed_prefix[k + 1] / speed_prefix[k_count];
    std::size_t end = begin + 1;
    for (std::size_t e = begin + 1; e <= last_end; ++e)
      if (std::abs(prefix[e] - target) < std::abs(prefix[end] - target))
        end = e;
    while (fits && end > begin && !fits(static_cast<int>(k), {begin, end}))
      --end;
    if (end == begin)
      return std::nullopt;  // not even one block fits on this stage
    ranges.push_back({begin, end});
    begin = end;
  }
  ranges.push_back({begin, n});
  if (fits && !fits(stages - 1, ranges.back()))
    return std::nullopt;
  return ranges;
}

std::vector<StageRange> partition_uniform(std::size_t blocks, int stages)
{
  check_sizes(blocks, stages);
  const auto k_count = static_cast<std::size_t>(stages);
  std::vector<StageRange> ranges;
  std::size_t begin = 0;
  for (std::size_t k = 0; k < k_count; ++k) {
    const std::size_t size = blocks / k_count + (k < blocks % k_count ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

std::vector<StageRange> partition_from_balance(const std::vector<int>& balance, std::size_t blocks)
{
  std::vector<StageRange> ranges;
  std::size_t begin = 0;
  for (int count : balance) {
    if (count < 1)
      throw std::invalid_argument("every stage needs at least one block");
    ranges.push_back({begin, begin + static_cast<std::size_t>(count)});
    begin += static_cast<std::size_t>(count);
  }
  if (begin != blocks)
    throw std::invalid_argument("the balance gives " + std::to_string(begin) + " blocks but the model has " +
                                std::to_string(blocks));
  return ranges;
}

double slowest_stage(const std::vector<double>& costs, const std::vector<StageRange>& ranges,
                     const std::vector<double>& speeds)
{
  const std::vector<double> speed = stage_speeds(speeds, static_cast<int>(ranges.size()));
  double worst = 0;
  for (std::size_t k = 0; k < ranges.size(); ++k)
    worst = std::max(worst, std::accumulate(costs.begin() + static_cast<std::ptrdiff_t>(ranges[k].begin),
                                            costs.begin() + static_cast<std::ptrdiff_t>(ranges[k].end), 0.0) /
                                speed[k]);
  return worst;
}

}  // namespace ddlsim::models
