// Schedule generators: turn a parallelism plan into a TaskGraph.
//
// K = stages, M = micro_batches, dp data-parallel replicas of the pipeline.
//   GPipe (Huang et al. 2019): every stage runs all M forwards, then all M backwards in reverse
//     order; a stage holds all M micro-batches' activations.
//   1F1B (PipeDream-Flush, Narayanan et al. 2021): stage s runs min(K-s-1, M) warm-up forwards, then
//     alternates one forward and one backward, then drains the remaining backwards; it holds at
//     most K - s micro-batches. Same ideal time as GPipe, less memory.
// Both end with the flush: each stage's gradients are all-reduced across its dp replicas, then every
// device steps its optimizer. pp = 1 is plain data parallelism with gradient accumulation. With
// gradient buckets (PyTorch DDP's bucket_cap), the last backward pass is split at the bucket
// boundaries and each bucket's all-reduce starts as soon as its gradients are ready (and the
// previous bucket's is done: one communication stream), overlapping the rest of the backward;
// the optimizer waits for all of them.
//
// Synchronized batch norm: a stage's sync_points split every forward and backward pass at the
// layers whose statistics are all-reduced across the replicas; the all-reduce blocks that device's
// compute stream, as NCCL on the compute stream does in PyTorch's SyncBatchNorm.
//
// Device of (stage s, replica r, tensor rank t) = (s * dp + r) * tp + t: a tensor-parallel group is
// contiguous (inside a node), then the replicas of a stage, then the stages (Megatron's ordering).
// With tp > 1 every GPU of a group runs its share of each layer (OpCosts), the stage's
// tp_collectives run inside the group, a stage sends each tensor rank's 1/tp of the activations
// to the same rank of the next stage, and the gradient all-reduce runs per tensor rank across the
// replicas. This is the integrated P_r x P_c grid (Gholami et al. 2018) with P_r = tp, P_c = dp,
// combined with pipeline stages.
//
//   PipelinePlan plan{.dp = 2, .micro_batches = 8, .micro_batch_size = 4,
//                     .stages = {{.layers = {0, 7}, .activation_bytes = 6e6, .gradient_bytes = 2e8},
//                                {.layers = {7, 14}, .activation_bytes = 0, .gradient_bytes = 2e8}}};
//   TaskGraph g = build_schedule(plan);   // 4 devices
#pragma once

#include "common/EnumTable.hpp"
#include "models/Model.hpp"
#include "sim/TaskGraph.hpp"

#include <vector>

namespace ddlsim::sim {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };

inline constexpr EnumTable<ScheduleKind, 3> schedule_table{{{
    {"gpipe", ScheduleKind::gpipe, "GPipe: all forwards, all backwards, then gradient all-reduce and optimizer step"},
    {"1f1b", ScheduleKind::one_f_one_b,
     "1F1B (PipeDream-Flush): warm-up forwards, then one forward one backward, then the flush"},
    {"interleaved", ScheduleKind::interleaved,
     "interleaved 1F1B (Megatron-LM): v model chunks per device, bubble (K-1)/(vM) of the ideal time"},
}}};

/// Micro-batches whose activations stage `stage` of `stages` holds at its peak (GPipe, 1F1B).
int in_flight_micro_batches(ScheduleKind schedule, int stages, int stage, int micro_batches);

/// One forward or backward pass in a device's stream: micro-batch and model chunk (the global
/// chunk index; without interleaving the chunk is the device's pipeline rank).
struct PipelinePass {
  Phase phase;
  int micro_batch;
  int chunk;
};

/// The order in which pipeline rank `rank` of `ranks` runs its passes. Interleaved: v chunks per
/// rank (rank r holds chunks r, r + K, ...), Megatron-LM's order, which needs M divisible by K.
/// Throws std::invalid_argument when it does not.
std::vector<PipelinePass> stream_order(ScheduleKind schedule, int ranks, int virtual_stages, int rank,
                                       int micro_batches);

/// For each of rank `rank`'s chunks (in the order r, r + K, ...), the most micro-batches whose
/// activations it holds at once under the schedule.
std::vector<int> in_flight_per_chunk(ScheduleKind schedule, int ranks, int virtual_stages, int rank, int micro_batches);

/// A point inside a stage where synchronized batch norm all-reduces statistics across the replicas:
/// after layer `layer - 1` in forward, before it in backward.
struct SyncPoint {
  std::size_t layer = 0;  ///< passes are split before this layer index
  double bytes = 0;       ///< bytes all-reduced (per-channel sums, fp32)
};

/// A gradient bucket: the weight gradients of layers [layer, end of the previous bucket), all-reduced
/// as soon as the last backward pass has produced them.
struct GradientBucket {
  std::size_t layer = 0;  ///< first layer of the bucket
  double bytes = 0;
};

/// A tensor-parallel collective inside a stage's passes, over the tp GPUs of one replica: in
/// forward it follows layer `layer`; in backward it follows that layer's backward. It blocks the
/// stream (the next layer needs its result), as Megatron-LM's synchronous all-reduces do.
struct TpCollective {
  std::size_t layer = 0;
  Phase phase = Phase::forward;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes_per_sample = 0;  ///< full buffer per sample
};

struct StagePlan {
  models::StageRange layers;        ///< model layers of this stage
  double activation_bytes = 0;      ///< bytes per sample sent to the next stage (and its gradient sent back)
  double gradient_bytes = 0;        ///< bytes of weight gradients all-reduced across the data-parallel replicas
  std::vector<SyncPoint> sync_points;  ///< in increasing layer order, within (layers.begin, layers.end]
  /// When not empty (and dp > 1), the gradients are all-reduced in these buckets, overlapped with
  /// the last backward pass, instead of in one all-reduce after it. In backward order (the stage's
  /// last layers first); the last bucket starts at layers.begin.
  std::vector<GradientBucket> buckets;
  /// Tensor-parallel collectives (tp > 1), in increasing layer order.
  std::vector<TpCollective> tp_collectives;
};

struct PipelinePlan {
  ScheduleKind schedule = ScheduleKind::gpipe;
  int virtual_stages = 1;     ///< v: model chunks per device (interleaved); stages holds pp x v chunks
  int dp = 1;
  int tp = 1;                 ///< tensor-parallel GPUs per stage and replica (P_r of the grid)
  int micro_batches = 1;      ///< M, per replica and iteration
  int micro_batch_size = 1;   ///< samples per micro-batch
  std::vector<StagePlan> stages;  ///< the model chunks in model order (pp x virtual_stages of them)
  CollectiveAlgorithm dp_algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity dp_fidelity = CollectiveFidelity::flow;
  CollectiveAlgorithm tp_algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity tp_fidelity = CollectiveFidelity::flow;
  bool optimizer_step = true;  ///< add an optimizer task per device after its gradients are reduced

  int pp() const { return static_cast<int>(stages.size()) / virtual_stages; }
  int devices() const { return pp() * dp * tp; }
  /// Device of chunk `stage` (pipeline rank stage mod pp), data-parallel replica `replica` and
  /// tensor-parallel rank `t`: tp is innermost (inside a node), then dp, then pp.
  int device(int stage, int replica, int t = 0) const { return ((stage % pp()) * dp + replica) * tp + t; }
};

/// Builds the iteration's TaskGraph. Throws std::invalid_argument on an empty plan, sizes < 1, a
/// chunk count not divisible by virtual_stages, M not divisible by pp for interleaving, or a sync
/// point or bucket outside its stage.
TaskGraph build_schedule(const PipelinePlan& plan);

}  // namespace ddlsim::sim
