// One layer of a network: its kernels at their real shapes, and the per-sample sizes the simulator
// and the memory model need.
//
// Everything is per sample (one sequence for a transformer, one image for a CNN) and in elements,
// so one Layer serves every micro-batch size and dtype:
//   forward flop of a micro-batch of b samples   = b * forward_flop()
//   activations a layer keeps for backward      = its inputs and/or output (shared tensors, counted once
//                                                   by the Model) + private elements + mask bytes
//   weight bytes                                 = parameters * dtype_bytes
// Layers are made by ModelBuilder (models/ModelBuilder.hpp), which infers shapes and fills the kernels.
#pragma once

#include "common/EnumTable.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddlsim::models {

enum class LayerKind {
  linear,
  conv2d,
  pooling,
  attention,
  embedding,
  layer_norm,
  rms_norm,
  batch_norm,
  sync_batch_norm,
  group_norm,
  activation,
  swiglu,
  rotary,
  moe_router,
  moe,
  moe_combine,
  dropout,
  add,
  concat,
  softmax_loss,
  custom
};

inline constexpr EnumTable<LayerKind, 21> layer_kind_table{{{
    {"linear", LayerKind::linear, "fully connected: y = x W + b on the last dimension (flattens C x H x W)"},
    {"conv2d", LayerKind::conv2d, "2-D convolution (cuDNN), optional groups"},
    {"pooling", LayerKind::pooling, "max or average pooling, or global average pooling"},
    {"attention", LayerKind::attention, "self-attention core on fused QKV: batched GEMMs QK^T and PV with softmax"},
    {"embedding", LayerKind::embedding, "token (and learned position) embedding lookup"},
    {"layer_norm", LayerKind::layer_norm, "layer normalisation over the features of each token"},
    {"rms_norm", LayerKind::rms_norm, "RMSNorm over the features of each token: no mean, no bias (Llama)"},
    {"batch_norm", LayerKind::batch_norm, "batch normalisation, statistics over the local micro-batch"},
    {"sync_batch_norm", LayerKind::sync_batch_norm,
     "batch normalisation with statistics all-reduced across the data-parallel replicas"},
    {"group_norm", LayerKind::group_norm, "group normalisation (statistics per sample and channel group)"},
    {"activation", LayerKind::activation, "element-wise nonlinearity (relu, gelu, tanh, sigmoid, silu)"},
    {"swiglu", LayerKind::swiglu, "SwiGLU gate: silu(a) * b on the two halves of its input (Llama's MLP)"},
    {"rotary", LayerKind::rotary, "rotary position embedding (RoPE) applied to Q and K of a fused QKV; no parameters"},
    {"moe_router", LayerKind::moe_router,
     "a mixture of experts' router: gate GEMM, top-k, tokens permuted by expert (made by type: moe)"},
    {"moe", LayerKind::moe,
     "mixture of experts: router, dispatch, the experts' grouped GEMMs, combine (three layers; this one the experts)"},
    {"moe_combine", LayerKind::moe_combine,
     "a mixture of experts' combine: each token's top_k expert outputs un-permuted and summed (made by type: moe)"},
    {"dropout", LayerKind::dropout, "dropout: keeps a one-byte mask per element for backward"},
    {"add", LayerKind::add, "element-wise sum of its inputs (residual connection)"},
    {"concat", LayerKind::concat, "concatenation of its inputs along channels/features"},
    {"softmax_loss", LayerKind::softmax_loss, "softmax and cross-entropy loss over the classes"},
    {"custom", LayerKind::custom, "costs given explicitly in the model file"},
}}};

/// How a layer is split across the tp GPUs of a tensor-parallel group (Megatron-LM; Gholami et al.).
///   column      weights split by output: compute / tp, output split; backward all-reduces the input gradient
///   row         weights split by input (input split): compute / tp; forward all-reduces the output
///   split       element-wise or per-head work on a split tensor: compute / tp, output split, no traffic
///   replicated  every GPU computes the whole layer on the whole tensor
///   gathered    the P_r x P_c grid's fully connected/convolution layer: weights split by output,
///               forward all-gathers the output, backward all-reduces the input gradient
enum class TpRole { replicated, column, row, split, gathered };

inline constexpr EnumTable<TpRole, 5> tp_role_table{{{
    {"replicated", TpRole::replicated, "whole layer on every GPU of the group"},
    {"column", TpRole::column, "weights split by output; backward all-reduce of the input gradient"},
    {"row", TpRole::row, "weights split by input; forward all-reduce of the output"},
    {"split", TpRole::split, "work on a split tensor, no communication"},
    {"gathered", TpRole::gathered, "weights split by output; forward all-gather, backward all-reduce (grid)"},
}}};

/// True when the layer's work and weights divide by tp.
constexpr bool tp_divides(TpRole r) { return r != TpRole::replicated; }
/// True when the layer's output tensor is split across the group.
constexpr bool tp_output_split(TpRole r) { return r == TpRole::column || r == TpRole::split; }

/// Shape of one sample's tensor: `tokens` rows of `features` for sequences, or channels x height x
/// width for images (tokens = 1, features = channels).
struct TensorShape {
  double tokens = 1;
  double features = 1;
  double height = 1;
  double width = 1;
  bool image = false;
  double elements() const { return tokens * features * height * width; }
  std::string to_string() const;
  static TensorShape sequence(double tokens, double features) { return {tokens, features, 1, 1, false}; }
  static TensorShape picture(double channels, double height, double width) { return {1, channels, height, width, true}; }
  bool operator==(const TensorShape&) const = default;
};

