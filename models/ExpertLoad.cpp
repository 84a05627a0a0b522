#include "models/ExpertLoad.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ddlsim::models {

double ExpertLoad::busiest() const { return rank_load.empty() ? kept : *std::max_element(rank_load.begin(), rank_load.end()); }

bool expert_parallel_fits(int experts, int ep) { return experts >= 1 && ep >= 1 && (experts % ep == 0 || ep % experts == 0); }

ExpertLoad expert_load(const Layer& moe, int ep)
{
  if (moe.experts < 1 || !expert_parallel_fits(moe.experts, ep))
    throw std::invalid_argument("expert parallelism over " + std::to_string(ep) + " GPUs needs a divisor or a multiple of the " +
                                std::to_string(moe.experts) + " experts");
  const double e = moe.experts, big = moe.load_imbalance;
  const double rest = e > 1 ? (e - big) / (e - 1) : 1.0;  // each of the other experts, over the mean
  auto kept = [&](double load) { return moe.capacity_factor > 0 ? std::min(load, moe.capacity_factor) : load; };
  ExpertLoad out;
  out.kept = (kept(big) + (e - 1) * kept(rest)) / e;
  out.shards = ep > moe.experts ? ep / moe.experts : 1;
  const double per_rank = ep > moe.experts ? 1.0 : e / ep;  // experts per rank
  const double busiest = (kept(big) + (per_rank - 1) * kept(rest)) / per_rank;
  const int busy_ranks = out.shards;
  const double others = ep > busy_ranks ? (ep * out.kept - busy_ranks * busiest) / (ep - busy_ranks) : busiest;
  out.rank_load.assign(static_cast<std::size_t>(ep), others);
  std::fill(out.rank_load.begin(), out.rank_load.begin() + busy_ranks, busiest);
  return out;
}

}  // namespace ddlsim::models
