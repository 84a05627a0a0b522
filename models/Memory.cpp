#include "models/Memory.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ddlsim::models {
namespace {

// Sparse table: table[j][i] = max of values[i .. i + 2^j).
std::vector<std::vector<double>> sparse_table(const std::vector<double>& values)
{
  std::vector<std::vector<double>> table{values};
  for (std::size_t span = 1; 2 * span <= values.size(); span *= 2) {
    const auto& prev = table.back();
    std::vector<double> next(values.size() - 2 * span + 1);
    for (std::size_t i = 0; i < next.size(); ++i)
      next[i] = std::max(prev[i], prev[i + span]);
    table.push_back(std::move(next));
  }
  return table;
}

}  // namespace

bool fused_attention(const Layer& layer)
{
  return std::any_of(layer.kernels.begin(), layer.kernels.end(), [](const Kernel& k) { return k.fused; });
}

bool op_checkpointed(const Model& model, StageRange block)
{
  return std::any_of(model.layers().begin() + static_cast<std::ptrdiff_t>(block.begin),
                     model.layers().begin() + static_cast<std::ptrdiff_t>(block.end),
                     [](const Layer& l) { return l.kind == LayerKind::attention; });
}

std::vector<double> op_checkpoint_kept(const Model& model, StageRange block)
{
  std::vector<double> kept;
  int matmuls = 0; // aten.mm calls so far in the block's forward
  for (std::size_t i = block.begin; i < block.end; ++i) {
    const Layer& l = model.layers()[i];
    double share   = 0;
    if (l.kind == LayerKind::linear && !l.bias) {
      const std::vector<double> parts = l.matmuls.empty() ? std::vector<double>{l.output.features} : l.matmuls;
      double saved                    = 0;
      for (double features : parts)
        if (++matmuls % 2 == 1) // every second mm of the block is recomputed
          saved += features;
      share = saved / l.output.features;
    } else if (l.kind == LayerKind::attention && fused_attention(l)) {
      share = 1;
    }
    kept.push_back(share);
  }
  return kept;
}

std::vector<std::pair<std::size_t, double>> op_checkpoint_layers(const Model& model, std::size_t begin, std::size_t end)
{
  std::vector<std::pair<std::size_t, double>> out;
  for (std::size_t l = begin; l < end;) {
    const StageRange block = model.blocks()[model.layers()[l].block].layers;
    const std::size_t last = std::min(end, block.end);
    if (op_checkpointed(model, block)) {
      const std::vector<double> kept = op_checkpoint_kept(model, block);
      for (; l < last; ++l)
        out.emplace_back(l, kept[l - block.begin]);
    }
    l = last;
  }
  return out;
}

double optimizer_bytes_per_parameter(Optimizer optimizer, Dtype dtype)
{
  const double state = optimizer == Optimizer::adam ? 8.0 : optimizer == Optimizer::momentum ? 4.0 : 0.0;
  const double master = dtype_bytes(dtype) < 4.0 ? 4.0 : 0.0;
  return state + master;
}

TrainingState training_state(double parameters, Dtype dtype, Optimizer optimizer, ZeroStage zero, int shard)
{
  return training_state(parameters, dtype, optimizer, zero, shard, dtype_bytes(dtype), 0);
}

TrainingState training_state(double parameters, Dtype dtype, Optimizer optimizer, ZeroStage zero, int shard,
                             double gradient_bytes, double weight_copy_bytes)
{
  if (zero_level(zero) > 3 || shard < 1)
    throw std::invalid_argument("ZeRO stage must be 0-3 and the shard group >= 1 GPU");
  const double n = shard;
  TrainingState s;
  s.weights         = parameters * (dtype_bytes(dtype) + weight_copy_bytes) / (shards_parameters(zero) ? n : 1.0);
  s.gradients       = parameters * gradient_bytes / (shards_gradients(zero) ? n : 1.0);
  s.optimizer_state = parameters * optimizer_bytes_per_parameter(optimizer, dtype) / (shards_optimizer(zero) ? n : 1.0);
  return s;
}

