// The partitioners against brute force on random instances, with and without a memory limit.
#include "models/Partition.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>

using namespace ddlsim::models;

namespace {

// Every contiguous partition of n blocks into k stages (cuts as a bitmask over the n-1 gaps).
template <typename Visit> void each_partition(std::size_t n, int k, Visit visit)
{
  for (unsigned mask = 0; mask < (1u << (n - 1)); ++mask) {
    if (__builtin_popcount(mask) != k - 1)
      continue;
    std::vector<StageRange> ranges;
    std::size_t begin = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (i == n - 1 || (mask >> i) & 1u) {
        ranges.push_back({begin, i + 1});
        begin = i + 1;
      }
    visit(ranges);
  }
}

bool is_partition(const std::vector<StageRange>& ranges, std::size_t n, int k)
{
  if (ranges.size() != static_cast<std::size_t>(k) || ranges.front().begin != 0 || ranges.back().end != n)
    return false;
  for (std::size_t s = 0; s < ranges.size(); ++s)
    if (ranges[s].size() < 1 || (s > 0 && ranges[s].begin != ranges[s - 1].end))
      return false;
  return true;
}

}  // namespace

TEST_CASE("the optimal partition equals brute force on random instances, with and without memory limits")
{
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int> cost_of(1, 20);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 11;
    const int k = 1 + static_cast<int>(rng() % std::min<std::size_t>(n, 5));
    std::vector<double> costs(n), memory(n);
    for (std::size_t i = 0; i < n; ++i) {
      costs[i] = cost_of(rng);
      memory[i] = cost_of(rng);
    }
    // Memory limit: the sum of the blocks' memory, plus a per-stage term growing towards stage 0
    // (as 1F1B's K - s micro-batches do).
    const double cap = trial % 3 == 0 ? std::numeric_limits<double>::infinity() : 15.0 + static_cast<double>(rng() % 40);
    const StageFits fits = [&](int stage, StageRange r) {
      double m = 2.0 * (k - stage);
      for (std::size_t i = r.begin; i < r.end; ++i)
        m += memory[i];
      return m <= cap;
    };
    double best = std::numeric_limits<double>::infinity();
    each_partition(n, k, [&](const std::vector<StageRange>& ranges) {
      for (std::size_t s = 0; s < ranges.size(); ++s)
        if (!fits(static_cast<int>(s), ranges[s]))
          return;
      best = std::min(best, slowest_stage(costs, ranges));
    });
    CAPTURE(trial);
    const auto found = partition_optimal(costs, k, fits);
    if (best == std::numeric_limits<double>::infinity()) {
      CHECK_FALSE(found.has_value());
      continue;
    }
    REQUIRE(found.has_value());
    CHECK(is_partition(*found, n, k));
    for (std::size_t s = 0; s < found->size(); ++s)
      CHECK(fits(static_cast<int>(s), (*found)[s]));
    CHECK(slowest_stage(costs, *found) == best);

    // Never worse than the same number of blocks per stage, whenever that fits.
    const auto uniform = partition_uniform(n, k);
    CHECK(is_partition(uniform, n, k));
    bool uniform_fits = true;
    for (std::size_t s = 0; s < uniform.size(); ++s)
      uniform_fits = uniform_fits && fits(static_cast<int>(s), uniform[s]);
    if (uniform_fits)
      CHECK(slowest_stage(costs, *found) <= slowest_stage(costs, uniform));

    // The greedy heuristic gives a valid partition that fits, never better than the optimum.
    if (const auto greedy = partition_balanced(costs, k, fits)) {
      CHECK(is_partition(*greedy, n, k));
      for (std::size_t s = 0; s < greedy->size(); ++s)
        CHECK(fits(static_cast<int>(s), (*greedy)[s]));
      CHECK(slowest_stage(costs, *greedy) >= best);
    }
  }
}

TEST_CASE("ties go to the earliest cut; sizes are checked")
{
  const std::vector<double> costs{1, 1, 2, 1, 1};
  CHECK(*partition_optimal(costs, 2) == std::vector<StageRange>{{0, 2}, {2, 5}});  // {1,1 | 2,1,1} and {1,1,2 | 1,1} both cost 4
  CHECK(partition_uniform(5, 2) == std::vector<StageRange>{{0, 3}, {3, 5}});
  CHECK(partition_from_balance({2, 3}, 5) == std::vector<StageRange>{{0, 2}, {2, 5}});
  CHECK_THROWS_AS(partition_from_balance({2, 2}, 5), std::invalid_argument);
  CHECK_THROWS_AS(partition_from_balance({0, 5}, 5), std::invalid_argument);
  CHECK_THROWS_AS(partition_optimal(costs, 6), std::invalid_argument);
  CHECK_THROWS_AS(partition_optimal(costs, 0), std::invalid_argument);
  // The greedy cut lands nearest to each k/K share of the total time.
  CHECK(*partition_balanced({1, 1, 1, 1, 1, 1, 1, 1}, 4) ==
        std::vector<StageRange>{{0, 2}, {2, 4}, {4, 6}, {6, 8}});
}

