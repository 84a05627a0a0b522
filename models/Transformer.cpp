#include "models/Transformer.hpp"

#include <stdexcept>

namespace ddlsim::models {

Model make_gpt(const GptConfig& c)
{
  if (c.layers <= 0 || c.hidden <= 0 || c.heads <= 0 || c.seq <= 0 || c.vocab <= 0 || c.ffn_hidden < 0)
    throw std::invalid_argument("GPT sizes must be positive");
  if (c.hidden % c.heads != 0)
    throw std::invalid_argument("hidden size must be divisible by the number of heads");

  const double s = c.seq;
  const double h = c.hidden;
  const double a = c.heads;
  const double v = c.vocab;
  const double f = c.ffn_hidden > 0 ? c.ffn_hidden : 4.0 * h;
  std::vector<Layer> layers;
  layers.reserve(static_cast<std::size_t>(c.layers) + 3);

  // Token and position embeddings: a gather, negligible flop, one s x h output.
  layers.push_back({.name = "embedding",
                    .kind = LayerKind::embedding,
                    .parameters = v * h + s * h,
                    .forward_flop = s * h,
                    .backward_flop = 2 * s * h,
                    .output_elements = s * h,
                    .stashed_elements = 0,
                    .traffic_elements = 2 * s * h});

  // Attention: QKV 3h^2+3h, projection h^2+h; MLP 2hf+f+h; two layer norms 4h.
  const double block_params = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  // GEMMs 2 s (4h^2 + 2hf) plus attention scores and context 4 s^2 h.
  const double block_fwd = 2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h;
  // Korthikanti et al.: 18 s h + 4 s f + 5 a s^2 bytes in a 16-bit format (34 s h + 5 a s^2 when f = 4h),
  // i.e. 9 s h + 2 s f + 2.5 a s^2 elements of 2 bytes.
  const double block_stash = 9 * s * h + 2 * s * f + 2.5 * a * s * s;
  for (int i = 0; i < c.layers; ++i)
    layers.push_back({.name = "block" + std::to_string(i),
                      .kind = LayerKind::transformer_block,
                      .parameters = block_params,
                      .forward_flop = block_fwd,
                      .backward_flop = 2 * block_fwd,
                      .output_elements = s * h,
                      .stashed_elements = block_stash,
                      .traffic_elements = block_stash + s * h});

  layers.push_back({.name = "final_norm",
                    .kind = LayerKind::layer_norm,
                    .parameters = 2 * h,
                    .forward_flop = 5 * s * h,
                    .backward_flop = 10 * s * h,
                    .output_elements = s * h,
                    .stashed_elements = s * h,
                    .traffic_elements = 2 * s * h});

  // Logits GEMM s x h x V, softmax and cross-entropy; the logits are kept for the loss gradient.
  layers.push_back({.name = "lm_head",
                    .kind = LayerKind::lm_head,
                    .parameters = c.tied_embeddings ? 0.0 : v * h,
                    .forward_flop = 2 * s * h * v,
                    .backward_flop = 4 * s * h * v,
                    .output_elements = 1,  // the loss
                    .stashed_elements = s * h + s * v,
                    .traffic_elements = s * h + 2 * s * v});
  return Model(c.name, std::move(layers));
}

}  // namespace ddlsim::models
