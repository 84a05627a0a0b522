// The gradient reduction each ZeRO stage runs (common/ZeroStage.hpp has the stages and their rules).
#pragma once

#include "common/ZeroStage.hpp"
#include "sim/TaskGraph.hpp"

namespace ddlsim::sim {

/// The gradient reduction: a reduce-scatter over the shard group when anything is sharded, else an
/// all-reduce.
constexpr CollectiveKind gradient_reduction(ZeroStage z)
{
  return shards_optimizer(z) ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
}

} // namespace ddlsim::sim
