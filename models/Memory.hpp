// GPU memory of one pipeline stage: weights, gradients, optimizer state, stashed activations,
// workspace and a framework reserve.
//
// Bytes per parameter (mixed precision keeps an fp32 master copy when training in fp16/bf16/fp8):
//   optimizer   fp32/tf32 (w + g + state)    16/8-bit (w + g + master + state)
//   sgd         4 + 4 + 0       =  8         d + d + 4 + 0
//   momentum    4 + 4 + 4       = 12         d + d + 4 + 4
//   adam        4 + 4 + 8       = 16         d + d + 4 + 8      (= 16 for bf16, Rajbhandari et al. 2020)
//
// Activations: a stage keeps, for every micro-batch in flight (GPipe: all M; 1F1B: at most K - s on
// stage s, see sim::in_flight_micro_batches), what its layers stash for backward, plus the tensors
// it received that its layers stash. Recomputation trades that for extra forward work:
//   selective  drop the private stash of the layers marked recompute_cheap (the attention core's
//              softmax and dropout tensors, Korthikanti et al. 2022); one micro-batch's worth is
//              rebuilt at a time
//   full       keep only each block's input (checkpoint per block, Megatron's full recompute);
//              the largest block's whole stash is rebuilt for one micro-batch at a time
//   selective-op  torchtitan's per-op checkpointing of each transformer block (a block with an
//              attention layer; the others keep their stash): the block's input and the outputs of
//              the ops it saves (op_checkpoint_kept: every other matmul, SDPA's output; with tensor and
//              sequence parallelism the reduce-scatters' s/tp outputs); the block's
//              whole stash, less what was kept, is rebuilt for one micro-batch at a time
// Workspace is the largest, over the stage's layers, of library scratch (im2col for convolutions)
// plus the gradient buffers live during that layer's backward (its input and output gradients).
// Tensor parallelism (tp GPUs per group) divides the weights, work and private stash of the layers
// it splits and the stashed tensors that are split; replicated layers and tensors stay whole
// (Korthikanti et al.: s h (10 + 24/t) + 5 a s^2 / t bytes per GPT layer and sample). With sequence
// parallelism the replicated layers of a sequence model (norms, dropout, residual adds) work on s/t
// tokens, so their stash divides by t too: s h 34/t + 5 a s^2 / t. Context parallelism (cp GPUs per
// sequence) divides every activation of a sequence model by cp (each GPU keeps its s/cp tokens).
//
// Expert parallelism (ep GPUs) divides the experts layers' parameters by ep; their training state is
// sharded over its own ZeRO group (expert_shard). The experts layers' stash is that of the busiest
// GPU's rows (expert_load), and with ep > 1 each keeps its dispatch buffers as workspace: the tokens
// it sends and those it receives, (1 + expert_load) x tokens x top_k x hidden per sample. An expert
// split over shards = ep / experts GPUs (ep > experts) receives every copy routed to it on each
// shard: its input stash and both buffers are shards times larger. With sequence parallelism the
// dispatched copies are gathered over the tensor-parallel group before the experts (Megatron-Core's
// token dispatchers), so the experts' input stash is whole on every tensor rank, not / t; the
// dispatch buffers hold each rank's s/t tokens.
// Sharded data parallelism (ZeRO, Rajbhandari et al. 2020; FSDP) over a group of N GPUs divides the
// training state: stage 1 the optimizer state, stage 2 also the gradients, stage 3 also the weights.
// With mixed-precision Adam (2 + 2 + 12 bytes per parameter): 16 P, 4 P + 12 P/N, 2 P + 14 P/N, 16 P/N.
// The buffers this needs are workspace: stage 2 and 3 the unsharded gradients of the largest block
// before they are reduce-scattered, stage 3 the gathered weights of the largest block and of the
// next one (prefetched).
//
//   StageMemoryModel mem(model, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam}, 4);  // micro-batch 4
//   MemoryBreakdown m = mem.stage({0, 13}, 8);   // blocks [0, 13) with 8 micro-batches in flight
//   m.total();                                   // bytes
#pragma once

#include "common/Dtype.hpp"
#include "common/EnumTable.hpp"
#include "common/ZeroStage.hpp"
#include "models/Model.hpp"

#include <optional>
#include <vector>

