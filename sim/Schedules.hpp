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
// Expert parallelism (mixtures of experts, ep > 1): around each experts layer, every group of ep
// consecutive replicas (per tensor rank) runs an all-to-all that dispatches the routed tokens to the
// experts' GPUs and one that combines the results back, in forward and (the other way) in backward,
// each blocking the stream; the busiest ep rank receives (dispatch) and sends (combine) the most and
// computes the longest (expert_load, expert_compute). Under full recomputation (expert_recompute) the
// backward reruns the forward's dispatch and combine before the combine's backward. Expert gradients
// are reduced over the replicas holding the same experts, dense ones over all.
//
//   PipelinePlan plan{.dp = 2, .micro_batches = 8, .micro_batch_size = 4,
//                     .stages = {{.layers = {0, 7}, .activation_bytes = 6e6, .gradient_bytes = 2e8},
//                                {.layers = {7, 14}, .activation_bytes = 0, .gradient_bytes = 2e8}}};
//   TaskGraph g = build_schedule(plan);   // 4 devices
#pragma once

#include "common/EnumTable.hpp"
#include "models/Model.hpp"
#include "sim/TaskGraph.hpp"
#include "sim/ZeroStage.hpp"

#include <vector>

namespace ddlsim::sim {

class Fold;  // Fold.hpp

enum class ScheduleKind { gpipe, one_f_one_b, interleaved };

inline constexpr EnumTable<ScheduleKind, 3> schedule_table{{{
    {"gpipe", ScheduleKind::gpipe, "GPipe: all forwards, all backwards, then gradient all-reduce and optimizer step"},
    {"1f1b", ScheduleKind::one_f_one_b,
     "1F1B (PipeDream-Flush): warm-up forwards, then one forward one backward, then the flush"},
    {"interleaved", ScheduleKind::interleaved,
     "interleaved 1F1B (Megatron-LM): v model chunks per device, bubble (K-1)/(vM) of the ideal time"},
}}};

/// How context parallelism exchanges K/V (RingAttention): `parallelism.cp_algorithm`.
enum class CpAlgorithm { ring, all_gather };

inline constexpr EnumTable<CpAlgorithm, 2> cp_algorithm_table{{{
    {"ring", CpAlgorithm::ring,
     "ring attention (Megatron-Core, torchtitan): cp - 1 K/V blocks passed around the cp ring, each "
     "overlapping the attention over the block already held"},
    {"all_gather", CpAlgorithm::all_gather,
     "Llama 3's all-gather: the K/V of every chunk gathered over the cp group before the attention (not "
     "overlapped), dK/dV reduce-scattered after its backward"},
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

/// Which GEMM of a column-parallel layer's backward a tensor-parallel collective can run beside
/// (PipelinePlan::tp_backward_overlap): the input gradient's (dgrad) or the weight gradient's (wgrad).
enum class TpBeside : std::uint8_t { none, input_gradient, weight_gradient };

/// How a tensor-parallel collective runs under a plan's overlap options (TpCollective::overlap): it
/// blocks the stream, or Transformer Engine's userbuffers pipeline it with its layer's GEMM
/// (tp_comm_overlap), or it runs beside one of its column layer's backward GEMMs (tp_backward_overlap).
enum class TpOverlap : std::uint8_t { blocking, userbuffers, backward_async };

/// A tensor-parallel collective inside a stage's passes, over the tp GPUs of one replica: in
/// forward it follows layer `layer`; in backward it follows that layer's backward. It blocks the
/// stream (the next layer needs its result), as Megatron-LM's synchronous all-reduces do; with
/// PipelinePlan::tp_comm_overlap, an `overlappable` one runs beside its own layer's GEMMs instead,
/// and with PipelinePlan::tp_backward_overlap, one `beside` a backward GEMM runs beside that GEMM.
struct TpCollective {
  std::size_t layer = 0;
  Phase phase = Phase::forward;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes_per_sample = 0;  ///< full buffer per sample
  /// true: it precedes the layer instead (in forward before the layer runs, in backward before its
  /// backward): sequence parallelism's all-gathers of the input of a column layer and of the output
  /// gradient of a row layer
  bool before = false;
  /// true: full recomputation's rerun of a forward collective (phase backward), just before the
  /// layer's backward, whose compute task holds the recomputed forward (sim/OpCosts)
  bool recomputed = false;
  /// true: Transformer Engine's userbuffers can overlap it with its layer's GEMM (the all-gathers and
  /// reduce-scatters of a transformer block's linear layers under sequence parallelism)
  bool overlappable = false;
  /// A column layer's backward: the input's all-gather (sequence parallelism: only the s/tp shard was
  /// kept) is needed by the weight gradient only, so it can run beside the input gradient's GEMM; the
  /// input gradient's reduce-scatter (all-reduce without sequence parallelism) beside the weight
  /// gradient's GEMM
  TpBeside beside = TpBeside::none;

  /// How it runs with PipelinePlan::tp_comm_overlap and tp_backward_overlap as given: one rule for the
  /// graph (sim/PassSteps), the resource estimate and the search's closed form. Userbuffers take
  /// precedence; a recomputed forward's collective always blocks.
  TpOverlap overlap(bool tp_comm_overlap, bool tp_backward_overlap) const
  {
    if (tp_comm_overlap && overlappable)
      return TpOverlap::userbuffers;
    if (tp_backward_overlap && beside != TpBeside::none && phase == Phase::backward && !recomputed)
      return TpOverlap::backward_async;
    return TpOverlap::blocking;
  }

  /// The pass boundary it sits at, as pass_steps numbers them (forward: before layer i is i, after it
  /// i + 1; backward, which runs the layers in reverse: before layer i's backward is i + 1, after it i).
  std::size_t position() const
  {
    if (recomputed)
      return layer + 1;
    return phase == Phase::forward ? (before ? layer : layer + 1) : (before ? layer + 1 : layer);
  }
};

/// A unit of ZeRO stage 3 (FSDP's wrapped module, here a block): layers [begin, end) whose
/// parameters are all-gathered before the unit's forward and again before its backward (the next
/// unit's gather prefetched while this one computes), and whose gradients are reduce-scattered after
/// its backward.
struct ShardUnit {
  std::size_t begin = 0;
  std::size_t end = 0;
  double bytes = 0;         ///< the unit's parameters on one tensor-parallel rank, unsharded (experts' apart)
  double expert_bytes = 0;  ///< its experts' parameters on that rank, gathered over the expert shard group
  /// The unit's gradients as reduce-scattered (the gradients' dtype: fp32 where the weights are bf16 under
  /// Megatron or FSDP's mixed precision); 0: `bytes`
  double gradient_bytes = 0;
};

/// An attention layer under context parallelism (ring attention, as Megatron-Core's CP and
/// torchtitan): the layer runs in cp chunks of 1/cp of its work; before chunk j a GPU receives the
/// K/V block of the GPU j places before it in the cp ring (forward), and K/V with their gradients
/// (backward), so the ring's transfers overlap the attention compute. When the layer's backward
/// also reruns its forward (`recomputed`), each backward step carries the K/V block once more, for
/// the recomputed forward's ring: 3 blocks a step instead of 2 (Transformer Engine's
/// AttnFuncWithCPAndKVP2P runs its forward ring again when Megatron's checkpoint reruns the layer).
/// With CpAlgorithm::all_gather (Llama 3, Transformer Engine's AttnFuncWithCPAndKVAllGather) the layer
/// runs whole: its forward waits for an all-gather of the K/V over the cp group; its backward
/// all-gathers them again (once more for the recomputed forward), then reduce-scatters dK/dV.
struct RingAttention {
  std::size_t layer = 0;
  double kv_bytes_per_sample = 0;  ///< K and V of the whole sequence on one tensor-parallel rank
  /// the layer's backward compute holds its recomputed forward (sim/OpCosts: full recomputation, or
  /// selective on a recompute_cheap attention core)
  bool recomputed = false;
};

/// The experts layer of a mixture of experts under expert parallelism (ep > 1): each ep group's
/// all-to-all dispatches the routed tokens to the GPUs holding their experts before the layer, and
/// another combines the outputs back after it; in backward the gradients go the other way (the
/// combine's backward before the layer's, the dispatch's after). All four block the stream.
struct ExpertExchange {
  std::size_t layer = 0;        ///< the experts layer
  double bytes_per_sample = 0;  ///< each GPU's dispatch send buffer at uniform, dropless load
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
  /// ZeRO stage 3: the units, in increasing layer order, covering the stage.
  std::vector<ShardUnit> units;
  /// Context parallelism (cp > 1): the attention layers.
  std::vector<RingAttention> rings;
  /// Expert parallelism (ep > 1): the experts layers, in increasing order.
  std::vector<ExpertExchange> exchanges;
  /// Weight gradients of the experts this stage's GPUs hold: reduced (and with ZeRO sharded) over the
  /// dp x cp / ep replicas holding the same experts, not over all; gradient_bytes is the rest. ZeRO
  /// 1-2 reduce them after the last backward (2: after every backward), with the dense gradients.
  double expert_gradient_bytes = 0;
};

/// How a pipeline rank's sends meet its compute: whether the device's next task waits for a pass's
/// send, as the frameworks run them (docs/frameworks.md#overlap).
enum class P2pSends {
  overlapped, ///< beside the compute after them (Megatron's --overlap-p2p-communication; `ideal`)
  /// every send waited for (Megatron-Core's 1F1B, Megatron-LM 2021 without interleaving; PyTorch's
  /// Schedule1F1B, whose warm-up and cool-down sends overlap one pass, off the critical path)
  blocking,
  /// Megatron's interleaved schedule without overlap: warm-up and cool-down sends waited for one by
  /// one; in the steady state a forward's send leaves with the next backward's, after that backward
  /// (send_forward_backward_recv_forward_backward), and the device waits for both
  paired,
};

struct PipelinePlan {
  ScheduleKind schedule = ScheduleKind::gpipe;
  int virtual_stages = 1;     ///< v: model chunks per device (interleaved); stages holds pp x v chunks
  /// Replicas of each stage that hold the same weights: data-parallel x context-parallel ranks.
  /// Replica r is context rank r mod cp of data rank r / cp (a cp group is contiguous, as Megatron's
  /// order tp-cp-dp-pp); gradients are reduced over all dp x cp replicas.
  int dp = 1;
  int cp = 1;                 ///< context-parallel ranks sharing each sequence (a divisor of dp)
  CpAlgorithm cp_algorithm = CpAlgorithm::ring;  ///< how the cp ranks exchange K/V (RingAttention)
  /// Sharded data parallelism (ZeRO, sim/ZeroStage.hpp) over groups of `shard` consecutive replicas
  /// (all dp x cp, or fewer: hybrid sharding, with an all-reduce of each shard across the groups).
  /// Without it the gradients are all-reduced (bucketed in the last backward pass) and every replica
  /// steps the optimizer; stages 1 and 2 gather the parameters after the step, stage 3 before each
  /// unit's forward and backward instead.
  ZeroStage zero = ZeroStage::none;
  int shard = 1;
  /// Bytes of the parameters all-gathered after the step (ZeRO 1, 2) per byte of gradient reduced: 1 when
  /// both are in the training dtype, 0.5 under Megatron (bf16 weights, fp32 gradients)
  double gather_per_gradient_byte = 1;
  /// ZeRO 1, 2 (`parallelism.overlap_param_gather`, Megatron's --overlap-param-gather): the parameters
  /// are gathered in the forward instead of after the step, bucket by bucket (the gradient buckets),
  /// each issued as the forward reaches the bucket before it and waited for by its first layer: in
  /// one simulated iteration, the previous step's gathers, which the first forward pass of each chunk
  /// waits for; the first bucket is exposed, the rest overlap the forward.
  bool overlap_param_gather = false;
  /// Expert parallelism: replicas r = g ep + e form ep group g (ep consecutive replicas, Megatron-Core's
  /// order); ep rank e holds 1/ep of every mixture of experts' experts. Its expert gradients are
  /// reduced over the replicas with the same e; with ZeRO in groups of `expert_shard` of them.
  int ep = 1;
  int expert_shard = 1;
  CollectiveAlgorithm ep_algorithm = CollectiveAlgorithm::direct;
  CollectiveFidelity ep_fidelity = CollectiveFidelity::flow;
  /// Full recomputation (ep > 1): every backward pass first reruns the experts layers' forward, their
  /// dispatch and combine all-to-alls included (Megatron-Core checkpoints the whole transformer
  /// layer): two more all-to-alls per experts layer, before the combine's backward.
  bool expert_recompute = false;
  /// Per ep rank, its experts' work over the uniform, dropless work (models::ExpertLoad): the
  /// all-to-alls' member loads. Empty: 1 on every rank.
  std::vector<double> expert_load;
  /// Per ep rank, the factor on its experts layer's compute time (its load over the kept share, which
  /// the cost model already counts). Empty: 1.
  std::vector<double> expert_compute;
  int tp = 1;                 ///< tensor-parallel GPUs per stage and replica (P_r of the grid)
  int micro_batches = 1;      ///< M, per replica and iteration
  int micro_batch_size = 1;   ///< samples per micro-batch
  std::vector<StagePlan> stages;  ///< the model chunks in model order (pp x virtual_stages of them)
  CollectiveAlgorithm dp_algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity dp_fidelity = CollectiveFidelity::flow;
  CollectiveAlgorithm tp_algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity tp_fidelity = CollectiveFidelity::flow;
  /// Transformer Engine's userbuffers (`parallelism.tp_comm_overlap`): each overlappable tensor-parallel
  /// collective is split in tp chunks that pipeline with its layer's GEMM. All but the last chunk run
  /// beside the layer's compute; the last follows it and blocks, so a layer costs about
  /// max(GEMM, (tp - 1) / tp of the collective) + 1 / tp of it.
  bool tp_comm_overlap = false;
  /// Megatron's column-parallel backward (`parallelism.tp_backward_overlap`; Megatron-LM since 2021-09,
  /// Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication and Transformer Engine's linear
  /// layers): the collectives `beside` a GEMM are issued asynchronously before it, and the stream
  /// waits for them after it. The layer's backward is two compute tasks (ComputePart): the input
  /// gradient's part (its GEMMs, the memory-bound kernels, any recomputed forward), then the weight
  /// gradient's GEMMs, costing max(input part, gather) + max(weight part, reduction) instead of their
  /// sum. Collectives userbuffers overlap (tp_comm_overlap) are theirs, not these.
  bool tp_backward_overlap = false;
  /// How the pipeline's sends meet the compute after them (P2pSends; `parallelism.overlap_p2p_comm`
  /// and the framework, experiments::p2p_sends).
  P2pSends p2p        = P2pSends::overlapped;
  bool optimizer_step = true;  ///< add an optimizer task per device after its gradients are reduced
  /// When set (over devices()), only the fold's representatives get tasks, and only the
  /// collectives that have a representative member (Fold.hpp): the graph a folded replay runs.
  const Fold* fold = nullptr;

  int pp() const { return static_cast<int>(stages.size()) / virtual_stages; }
  int devices() const { return pp() * dp * tp; }
  /// Device of chunk `stage` (pipeline rank stage mod pp), data-parallel replica `replica` and
  /// tensor-parallel rank `t`: tp is innermost (inside a node), then dp, then pp.
  int device(int stage, int replica, int t = 0) const { return ((stage % pp()) * dp + replica) * tp + t; }
};

/// Builds the iteration's TaskGraph. Throws std::invalid_argument on an empty plan, sizes < 1, a
/// chunk count not divisible by virtual_stages, M not divisible by pp for interleaving, cp or the
/// shard group not dividing dp, ep not dividing dp or the expert shard group not dividing dp / ep,
/// expert loads not one per ep rank, a ZeRO stage outside 0-3, or a sync point, bucket, unit, ring
/// or expert exchange outside its stage.
TaskGraph build_schedule(const PipelinePlan& plan);

/// Of stream_order's passes, how many forwards lead before the first backward joins them (the
/// warm-up; GPipe: every forward): 1F1B's steady state pairs the passes after it, a forward then a
/// backward, until the cool-down's backwards.
int warmup_forwards(ScheduleKind schedule, int k, int v, int rank, int m_count);

}  // namespace ddlsim::sim