enum class KernelKind { gemm, batched_gemm, conv2d, pointwise, gather, custom };

inline constexpr EnumTable<KernelKind, 6> kernel_kind_table{{{
    {"gemm", KernelKind::gemm, "cuBLAS GEMM with the layer's weights as one operand"},
    {"batched_gemm", KernelKind::batched_gemm, "strided batched GEMM of two activations (attention)"},
    {"conv2d", KernelKind::conv2d, "cuDNN convolution"},
    {"pointwise", KernelKind::pointwise, "memory-bound element-wise or reduction kernel"},
    {"gather", KernelKind::gather, "row gather from a table (embedding lookup)"},
    {"custom", KernelKind::custom, "explicit flop and bytes"},
}}};

/// C[m x n] = A[m x k] B[k x n], `batch` times per sample. For kind gemm, m is the rows of one sample
/// (tokens) and B is the weight; a micro-batch of b samples runs one GEMM with b * m rows.
struct GemmShape {
  double m = 0;
  double n = 0;
  double k = 0;
  double batch = 1;
};

/// One sample's convolution: input c x h x w, k filters of r x s over c / groups channels.
struct ConvShape {
  int c = 0, h = 0, w = 0;
  int k = 0, r = 1, s = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int groups = 1;
  int out_h() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  int out_w() const { return (w + 2 * pad_w - s) / stride_w + 1; }
};

/// One kernel of a layer's forward pass, with what its backward costs. Costs are per sample except
/// the `fixed_*` bytes (weights), which a pass reads once whatever the micro-batch size.
struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::custom;
  GemmShape gemm;  ///< gemm and batched_gemm
  ConvShape conv;  ///< conv2d
  double forward_flop = 0;
  double forward_sample_elements = 0;   ///< elements read and written per sample
  double forward_fixed_elements = 0;    ///< weight elements read once per pass
  double backward_flop = 0;
  double backward_sample_elements = 0;
  double backward_fixed_elements = 0;   ///< weights read and weight gradients written
  double workspace_elements = 0;        ///< library scratch per sample (im2col for convolutions)
  /// Part of a fused kernel (FlashAttention): priced by its flop and bytes, never by the measured time
  /// of a library kernel of the same GEMM shape (which would do the full square, once)
  bool fused = false;
  bool causal = false;                  ///< fused attention with a causal mask: blocks on and below the diagonal
  bool in_forward = true;               ///< launched in the forward pass (false: a backward-only kernel)
  bool in_backward = true;              ///< launched in the backward pass (false: a forward-only kernel)
  std::string shape_string() const;     ///< e.g. "gemm m=1024 n=2304 k=768", "conv 3x224x224 k=64 7x7/2"
};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::custom;
  std::vector<std::size_t> inputs;  ///< producing layers (indices into the model, all earlier); empty = model input
  TensorShape output;               ///< per sample
  double parameters = 0;            ///< trainable parameters owned by this layer (count)
  double tied_parameters = 0;       ///< weights used here but owned by layer `tied_to` (a tied LM head)
  std::size_t tied_to = 0;
  bool stash_inputs = false;        ///< keeps its input tensors for backward (shared with other stashers)
  bool stash_output = false;        ///< keeps its output tensor for backward (ReLU)
  double stashed_elements = 0;      ///< private elements kept for backward per sample, in the training dtype
  double stashed_mask_bytes = 0;    ///< private bytes kept for backward per sample (dropout masks, pool indices)
  double norm_channels = 0;         ///< channels whose batch statistics sync_batch_norm all-reduces
  bool recompute_cheap = false;     ///< selective recomputation drops this layer's stash and recomputes it
  bool bias                 = false;     ///< linear: adds a bias (PyTorch runs one addmm, not an mm)
  /// linear: the output features of each matrix multiply its one GEMM stands for, in the order a PyTorch
  /// module calls them (Llama's wq, wk and wv for a fused qkv; w1 and w3 for a SwiGLU's up projection);
  /// empty: one. Per-op checkpointing counts them (models::op_checkpoint_kept).
  std::vector<double> matmuls;
  std::uint32_t block = 0;          ///< index of the block (pipeline partition unit) holding this layer
  int heads = 0;                    ///< attention and rotary layers: query heads
  int kv_heads = 0;                 ///< attention and rotary layers: key/value heads (grouped-query attention)
  /// Parameters a token uses (count): all of them, but a mixture of experts' top_k experts only.
  double active_parameters = 0;
  // A mixture of experts is three layers: moe_router, moe (the experts) and moe_combine; these are
  // set on all three.
  int experts = 0;                  ///< moe: routed experts
  int top_k = 0;                    ///< moe: experts each token is routed to
  double expert_parameters = 0;     ///< moe: parameters of one routed expert
  double capacity_factor = 0;       ///< moe: tokens an expert takes, over the mean (0: no limit, dropless)
  double load_imbalance = 1;        ///< moe: the busiest expert's tokens over the mean
  TpRole tp = TpRole::replicated;   ///< how tensor parallelism splits it
  std::vector<Kernel> kernels;      ///< forward kernels, in launch order

  double forward_flop() const;
  double backward_flop() const;
  double output_elements() const { return output.elements(); }
  /// Library workspace per sample, in elements (the largest of its kernels').
  double workspace_elements() const;
};

}  // namespace ddlsim::models
