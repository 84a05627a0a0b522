// Building a Model layer by layer, with shapes inferred and kernels filled in.
//
// Each call adds one layer, reads the shapes of its inputs, checks them, and returns the layer's
// output. The generators (Zoo.hpp) and the YAML layer-list loader both build through it, so every
// layer type has its flop, traffic, stash and kernel shapes defined in one place (ModelBuilder.cpp).
//
//   ModelBuilder b("tiny", TensorShape::picture(3, 32, 32));
//   b.block("stem");
//   Tensor x = b.conv2d(b.input(), {.out_channels = 16, .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, "conv");
//   x = b.norm(x, Normalization::batch_norm, "bn");
//   x = b.activation(x, Activation::relu, "relu");
//   b.block("head");
//   x = b.pool(x, {.mode = PoolMode::avg, .global = true}, "gap");
//   x = b.linear(x, 10, true, "fc");
//   b.softmax_loss(x, "loss");
//   Model m = b.build();
//
// Shape errors throw std::invalid_argument with a message that names the layer.
#pragma once

#include "common/EnumTable.hpp"
#include "models/Model.hpp"

#include <limits>
#include <string>
#include <vector>

namespace ddlsim::models {

enum class Activation { relu, gelu, tanh, sigmoid, silu };
inline constexpr EnumTable<Activation, 5> activation_table{{{
    {"relu", Activation::relu, "max(x, 0); keeps its output for backward"},
    {"gelu", Activation::gelu, "Gaussian error linear unit; keeps its input"},
    {"tanh", Activation::tanh, "hyperbolic tangent; keeps its output"},
    {"sigmoid", Activation::sigmoid, "logistic function; keeps its output"},
    {"silu", Activation::silu, "x * sigmoid(x); keeps its input"},
}}};

enum class PoolMode { max, avg };
inline constexpr EnumTable<PoolMode, 2> pool_mode_table{{{
    {"max", PoolMode::max, "maximum over the window; keeps its input and the argmax indices"},
    {"avg", PoolMode::avg, "average over the window; keeps nothing"},
}}};

enum class Normalization { batch_norm, sync_batch_norm, group_norm, layer_norm, rms_norm };
inline constexpr EnumTable<Normalization, 5> normalization_table{{{
    {"batch_norm", Normalization::batch_norm, "statistics over each replica's micro-batch"},
    {"sync_batch_norm", Normalization::sync_batch_norm,
     "statistics over all data-parallel replicas (all-reduce in forward and backward)"},
    {"group_norm", Normalization::group_norm, "statistics per sample over channel groups"},
    {"layer_norm", Normalization::layer_norm, "statistics per sample (per token) over all features"},
    {"rms_norm", Normalization::rms_norm, "root mean square per token over all features, scale only (Llama)"},
}}};

/// How the attention core is computed.
///   eager  cuBLAS QK^T, softmax, PV: the a x s x s scores and probabilities are written to memory and
///          the probabilities kept for backward (Megatron's unfused path)
///   flash  FlashAttention (Dao 2022-2023): one fused kernel per pass, no s x s tensor in memory; it
///          keeps only the output and the log-sum-exp per row and recomputes QK^T in the backward pass
///          (counted in the backward's flop); with a causal mask it skips the blocks above the diagonal
enum class AttentionKind { eager, flash };
inline constexpr EnumTable<AttentionKind, 2> attention_kind_table{{{
    {"eager", AttentionKind::eager, "QK^T, softmax and PV as separate kernels; the s x s probabilities kept"},
    {"flash", AttentionKind::flash, "FlashAttention: fused, no s x s tensor kept, QK^T recomputed in backward"},
}}};

/// A mixture-of-experts layer (Shazeer et al. 2017; GShard; Mixtral; DeepSeek-MoE).
struct MoeOptions {
  int experts = 8;
  int top_k = 2;
  double expert_ffn_hidden = 0;  ///< each expert's MLP width
  bool swiglu = true;            ///< experts as SwiGLU (3 matrices) or GeLU MLPs (2)
  double capacity_factor = 0;    ///< tokens an expert takes over the mean (0: dropless)
  double load_imbalance = 1;     ///< the busiest expert's tokens over the mean (>= 1)
};

struct AttentionOptions {
  int heads = 1;
  int kv_heads = 0;  ///< key/value heads (grouped-query attention); 0 means heads (multi-head)
  bool dropout = false;
  AttentionKind kind = AttentionKind::eager;
  bool causal = false;  ///< decoder mask: flash computes only the blocks on and below the diagonal
};

/// An output of a layer being built; producer is the layer index, or `model_input`.
struct Tensor {
  static constexpr std::size_t model_input = std::numeric_limits<std::size_t>::max();
  std::size_t producer = model_input;
  TensorShape shape;
};

struct ConvOptions {
  int out_channels = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int groups = 1;
  bool bias = false;
};

struct PoolOptions {
  PoolMode mode = PoolMode::max;
  int kernel = 2;
  int stride = 0;  ///< 0 means the kernel size
  int padding = 0;
  bool global = false;  ///< pool each channel's whole plane to 1 x 1
};

struct CustomCosts {
  double parameters = 0;
  double forward_flop = 0;      ///< per sample
  double backward_flop = 0;     ///< per sample
  double output_elements = 0;   ///< per sample
  double stashed_elements = 0;  ///< per sample
  double traffic_elements = 0;  ///< elements read + written per sample in forward
};

/// A linear layer's GEMM kernel: `m` rows (tokens) of one sample by `n` output features over `k` input
/// features, with the costs of its forward and of its backward's data- and weight-gradient GEMMs.
Kernel gemm_kernel(std::string name, double m, double n, double k);

class ModelBuilder {
public:
  ModelBuilder(std::string model_name, TensorShape input);

