// GPT-style decoder-only transformer generator.
//
// Counts follow Megatron-LM (Narayanan et al., SC'21) and the activation-memory analysis of
// Korthikanti et al. (2022), per sample of `seq` tokens, hidden size h, `heads` heads a, vocab V:
//   block parameters     12 h^2 + 13 h                 (QKV, projection, 4h MLP, biases, two layer norms)
//   block forward flop   24 s h^2 + 4 s^2 h            (= 24 s h^2 (1 + s / 6h))
//   block backward flop  2 x forward
//   block stash          34 s h + 5 a s^2 bytes in 16-bit formats (17 s h + 2.5 a s^2 elements)
//   LM head              2 s h V forward flop, weights tied to the token embedding when tied_embeddings
//
//   Model m = make_gpt({.name = "gpt2-xl", .layers = 48, .hidden = 1600, .heads = 25, .seq = 1024, .vocab = 50257});
#pragma once

#include "models/Model.hpp"

namespace ddlsim::models {

struct GptConfig {
  std::string name = "gpt";
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int seq = 1024;
  int vocab = 50257;
  int ffn_hidden = 0;           ///< MLP width; 0 means 4 x hidden
  bool tied_embeddings = true;  ///< LM head reuses the token embedding (GPT-2, Megatron default)
};

/// Builds embedding, `layers` transformer blocks, final layer norm and LM head (with loss).
/// Throws std::invalid_argument when a size is not positive or hidden is not divisible by heads.
Model make_gpt(const GptConfig& config);

}  // namespace ddlsim::models
