// Splitting a model's layers into contiguous pipeline stages.
//
//   std::vector<double> cost = {1, 1, 2, 1, 1};
//   auto stages = partition_min_max(cost, 2);   // {[0,3), [3,5)}: slowest stage costs 4, the best possible
#pragma once

#include <cstddef>
#include <vector>

namespace ddlsim::models {

/// Layers [begin, end) of one pipeline stage.
struct StageRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool operator==(const StageRange&) const = default;
};

/// Contiguous partition of `costs` into `stages` non-empty ranges minimising the cost of the most
/// expensive range (exact dynamic programme, O(stages * n^2)). Ties go to the earliest split, so the
/// result is deterministic. Throws std::invalid_argument when stages < 1 or stages > costs.size().
std::vector<StageRange> partition_min_max(const std::vector<double>& costs, int stages);

}  // namespace ddlsim::models
