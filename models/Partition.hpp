// Splitting a model's blocks into contiguous pipeline stages.
//
// Four ways, as pipeline libraries offer them:
//   explicit   `balance: [..]`, blocks per stage, as torchgpipe's GPipe(balance=...) takes
//   uniform    the same number of blocks per stage (torchgpipe's balance_by_count baseline)
//   balanced   greedy cuts where the running compute time crosses k/K of the total (the quick
//              balance_by_time heuristic), moving a cut earlier when the stage would not fit
//   optimal    exact dynamic programme minimising the slowest stage among partitions whose every
//              stage fits in memory (PipeDream's planner without replication), O(K n^2)
// The optional `fits(stage, blocks)` predicate is the memory constraint; explicit and uniform are
// checked against it by the caller (the point becomes oom), balanced and optimal avoid what does not fit.
// The optional `speeds` give each stage's GPU speed relative to the costs' (heterogeneous nodes,
// stragglers): stage k of blocks [i, j) then takes (prefix[j] - prefix[i]) / speeds[k], which optimal
// minimises the largest of and balanced cuts in proportion to (k-th cut at sum(speeds[0..k]) / sum(speeds)
// of the total).
//
//   std::vector<double> cost = {1, 1, 2, 1, 1};
//   auto stages = partition_optimal(cost, 2);    // {[0,2), [2,5)}: slowest stage costs 4, the best possible
#pragma once

#include "common/EnumTable.hpp"
#include "models/Model.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace ddlsim::models {

enum class Partitioner { optimal, balanced, uniform, explicit_balance };

inline constexpr EnumTable<Partitioner, 4> partitioner_table{{{
    {"optimal", Partitioner::optimal, "minimise the slowest stage's compute time, every stage fitting in memory (DP)"},
    {"balanced", Partitioner::balanced, "greedy cuts at equal shares of the compute time, moved earlier to fit memory"},
    {"uniform", Partitioner::uniform, "the same number of blocks per stage"},
    {"explicit", Partitioner::explicit_balance, "blocks per stage as given by parallelism.balance"},
}}};

/// fits(stage index, block range) -> does a device holding these blocks fit in memory?
using StageFits = std::function<bool(int, StageRange)>;

/// Exact min-max contiguous partition of `costs` into `stages` non-empty ranges, every range
/// satisfying `fits` (when given), stage k's time being its cost / speeds[k] (speeds empty: all 1).
/// Ties go to the earliest cut, so the result is deterministic. nullopt when no partition fits. Throws
/// std::invalid_argument when stages < 1 or stages > costs.size(), or speeds are neither empty nor
/// one positive value per stage.
std::optional<std::vector<StageRange>> partition_optimal(const std::vector<double>& costs, int stages,
                                                         const StageFits& fits = {},
                                                         const std::vector<double>& speeds = {});

/// Greedy time-balanced partition (see above); nullopt when it finds no cuts that fit.
std::optional<std::vector<StageRange>> partition_balanced(const std::vector<double>& costs, int stages,
                                                          const StageFits& fits = {},
                                                          const std::vector<double>& speeds = {});

/// `blocks` split into `stages` ranges whose sizes differ by at most one (larger ones first).
std::vector<StageRange> partition_uniform(std::size_t blocks, int stages);

/// Ranges from blocks-per-stage counts. Throws std::invalid_argument when a count is < 1 or the
/// counts do not add up to `blocks`.
std::vector<StageRange> partition_from_balance(const std::vector<int>& balance, std::size_t blocks);

/// Time of the slowest range: its cost / speeds[k] (speeds empty: all 1).
double slowest_stage(const std::vector<double>& costs, const std::vector<StageRange>& ranges,
                     const std::vector<double>& speeds = {});

}  // namespace ddlsim::models
