#include "models/ModelBuilder.hpp"

#include <cmath>
#include <stdexcept>

namespace ddlsim::models {
namespace {

// Cost rules for the kernels a layer launches. Forward traffic counts every operand read and the
// result written once; backward runs the input-gradient and weight-gradient kernels (two GEMMs or
// convolutions of the forward's size) or reads the output gradient and the saved tensor and writes
// the input gradient (element-wise kernels).

Kernel make_kernel(std::string name, KernelKind kind)
{
  Kernel k;
  k.name = std::move(name);
  k.kind = kind;
  return k;
}

Kernel batched_gemm_kernel(std::string name, double batch, double m, double n, double k)
{
  Kernel g = make_kernel(std::move(name), KernelKind::batched_gemm);
  g.gemm = {.m = m, .n = n, .k = k, .batch = batch};
  g.forward_flop = 2 * batch * m * n * k;
  g.forward_sample_elements = batch * (m * k + k * n + m * n);
  g.backward_flop = 2 * g.forward_flop;
  g.backward_sample_elements = 2 * g.forward_sample_elements;
  return g;
}

Kernel conv_kernel(std::string name, const ConvShape& c)
{
  Kernel k = make_kernel(std::move(name), KernelKind::conv2d);
  k.conv = c;
  const double out = static_cast<double>(c.k) * c.out_h() * c.out_w();
  const double in = static_cast<double>(c.c) * c.h * c.w;
  const double weights = static_cast<double>(c.k) * (c.c / c.groups) * c.r * c.s;
  const double macs = out * (c.c / c.groups) * c.r * c.s;
  k.forward_flop = 2 * macs;
  k.forward_sample_elements = in + out;
  k.forward_fixed_elements = weights;
  k.backward_flop = 4 * macs;
  k.backward_sample_elements = 2 * (in + out);
  k.backward_fixed_elements = 2 * weights;
  // Implicit/explicit GEMM algorithms lower the input to columns; a 1x1 stride-1 convolution is a
  // plain GEMM and needs none. This is the explicit-GEMM bound, what cuDNN may use when allowed.
  if (c.r * c.s > 1 || c.stride_h > 1 || c.stride_w > 1)
    k.workspace_elements = static_cast<double>(c.c) * c.r * c.s * c.out_h() * c.out_w();
  return k;
}

Kernel pointwise_kernel(std::string name, double in, double out, double flop)
{
  Kernel k = make_kernel(std::move(name), KernelKind::pointwise);
  k.forward_flop = flop;
  k.forward_sample_elements = in + out;
  k.backward_flop = 2 * flop;
  k.backward_sample_elements = out + 2 * in;  // read dY and the saved tensor, write dX
  return k;
}

// Normalisation kernels as the libraries launch them, in element transfers per element of x (each
// tensor read or written once counts one) and launches per pass (docs/kernels.md):
//   batch_norm  cuDNN's NCHW training kernels (bn_fw_tr_1C11, bn_bw_1C11): forward one launch that
//               reads x for the per-channel statistics and again to write y (3); backward one launch
//               that reduces dy and dy x and writes dx (5)
//   group_norm  PyTorch's native kernels: forward the per-(sample, group) moments (read x: 1), then
//               the normalisation (read x, write y: 2); backward the internal gradients (read dy, x:
//               2), then dx (read dy, x, write dx: 3); small per-(sample, channel) parameters between
//   layer_norm  PyTorch's native, Apex's and Megatron's fused kernels: forward one launch (read x,
//               write y and a mean and rstd per token: 2); backward dx (read dy, x, write dx: 3) and
//               the gamma and beta gradients (read dy, x: 2), two launches
//   rms_norm    the same kernels without the mean and the shift (one rstd per token)
// Per-token and per-group statistics are fp32; they are counted as elements of the training dtype
// (under 0.3% of the traffic from 768 features up).
std::vector<Kernel> norm_kernels(const std::string& name, Normalization kind, double elements, double channels,
                                 double rows, double groups)
{
  std::vector<Kernel> out;
  auto kernel = [&](const std::string& suffix) {
    Kernel k = make_kernel(name + suffix, KernelKind::pointwise);
    return k;
  };
  switch (kind) {
  case Normalization::batch_norm:
  case Normalization::sync_batch_norm: {
    Kernel k = kernel("");
    k.forward_flop = 8 * elements;
    k.forward_sample_elements = 3 * elements;
    k.forward_fixed_elements = 2 * channels;  // gamma, beta
    k.backward_flop = 12 * elements;
    k.backward_sample_elements = 5 * elements;
    k.backward_fixed_elements = 4 * channels;  // gamma read; dgamma, dbeta written (and beta)
    out.push_back(k);
    break;
  }
  case Normalization::group_norm: {
    Kernel moments = kernel(".moments");
    moments.forward_flop = 3 * elements;
    moments.forward_sample_elements = elements + 2 * groups;  // x read; mean, rstd written
    moments.backward_flop = 4 * elements;
    moments.backward_sample_elements = 2 * elements + 2 * channels;  // dy, x read; ds, db per channel written
    Kernel apply = kernel(".apply");
    apply.forward_flop = 2 * elements;
    apply.forward_sample_elements = 2 * elements + 2 * channels;  // x read, y written; scale, shift per channel
    apply.forward_fixed_elements = 2 * channels;
    apply.backward_flop = 5 * elements;
    apply.backward_sample_elements = 3 * elements + 2 * channels;  // dy, x read, dx written
    apply.backward_fixed_elements = 4 * channels;                  // gamma read; dgamma, dbeta written
    out.push_back(moments);
    out.push_back(apply);
    break;
  }
  case Normalization::layer_norm:
  case Normalization::rms_norm: {
    const bool rms = kind == Normalization::rms_norm;
    const double stats = rms ? 1 : 2;       // rstd (and mean) per token
    const double params = rms ? 1 : 2;      // gamma (and beta)
    Kernel fused = kernel("");
    fused.forward_flop = (rms ? 4 : 8) * elements;
    fused.forward_sample_elements = 2 * elements + stats * rows;
    fused.forward_fixed_elements = params * channels;
    fused.backward_flop = (rms ? 6 : 8) * elements;
    fused.backward_sample_elements = 3 * elements + stats * rows;  // dy, x (and the statistics) read, dx written
    fused.backward_fixed_elements = channels;                      // gamma read
    Kernel weights = kernel(".weight_grad");
    weights.in_forward = false;
    weights.backward_flop = (rms ? 2 : 3) * elements;
    weights.backward_sample_elements = 2 * elements + stats * rows;  // dy, x read
    weights.backward_fixed_elements = params * channels;             // dgamma (and dbeta) written
    out.push_back(fused);
    out.push_back(weights);
    break;
  }
  }
  return out;
}

double activation_flop(Activation f)
{
  switch (f) {
  case Activation::relu: return 1;
  case Activation::gelu: return 8;
  case Activation::tanh: return 5;
  case Activation::sigmoid: return 4;
  case Activation::silu: return 5;
  }
  return 1;
}

bool positive_int(double v) { return v >= 1 && std::floor(v) == v; }

}  // namespace

Kernel gemm_kernel(std::string name, double m, double n, double k)
{
  Kernel g                   = make_kernel(std::move(name), KernelKind::gemm);
  g.gemm                     = {.m = m, .n = n, .k = k, .batch = 1};
  g.forward_flop             = 2 * m * n * k;
  g.forward_sample_elements  = m * k + m * n;
  g.forward_fixed_elements   = k * n;
  g.backward_flop            = 4 * m * n * k;
  g.backward_sample_elements = 2 * m * n + 2 * m * k; // dgrad reads dY writes dX; wgrad reads X and dY
  g.backward_fixed_elements  = 2 * k * n;             // dgrad reads W, wgrad writes dW
  return g;
}

ModelBuilder::ModelBuilder(std::string model_name, TensorShape input) : model_name_(std::move(model_name)), input_(input)
{
  if (!(input.elements() > 0))
    throw std::invalid_argument("model input must have at least one element");
}

void ModelBuilder::block(std::string name) { block_names_.push_back(std::move(name)); }

Layer& ModelBuilder::add_layer(LayerKind kind, std::string name, const std::vector<Tensor>& inputs, TensorShape output)
{
  if (name.empty())
    name = std::string(layer_kind_table.name(kind)) + std::to_string(layers_.size());
  if (block_names_.empty())
    block_names_.push_back(name);
  Layer l;
  l.name = std::move(name);
  l.kind = kind;
  for (const Tensor& t : inputs)
    if (t.producer != Tensor::model_input)
      l.inputs.push_back(t.producer);
  if (!l.inputs.empty() && l.inputs.size() != inputs.size())
    throw std::invalid_argument("layer '" + l.name + "' mixes the model input with layer outputs; add an identity layer");
  l.output = output;
  l.block = static_cast<std::uint32_t>(block_names_.size() - 1);
  switch (kind) {
  case LayerKind::linear:
  case LayerKind::conv2d: l.tp = TpRole::gathered; break;
  case LayerKind::attention:
  case LayerKind::rotary:
  case LayerKind::swiglu:
  case LayerKind::moe: l.tp = TpRole::split; break;  // moe: expert tensor parallelism = tp (Megatron's default)
  case LayerKind::embedding: l.tp = TpRole::row; break;  // vocabulary-parallel: all-reduce of the lookup
  default: l.tp = TpRole::replicated; break;
  }
  layers_.push_back(std::move(l));
  return layers_.back();
}

Tensor ModelBuilder::linear(Tensor x, double out_features, bool bias, std::string name)
{
  if (!positive_int(out_features))
    throw std::invalid_argument("linear '" + name + "': output features must be a positive integer");
  const double rows = x.shape.tokens;
  const double in = x.shape.features * x.shape.height * x.shape.width;  // images are flattened
  Layer& l = add_layer(LayerKind::linear, std::move(name), {x}, TensorShape::sequence(rows, out_features));
  l.parameters = in * out_features + (bias ? out_features : 0.0);
  l.bias            = bias;
  l.stash_inputs = true;
  l.kernels.push_back(gemm_kernel(l.name, rows, out_features, in));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::conv2d(Tensor x, const ConvOptions& o, std::string name)
{
  if (!x.shape.image)
    throw std::invalid_argument("conv2d '" + name + "' needs an image input (channels x height x width), got " +
                                x.shape.to_string());
  ConvShape c{.c = static_cast<int>(x.shape.features), .h = static_cast<int>(x.shape.height),
              .w = static_cast<int>(x.shape.width), .k = o.out_channels, .r = o.kernel_h, .s = o.kernel_w,
              .stride_h = o.stride_h, .stride_w = o.stride_w, .pad_h = o.pad_h, .pad_w = o.pad_w, .groups = o.groups};
  if (o.out_channels < 1 || o.kernel_h < 1 || o.kernel_w < 1 || o.stride_h < 1 || o.stride_w < 1 || o.pad_h < 0 ||
      o.pad_w < 0 || o.groups < 1)
    throw std::invalid_argument("conv2d '" + name + "': sizes must be positive (padding non-negative)");
  if (c.c % c.groups != 0 || c.k % c.groups != 0)
    throw std::invalid_argument("conv2d '" + name + "': channels (" + std::to_string(c.c) + " in, " +
                                std::to_string(c.k) + " out) must be divisible by groups (" + std::to_string(c.groups) + ")");
  if (c.h + 2 * c.pad_h < c.r || c.w + 2 * c.pad_w < c.s)
    throw std::invalid_argument("conv2d '" + name + "': kernel larger than the padded input " + x.shape.to_string());
  Layer& l = add_layer(LayerKind::conv2d, std::move(name), {x}, TensorShape::picture(c.k, c.out_h(), c.out_w()));
  l.parameters = static_cast<double>(c.k) * (c.c / c.groups) * c.r * c.s + (o.bias ? c.k : 0);
  l.stash_inputs = true;
  l.kernels.push_back(conv_kernel(l.name, c));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::pool(Tensor x, const PoolOptions& o, std::string name)
{
  if (!x.shape.image)
    throw std::invalid_argument("pooling '" + name + "' needs an image input, got " + x.shape.to_string());
  const double ch = x.shape.features;
  double oh = 1, ow = 1, window = x.shape.height * x.shape.width;
  if (!o.global) {
    const int stride = o.stride > 0 ? o.stride : o.kernel;
    if (o.kernel < 1 || o.padding < 0 || x.shape.height + 2 * o.padding < o.kernel ||
        x.shape.width + 2 * o.padding < o.kernel)
      throw std::invalid_argument("pooling '" + name + "': window " + std::to_string(o.kernel) +
                                  " does not fit the input " + x.shape.to_string());
    oh = std::floor((x.shape.height + 2 * o.padding - o.kernel) / stride) + 1;
    ow = std::floor((x.shape.width + 2 * o.padding - o.kernel) / stride) + 1;
    window = static_cast<double>(o.kernel) * o.kernel;
  }
  Layer& l = add_layer(LayerKind::pooling, std::move(name), {x}, TensorShape::picture(ch, oh, ow));
  const double out = l.output.elements();
  if (o.mode == PoolMode::max) {
    l.stash_inputs = true;
    l.stashed_mask_bytes = 8 * out;  // int64 argmax indices
  }
  l.kernels.push_back(pointwise_kernel(l.name, x.shape.elements(), out, out * window));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::attention(Tensor qkv, int heads, bool dropout, std::string name)
{
  return attention(qkv, {.heads = heads, .kv_heads = heads, .dropout = dropout}, std::move(name));
}

Tensor ModelBuilder::attention(Tensor qkv, const AttentionOptions& o, std::string name)
{
  const int kv = o.kv_heads > 0 ? o.kv_heads : o.heads;
  const double s = qkv.shape.tokens;
  const double a = o.heads;
  const double d = qkv.shape.features / (a + 2.0 * kv);  // head dimension
  if (qkv.shape.image || o.heads < 1 || kv < 1 || o.heads % kv != 0 || std::floor(d) != d || d < 1)
    throw std::invalid_argument("attention '" + name + "' needs a fused QKV input of tokens x (heads + 2 kv_heads) x "
                                "head_dim with kv_heads (" + std::to_string(kv) + ") dividing heads (" +
                                std::to_string(o.heads) + "), got " + qkv.shape.to_string());
  const double h = a * d;
  Layer& l = add_layer(LayerKind::attention, std::move(name), {qkv}, TensorShape::sequence(s, h));
  l.heads = o.heads;
  l.kv_heads = kv;
  l.stash_inputs = true;  // Q, K and V
  if (o.kind == AttentionKind::eager) {
    l.recompute_cheap = true;
    l.stashed_elements = a * s * s * (o.dropout ? 2 : 1);  // softmax output (and the dropped-out probabilities)
    l.stashed_mask_bytes = o.dropout ? a * s * s : 0;
    l.kernels.push_back(batched_gemm_kernel(l.name + ".scores", a, s, s, d));
    l.kernels.push_back(pointwise_kernel(l.name + ".softmax", a * s * s, a * s * s, 5 * a * s * s));
    if (o.dropout)
      l.kernels.push_back(pointwise_kernel(l.name + ".dropout", a * s * s, a * s * s, a * s * s));
    l.kernels.push_back(batched_gemm_kernel(l.name + ".context", a, s, d, s));
    // The mask is recorded for the backends that run it (the torch backend); eager kernels are priced
    // at their full GEMMs all the same (only fused kernels skip the blocks above the diagonal).
    for (Kernel& k : l.kernels)
      k.causal = o.causal;
    return {layers_.size() - 1, l.output};
  }
  // FlashAttention: the two GEMMs of the fused kernel, priced by their flop; memory traffic is Q, K,
  // V and O once (K and V at kv_heads), never the s x s scores. It keeps the output (the next layer's
  // stashed input) and one fp32 log-sum-exp per head and row. Backward: dV = P^T dO, dP = dO V^T,
  // dS -> dQ, dK (the forward's GEMMs twice over), plus QK^T recomputed: 2.5 x the forward's flop.
  // Causal: only the blocks on and below the diagonal run, half the square (FlashAttention-2).
  const double fraction = o.causal ? 0.5 : 1.0;
  l.stashed_mask_bytes = 4 * a * s;  // log-sum-exp (dropout keeps only its RNG state: the mask is regenerated)
  Kernel scores = batched_gemm_kernel(l.name + ".flash_qk", a, s, s, d);
  Kernel context = batched_gemm_kernel(l.name + ".flash_pv", a, s, d, s);
  for (Kernel* k : {&scores, &context}) {
    k->forward_flop *= fraction;
    k->backward_flop *= fraction;
    k->fused = true;
    k->causal = o.causal;
  }
  scores.backward_flop += scores.forward_flop;  // QK^T recomputed
  scores.forward_sample_elements = a * s * d + kv * s * d;                // Q, K
  context.forward_sample_elements = kv * s * d + a * s * d;               // V, O
  scores.backward_sample_elements = 2 * scores.forward_sample_elements;  // Q, K read; dQ, dK written
  context.backward_sample_elements = 2 * context.forward_sample_elements + a * s * d;  // V, O, dO; dV
  l.kernels.push_back(scores);
  l.kernels.push_back(context);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::rotary(Tensor qkv, int heads, int kv_heads, std::string name)
{
  const double features = qkv.shape.features;
  if (qkv.shape.image || heads < 1 || kv_heads < 1 || std::fmod(features, heads + 2.0 * kv_heads) != 0)
    throw std::invalid_argument("rotary '" + name + "' needs a fused QKV input of tokens x (heads + 2 kv_heads) x "
                                "head_dim, got " + qkv.shape.to_string());
  const double d = features / (heads + 2.0 * kv_heads);
  const double rotated = qkv.shape.tokens * (heads + kv_heads) * d;  // Q and K; V passes through
  Layer& l = add_layer(LayerKind::rotary, std::move(name), {qkv}, qkv.shape);
  l.heads = heads;
  l.kv_heads = kv_heads;
  // In place on Q and K: read x and the cos/sin tables, write the rotation (~3 flop per element);
  // backward rotates the gradient by the opposite angle, nothing kept.
  Kernel k = pointwise_kernel(l.name, rotated, rotated, 3 * rotated);
  k.backward_flop = k.forward_flop;
  k.backward_sample_elements = 2 * rotated;
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::swiglu(Tensor x, std::string name)
{
  const double features = x.shape.features;
  if (x.shape.image || std::fmod(features, 2.0) != 0)
    throw std::invalid_argument("swiglu '" + name + "' needs tokens x (2 x ffn_hidden) features (gate and up), got " +
                                x.shape.to_string());
  Layer& l = add_layer(LayerKind::swiglu, std::move(name), {x}, TensorShape::sequence(x.shape.tokens, features / 2));
  l.stash_inputs = true;  // both halves, for the gradient of the product and of silu
  const double e = l.output.elements();
  // silu(a) * b: ~6 flop per output element; reads 2e, writes e. Backward reads dY, a, b, writes da, db.
  Kernel k = pointwise_kernel(l.name, 2 * e, e, 6 * e);
  k.backward_flop = 12 * e;
  k.backward_sample_elements = 5 * e;
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::moe(Tensor x, const MoeOptions& o, std::string name)
{
  if (x.shape.image || o.experts < 1 || o.top_k < 1 || o.top_k > o.experts || !(o.expert_ffn_hidden >= 1) ||
      o.capacity_factor < 0 || !(o.load_imbalance >= 1) || o.load_imbalance > o.experts)
    throw std::invalid_argument("moe '" + name + "' needs tokens x hidden, 1 <= top_k <= experts, an expert width, a "
                                "capacity factor >= 0 and 1 <= load imbalance <= experts (got experts " +
                                std::to_string(o.experts) + ", top_k " + std::to_string(o.top_k) + ")");
  const double s = x.shape.tokens, h = x.shape.features, e = o.experts, k = o.top_k, f = o.expert_ffn_hidden;
  const double matrices = o.swiglu ? 3 : 2;
  const double up = o.swiglu ? 2 * f : f;  // gate and up fused, or the one up matrix
  const double routed = s * k;             // token copies, one per route
  auto describe = [&](Layer& l) {
    l.experts = o.experts;
    l.top_k = o.top_k;
    l.capacity_factor = o.capacity_factor;
    l.load_imbalance = o.load_imbalance;
    l.expert_parameters = matrices * h * f;
  };
  // Router: the gate GEMM (hidden x experts), top-k, and the tokens permuted by expert (a copy per
  // route): what the dispatch sends. It keeps its input and the routing probabilities (fp32).
  Layer& router = add_layer(LayerKind::moe_router, name + ".router", {x}, TensorShape::sequence(routed, h));
  describe(router);
  router.parameters = router.active_parameters = h * e;
  router.stash_inputs = true;
  router.stashed_elements = 2 * s * e;
  router.kernels.push_back(gemm_kernel(router.name + ".gate", s, e, h));
  router.kernels.push_back(pointwise_kernel(router.name + ".topk", s * e, s * e + 2 * routed, 5 * s * e));
  router.kernels.push_back(pointwise_kernel(router.name + ".permute", s * h, routed * h, 0));
  const Tensor permuted{layers_.size() - 1, router.output};

  // Experts: grouped GEMMs over all routed rows, every expert's weights read once. They keep their
  // input (the up GEMM's), the up output (the activation's input) and the activation's output.
  Layer& experts = add_layer(LayerKind::moe, name + ".experts", {permuted}, TensorShape::sequence(routed, h));
  describe(experts);
  experts.parameters = e * experts.expert_parameters;
  experts.active_parameters = k * experts.expert_parameters;
  experts.stash_inputs = true;
  experts.stashed_elements = routed * (up + f);
  Kernel gate_up = gemm_kernel(experts.name + ".up", routed, up, h);
  gate_up.forward_fixed_elements = e * h * up;
  gate_up.backward_fixed_elements = 2 * e * h * up;
  experts.kernels.push_back(gate_up);
  if (o.swiglu) {
    Kernel act = pointwise_kernel(experts.name + ".swiglu", 2 * routed * f, routed * f, 6 * routed * f);
    act.backward_flop = 12 * routed * f;
    act.backward_sample_elements = 5 * routed * f;
    experts.kernels.push_back(act);
  } else {
    experts.kernels.push_back(pointwise_kernel(experts.name + ".gelu", routed * f, routed * f, 8 * routed * f));
  }
  Kernel down = gemm_kernel(experts.name + ".down", routed, h, f);
  down.forward_fixed_elements = e * f * h;
  down.backward_fixed_elements = 2 * e * f * h;
  experts.kernels.push_back(down);
  const Tensor outputs{layers_.size() - 1, experts.output};

  // Combine: each token's top_k outputs un-permuted and summed with the routing weights; it keeps the
  // experts' outputs, which the routing weights' gradient needs.
  Layer& combine = add_layer(LayerKind::moe_combine, name + ".combine", {outputs}, x.shape);
  describe(combine);
  combine.stash_inputs = true;
  combine.kernels.push_back(pointwise_kernel(combine.name, routed * h + routed, s * h, 2 * routed * h));
  return {layers_.size() - 1, combine.output};
}

Tensor ModelBuilder::embedding(Tensor tokens, double vocab, double hidden, double positions, std::string name)
{
  if (tokens.shape.image || tokens.shape.features != 1)
    throw std::invalid_argument("embedding '" + name + "' needs token ids (tokens x 1), got " + tokens.shape.to_string());
  if (!positive_int(vocab) || !positive_int(hidden) || positions < 0)
    throw std::invalid_argument("embedding '" + name + "': vocab and hidden must be positive integers");
  const double s = tokens.shape.tokens;
  if (positions > 0 && positions < s)
    throw std::invalid_argument("embedding '" + name + "': " + std::to_string(static_cast<long long>(positions)) +
                                " positions cannot cover " + std::to_string(static_cast<long long>(s)) + " tokens");
  Layer& l = add_layer(LayerKind::embedding, std::move(name), {tokens}, TensorShape::sequence(s, hidden));
  l.parameters = (vocab + positions) * hidden;
  Kernel k = make_kernel(l.name, KernelKind::gather);
  const double passes = positions > 0 ? 2 : 1;  // token rows, then position rows added
  k.forward_flop = positions > 0 ? s * hidden : 0;
  k.forward_sample_elements = 2 * passes * s * hidden;
  k.backward_sample_elements = 2 * passes * s * hidden;
  k.backward_fixed_elements = (vocab + positions) * hidden;  // the dense weight gradient is written whole
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::norm(Tensor x, Normalization kind, std::string name, int groups)
{
  const LayerKind layer_kind = kind == Normalization::batch_norm        ? LayerKind::batch_norm
                               : kind == Normalization::sync_batch_norm ? LayerKind::sync_batch_norm
                               : kind == Normalization::group_norm      ? LayerKind::group_norm
                               : kind == Normalization::rms_norm        ? LayerKind::rms_norm
                                                                         : LayerKind::layer_norm;
  const bool per_token = kind == Normalization::layer_norm || kind == Normalization::rms_norm;
  if (!per_token && !x.shape.image)
    throw std::invalid_argument(std::string(normalization_table.name(kind)) + " '" + name +
                                "' needs an image input (channels x height x width); use layer_norm for sequences");
  const double channels = x.shape.features;
  if (kind == Normalization::group_norm && (groups < 1 || static_cast<long long>(channels) % groups != 0))
    throw std::invalid_argument("group_norm '" + name + "': " + std::to_string(static_cast<long long>(channels)) +
                                " channels are not divisible into " + std::to_string(groups) + " groups");
  Layer& l = add_layer(layer_kind, std::move(name), {x}, x.shape);
  l.parameters = kind == Normalization::rms_norm ? channels : 2 * channels;
  l.stash_inputs = true;
  if (kind == Normalization::sync_batch_norm)
    l.norm_channels = channels;
  const double rows = x.shape.image ? 1.0 : x.shape.tokens;
  for (Kernel& k : norm_kernels(l.name, kind, x.shape.elements(), channels, rows, groups))
    l.kernels.push_back(std::move(k));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::activation(Tensor x, Activation f, std::string name)
{
  Layer& l = add_layer(LayerKind::activation, std::move(name), {x}, x.shape);
  const bool keeps_output = f == Activation::relu || f == Activation::tanh || f == Activation::sigmoid;
  l.stash_output = keeps_output;
  l.stash_inputs = !keeps_output;
  const double e = x.shape.elements();
  l.kernels.push_back(pointwise_kernel(l.name, e, e, activation_flop(f) * e));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::dropout(Tensor x, std::string name)
{
  Layer& l = add_layer(LayerKind::dropout, std::move(name), {x}, x.shape);
  const double e = x.shape.elements();
  l.stashed_mask_bytes = e;
  l.kernels.push_back(pointwise_kernel(l.name, e, e, e));
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::add(const std::vector<Tensor>& xs, std::string name)
{
  if (xs.size() < 2)
    throw std::invalid_argument("add '" + name + "' needs at least two inputs");
  for (const Tensor& t : xs)
    if (!(t.shape == xs.front().shape))
      throw std::invalid_argument("add '" + name + "': input shapes differ (" + xs.front().shape.to_string() + " and " +
                                  t.shape.to_string() + ")");
  Layer& l = add_layer(LayerKind::add, std::move(name), xs, xs.front().shape);
  const double e = l.output.elements();
  const double n = static_cast<double>(xs.size());
  Kernel k = pointwise_kernel(l.name, n * e, e, (n - 1) * e);
  k.backward_flop = 0;  // the output gradient is passed to every input as it is
  k.backward_sample_elements = 0;
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::concat(const std::vector<Tensor>& xs, std::string name)
{
  if (xs.size() < 2)
    throw std::invalid_argument("concat '" + name + "' needs at least two inputs");
  TensorShape out = xs.front().shape;
  out.features = 0;
  for (const Tensor& t : xs) {
    if (t.shape.image != out.image || t.shape.tokens != out.tokens || t.shape.height != out.height ||
        t.shape.width != out.width)
      throw std::invalid_argument("concat '" + name + "': inputs differ in more than channels/features (" +
                                  xs.front().shape.to_string() + " and " + t.shape.to_string() + ")");
    out.features += t.shape.features;
  }
  Layer& l = add_layer(LayerKind::concat, std::move(name), xs, out);
  const double e = out.elements();
  Kernel k = pointwise_kernel(l.name, e, e, 0);
  k.backward_sample_elements = 2 * e;  // the gradient is split back into the inputs
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::softmax_loss(Tensor logits, std::string name)
{
  if (logits.shape.image && (logits.shape.height != 1 || logits.shape.width != 1))
    throw std::invalid_argument("softmax_loss '" + name + "' needs class scores (tokens x classes), got " +
                                logits.shape.to_string());
  const double e = logits.shape.elements();
  Layer& l = add_layer(LayerKind::softmax_loss, std::move(name), {logits}, TensorShape::sequence(1, 1));
  l.stashed_elements = e;  // log-probabilities, for the gradient
  Kernel k = pointwise_kernel(l.name, e, e, 5 * e);
  k.backward_sample_elements = 2 * e;
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

Tensor ModelBuilder::custom(const std::vector<Tensor>& xs, const CustomCosts& c, std::string name)
{
  if (!(c.output_elements > 0))
    throw std::invalid_argument("custom layer '" + name + "' needs output_elements > 0");
  Layer& l = add_layer(LayerKind::custom, std::move(name), xs, TensorShape::sequence(1, c.output_elements));
  l.parameters = c.parameters;
  l.stashed_elements = c.stashed_elements;
  Kernel k = make_kernel(l.name, KernelKind::custom);
  k.forward_flop = c.forward_flop;
  k.forward_sample_elements = c.traffic_elements;
  k.forward_fixed_elements = c.parameters;
  k.backward_flop = c.backward_flop;
  k.backward_sample_elements = 2 * c.traffic_elements;
  k.backward_fixed_elements = 2 * c.parameters;
  l.kernels.push_back(k);
  return {layers_.size() - 1, l.output};
}

void ModelBuilder::set_tp(TpRole role)
{
  if (layers_.empty())
    throw std::invalid_argument("set_tp: no layer yet");
  layers_.back().tp = role;
}

void ModelBuilder::set_matmuls(std::vector<double> features)
{
  double sum = 0;
  for (double f : features)
    sum += f;
  if (layers_.empty() || layers_.back().kind != LayerKind::linear ||
      std::fabs(sum - layers_.back().output.features) > 1e-9 * sum)
    throw std::invalid_argument("set_matmuls: the last layer must be a linear of as many output features");
  layers_.back().matmuls = std::move(features);
}

void ModelBuilder::tie_last_to(std::size_t owner, double parameters)
{
  if (layers_.empty() || owner >= layers_.size() - 1)
    throw std::invalid_argument("tie_last_to: the owner must be an earlier layer");
  layers_.back().tied_to = owner;
  layers_.back().tied_parameters = parameters;
  layers_.back().parameters = std::max(0.0, layers_.back().parameters - parameters);
}

Model ModelBuilder::build() { return Model(model_name_, input_, std::move(layers_), std::move(block_names_)); }

}  // namespace ddlsim::models
