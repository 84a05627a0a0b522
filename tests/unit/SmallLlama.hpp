// Test helper: a small Llama with grouped-query attention and SwiGLU (hidden 1,024, 8 heads over 2 K/V
// heads, SwiGLU width 2,816, sequence 1,024), for the per-op checkpointing tests.
#pragma once

#include "models/Zoo.hpp"

inline ddlsim::models::Model small_llama(int layers, bool bias = false)
{
  return ddlsim::models::make_llama({.name       = "l",
                                     .layers     = layers,
                                     .hidden     = 1024,
                                     .heads      = 8,
                                     .kv_heads   = 2,
                                     .ffn_hidden = 2816,
                                     .seq        = 1024,
                                     .vocab      = 32000,
                                     .bias       = bias});
}
