// What a point is before it runs: its plan. Everything here is derived from a resolved PointConfig
// without SimGrid, so that the simulation (experiments/Evaluate), the resource estimate
// (experiments/Resources) and the search's closed form (experiments/Search) read one set of rules.
//
//   plan_point          partition the blocks into pp stages (by the point's partitioner under the cost
//                       model, within GPU memory), size activations and gradients, memory per stage
//   check_memory        the memory verdict of a point without simulating it (`ddlsim validate`)
//   plan_fold           the symmetries the replay folds (tensor ranks, replicas)
//   tensor_collectives  a stage's tensor-parallel collectives; gradient_buckets its DDP buckets
//   compute_options, memory_options, point_dtypes   what the cost and memory models are told
#pragma once

#include "calibration/CostModel.hpp"
#include "experiments/Experiment.hpp"
#include "models/ExpertLoad.hpp"
#include "models/Memory.hpp"
#include "sim/Fold.hpp"
#include "sim/Framework.hpp"
#include "sim/OpCosts.hpp"
#include "sim/Schedules.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// The flop the CSV's throughput columns count for one sample: the model's forward and backward
/// flop (achieved_flop_per_s_per_gpu), those MFU counts (PaLM's 6N + 12lhs per token for a sequence
/// model), and the tokens of a sample (0 without attention: no tokens_per_s).
struct WorkloadFlop {
  double per_sample       = 0;
  double model_per_sample = 0;
  double tokens           = 0;
};
WorkloadFlop workload_flop(const PointConfig& point);

struct PointPlan {
  sim::PipelinePlan pipeline;
  std::vector<models::StageRange> stage_blocks;      ///< blocks of each stage (each model chunk when interleaved)
  std::vector<models::MemoryBreakdown> stage_memory; ///< per pipeline rank (its chunks together), at its peak
  /// First pipeline rank that does not fit in GPU memory, or -1. When no partition fits, the plan is
  /// the fastest partition without the memory constraint, and this names its first rank over capacity.
  int oom_stage = -1;
};

/// Stage partition (by the point's partitioner, under the cost model and the memory capacity),
/// transfer sizes, synchronized-batch-norm points and memory of a valid point.
PointPlan plan_point(const PointConfig& point, const calibration::CostModel& cost);

/// Whether a point fits in GPU memory, and if not, why: the GPU that needs the most, every term and
/// the largest (the `oom` row's message).
struct MemoryVerdict {
  double peak_bytes       = 0; ///< the GPU that needs the most (or the first over capacity)
  double activation_bytes = 0; ///< its activations
  double capacity_bytes   = 0; ///< its memory
  std::string message;         ///< empty when it fits
  bool fits() const { return message.empty(); }
};
MemoryVerdict stage_memory_verdict(const PointConfig& point, const PointPlan& plan);
/// Memory of parameter-server training: workers hold the model, weights and gradients and their
/// activations; servers hold 1/S of the weights and the optimizer state each.
MemoryVerdict parameter_server_memory(const PointConfig& point);
/// The memory verdict of a valid point without simulating it (no SimGrid): what `ddlsim validate` checks.
MemoryVerdict check_memory(const PointConfig& point);

/// The symmetries a pipeline point is simulated under (sim/Fold.hpp, docs/scale.md): the tensor
/// ranks of every group rotated (tp_aggregate), the replicas of every stage shifted (fold_replicas),
/// each kept only where the cluster maps onto itself (speeds, nodes, NICs, fat-tree leaves) and the
/// collectives' algorithms fold; what was left out, and why.
struct FoldPlan {
  std::vector<sim::FoldGenerator> generators;
  int tp       = 1; ///< tensor ranks folded into one
  int replicas = 1; ///< replicas (dp x cp) folded into one
  std::string note; ///< "off" (fold_replicas: false), or what could not be folded and why; empty when all was
  int factor() const { return tp * replicas; }
};
/// The symmetries a pipeline point is simulated under. Collectives that they do not map onto
/// themselves (trees) run apart, checked while the replay runs (Fold.hpp); where that check fails,
/// evaluate_point drops the symmetries and simulates again.
FoldPlan plan_fold(const PointConfig& point);
/// What collective_fidelity says of a fold: "tp8xdp128", "none (dp: GPU 5 runs at speed 0.8)", "off".
std::string fold_description(const FoldPlan& fold);
/// The CSV's collective_fidelity: "dp=flow;tp=analytic+aggregated;fold=tp8xdp128" (the fold for
/// points with tensor or data parallelism; "+aggregated" where tensor ranks are folded).
std::string collective_fidelity(const PointConfig& point, const FoldPlan& fold);
/// A pipeline point's device layout (pp x v chunks, replicas, tp, cp, ZeRO groups, collective
/// algorithms) without the stages' contents: what the fold's symmetries act on.
sim::PipelinePlan pipeline_layout(const PointConfig& point);