StageMemoryModel::StageMemoryModel(const Model& model, const MemoryOptions& options, int micro_batch_size)
    : model_(&model), options_(options), micro_batch_(micro_batch_size)
{
  if (micro_batch_size < 1)
    throw std::invalid_argument("micro-batch size must be >= 1");
  if (options.tp < 1 || options.cp < 1)
    throw std::invalid_argument("tp and cp must be >= 1");
  if (zero_level(options.zero) > 3 || options.shard < 1)
    throw std::invalid_argument("ZeRO stage must be 0-3 and the shard group >= 1 GPU");
  const double d = dtype_bytes(options.dtype);
  const double tp = options.tp;
  const auto& layers = model.layers();
  const std::size_t nb = model.blocks().size();
  if (options.ep < 1 || options.expert_shard < 1 || !(options.expert_load >= 0))
    throw std::invalid_argument("ep and the expert shard group must be >= 1, the expert load >= 0");
  params_.assign(nb + 1, 0.0);
  expert_params_.assign(nb + 1, 0.0);
  stash_.assign(nb + 1, 0.0);
  cheap_.assign(nb + 1, 0.0);
  boundary_.assign(nb + 1, 0.0);
  std::vector<double> block_cheap(nb, 0.0), block_full(nb, 0.0), block_workspace(nb, 0.0), block_params(nb, 0.0);
  // Sequence and context parallelism split the tokens of a sequence model's activations.
  const bool sequence_model = model.has(LayerKind::attention);
  const double cp = sequence_model ? options.cp : 1.0;
  for (std::size_t b = 0; b < nb; ++b) {
    const StageRange r = model.blocks()[b].layers;
    double params = 0, experts = 0, stash = 0, cheap = 0, workspace = 0;
    for (std::size_t i = r.begin; i < r.end; ++i) {
      const Layer& l = layers[i];
      const bool expert_layer = l.kind == LayerKind::moe;
      const double share = tp_divides(l.tp) ? 1.0 / tp : 1.0;
      const bool sp = options.sequence_parallel && sequence_model && !l.output.image;
      const double stash_share = (sp ? 1.0 / tp : share) / cp;  // of the layer's private stash
      const double rows = expert_layer ? options.expert_load : 1.0;  // the busiest GPU's tokens
      // An expert split over `shards` GPUs (ep > experts): each shard receives every token copy routed
      // to its expert, whole, and keeps it for backward (its GEMM outputs are 1/shards as wide).
      const double shards = expert_layer && options.ep > l.experts ? static_cast<double>(options.ep / l.experts) : 1.0;
      params += l.parameters * share / (expert_layer ? options.ep : 1);
      experts += expert_layer ? l.parameters * share / options.ep : 0.0;
      const double split = model.owned_split_stash_elements(i);
      double whole = model.owned_stash_elements(i) - split;
      if (shards > 1 && !l.inputs.empty())
        whole += (shards - 1) * layers[l.inputs.front()].output_elements();
      // The experts' whole stash is their input, the dispatched token copies. With sequence
      // parallelism they are gathered over the tensor-parallel group before the experts (Megatron-
      // Core's token_dispatcher.py: the all-to-all dispatcher's "permute -> A2A(EP) -> AG(TP)", the
      // all-gather dispatcher's gather over TP x EP of the [S/TP, B, H] tokens; the replay's gather
      // before the experts with ep > 1, before the router with ep 1), and the experts' first GEMM
      // keeps that gathered input: every tensor rank holds all of it, not 1/tp.
      const bool sharded = sp && !expert_layer;
      // Elements one GPU keeps of a layer's owned stash (`whole` kept whole, `split` split over tp).
      const auto on_gpu = [&](double kept_whole, double kept_split) {
        return (sharded ? kept_whole / tp : kept_whole) + kept_split / tp;
      };
      stash += (on_gpu(whole, split) * d / cp + l.stashed_mask_bytes * stash_share) * rows;
      if (options.gemm_input_bytes > 0) { // GEMM inputs kept narrower (Transformer Engine's FP8)
        const double gemm_split = model.owned_split_gemm_input_stash_elements(i);
        const double gemm_whole = model.owned_gemm_input_stash_elements(i) - gemm_split;
        stash -= on_gpu(gemm_whole, gemm_split) * (d - options.gemm_input_bytes) / cp * rows;
      }
      if (l.recompute_cheap) {
        const double dropped = (l.stashed_elements * d + l.stashed_mask_bytes) * stash_share;
        cheap += dropped;
        block_cheap[b] = std::max(block_cheap[b], dropped);
      }
      double gradients = l.output_elements();
      for (std::size_t in : l.inputs)
        gradients += layers[in].output_elements();
      if (l.inputs.empty())
        gradients += model.input_shape().elements();
      double buffers = 0;  // the dispatch's send and receive buffers (every copy to each shard)
      if (expert_layer && options.ep > 1)
        buffers = shards * (1 + options.expert_load) * l.output_elements() * d / cp / (sp ? tp : 1.0);
      workspace = std::max(workspace, (l.workspace_elements() + gradients) * d * share / cp + buffers);
      if (l.tied_parameters > 0)
        tied_layers_.push_back(i);
    }
    const double input = model.crossing_elements(r.begin) * d / cp / (options.sequence_parallel && sequence_model ? tp : 1.0);
    params_[b + 1] = params_[b] + params;
    expert_params_[b + 1] = expert_params_[b] + experts;
    block_params[b] = params;
    stash_[b + 1] = stash_[b] + stash;
    cheap_[b + 1] = cheap_[b] + cheap;
    boundary_[b + 1] = boundary_[b] + input;
    block_full[b] = stash + model.crossing_stash_elements(r.begin) * d / cp /
                            (options.sequence_parallel && sequence_model ? tp : 1.0);
    block_workspace[b] = workspace;
  }
  // Per-op checkpointing: a transformer block keeps its input and the outputs its policy saves (a
  // linear's whole on each tensor-parallel GPU unless split by columns; SDPA's output and its fp32
  // log-sum-exp per head and token), and rebuilds the rest of its stash in its backward; another
  // block keeps its stash.
  op_kept_.assign(nb + 1, 0.0);
  op_block_.assign(nb, false);
  std::vector<double> block_op_rerun(nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    const StageRange r = model.blocks()[b].layers;
    double kept        = stash_[b + 1] - stash_[b];
    if (op_checkpointed(model, r)) {
      const std::vector<double> share = op_checkpoint_kept(model, r);
      // Whether the block's stash holds tensor t (a layer's output, or its input when t < r.begin).
      const auto stashed = [&](std::size_t t) {
        for (std::size_t j = r.begin; j < r.end; ++j)
          if ((layers[j].stash_inputs &&
               std::find(layers[j].inputs.begin(), layers[j].inputs.end(), t) != layers[j].inputs.end()) ||
              (layers[j].stash_output && j == t))
            return true;
        return false;
      };
      const double input = boundary_[b + 1] - boundary_[b];
      double outputs = 0, of_stash = 0; // kept; and of that, what the stash holds (not rebuilt)
      for (std::size_t i = r.begin; i < r.end; ++i) {
        const Layer& l      = layers[i];
        const double split  = tp_output_split(l.tp) ? tp : 1.0;
        const double output = share[i - r.begin] * l.output_elements() * d / split / cp;
        outputs += output;
        of_stash += stashed(i) ? output : 0.0;
        if (l.kind == LayerKind::attention && share[i - r.begin] > 0)
          outputs += l.heads * l.output.tokens * 4.0 / split / cp; // the fp32 log-sum-exp
        // its reduce-scatter's s/tp output (a row layer's, the experts' combine's)
        if ((l.tp == TpRole::row || l.kind == LayerKind::moe_combine) && tp > 1 && options.sequence_parallel)
          outputs += l.output_elements() * d / tp / cp;
      }
      bool input_stashed = false; // the block's input, kept by the checkpoint
      for (std::size_t j = r.begin; j < r.end; ++j)
        for (std::size_t t : layers[j].inputs)
          input_stashed |= t < r.begin && stashed(t);
      op_block_[b]      = true;
      kept              = input + outputs;
      block_op_rerun[b] = std::max(0.0, block_full[b] - of_stash - (input_stashed ? input : 0.0));
    }
    op_kept_[b + 1] = op_kept_[b] + kept;
  }
  max_op_rerun_     = sparse_table(block_op_rerun);
  max_cheap_ = sparse_table(block_cheap);
  max_full_ = sparse_table(block_full);
  max_workspace_ = sparse_table(block_workspace);
  max_block_params_ = sparse_table(block_params);
}