namespace ddlsim::models {

enum class Optimizer { sgd, momentum, adam };

inline constexpr EnumTable<Optimizer, 3> optimizer_table{{{
    {"sgd", Optimizer::sgd, "plain SGD: no optimizer state"},
    {"momentum", Optimizer::momentum, "SGD with momentum: one fp32 buffer per parameter"},
    {"adam", Optimizer::adam, "Adam/AdamW: two fp32 moments per parameter"},
}}};

enum class Recompute { none, selective, full, selective_op };

inline constexpr EnumTable<Recompute, 4> recompute_table{{{
    {"none", Recompute::none, "keep every activation backward needs"},
    {"selective", Recompute::selective, "recompute the attention core (softmax, dropout) in backward"},
    {"full", Recompute::full, "keep only each block's input; rerun the block's forward before its backward"},
    {"selective-op", Recompute::selective_op,
     "torchtitan's per-op checkpointing: keep every other matmul's and SDPA's outputs, rerun the rest of each "
     "transformer block"},
}}};

/// Whether an attention layer runs fused (FlashAttention: SDPA's flash backend under PyTorch).
bool fused_attention(const Layer& layer);

/// Whether recomputation `recompute` reruns `layer`'s forward in its backward pass (and so whatever
/// communication that forward does): full reruns every layer, selective the recompute_cheap ones,
/// selective-op an attention layer that is not fused (SDPA's output is kept; which other layers rerun
/// depends on their block: op_checkpoint_kept).
inline bool reruns_forward(Recompute recompute, const Layer& layer)
{
  return recompute == Recompute::full || (recompute == Recompute::selective && layer.recompute_cheap) ||
         (recompute == Recompute::selective_op && layer.kind == LayerKind::attention && !fused_attention(layer));
}

/// Whether per-op checkpointing (Recompute::selective_op) wraps `block`: torchtitan checkpoints each
/// transformer block, a block with an attention layer; the embedding and the output head keep their stash.
bool op_checkpointed(const Model& model, StageRange block);

/// torchtitan's per-op selective checkpointing (`selective_ac_option = "op"`, torch.utils.checkpoint's
/// selective contexts) of the checkpointed block `block`: per layer, in order, the share of its forward
/// output the checkpoint keeps instead of recomputing. Its policy keeps the outputs of aten.mm (but every
/// second one of the block, counted in call order), of SDPA's flash and efficient kernels and of
/// reduce-scatters, and recomputes every other op. Here: a linear without a bias keeps the matmuls
/// (Layer::matmuls) the count gives it (one with a bias runs addmm: none); a fused attention keeps its
/// output (its copies rerun); every other layer keeps nothing.
std::vector<double> op_checkpoint_kept(const Model& model, StageRange block);

/// The layers of [begin, end) that per-op checkpointing wraps (their blocks op_checkpointed), in order,
/// each with the share of its forward it keeps (op_checkpoint_kept, counted over the whole block).
std::vector<std::pair<std::size_t, double>> op_checkpoint_layers(const Model& model, std::size_t begin,
                                                                 std::size_t end);

/// Optimizer bytes per parameter beyond weights and gradients (moments, and the fp32 master copy
/// when `dtype` is narrower than 32 bits).
double optimizer_bytes_per_parameter(Optimizer optimizer, Dtype dtype);

struct MemoryOptions {
  Dtype dtype            = Dtype::bf16;
  Optimizer optimizer = Optimizer::adam;
  Recompute recompute = Recompute::none;
  double reserve_bytes = 0;  ///< CUDA context, NCCL buffers, allocator slack
  int tp = 1;                ///< tensor-parallel GPUs sharing each layer (see Layer::tp)
  bool sequence_parallel = false;  ///< replicated per-token layers split over tp too (Megatron SP)
  int cp = 1;                ///< context-parallel GPUs sharing each sequence
  ZeroStage zero         = ZeroStage::none;  ///< sharded data parallelism (common/ZeroStage.hpp)
  int shard = 1;             ///< GPUs of the ZeRO shard group
  int ep = 1;                ///< expert parallelism: a GPU holds 1/ep of every experts layer (moe)
  int expert_shard = 1;      ///< GPUs of the ZeRO shard group of the experts' state (of those holding them)
  /// The experts layers' rows on the GPU that has the most, over the uniform dropless rows
  /// (models::ExpertLoad: its busiest rank, or its kept share with ep 1): scales their stash, and
  /// with ep > 1 the dispatch buffers
  double expert_load = 1;
  /// Bytes of a gradient element (0: the dtype's): Megatron accumulates bf16 weights' gradients in fp32
  double gradient_bytes = 0;
  /// Bytes per weight held beside it (0: none): Transformer Engine's FP8 copy and its transpose (2)
  double weight_copy_bytes = 0;
  /// Bytes of a stashed element that only linear layers keep, a GEMM input (0: the dtype's): with FP8
  /// GEMMs Transformer Engine keeps the FP8 cast of the input for the weight gradient (1)
  double gemm_input_bytes = 0;
  /// The held weights' dtype when it is not `dtype`: autocast's fp32 weights, which are their own master
  /// copy (the optimizer keeps no other); unset: `dtype`'s
  std::optional<Dtype> weights = std::nullopt;
};

/// Parts of the training state a GPU keeps under ZeRO `stage` with a shard group of `shard` GPUs,
/// for `parameters` held parameters (already divided by tp and pp): bytes.
struct TrainingState {
  double weights = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double total() const { return weights + gradients + optimizer_state; }
};
TrainingState training_state(double parameters, Dtype dtype, Optimizer optimizer, ZeroStage zero, int shard);
/// The same with gradients of `gradient_bytes` per element and `weight_copy_bytes` more per weight
/// (MemoryOptions::gradient_bytes, weight_copy_bytes).
TrainingState training_state(double parameters, Dtype dtype, Optimizer optimizer, ZeroStage zero, int shard,
                             double gradient_bytes, double weight_copy_bytes);

struct MemoryBreakdown {
  double weights = 0;          ///< bytes
  double gradients = 0;        ///< bytes
  double optimizer_state = 0;  ///< bytes (moments and the fp32 master copy in mixed precision)
  double activations = 0;      ///< bytes stashed for backward at the peak
  double workspace = 0;        ///< bytes of scratch and gradient buffers at the peak
  double reserve = 0;          ///< bytes set aside for the framework
  double parameters = 0;       ///< parameters held (count), tied copies included
  double total() const { return weights + gradients + optimizer_state + activations + workspace + reserve; }
};

/// Memory of stages made of block ranges of one model, at one micro-batch size. Precomputes sums
/// over blocks so that any range costs O(1) (plus the few tied layers): the partitioners ask for
/// thousands of candidate stages.
class StageMemoryModel {
public:
  /// Throws std::invalid_argument when micro_batch_size < 1.
  StageMemoryModel(const Model& model, const MemoryOptions& options, int micro_batch_size);

