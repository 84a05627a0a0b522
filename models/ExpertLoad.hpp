// How a mixture of experts' routed tokens fall on the GPUs of an expert-parallel group.
//
// Load model. Of the mean routed tokens per expert (tokens x top_k / experts), the busiest expert
// receives load_imbalance (L) times as many and the other E - 1 experts share the rest equally,
// (E - L) / (E - 1) times the mean each. With a capacity factor c > 0 an expert keeps at most c
// times the mean and the rest is dropped (GShard, Switch Transformer): those token copies skip the
// experts, their tokens keep the residual. Capacity 0 is dropless (Megablocks, Megatron's default).
//   kept share  = (min(L, c) + (E - 1) min((E - L)/(E - 1), c)) / E
//   dropped     = 1 - kept share, of tokens x top_k copies per MoE layer
// Expert parallelism over ep GPUs:
//   ep divides E   GPU rank 0 holds the busiest expert and E/ep - 1 others: its load is
//                  (min(L, c) + (E/ep - 1) min((E - L)/(E - 1), c)) / (E/ep)
//   E divides ep   each expert is split over ep/E GPUs by its width (Tutel's sharded experts): every
//                  token copy goes to all ep/E shards; ranks 0 .. ep/E - 1 hold the busiest expert,
//                  load min(L, c)
// A rank's load is its experts' work (rows x width) over the uniform, dropless work, which is the
// same on every rank whatever ep (tokens x top_k rows of the full width per sample); the other
// ranks share the rest equally, so the loads average to the kept share. The busiest rank sets the
// pace of the expert GEMMs and of the all-to-alls (sim/Schedules.hpp).
//
//   ExpertLoad l = expert_load(model.layers()[i], 8);   // Mixtral, ep 8: one expert per GPU
//   l.busiest();                                        // = load_imbalance when dropless
#pragma once

#include "models/Layer.hpp"

#include <vector>

namespace ddlsim::models {

struct ExpertLoad {
  double kept = 1;                ///< share of the routed token copies the experts keep
  std::vector<double> rank_load;  ///< per expert-parallel rank, its work over the uniform dropless work
  int shards = 1;                 ///< GPUs each expert is split over (ep / experts when ep > experts)
  double busiest() const;
};

/// True when `ep` GPUs can hold `experts` experts: ep divides them, or is a multiple of them.
bool expert_parallel_fits(int experts, int ep);

/// The load of a mixture-of-experts layer (any of its three layers) over `ep` ranks. Throws
/// std::invalid_argument when the layer has no experts or expert_parallel_fits() is false.
ExpertLoad expert_load(const Layer& moe, int ep);

}  // namespace ddlsim::models
