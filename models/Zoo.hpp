// Model generators: the network families of the zoo, sized by a few parameters.
//
// Each generator builds through ModelBuilder, so its layers carry real kernel shapes (GEMM m, n, k;
// convolution C, H, W, K, R, S, stride). The shipped zoo files (models/zoo/*.yaml) name a generator
// and its sizes; a model file can do the same with any sizes (see ModelLoader.hpp).
//
//   Model gpt = make_gpt({.name = "gpt3-175b", .layers = 96, .hidden = 12288, .heads = 96, .seq = 2048});
//   Model r50 = make_resnet({.name = "resnet50", .depth = 50});
//   Model amoeba = make_amoebanet({.name = "amoebanet-d", .layers = 18, .filters = 256});
//
// Every generator throws std::invalid_argument when a size is out of range.
#pragma once

#include "models/Model.hpp"
#include "models/ModelBuilder.hpp"

#include <string>

namespace ddlsim::models {

/// GPT decoder (Radford et al. 2019; Megatron-LM). Blocks: embedding, one per transformer layer,
/// head (final layer norm, logits, loss). Per layer: pre-LN attention (LN, fused QKV GEMM,
/// attention core, projection, dropout, residual add) and MLP (LN, h->f GEMM, GeLU, f->h GEMM,
/// dropout, residual add). Counts match Megatron's: 12 h^2 + 13 h parameters per layer and a
/// stash of 34 s h + 5 a s^2 bytes in 16-bit formats (Korthikanti et al. 2022).
struct GptConfig {
  std::string name = "gpt";
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int seq = 1024;
  int vocab = 50257;
  int ffn_hidden = 0;           ///< MLP width; 0 means 4 x hidden
  bool tied_embeddings = true;  ///< the LM head reuses the token embedding (GPT-2, Megatron default)
  bool dropout = true;
  AttentionKind attention = AttentionKind::eager;
};
Model make_gpt(const GptConfig& config);

/// Llama-class decoder (Touvron et al. 2023, Llama 2; Dubey et al. 2024, Llama 3), the shape most
/// dense LLMs of 2023-2026 share (Mistral, Qwen, DeepSeek's dense models). Blocks: embedding, one per
/// layer, head (final norm, untied LM head, loss). Per layer, pre-norm:
///   attention  norm, fused QKV GEMM of hidden x (heads + 2 kv_heads) head_dim (grouped-query when
///              kv_heads < heads, multi-query when 1), RoPE on Q and K, attention core (FlashAttention
///              by default, causal), output projection, residual add
///   MLP        norm, SwiGLU (gate and up fused: hidden x 2 ffn_hidden, the gate's silu * product,
///              down: ffn_hidden x hidden), residual add; or a GeLU MLP (ffn: gelu)
/// No biases, no dropout (as the released models), RMSNorm, untied embeddings. Parameters per layer:
/// 2 h^2 + 2 h kv d + 3 h f + 2 h (RMSNorm); plus vocab x h twice and a final norm.
/// Tensor parallelism as Megatron-Core: QKV and gate/up by column (K/V heads split over tp), the
/// projections by row, the core, RoPE and the gate split, norms and adds replicated.
enum class FeedForward { swiglu, gelu };
inline constexpr EnumTable<FeedForward, 2> feed_forward_table{{{
    {"swiglu", FeedForward::swiglu, "SwiGLU: gate and up (hidden x ffn_hidden each), silu(gate) * up, down"},
    {"gelu", FeedForward::gelu, "two matrices with a GeLU between them (GPT)"},
}}};
enum class Positions { rope, learned };
inline constexpr EnumTable<Positions, 2> positions_table{{{
    {"rope", Positions::rope, "rotary embeddings on Q and K: no parameters, an element-wise kernel per layer"},
    {"learned", Positions::learned, "a learned seq x hidden table added to the token embeddings"},
}}};
/// The mixture of experts of a Llama-shaped model (Mixtral, DeepSeek-MoE, Qwen-MoE): every MLP after
/// the first `dense_layers` layers is `experts` routed experts of `expert_ffn_hidden` (top_k per token)
/// plus `shared_experts` experts every token uses (one MLP of shared_experts x expert_ffn_hidden).
struct MoeConfig {
  int experts = 0;             ///< 0: a dense model
  int top_k = 2;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  int dense_layers = 0;        ///< the first layers keep a dense MLP of ffn_hidden
  double capacity_factor = 0;  ///< 0: dropless
  double load_imbalance = 1;
};

struct LlamaConfig {
  std::string name = "llama";
  int layers = 32;
  int hidden = 4096;
  int heads = 32;
  int kv_heads = 0;      ///< 0 means heads (multi-head attention)
  int ffn_hidden = 11008;
  int seq = 4096;
  int vocab = 32000;
  FeedForward ffn = FeedForward::swiglu;
  Normalization norm = Normalization::rms_norm;
  Positions positions = Positions::rope;
  bool tied_embeddings = false;
  bool bias = false;
  bool dropout = false;
  AttentionKind attention = AttentionKind::flash;
  MoeConfig moe{};
};
Model make_llama(const LlamaConfig& config);

/// BERT encoder (Devlin et al. 2019) with post-LN layers, pooler, and the masked-LM head (decoder
/// tied to the token embedding). Blocks: embedding, one per layer, head.
struct BertConfig {
  std::string name = "bert";
  int layers = 24;
  int hidden = 1024;
  int heads = 16;
  int seq = 512;
  int vocab = 30522;
  int type_vocab = 2;  ///< segment embeddings
  int ffn_hidden = 0;  ///< 0 means 4 x hidden
  AttentionKind attention = AttentionKind::eager;  ///< bidirectional: no causal mask
};
Model make_bert(const BertConfig& config);

/// ResNet (He et al. 2016), torchvision layout (stride in the 3x3 convolution of a bottleneck).
/// depth 18 or 34 (basic blocks), 50, 101 or 152 (bottlenecks). Blocks: stem, one per residual
/// unit, head.
struct ResNetConfig {
  std::string name = "resnet";
  int depth = 50;
  int image = 224;
  int classes = 1000;
  int width = 64;  ///< channels of the first stage
  Normalization normalization = Normalization::batch_norm;
  int groups = 32;  ///< for group_norm
};
Model make_resnet(const ResNetConfig& config);

/// VGG (Simonyan & Zisserman 2015), torchvision layout: depth 11, 13, 16 or 19, optional batch
/// norm after every convolution. Blocks: one per convolution stage, then each classifier layer.
struct VggConfig {
  std::string name = "vgg";
  int depth = 16;
  int image = 224;
  int classes = 1000;
  bool batch_norm = false;
};
Model make_vgg(const VggConfig& config);

/// AlexNet, torchvision layout (Krizhevsky 2014 "one weird trick" variant, 61.1 M parameters).
struct AlexNetConfig {
  std::string name = "alexnet";
  int image = 224;
  int classes = 1000;
};
Model make_alexnet(const AlexNetConfig& config);

/// AmoebaNet-D (Real et al. 2019) as GPipe and torchgpipe size it: (L, D) = (layers, filters), L a
/// multiple of 3 normal cells in three groups separated by reduction cells, after a stem of one
/// convolution and two reduction cells; D / 4 channels in the first cell. Each cell takes the
/// outputs of the two cells before it. Blocks: stem, each cell, classifier.
struct AmoebaNetConfig {
  std::string name = "amoebanet-d";
  int layers = 18;
  int filters = 256;
  int image = 224;
  int classes = 1000;
  Normalization normalization = Normalization::batch_norm;
  int groups = 32;  ///< for group_norm
};
Model make_amoebanet(const AmoebaNetConfig& config);

/// Multi-layer perceptron: `layers` fully connected layers of `hidden` units (with `activation`
/// between them) from `input` features to `classes`, loss at the end. One block per layer. The
/// network of the P_r x P_c grid study (Gholami et al. 2018).
struct MlpConfig {
  std::string name = "mlp";
  int input = 1024;
  int hidden = 4096;
  int layers = 8;  ///< hidden layers
  int classes = 1000;
  Activation activation = Activation::relu;
};
Model make_mlp(const MlpConfig& config);

}  // namespace ddlsim::models