TEST_CASE("stages on slower GPUs get less work: closed forms and brute force with speeds")
{
  // 12 blocks of 1 s on two stages, the second GPU at half speed: 8 + 4 blocks, both stages 8 s
  // (the speed-blind optimum 6 + 6 would take 12 s on the slow stage).
  const std::vector<double> ones(12, 1.0);
  const auto two = partition_optimal(ones, 2, {}, {1.0, 0.5});
  REQUIRE(two);
  CHECK((*two)[0].size() == 8);
  CHECK(slowest_stage(ones, *two, {1.0, 0.5}) == doctest::Approx(8.0));
  CHECK(slowest_stage(ones, *partition_optimal(ones, 2), {1.0, 0.5}) == doctest::Approx(12.0));
  const auto greedy = partition_balanced(ones, 2, {}, {1.0, 0.5});  // cut at 1 / 1.5 of the total
  REQUIRE(greedy);
  CHECK((*greedy)[0].size() == 8);
  // Three stages at speeds 1, 1, 0.5: 5 + 5 + 2 blocks, the slowest 5 s (2 blocks at half speed: 4 s).
  const auto three = partition_optimal(ones, 3, {}, {1.0, 1.0, 0.5});
  REQUIRE(three);
  CHECK((*three)[0].size() == 5);
  CHECK((*three)[1].size() == 5);
  CHECK((*three)[2].size() == 2);
  CHECK(slowest_stage(ones, *three, {1.0, 1.0, 0.5}) == doctest::Approx(5.0));
  // Speeds of 1 change nothing.
  CHECK((*partition_optimal(ones, 3, {}, {1.0, 1.0, 1.0}))[0].size() == (*partition_optimal(ones, 3))[0].size());
  CHECK_THROWS_AS(partition_optimal(ones, 2, {}, {1.0}), std::invalid_argument);
  CHECK_THROWS_AS(partition_optimal(ones, 2, {}, {1.0, 0.0}), std::invalid_argument);

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.1, 5.0), speed(0.2, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 3 + trial % 8;
    const int k = 1 + trial % static_cast<int>(n < 4 ? n : 4);
    std::vector<double> costs(n), speeds(static_cast<std::size_t>(k));
    for (double& c : costs)
      c = cost(rng);
    for (double& s : speeds)
      s = speed(rng);
    double best = std::numeric_limits<double>::infinity();
    each_partition(n, k, [&](const std::vector<StageRange>& r) { best = std::min(best, slowest_stage(costs, r, speeds)); });
    const auto found = partition_optimal(costs, k, {}, speeds);
    REQUIRE(found);
    CHECK(slowest_stage(costs, *found, speeds) == doctest::Approx(best).epsilon(1e-12));
  }
}

// Megatron-Core's even split of a transformer's layers over interleaved chunks (models/ChunkSplit.hpp).
#include "models/ChunkSplit.hpp"
#include "models/ModelLoader.hpp"

TEST_CASE("interleaved chunks split the layers, or the layers plus the embedding and the loss, evenly")
{
  const Model small = load_model("gpt2-small");  // 12 layers
  CHECK(splits_evenly(small, 4));                  // 12 / 4
  CHECK(splits_evenly(small, 7));                  // (12 + 2) / 7
  CHECK_FALSE(splits_evenly(small, 8));            // neither 12 nor 14
  CHECK(even_virtual_stages(small, 2, 8) == std::vector<int>{2, 3, 6, 7});
  CHECK(even_virtual_stages(small, 2, 3) == std::vector<int>{2, 3});
  const Model llama = load_model("llama3.1-405b");  // 126 layers: Meta's 16 x 8 chunks of the Llama 3 paper
  CHECK_FALSE(llama.architecture()->layers % 128 == 0);
  CHECK(splits_evenly(llama, 128));
  CHECK(even_virtual_stages(llama, 16, 8) == std::vector<int>{2, 4, 8});  // 128 / 32, 64, 128
  const Model cnn = load_model("resnet50");  // no layer count: blocks split as the partitioner likes
  CHECK(cnn.architecture() == nullptr);
  CHECK(splits_evenly(cnn, 5));
}
