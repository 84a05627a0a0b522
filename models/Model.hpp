// A network as a DAG of layers stored in topological order, grouped into blocks.
//
// Blocks are the units a pipeline partition cuts between (the children of torchgpipe's
// nn.Sequential: a transformer layer, a residual unit, an AmoebaNet cell); a block is a contiguous
// run of layers in the order. Layers say which layers feed them (Layer::inputs), so a residual or
// a cell's two inputs can cross a stage boundary, and the model knows what crosses every cut.
//
// Activations saved for backward are deduplicated: a tensor that two layers stash (a ReLU's output
// and the next convolution's input) is owned by the first of them and counted once.
//
//   Model m = load_model("resnet50");
//   m.parameter_count();                       // 25,557,032
//   m.blocks().size();                         // stem, 16 bottlenecks, head
//   m.crossing_elements(m.blocks()[5].layers.begin);   // elements per sample sent at that cut
#pragma once

#include "common/Dtype.hpp"
#include "models/Layer.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::models {

/// A half-open range [begin, end) of layers or of blocks.
struct StageRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool operator==(const StageRange&) const = default;
};

struct Block {
  std::string name;
  StageRange layers;
};

/// A decoder-only transformer's hyper-parameters as its generator was given them (make_gpt,
/// make_llama in Zoo.hpp): what another framework needs to build the same model (`ddlsim export
/// megatron`). Other models have none.
struct Architecture {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0, seq = 0, vocab = 0;
  bool swiglu = false;           ///< else a GeLU MLP
  bool rms_norm = false;         ///< else LayerNorm
  bool rope = false;             ///< else learned absolute positions
  bool tied_embeddings = false;  ///< the LM head reuses the token embedding
  bool bias = false;             ///< the linear layers have biases
  bool dropout = false;
  bool flash = false;            ///< FlashAttention (else the eager, unfused core)
  int experts = 0, top_k = 0, expert_ffn_hidden = 0, shared_experts = 0, dense_layers = 0;  ///< experts 0: dense
  double capacity_factor = 0;    ///< 0: dropless
};

class Model {
public:
  Model() = default;
  /// `layers` must be in topological order (inputs earlier) with non-decreasing Layer::block indices
  /// into `block_names`, every block non-empty. Throws std::invalid_argument otherwise.
  Model(std::string name, TensorShape input, std::vector<Layer> layers, std::vector<std::string> block_names);

  const std::string& get_name() const { return name_; }
  const TensorShape& input_shape() const { return input_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  std::size_t size() const { return layers_.size(); }

  double parameter_count() const;
  /// Parameters one token uses: all but the routed experts it is not sent to (mixture of experts).
  double active_parameter_count() const;
  double forward_flop_per_sample() const;
  double backward_flop_per_sample() const;
  /// Activation bytes per sample saved for backward by the whole model, without recomputation.
  double stashed_bytes_per_sample(Dtype dtype) const;

  /// Stashed elements per sample owned by layer `i` (its private stash plus the shared tensors it is
  /// the first to keep). Masks are Layer::stashed_mask_bytes.
  double owned_stash_elements(std::size_t i) const { return owned_stash_[i]; }
  /// Bytes per sample layer `i` keeps for backward in `dtype`: its owned elements plus its masks.
  double owned_stash_bytes(std::size_t i, Dtype dtype) const
  {
    return owned_stash_[i] * dtype_bytes(dtype) + layers_[i].stashed_mask_bytes;
  }
  /// The part of owned_stash_elements(i) that tensor parallelism splits (the layer's own work when
  /// it divides, stashed tensors that are split); the rest is kept whole on every GPU of the group.
  double owned_split_stash_elements(std::size_t i) const { return owned_split_stash_[i]; }
  /// Whether layer `i` produces an input of a softmax_loss layer: the output projection (an LM head),
  /// which Megatron runs outside Transformer Engine (a plain ColumnParallelLinear, never FP8).
  bool feeds_loss(std::size_t i) const { return feeds_loss_[i] != 0; }
  /// Of owned_stash_elements(i) (and of its split part), the tensors only linear layers stash, the
  /// output projection aside: GEMM inputs, which Transformer Engine keeps in FP8 with FP8 GEMMs.
  double owned_gemm_input_stash_elements(std::size_t i) const { return owned_gemm_stash_[i]; }
  double owned_split_gemm_input_stash_elements(std::size_t i) const { return owned_split_gemm_stash_[i]; }
  /// Elements per sample of the tensors produced before layer position `p` and consumed at or
  /// after it: what a pipeline stage starting at `p` receives (and returns gradients for).
  double crossing_elements(std::size_t p) const { return crossing_[p]; }
  /// Elements per sample of tensors stashed both before `p` (by their owner) and at or after it: a
  /// stage starting at `p` keeps its own copy of them.
  double crossing_stash_elements(std::size_t p) const { return crossing_stash_[p]; }
  /// Parameters of layer `i` that each GPU holding layers `stage` keeps, with tensor parallelism
  /// over `tp` GPUs: its own, plus its own copy of tied weights whose owner is outside the stage,
  /// both / tp when tensor parallelism splits the layer.
  double held_parameters(std::size_t i, StageRange stage, int tp = 1) const;
  /// Layers of a range of blocks.
  StageRange layer_range(StageRange blocks) const;
  /// True when some layer is of this kind.
  bool has(LayerKind kind) const;
  /// The transformer generator's hyper-parameters; null for other models.
  const Architecture* architecture() const { return architecture_.has_value() ? &*architecture_ : nullptr; }
  void set_architecture(const Architecture& a) { architecture_ = a; }

private:
  std::string name_;
  std::optional<Architecture> architecture_;
  TensorShape input_;
  std::vector<Layer> layers_;
  std::vector<Block> blocks_;
  std::vector<double> owned_stash_;
  std::vector<double> owned_split_stash_;
  std::vector<char> feeds_loss_;
  std::vector<double> owned_gemm_stash_;
  std::vector<double> owned_split_gemm_stash_;
  std::vector<double> crossing_;        // size n + 1
  std::vector<double> crossing_stash_;  // size n + 1
};

}  // namespace ddlsim::models
