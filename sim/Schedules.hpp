// Schedule generators: turn a parallelism plan into a TaskGraph.
//
// GPipe (Huang et al. 2019) with K = stages, M = micro_batches, and dp data-parallel replicas:
// every replica runs all M forwards through the K stages (fill), then all M backwards in reverse
// order (drain), then each stage's gradients are all-reduced across the dp replicas of that stage,
// then every device steps its optimizer (the flush). pp = 1 is plain data parallelism with
// gradient accumulation over M micro-batches.
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
#include "models/Partition.hpp"
#include "sim/TaskGraph.hpp"

#include <vector>

namespace ddlsim::sim {

enum class ScheduleKind { gpipe };

inline constexpr EnumTable<ScheduleKind, 1> schedule_table{{{
    {"gpipe", ScheduleKind::gpipe, "GPipe: all forwards, all backwards, then gradient all-reduce and optimizer step"},
}}};

struct StagePlan {
  models::StageRange layers;    ///< model layers of this stage
  double activation_bytes = 0;  ///< bytes per sample sent to the next stage (and its gradient sent back)
  double gradient_bytes = 0;    ///< bytes of weight gradients all-reduced across the data-parallel replicas
};

struct PipelinePlan {
  ScheduleKind schedule = ScheduleKind::gpipe;
  int dp = 1;
  int micro_batches = 1;      ///< M, per replica and iteration
  int micro_batch_size = 1;   ///< samples per micro-batch
  std::vector<StagePlan> stages;
  CollectiveAlgorithm dp_algorithm = CollectiveAlgorithm::ring;
  bool optimizer_step = true;  ///< add an optimizer task per device after its gradients are reduced

  int pp() const { return static_cast<int>(stages.size()); }
  int devices() const { return pp() * dp; }
  int device(int stage, int replica) const { return stage * dp + replica; }
};

/// Builds the iteration's TaskGraph. Throws std::invalid_argument on an empty plan or sizes < 1.
TaskGraph build_schedule(const PipelinePlan& plan);

}  // namespace ddlsim::sim