  Tensor input() const { return {Tensor::model_input, input_}; }
  /// Starts a new block (pipeline partition unit); the layers added next belong to it.
  void block(std::string name);
  std::size_t layer_count() const { return layers_.size(); }

  Tensor linear(Tensor x, double out_features, bool bias, std::string name);
  Tensor conv2d(Tensor x, const ConvOptions& options, std::string name);
  Tensor pool(Tensor x, const PoolOptions& options, std::string name);
  /// Attention core on a fused QKV input of 3 x hidden features: softmax(Q K^T / sqrt(d)) V with
  /// `heads` heads, optional dropout on the probabilities. Output: tokens x hidden.
  Tensor attention(Tensor qkv, int heads, bool dropout, std::string name);
  /// Attention core on a fused QKV input of (heads + 2 kv_heads) x head_dim features (grouped-query
  /// attention when kv_heads < heads; each K/V head serves heads / kv_heads query heads). Output:
  /// tokens x (heads x head_dim).
  Tensor attention(Tensor qkv, const AttentionOptions& options, std::string name);
  /// Rotary position embedding (Su et al. 2021) on the Q and K parts of a fused QKV input of
  /// (heads + 2 kv_heads) head_dim features: an element-wise rotation, no parameters, nothing kept.
  Tensor rotary(Tensor qkv, int heads, int kv_heads, std::string name);
  /// SwiGLU gate (Shazeer 2020): silu(a) * b on the halves a, b of its input. Output: half the features.
  Tensor swiglu(Tensor x, std::string name);
  /// Mixture of experts on tokens x hidden, as three layers (the dispatch and combine all-to-alls of
  /// expert parallelism go between them): `name.router` (moe_router: a router GEMM hidden x experts,
  /// top-k, the tokens permuted to their experts, tokens x top_k rows out), `name.experts` (moe: each
  /// expert's MLP on the rows routed to it, grouped GEMMs of tokens x top_k rows in all) and
  /// `name.combine` (moe_combine: the weighted sum back to tokens x hidden). Parameters: router +
  /// experts x expert MLP; a token uses the router and top_k experts. Throws std::invalid_argument
  /// unless 1 <= top_k <= experts and 1 <= load_imbalance <= experts.
  Tensor moe(Tensor x, const MoeOptions& options, std::string name);
  /// Token lookup in a vocab x hidden table, plus a learned `positions` x hidden position table when
  /// positions > 0. Input: tokens x 1 (token ids).
  Tensor embedding(Tensor tokens, double vocab, double hidden, double positions, std::string name);
  /// `groups` is used by group_norm only.
  Tensor norm(Tensor x, Normalization kind, std::string name, int groups = 32);
  Tensor activation(Tensor x, Activation function, std::string name);
  Tensor dropout(Tensor x, std::string name);
  Tensor add(const std::vector<Tensor>& xs, std::string name);
  Tensor concat(const std::vector<Tensor>& xs, std::string name);
  /// Softmax and cross-entropy over the features of each token (the classes). Output: the loss.
  Tensor softmax_loss(Tensor logits, std::string name);
  Tensor custom(const std::vector<Tensor>& xs, const CustomCosts& costs, std::string name);

  /// Sets how tensor parallelism splits the last layer added (defaults: linear and conv2d
  /// `gathered`, attention `split`, embedding `row`, everything else `replicated`).
  void set_tp(TpRole role);

  /// Says that the last layer, a linear, stands for several matrix multiplies of these output features
  /// (Layer::matmuls), which must add up to its own. Throws std::invalid_argument otherwise.
  void set_matmuls(std::vector<double> features);

  /// Marks the last layer as using the weights of layer `owner` (tied embeddings): the weights count
  /// once in the model, but a pipeline stage holding only the user keeps its own copy.
  void tie_last_to(std::size_t owner, double parameters);

  /// Finishes the model. Throws std::invalid_argument when it has no layers.
  Model build();

private:
  Layer& add_layer(LayerKind kind, std::string name, const std::vector<Tensor>& inputs, TensorShape output);
  std::string model_name_;
  TensorShape input_;
  std::vector<Layer> layers_;
  std::vector<std::string> block_names_;
};

}  // namespace ddlsim::models