  /// Memory of the device holding blocks [blocks.begin, blocks.end) with `in_flight` micro-batches'
  /// activations stashed at its peak.
  MemoryBreakdown stage(StageRange blocks, int in_flight) const;
  /// Parameters (count) a device holding these blocks keeps, including tied copies and its share of
  /// the experts.
  double parameters(StageRange blocks) const;
  /// Of parameters(blocks), the experts' (its 1/ep share of the experts layers, / tp).
  double expert_parameters(StageRange blocks) const { return expert_params_[blocks.end] - expert_params_[blocks.begin]; }

private:
  double range_max(const std::vector<std::vector<double>>& table, StageRange blocks) const;

  const Model* model_;
  MemoryOptions options_;
  double micro_batch_;
  std::vector<double> params_;     // prefix sums over blocks
  std::vector<double> expert_params_;  // of which the experts'
  std::vector<double> stash_;      // bytes per sample, no recomputation
  std::vector<double> cheap_;      // bytes per sample selective recomputation drops
  std::vector<double> boundary_;   // bytes per sample of each block's input
  std::vector<double> op_kept_; // bytes per sample per-op checkpointing keeps (a block's stash when not checkpointed)
  std::vector<bool> op_block_;  // whether per-op checkpointing wraps the block
  std::vector<std::vector<double>> max_cheap_;      // sparse tables over blocks
  std::vector<std::vector<double>> max_full_;
  std::vector<std::vector<double>> max_op_rerun_; // a checkpointed block's stash less what it keeps
  std::vector<std::vector<double>> max_workspace_;
  std::vector<std::vector<double>> max_block_params_;  // parameters of the largest block (ZeRO buffers)
  std::vector<std::size_t> tied_layers_;
};

}  // namespace ddlsim::models
