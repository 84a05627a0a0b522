// GPT, Llama and BERT generators (declared in Zoo.hpp).
#include "models/Zoo.hpp"

#include <stdexcept>

namespace ddlsim::models {
namespace {

void check_transformer(const std::string& name, int layers, int hidden, int heads, int seq, int vocab, int ffn)
{
  if (layers <= 0 || hidden <= 0 || heads <= 0 || seq <= 0 || vocab <= 0 || ffn < 0)
    throw std::invalid_argument(name + ": transformer sizes must be positive");
  if (hidden % heads != 0)
    throw std::invalid_argument(name + ": hidden size (" + std::to_string(hidden) +
                                ") must be divisible by the number of heads (" + std::to_string(heads) + ")");
}

// Self-attention sub-layer body: fused QKV GEMM, attention core, output projection, dropout.
// Tensor parallelism as Megatron-LM splits a layer: QKV and the first MLP GEMM by column, the
// projections by row, attention heads and GeLU on the split tensors; norms, dropout and residuals
// replicated. Per layer that is two all-reduces of s x h in forward and two in backward.
Tensor attention_body(ModelBuilder& b, Tensor x, double h, const AttentionOptions& attention, const std::string& p)
{
  const bool dropout = attention.dropout;
  Tensor t = b.linear(x, 3 * h, true, p + ".qkv");
  b.set_tp(TpRole::column);
  t = b.attention(t, attention, p + ".attention");
  t = b.linear(t, h, true, p + ".proj");
  b.set_tp(TpRole::row);
  return dropout ? b.dropout(t, p + ".attn_dropout") : t;
}

// MLP sub-layer body: h -> f GEMM, GeLU, f -> h GEMM, dropout.
Tensor mlp_body(ModelBuilder& b, Tensor x, double h, double f, bool dropout, const std::string& p)
{
  Tensor t = b.linear(x, f, true, p + ".fc1");
  b.set_tp(TpRole::column);
  t = b.activation(t, Activation::gelu, p + ".gelu");
  b.set_tp(TpRole::split);
  t = b.linear(t, h, true, p + ".fc2");
  b.set_tp(TpRole::row);
  return dropout ? b.dropout(t, p + ".mlp_dropout") : t;
}

}  // namespace

Model make_gpt(const GptConfig& c)
{
  check_transformer(c.name, c.layers, c.hidden, c.heads, c.seq, c.vocab, c.ffn_hidden);
  const double h = c.hidden;
  const double f = c.ffn_hidden > 0 ? c.ffn_hidden : 4.0 * h;
  ModelBuilder b(c.name, TensorShape::sequence(c.seq, 1));

  b.block("embedding");
  Tensor x = b.embedding(b.input(), c.vocab, h, c.seq, "embedding");
  const std::size_t embedding_layer = b.layer_count() - 1;
  if (c.dropout)
    x = b.dropout(x, "embedding_dropout");

  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "layer" + std::to_string(i);
    b.block(p);
    const AttentionOptions attention{.heads = c.heads, .kv_heads = c.heads, .dropout = c.dropout, .kind = c.attention,
                                     .causal = true};
    Tensor a = attention_body(b, b.norm(x, Normalization::layer_norm, p + ".ln1"), h, attention, p);
    x = b.add({x, a}, p + ".residual1");
    Tensor m = mlp_body(b, b.norm(x, Normalization::layer_norm, p + ".ln2"), h, f, c.dropout, p);
    x = b.add({x, m}, p + ".residual2");
  }

  b.block("head");
  x = b.norm(x, Normalization::layer_norm, "final_norm");
  x = b.linear(x, c.vocab, false, "lm_head");
  b.set_tp(TpRole::column);  // vocabulary-parallel logits
  if (c.tied_embeddings)
    b.tie_last_to(embedding_layer, static_cast<double>(c.vocab) * h);
  b.softmax_loss(x, "loss");
  b.set_tp(TpRole::split);  // cross-entropy on the vocabulary shards
  Model model = b.build();
  model.set_architecture({.layers = c.layers, .hidden = c.hidden, .heads = c.heads, .kv_heads = c.heads,
                          .ffn_hidden = static_cast<int>(f), .seq = c.seq, .vocab = c.vocab, .tied_embeddings = c.tied_embeddings,
                          .bias = true, .dropout = c.dropout, .flash = c.attention == AttentionKind::flash});
  return model;
}

