#include "models/Partition.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace ddlsim::models {

std::vector<StageRange> partition_min_max(const std::vector<double>& costs, int stages)
{
  const std::size_t n = costs.size();
  if (stages < 1 || static_cast<std::size_t>(stages) > n)
    throw std::invalid_argument("cannot split " + std::to_string(n) + " layers into " + std::to_string(stages) +
                                " non-empty stages");
  const auto k_count = static_cast<std::size_t>(stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];

  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: smallest possible slowest-stage cost when the first i layers form k stages.
  std::vector<std::vector<double>> best(k_count + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(k_count + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t k = 1; k <= k_count; ++k)
    for (std::size_t i = k; i <= n - (k_count - k); ++i)
      for (std::size_t j = k - 1; j < i; ++j) {
        double candidate = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (candidate < best[k][i]) {
          best[k][i] = candidate;
          cut[k][i] = j;
        }
      }

  std::vector<StageRange> ranges(k_count);
  std::size_t end = n;
  for (std::size_t k = k_count; k >= 1; --k) {
    ranges[k - 1] = {cut[k][end], end};
    end = cut[k][end];
  }
  return ranges;
}

}  // namespace ddlsim::models
