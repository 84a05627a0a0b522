// A pass of a pipeline stage as the steps PipelineBuilder (sim/PipelineBuilder.hpp) turns into tasks: internal
// to the schedule builders.
#pragma once

#include "sim/Schedules.hpp"

#include <utility>
#include <vector>

namespace ddlsim::sim {

// One pass of a stage as compute segments and collectives: blocking ones (synchronized batch norm
// across the replicas, tensor-parallel ones inside the group), gradient buckets (not blocking),
// ZeRO-3 parameter gathers and overlapped ZeRO 1-2 ones (not blocking; the next compute segment waits for them) and
// ring attention (a compute segment of one layer run in cp chunks with K/V transfers between them), the all-to-alls of
// expert parallelism (blocking), the expert gradients' reduction (expert_bucket, not blocking), and a layer whose
// tensor-parallel collectives overlap its GEMMs (tp_overlap: the layer's compute with its collectives beside it,
// Transformer Engine's userbuffers; tp_async: a column layer's backward as two halves, the input gradient's and the
// weight gradient's GEMM, each with its collectives beside it, Megatron's asynchronous backward collectives).
struct PassStep {
  enum class Kind {
    compute,
    dp_sync,
    tp_sync,
    bucket,
    gather,
    ring,
    expert,
    expert_bucket,
    tp_overlap,
    tp_async
  } kind            = Kind::compute;
  std::size_t begin = 0, end = 0;  // compute and ring: layers [begin, end)
  CollectiveKind collective = CollectiveKind::all_reduce;
  double bytes = 0;                // collectives: total bytes (per-sample sizes already scaled); ring: the
                                   // micro-batch's K/V on one tensor rank (a step sends 1/cp of it per block)
  CollectiveRole role = CollectiveRole::gradients;  // expert: dispatch or combine
  bool at_source = false;                           // expert: the busiest rank sends (combine direction)
  bool recomputed = false;                          // expert: the recomputed forward's, in backward;
                                                    // ring: the backward reruns the forward's ring too
  double expert_bytes = 0;                          // gather: the unit's experts' parameters
  std::vector<std::pair<CollectiveKind, double>> overlapped{}; // tp_overlap: its collectives and their bytes;
                                                               // tp_async: those beside the input gradient
  std::vector<std::pair<CollectiveKind, double>> after{};      // tp_async: those beside the weight gradient
};

/// The steps of one pass of `stage` in `phase`; `edge`: the stage's last backward pass of the
/// iteration (where the gradient reduction happens without ZeRO 2 or 3), or its first forward pass
/// (where PipelinePlan::overlap_param_gather gathers the parameters).
std::vector<PassStep> pass_steps(const StagePlan& stage, Phase phase, const PipelinePlan& plan, bool edge);

}  // namespace ddlsim::sim