double StageMemoryModel::range_max(const std::vector<std::vector<double>>& table, StageRange blocks) const
{
  const std::size_t len = blocks.size();
  const auto level = static_cast<std::size_t>(std::bit_width(len) - 1);
  const std::size_t span = std::size_t{1} << level;
  return std::max(table[level][blocks.begin], table[level][blocks.end - span]);
}

double StageMemoryModel::parameters(StageRange blocks) const
{
  double p = params_[blocks.end] - params_[blocks.begin];
  const StageRange layers = model_->layer_range(blocks);
  for (std::size_t i : tied_layers_) {
    const Layer& l = model_->layers()[i];
    const bool user_here = i >= layers.begin && i < layers.end;
    const bool owner_here = l.tied_to >= layers.begin && l.tied_to < layers.end;
    if (user_here && !owner_here)  // this stage keeps its own copy of the shared weights
      p += l.tied_parameters / (tp_divides(l.tp) ? options_.tp : 1);
  }
  return p;
}

MemoryBreakdown StageMemoryModel::stage(StageRange blocks, int in_flight) const
{
  if (blocks.begin >= blocks.end || blocks.end > model_->blocks().size())
    throw std::out_of_range("block range out of range");
  const double d = dtype_bytes(options_.dtype);
  MemoryBreakdown m;
  m.parameters = parameters(blocks);
  // Dense weights are sharded over the shard group, the experts' over their own.
  const double experts = expert_parameters(blocks);
  const double g = options_.gradient_bytes > 0 ? options_.gradient_bytes : d;
  const Dtype held          = options_.weights.value_or(options_.dtype); // the weights' dtype, and so their master's
  const TrainingState state = training_state(m.parameters - experts, held, options_.optimizer, options_.zero,
                                             options_.shard, g, options_.weight_copy_bytes);
  const TrainingState expert_state = training_state(experts, held, options_.optimizer, options_.zero,
                                                    options_.expert_shard, g, options_.weight_copy_bytes);
  m.weights = state.weights + expert_state.weights;
  m.gradients = state.gradients + expert_state.gradients;
  m.optimizer_state = state.optimizer_state + expert_state.optimizer_state;

  const double n = std::max(in_flight, 0);
  const double b = micro_batch_;
  const std::size_t first_layer = model_->blocks()[blocks.begin].layers.begin;
  const bool sequence_model = model_->has(LayerKind::attention);
  const double token_split =
      sequence_model ? options_.cp * (options_.sequence_parallel ? static_cast<double>(options_.tp) : 1.0) : 1.0;
  const double received = model_->crossing_stash_elements(first_layer) * d / token_split;
  const double stash = stash_[blocks.end] - stash_[blocks.begin];
  switch (options_.recompute) {
  case Recompute::none: m.activations = n * b * (stash + received); break;
  case Recompute::selective:
    m.activations = n * b * (stash - (cheap_[blocks.end] - cheap_[blocks.begin]) + received) +
                    b * range_max(max_cheap_, blocks);
    break;
  case Recompute::full:
    m.activations = n * b * (boundary_[blocks.end] - boundary_[blocks.begin]) + b * range_max(max_full_, blocks);
    break;
  case Recompute::selective_op: // a first block not checkpointed keeps what it received, as without recomputation
    m.activations =
        n * b * (op_kept_[blocks.end] - op_kept_[blocks.begin] + (op_block_[blocks.begin] ? 0.0 : received)) +
        b * range_max(max_op_rerun_, blocks);
    break;
  }
  m.workspace = b * range_max(max_workspace_, blocks);
  // ZeRO buffers: the largest block's unsharded gradients before their reduce-scatter (stages 2, 3)
  // and its gathered weights with the next block's prefetched (stage 3).
  if (shards_gradients(options_.zero) && options_.shard > 1) {
    const double block = range_max(max_block_params_, blocks) * d;
    m.workspace += block * (shards_parameters(options_.zero) ? 3.0 : 1.0);
  }
  m.reserve = options_.reserve_bytes;
  return m;
}

}  // namespace ddlsim::models
