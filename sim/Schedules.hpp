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
// Device of (stage s, replica r) = s * dp + r: replicas of a stage are neighbours, so data-parallel
// rings stay inside a node and pipeline transfers cross nodes (Megatron's ordering).
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

enum class ScheduleKind { gpipe, one_f_one_b };

inline constexpr EnumTable<ScheduleKind, 2> schedule_table{{{
    {"gpipe", ScheduleKind::gpipe, "GPipe: all forwards, all backwards, then gradient all-reduce and optimizer step"},
    {"1f1b", ScheduleKind::one_f_one_b,
     "1F1B (PipeDream-Flush): warm-up forwards, then one forward one backward, then the flush"},
}}};

/// Micro-batches whose activations stage `stage` of `stages` holds at its peak.
int in_flight_micro_batches(ScheduleKind schedule, int stages, int stage, int micro_batches);

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

struct StagePlan {
  models::StageRange layers;        ///< model layers of this stage
  double activation_bytes = 0;      ///< bytes per sample sent to the next stage (and its gradient sent back)
  double gradient_bytes = 0;        ///< bytes of weight gradients all-reduced across the data-parallel replicas
  std::vector<SyncPoint> sync_points;  ///< in increasing layer order, within (layers.begin, layers.end]
  /// When not empty (and dp > 1), the gradients are all-reduced in these buckets, overlapped with
  /// the last backward pass, instead of in one all-reduce after it. In backward order (the stage's
  /// last layers first); the last bucket starts at layers.begin.
  std::vector<GradientBucket> buckets;
};

struct PipelinePlan {
  ScheduleKind schedule = ScheduleKind::gpipe;
  int dp = 1;
  int micro_batches = 1;      ///< M, per replica and iteration
  int micro_batch_size = 1;   ///< samples per micro-batch
  std::vector<StagePlan> stages;
  CollectiveAlgorithm dp_algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity dp_fidelity = CollectiveFidelity::flow;
  bool optimizer_step = true;  ///< add an optimizer task per device after its gradients are reduced

  int pp() const { return static_cast<int>(stages.size()); }
  int devices() const { return pp() * dp; }
  int device(int stage, int replica) const { return stage * dp + replica; }
};

/// Builds the iteration's TaskGraph. Throws std::invalid_argument on an empty plan, sizes < 1 or a
/// sync point outside its stage.
TaskGraph build_schedule(const PipelinePlan& plan);

}  // namespace ddlsim::sim
