// One layer of a network, with the per-sample costs the simulator needs.
//
// All counts are per sample (one sequence for a transformer, one image for a CNN) and in elements,
// so that the same Layer serves every micro-batch size and dtype:
//   forward flop of a micro-batch of b samples = b * forward_flop;
//   weight bytes in bf16                       = parameters * dtype_bytes(Dtype::bf16).
#pragma once

#include "common/EnumTable.hpp"

#include <string>

namespace ddlsim::models {

enum class LayerKind { embedding, transformer_block, linear, layer_norm, lm_head, custom };

inline constexpr EnumTable<LayerKind, 6> layer_kind_table{{{
    {"embedding", LayerKind::embedding, "token + position embedding lookup"},
    {"transformer_block", LayerKind::transformer_block, "self-attention + MLP block (Megatron counts)"},
    {"linear", LayerKind::linear, "fully connected layer: in x out weights plus bias"},
    {"layer_norm", LayerKind::layer_norm, "layer normalisation"},
    {"lm_head", LayerKind::lm_head, "output projection to the vocabulary, softmax and loss"},
    {"custom", LayerKind::custom, "costs given explicitly in the model file"},
}}};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::custom;
  double parameters = 0;        ///< trainable parameters (count)
  double forward_flop = 0;      ///< flop per sample, forward pass
  double backward_flop = 0;     ///< flop per sample, backward pass (input and weight gradients)
  double output_elements = 0;   ///< activation elements produced per sample (what crosses a stage boundary)
  double stashed_elements = 0;  ///< elements kept from forward until backward, per sample
  double traffic_elements = 0;  ///< activation elements read + written in forward, per sample (roofline memory term)
};

}  // namespace ddlsim::models