/// The dtypes of the point's step (sim::step_dtypes of its framework and dtype, with training.grad_dtype
/// when set): what plan_point and the resource estimate size activations, gradients and weights in.
sim::StepDtypes point_dtypes(const PointConfig& point);

/// DDP-style gradient buckets of `layers` (PyTorch's bucket_cap): walking from the last layer, a
/// bucket closes once it holds at least `cap` bytes of gradients (per tensor rank of `tp`, at
/// `dtype_bytes` per element); the rest, down to the first layer, is the last bucket (a cut at the
/// first layer itself extends the bucket above it). With `without_experts` the experts layers'
/// gradients are left out (expert parallelism reduces them over their own group). Backward order.
std::vector<sim::GradientBucket> gradient_buckets(const models::Model& model, models::StageRange layers, double cap,
                                                  double dtype_bytes, int tp, bool without_experts);

/// The tensor-parallel collectives of `layers` (each layer's models::TpRole): their layer, phase,
/// kind and bytes per sample (at `dtype_bytes` per element); with `sequence_parallel` (a sequence
/// model) each all-reduce becomes a reduce-scatter and an all-gather. A mixture of experts (its
/// experts split over the group) is reduced like a dense MLP at its ends (router input, combine
/// output); with expert parallelism `ep` > 1 and sequence parallelism, as Megatron-Core does, each
/// tensor rank dispatches its tokens and the group gathers what arrived before the experts and
/// reduce-scatters their output after. With `recompute: full`, every forward collective comes again
/// in the backward pass (TpCollective::recomputed): full recomputation reruns each layer's forward,
/// its tensor-parallel collectives included, before the layer's backward (Megatron-LM's
/// CheckpointFunction.backward calls the checkpointed forward again; Korthikanti et al. 2022 count
/// the recomputed forward's all-reduces among full recomputation's costs). With `selective-op`, the
/// forward collectives of each checkpointed block but its reduce-scatters, whose outputs torchtitan's
/// policy keeps (models::op_checkpoint_layers).
std::vector<sim::TpCollective> tensor_collectives(const models::Model& model, models::StageRange layers,
                                                  double dtype_bytes, bool sequence_parallel = false, int ep = 1,
                                                  models::Recompute recompute = models::Recompute::none);

/// Elements of K and V of one sample's whole sequence on one tensor-parallel rank of attention layer
/// `l`: 2 x (kv_heads / tp heads, one when tp > kv_heads: Megatron replicates them) x head_dim x
/// tokens. What context parallelism exchanges per sample (sim::RingAttention).
double kv_elements_per_rank(const models::Layer& l, int tp);

/// The expert load of a point's mixture of experts over its ep ranks (its first experts layer's:
/// the generators make them all alike); nullopt for a dense model.
std::optional<models::ExpertLoad> point_expert_load(const PointConfig& point);

/// Token copies (token x expert assignments) the experts drop per iteration, over every MoE layer
/// and the whole global batch (0 when dropless).
double dropped_tokens(const PointConfig& point);

/// The options of a point for the cost and memory models (tp, sequence and context parallelism, ZeRO).
sim::ComputeOptions compute_options(const PointConfig& point);
models::MemoryOptions memory_options(const PointConfig& point);

/// Model flop per token as PaLM's appendix B counts them: 6 N + 12 l h s (N the parameters a token
/// uses: all of a dense model's, a mixture of experts' active ones; per attention layer 12 x query
/// width x sequence). What `mfu` divides by the GPUs' dense peak.
double model_flop_per_token(const models::Model& model);

/// The batch size batch-norm statistics see: the micro-batch for batch_norm, micro-batch x dp for
/// sync_batch_norm; 0 when the model has no batch norm.
long long bn_batch(const PointConfig& point);

} // namespace ddlsim::experiments