Model make_llama(const LlamaConfig& c)
{
  check_transformer(c.name, c.layers, c.hidden, c.heads, c.seq, c.vocab, c.ffn_hidden);
  const int kv = c.kv_heads > 0 ? c.kv_heads : c.heads;
  if (c.ffn_hidden < 1)
    throw std::invalid_argument(c.name + ": ffn_hidden must be positive");
  if (kv > c.heads || c.heads % kv != 0)
    throw std::invalid_argument(c.name + ": kv_heads (" + std::to_string(kv) + ") must divide heads (" +
                                std::to_string(c.heads) + ")");
  if (c.moe.experts > 0 && (c.moe.top_k < 1 || c.moe.top_k > c.moe.experts || c.moe.expert_ffn_hidden < 1 ||
                            c.moe.dense_layers < 0 || c.moe.dense_layers > c.layers || c.moe.shared_experts < 0))
    throw std::invalid_argument(c.name + ": moe needs 1 <= top_k <= experts (" + std::to_string(c.moe.top_k) + ", " +
                                std::to_string(c.moe.experts) + "), an expert_ffn_hidden and 0 <= dense_layers <= layers");
  const double h = c.hidden;
  const double d = h / c.heads;
  const double f = c.ffn_hidden;
  const bool learned = c.positions == Positions::learned;
  ModelBuilder b(c.name, TensorShape::sequence(c.seq, 1));

  b.block("embedding");
  Tensor x = b.embedding(b.input(), c.vocab, h, learned ? c.seq : 0, "embedding");
  const std::size_t embedding_layer = b.layer_count() - 1;
  if (c.dropout)
    x = b.dropout(x, "embedding_dropout");

  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "layer" + std::to_string(i);
    b.block(p);
    Tensor t = b.linear(b.norm(x, c.norm, p + ".attention_norm"), (c.heads + 2.0 * kv) * d, c.bias, p + ".qkv");
    b.set_tp(TpRole::column);
    b.set_matmuls({c.heads * d, kv * d, kv * d}); // Llama's wq, wk, wv
    if (!learned)
      t = b.rotary(t, c.heads, kv, p + ".rope");
    t = b.attention(t, {.heads = c.heads, .kv_heads = kv, .dropout = c.dropout, .kind = c.attention, .causal = true},
                    p + ".attention");
    t = b.linear(t, h, c.bias, p + ".proj");
    b.set_tp(TpRole::row);
    if (c.dropout)
      t = b.dropout(t, p + ".attn_dropout");
    x = b.add({x, t}, p + ".residual1");

    Tensor m = b.norm(x, c.norm, p + ".mlp_norm");
    // A dense MLP of `width` (SwiGLU: gate and up fused; or GeLU), column then row parallel.
    auto dense_mlp = [&](Tensor in, double width, const std::string& name) {
      Tensor u = b.linear(in, c.ffn == FeedForward::swiglu ? 2 * width : width, c.bias, name + "_up");
      b.set_tp(TpRole::column);
      if (c.ffn == FeedForward::swiglu) {
        b.set_matmuls({width, width}); // w1 (the gate), then w3
        u = b.swiglu(u, name + "_swiglu");
      } else {
        u = b.activation(u, Activation::gelu, name + "_gelu");
        b.set_tp(TpRole::split);
      }
      u = b.linear(u, h, c.bias, name + "_down");
      b.set_tp(TpRole::row);
      return u;
    };
    if (c.moe.experts > 0 && i >= c.moe.dense_layers) {
      const Tensor normed = m;
      m = b.moe(normed, {.experts = c.moe.experts, .top_k = c.moe.top_k,
                         .expert_ffn_hidden = static_cast<double>(c.moe.expert_ffn_hidden),
                         .swiglu = c.ffn == FeedForward::swiglu, .capacity_factor = c.moe.capacity_factor,
                         .load_imbalance = c.moe.load_imbalance},
                p + ".moe");  // each expert split over tp (expert TP = TP); collectives: experiments/Plan
      if (c.moe.shared_experts > 0)  // experts every token uses: one dense MLP beside the routed ones
        m = b.add({m, dense_mlp(normed, static_cast<double>(c.moe.shared_experts) * c.moe.expert_ffn_hidden,
                                p + ".shared")},
                  p + ".moe_sum");
    } else {
      m = dense_mlp(m, f, p + ".mlp");
    }
    if (c.dropout)
      m = b.dropout(m, p + ".mlp_dropout");
    x = b.add({x, m}, p + ".residual2");
  }

  b.block("head");
  x = b.norm(x, c.norm, "final_norm");
  x = b.linear(x, c.vocab, false, "lm_head");
  b.set_tp(TpRole::column);  // vocabulary-parallel logits
  if (c.tied_embeddings)
    b.tie_last_to(embedding_layer, static_cast<double>(c.vocab) * h);
  b.softmax_loss(x, "loss");
  b.set_tp(TpRole::split);
  Model model = b.build();
  model.set_architecture({.layers = c.layers, .hidden = c.hidden, .heads = c.heads, .kv_heads = kv,
                          .ffn_hidden = c.ffn_hidden, .seq = c.seq, .vocab = c.vocab,
                          .swiglu = c.ffn == FeedForward::swiglu, .rms_norm = c.norm == Normalization::rms_norm,
                          .rope = c.positions == Positions::rope, .tied_embeddings = c.tied_embeddings, .bias = c.bias,
                          .dropout = c.dropout, .flash = c.attention == AttentionKind::flash,
                          .experts = c.moe.experts, .top_k = c.moe.top_k, .expert_ffn_hidden = c.moe.expert_ffn_hidden,
                          .shared_experts = c.moe.shared_experts, .dense_layers = c.moe.dense_layers,
                          .capacity_factor = c.moe.capacity_factor});
  return model;
}

Model make_bert(const BertConfig& c)
{
  check_transformer(c.name, c.layers, c.hidden, c.heads, c.seq, c.vocab, c.ffn_hidden);
  if (c.type_vocab < 0)
    throw std::invalid_argument(c.name + ": type_vocab must not be negative");
  const double h = c.hidden;
  const double f = c.ffn_hidden > 0 ? c.ffn_hidden : 4.0 * h;
  ModelBuilder b(c.name, TensorShape::sequence(c.seq, 1));

  b.block("embedding");
  // Position and segment tables are both added row by row: one learned table of seq + type_vocab rows.
  Tensor x = b.embedding(b.input(), c.vocab, h, static_cast<double>(c.seq) + c.type_vocab, "embedding");
  const std::size_t embedding_layer = b.layer_count() - 1;
  x = b.norm(x, Normalization::layer_norm, "embedding_norm");
  x = b.dropout(x, "embedding_dropout");

  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "layer" + std::to_string(i);
    b.block(p);
    Tensor a = attention_body(b, x, h, {.heads = c.heads, .kv_heads = c.heads, .dropout = true, .kind = c.attention}, p);
    x = b.norm(b.add({x, a}, p + ".residual1"), Normalization::layer_norm, p + ".ln1");
    Tensor m = mlp_body(b, x, h, f, true, p);
    x = b.norm(b.add({x, m}, p + ".residual2"), Normalization::layer_norm, p + ".ln2");
  }

  b.block("head");
  Tensor pooled = b.linear(x, h, true, "pooler");  // next-sentence head (on every token: an upper bound)
  b.set_tp(TpRole::replicated);
  pooled = b.activation(pooled, Activation::tanh, "pooler_tanh");
  Tensor t = b.linear(x, h, true, "mlm_transform");
  b.set_tp(TpRole::replicated);
  t = b.activation(t, Activation::gelu, "mlm_gelu");
  t = b.norm(t, Normalization::layer_norm, "mlm_norm");
  t = b.linear(t, c.vocab, true, "mlm_decoder");
  b.set_tp(TpRole::column);
  b.tie_last_to(embedding_layer, static_cast<double>(c.vocab) * h);
  b.softmax_loss(t, "mlm_loss");
  b.set_tp(TpRole::split);
  Tensor nsp = b.linear(pooled, 2, true, "nsp_classifier");
  b.set_tp(TpRole::replicated);
  b.softmax_loss(nsp, "nsp_loss");
  return b.build();
}

}  // namespace ddlsim::models
