#include "sim/Framework.hpp"
#include "sim/FrameworkParts.hpp"

#include "calibration/EagerFit.hpp"
#include "common/Error.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <string>

namespace ddlsim::sim {

namespace framework_parts {

// How a layer's output is stored under autocast: fp32 for what autocast runs in fp32 or what is computed
// from fp32 tensors (the embedding of fp32 weights, layer norms, the loss, a residual sum with an fp32
// input, dropout or an activation of an fp32 tensor), else the training dtype (GEMMs, convolutions).
std::vector<char> fp32_outputs(const models::Model& model, std::size_t end, Dtype dtype, bool autocast)
{
  const auto& layers = model.layers();
  std::vector<char> out(end, 0);
  for (std::size_t l = 0; l < end; ++l) {
    if (dtype == Dtype::fp32 || !autocast) { // without autocast only the loss's explicit logits.float()
      out[l] = dtype == Dtype::fp32 || layers[l].kind == LayerKind::softmax_loss ? 1 : 0;
      continue;
    }
    bool any_input = false;
    for (std::size_t i : layers[l].inputs)
      any_input = any_input || out[i] != 0;
    switch (layers[l].kind) {
    case LayerKind::embedding:
    case LayerKind::layer_norm:
    case LayerKind::rms_norm:
    case LayerKind::softmax_loss: out[l] = 1; break;
    case LayerKind::activation:  // the Python GELU (keeps its input) computes in fp32 from its pow on
      out[l] = any_input || layers[l].stash_inputs ? 1 : 0;
      break;
    case LayerKind::add:
    case LayerKind::dropout:
    case LayerKind::pooling:
    case LayerKind::concat: out[l] = any_input ? 1 : 0; break;
    default: out[l] = 0;
    }
  }
  return out;
}

double input_elements(const models::Model& model, const Layer& layer)
{
  return layer.inputs.empty() ? model.input_shape().elements() : model.layers()[layer.inputs.front()].output_elements();
}

double input_tokens(const models::Model& model, const Layer& layer)
{
  return layer.inputs.empty() ? model.input_shape().tokens : model.layers()[layer.inputs.front()].output.tokens;
}

// Weights a layer reads (its own and tied ones), for autocast's weight casts and the gradient's.
double weights(const Layer& layer) { return layer.parameters + layer.tied_parameters; }

// Autocast around a library kernel (GEMM, convolution): its fp32 weights cast to the training dtype
// once per forward, an fp32 input cast too; in backward the weight gradient cast back to fp32 and added
// to the accumulated gradient (grad += g: read both, write one), and an fp32 input's gradient cast back.
void autocast_library(const Launches& k, Phase phase, double in, bool fp32_in, double w, double d)
{
  if (d >= fp32)
    return;
  if (phase == Phase::forward) {
    if (fp32_in)
      k.add(in * (fp32 + d));
    k.add(0, w * (fp32 + d));
    return;
  }
  k.add(0, w * (d + fp32), Access::strided);  // ToCopyBackward: PyTorch's unrolled loop
  k.add(0, w * 3 * fp32);
  if (fp32_in)
    k.add(in * (d + fp32), Access::strided);
}

// Eager attention as Hugging Face's GPT-2 runs it (transformers' eager_attention_forward): scores scaled,
// the causal mask added (fp32 result), softmax in fp32 (autocast), cast back, dropout, heads merged
// (a copy). S = heads x s x s scores per sample, T = s x hidden.
void eager_attention(const Launches& k, Phase phase, const Layer& l, double d, bool autocast)
{
  const double s = l.output.tokens;
  const double S = l.heads * s * s;
  const double T = l.output.elements();
  const bool dropout = l.stashed_mask_bytes > 0;
  const double r     = autocast && d < fp32 ? fp32 : d; // the softmax's precision
  if (phase == Phase::forward) {
    k.add(S * 2 * d);                 // scores * 1/sqrt(head_dim)
    k.add(S * (d + r), Access::broadcast);  // + causal mask
    k.add(S * 2 * r, Access::reduction);    // softmax
    if (r != d)
      k.add(S * (r + d));                   // .type(value.dtype)
    if (dropout)
      k.add(S * (2 * d + mask), Access::dropout);  // native_dropout: output and mask
    k.add(T * 2 * d, Access::broadcast);    // heads merged: transpose + contiguous (a strided copy)
    return;
  }
  k.add(T * 2 * d, Access::broadcast);      // heads split back
  if (dropout)
    k.add(S * (2 * d + mask));
  if (r != d)
    k.add(S * (d + r), Access::strided);
  k.add(S * 3 * r, Access::reduction);      // softmax backward: y, dy -> dx
  if (r != d)
    k.add(S * (r + d), Access::strided);    // the mask add's gradient back to the scores' dtype
  k.add(S * 2 * d);                         // scale
}

// PyTorch's scaled_dot_product_attention on its flash backend (Hugging Face's `sdpa`, torchtitan): the
// fused kernel comes from the layer (no s x s scores); around it, K and V repeated to every query head
// for grouped-query attention (repeat_kv: expand and reshape, a copy each), and the heads merged back
// (transpose and contiguous, a strided copy). Backward: the merge's copy back, and the repeated K and V
// gradients summed over each group.
void sdpa_attention(const Launches& k, Phase phase, const Layer& l, double d)
{
  const double T     = l.output.elements(); // s x heads x head_dim
  const double kv    = T * l.kv_heads / std::max(1, l.heads);
  const bool grouped = l.kv_heads > 0 && l.kv_heads < l.heads;
  if (phase == Phase::forward) {
    if (grouped)
      k.repeat(2, (kv + T) * d); // K and V: read kv_heads, write heads
    k.add(T * 2 * d, Access::broadcast);
    return;
  }
  k.add(T * 2 * d, Access::broadcast);
  if (grouped)
    for (int i = 0; i < 2; ++i)
      k.add((T + kv) * d, Access::reduction);
}

// RMSNorm as Hugging Face's LlamaRMSNorm and torchtitan's RMSNorm write it in Python: x.float(),
// pow(2).mean(-1), + eps, rsqrt, x * rsqrt, cast back to x's dtype, * weight (n elements of `din`
// bytes, `rows` tokens; the output `dout`: fp32 under autocast, whose weight is fp32). Backward:
// autograd through each, the two paths into x summed.
void eager_rms_norm(const Launches& k, Phase phase, double n, double rows, double din, double dout)
{
  const double cast = din < fp32 ? n * (din + fp32) : 0; // x.float() and .to(dtype): none for fp32 x
  if (phase == Phase::forward) {
    k.add(cast);
    k.add(n * 2 * fp32);                        // pow(2)
    k.add(n * fp32, Access::reduction);         // mean(-1)
    k.repeat(2, rows * 2 * fp32);               // + eps, rsqrt (one value per token)
    k.add(n * 2 * fp32, Access::broadcast);     // x * rsqrt
    k.add(cast);                                // back to x's dtype
    k.add(n * (din + dout), Access::broadcast); // * weight
    return;
  }
  k.add(n * (dout + din), Access::broadcast); // dy * weight
  k.add(n * (dout + din), Access::reduction); // the weight's gradient: dy * x_hat summed over tokens
  k.add(cast, Access::strided);               // the cast back's backward
  k.add(n * 2 * fp32, Access::broadcast);     // d(x * rsqrt) / dx
  k.add(n * 2 * fp32, Access::reduction);     // d / d rsqrt: summed over the hidden
  k.repeat(2, rows * 2 * fp32);               // rsqrt, + eps
  k.add(n * fp32, Access::broadcast);         // mean's backward: expanded
  k.add(n * 3 * fp32);                        // pow's backward: 2 x g
  k.add(n * 3 * fp32);                        // the two paths into x summed
  k.add(cast, Access::strided);               // x.float()'s backward
}

// SwiGLU as eager modules write it, silu(gate) * up (Hugging Face's LlamaMLP, torchtitan's
// FeedForward): two kernels forward; backward the product's two gradients and silu's (e outputs).
void eager_swiglu(const Launches& k, Phase phase, double e, double d)
{
  if (phase == Phase::forward) {
    k.add(e * 2 * d); // silu(gate)
    k.add(e * 3 * d); // * up
    return;
  }
  k.add(e * 3 * d); // d(up) = dy * silu(gate)
  k.add(e * 3 * d); // d(silu) = dy * up
  k.add(e * 3 * d); // silu's backward into the gate
}

// Rotary embeddings as Hugging Face's apply_rotary_pos_emb writes them, per rotated tensor (Q, then
// K; n elements each): q * cos + rotate_half(q) * sin, rotate_half a negated half and a cat (cos and
// sin cast to q's dtype once per layer, their few bytes left out). Backward: the two products'
// gradients, the negation's, the halves' gradients put back into a zeroed tensor, the paths summed.
void eager_rotary(const Launches& k, Phase phase, double n, double d)
{
  if (phase == Phase::forward) {
    k.add(n * 2 * d, Access::broadcast); // q * cos
    k.add(n * d);                        // -x2 (half the elements, read and written)
    k.add(n * 2 * d);                    // cat
    k.add(n * 2 * d, Access::broadcast); // * sin
    k.add(n * 3 * d);                    // +
    return;
  }
  k.add(n * 2 * d, Access::broadcast); // g * sin
  k.add(n * d);                        // the negation's gradient
  k.add(n * 2 * d, Access::strided);   // the halves' gradients into a zeroed tensor (slice backward)
  k.add(n * 2 * d, Access::broadcast); // g * cos
  k.add(n * 3 * d);                    // the two paths summed
}

// One layer's memory-bound launches (the library kernels come from layer_launches).
void layer_pointwise(const models::Model& model, std::size_t li, const std::vector<char>& fp32_out, Phase phase,
                     const Launches& k, Dtype dtype, bool fsdp)
{
  const Layer& l = model.layers()[li];
  const double d = dtype_bytes(dtype);
  const double wb = fsdp ? d : fp32; // bytes of a weight and its gradient: FSDP's param dtype, else fp32
  // FSDP reduce-scatters each micro-batch's gradients and accumulates the shard (fsdp_copies): no
  // AccumulateGrad kernel on the unsharded weights.
  auto accumulated = [&](double parameters) {
    if (!fsdp)
      k.add(0, parameters * 3 * fp32);
  };
  const double in = input_elements(model, l);
  const double out = l.output_elements();
  const bool fp32_in = !l.inputs.empty() ? fp32_out[l.inputs.front()] != 0 : true;
  const double din = fp32_in ? std::max(fp32, d) : d;  // bytes of an input element
  const double dout = fp32_out[li] != 0 ? std::max(fp32, d) : d;
  const bool fwd = phase == Phase::forward;
  switch (l.kind) {
  case LayerKind::linear:
  case LayerKind::conv2d:
    if (!fsdp)
      autocast_library(k, phase, in, fp32_in, weights(l), d);
    if (!fwd && l.kind == LayerKind::linear && l.parameters > 0)
      k.add(out * d);  // the bias gradient: a reduction over the rows
    return;
  case LayerKind::attention:
    if (fused_attention(l))
      sdpa_attention(k, phase, l, d);
    else
      eager_attention(k, phase, l, d, !fsdp);
    return;
  case LayerKind::dropout: k.add(in * (2 * din + mask), fwd ? Access::dropout : Access::contiguous); return;  // forward: y and mask; backward: dy, mask -> dx
  case LayerKind::add: {
    if (fwd) {
      double read = 0;
      bool mixed = false;
      for (std::size_t i : l.inputs) {
        read += model.layers()[i].output_elements() * (fp32_out[i] != 0 ? std::max(fp32, d) : d);
        mixed = mixed || (fp32_out[i] == 0 && dout > d);
      }
      k.add(read + out * dout, mixed ? Access::strided : Access::contiguous);  // mixed dtypes: unrolled
      return;
    }
    for (std::size_t i : l.inputs)  // the gradient passes through; a lower-precision input's is cast
      if (fp32_out[i] == 0 && dout > d)
        k.add(out * (dout + d), Access::strided);
    return;
  }
  case LayerKind::activation:
    if (l.stash_output) {  // relu, tanh, sigmoid: one kernel each way
      k.add(in * (fwd ? 2 : 3) * din);
      return;
    }
    // GELU in its tanh form as Python: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Autocast runs pow
    // in fp32 (x cast first), so everything after it is fp32 and so is the output: x^3, * 0.044715, x +,
    // * sqrt(2/pi), tanh, 1 +, 0.5 x (in x's dtype), the product. Backward through autograd: thirteen fp32
    // kernels (the products' two gradients, pow's, tanh's, the sums into x).
    if (fwd) {
      const double r = fsdp ? din : std::max(fp32, din); // without autocast, pow runs in x's dtype
      if (din < r)
        k.add(in * (din + r));   // x to fp32 for pow
      k.repeat(2, in * 2 * r);   // x^3, * 0.044715
      k.add(in * (din + 2 * r)); // x + ...
      k.repeat(3, in * 2 * r);   // * sqrt(2/pi), tanh, 1 + ...
      k.add(in * 2 * din);       // 0.5 x
      k.add(in * (din + 2 * r)); // the product
    } else {
      k.repeat(13, in * 3 * (fsdp ? din : std::max(fp32, din)));
    }
    return;
  case LayerKind::rms_norm:
    eager_rms_norm(k, phase, in, input_tokens(model, l), din, dout);
    if (!fwd)
      accumulated(l.parameters);
    return;
  case LayerKind::swiglu:
    eager_swiglu(k, phase, out, d);
    return;
  case LayerKind::rotary: {
    const double per_head = in / (l.heads + 2.0 * l.kv_heads);
    eager_rotary(k, phase, per_head * l.heads, d);
    eager_rotary(k, phase, per_head * l.kv_heads, d);
    return;
  }
  case LayerKind::layer_norm:
    if (fwd) {
      if (!fp32_in && d < fp32 && !fsdp)
        k.add(in * (d + fp32));  // autocast runs norms in fp32
      k.add(in * 2 * dout, Access::norm);
    } else {
      k.add(in * 3 * dout, Access::norm);           // dy, x -> dx
      k.add(in * 2 * dout, Access::norm);           // the weight and bias gradients' reductions
      accumulated(l.parameters);
    }
    return;
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
  case LayerKind::group_norm:
    if (fwd) {
      k.add(in * 3 * din, Access::norm);  // statistics (a read), then normalise (a read and a write)
      k.add(0, 16);                       // num_batches_tracked += 1 (training mode)
    }
    else
      k.add(in * 5 * din, Access::norm);  // dy, x for the statistics' gradients, then dy, x -> dx
    return;
  case LayerKind::embedding: {
    const int rows = tables(l); // token (+ position) rows
    if (fwd) {
      k.repeat(rows, out * 2 * wb);
      if (rows == 2)
        k.add(out * 3 * wb); // their sum
    } else {
      k.add(0, l.parameters * wb); // the dense gradient zeroed
      for (int t = 0; t < rows; ++t)
        k.add(out * 2 * wb, Access::broadcast); // rows added into it (sorted, then scattered)
      accumulated(l.parameters);
    }
    return;
  }
  case LayerKind::pooling:
    k.add(fwd ? in * din + out * (din + (l.stashed_mask_bytes > 0 ? 8 : 0)) : in * 2 * din + out * din,
          Access::reduction);
    return;
  case LayerKind::softmax_loss:
    // logits.float() (autocast's fp32 loss), log_softmax, nll_loss; backward: the gradient zeroed and
    // scattered, log_softmax's backward, the cast back to the logits' dtype
    if (fwd) {
      if (!fp32_in && d < fp32)
        k.add(in * (d + fp32));
      k.add(in * 2 * fp32, Access::reduction);
    } else {
      k.add(in * fp32);
      k.add(in * 3 * fp32, Access::reduction);
      if (!fp32_in && d < fp32)
        k.add(in * (fp32 + d), Access::strided);
    }
    return;
  default:
    return; // the ideal kernels stand (not yet modelled: experts, concat, custom)
  }
}

// Layers whose ideal memory-bound kernels the eager list above replaces.
bool replaces_pointwise(LayerKind kind)
{
  switch (kind) {
  case LayerKind::linear:
  case LayerKind::conv2d:
  case LayerKind::attention:
  case LayerKind::dropout:
  case LayerKind::add:
  case LayerKind::activation:
  case LayerKind::layer_norm:
  case LayerKind::rms_norm:
  case LayerKind::swiglu:
  case LayerKind::rotary:
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
  case LayerKind::group_norm:
  case LayerKind::embedding:
  case LayerKind::pooling:
  case LayerKind::softmax_loss: return true;
  default: return false;
  }
}

bool library_kernel(models::KernelKind kind)
{
  return kind == models::KernelKind::gemm || kind == models::KernelKind::batched_gemm ||
         kind == models::KernelKind::conv2d;
}

// A GEMM with a dimension off 16 bytes (calibration::unaligned_gemm): PyTorch hands cuBLAS the tensors as
// they are (the LM head's 50,257 classes), where the simulator's own backends pad them.
bool unaligned(const KernelLaunch& launch, Dtype dtype)
{
  return (launch.kind == models::KernelKind::gemm || launch.kind == models::KernelKind::batched_gemm) &&
         calibration::unaligned_gemm(launch.gemm.m, launch.gemm.n, launch.gemm.k, dtype);
}

// Parameter tensors of a layer: a weight, and a bias or a norm's shift where it has one.
double parameter_tensors(const models::Model& model, const Layer& l)
{
  if (l.parameters <= 0)
    return 0;
  switch (l.kind) {
  case LayerKind::linear:
    return l.parameters > input_elements(model, l) / std::max(1.0, l.output.tokens) * l.output.features ? 2 : 1;
  case LayerKind::conv2d: {
    const models::ConvShape& c = l.kernels.front().conv;
    return l.parameters > static_cast<double>(c.k) * (c.c / c.groups) * c.r * c.s ? 2 : 1;
  }
  case LayerKind::layer_norm:
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
  case LayerKind::group_norm: return 2;
  case LayerKind::embedding:
    return tables(l);
  default: return 1;
  }
}

// The operators an eager layer dispatches (forward) and the autograd nodes of its backward, by kind, as
// Hugging Face's GPT-2 and torchvision's ResNet issue them (counted in their profiler traces,
// docs/frameworks.md).
// `autocast`: bf16/fp16 training under torch.autocast, whose casts of the weights are operators of
// their own; fp32 training runs none.
HostOps layer_host_ops(const models::Model& model, const Layer& l, bool fp32_in, bool autocast, Phase phase)
{
  HostOps ops{};
  auto put = [&](HostOpKind kind, double n) { ops[static_cast<std::size_t>(kind)] += n; };
  const bool fwd = phase == Phase::forward;
  const double tensors = parameter_tensors(model, l);
  switch (l.kind) {
  case LayerKind::linear:  // view, addmm, view; backward: the GEMMs, views, casts of W, b (and an fp32 x)
    put(HostOpKind::gemm, 1);
    put(HostOpKind::view, fwd ? 2 : 4);
    if (!fwd) {
      put(HostOpKind::elementwise, autocast ? tensors + (fp32_in ? 1 : 0) : 0);
      put(HostOpKind::accumulate, tensors);
    }
    break;
  case LayerKind::conv2d:
    put(HostOpKind::conv, 1);
    if (!fwd) {
      put(HostOpKind::elementwise, autocast ? tensors : 0);
      put(HostOpKind::accumulate, tensors);
    }
    break;
  case LayerKind::attention:
    if (fused_attention(l)) { // views and transposes, repeat_kv's expand and reshape, the SDPA op, the merge
      put(HostOpKind::gemm, 1);
      put(HostOpKind::view, fwd ? 10 : 8);
      put(HostOpKind::elementwise, l.kv_heads < l.heads ? 3 : 1);
      break;
    }
    // split, views and transposes, two matmuls, scale, mask, softmax, cast, dropout
    put(HostOpKind::gemm, 2);
    put(HostOpKind::view, fwd ? 15 : 12);
    put(HostOpKind::elementwise, fwd ? 9 : 8);
    put(HostOpKind::reduction, 1);
    break;
  case LayerKind::activation: put(HostOpKind::elementwise, l.stash_output ? 1 : 8); break;
  case LayerKind::rms_norm:  // to, pow, mean, add, rsqrt, mul, to, mul; backward a node each
    put(HostOpKind::elementwise, 7);
    put(HostOpKind::reduction, 1);
    if (!fwd)
      put(HostOpKind::accumulate, tensors);
    break;
  case LayerKind::swiglu:  // silu, mul; backward their nodes
    put(HostOpKind::elementwise, 2);
    break;
  case LayerKind::rotary:  // cos, sin cast; per Q and K: mul, neg, cat, mul, add and two slices
    put(HostOpKind::elementwise, fwd ? 2 + 2 * 5 : 2 * 7);
    put(HostOpKind::view, fwd ? 2 * 2 + 2 : 0);
    break;
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
    if (fwd)
      put(HostOpKind::elementwise, 1);  // num_batches_tracked.add_(1), in Python (training mode)
    [[fallthrough]];
  case LayerKind::layer_norm:
  case LayerKind::group_norm:
    put(HostOpKind::norm, 1);
    if (!fwd)
      put(HostOpKind::accumulate, tensors);
    break;
  case LayerKind::embedding:  // the lookups, positions (arange, unsqueeze), their sum
    put(HostOpKind::gather, tensors);
    if (fwd)
      put(HostOpKind::elementwise, 4);
    else
      put(HostOpKind::accumulate, tensors);
    break;
  case LayerKind::pooling: put(HostOpKind::reduction, 1); break;
  case LayerKind::softmax_loss:  // float(), cross_entropy (log_softmax, nll_loss), / micro-batches
    put(HostOpKind::reduction, fwd ? 1 : 2);
    put(HostOpKind::elementwise, 3);
    break;
  default:
    put(HostOpKind::elementwise, 1);
    if (!fwd)
      put(HostOpKind::accumulate, tensors);
  }
  return ops;
}

void fsdp_copies(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                 const ComputeOptions& options, std::vector<KernelLaunch>& out)
{
  // A recomputed forward runs on the weights its backward gathered: no copies of its own.
  if (!fsdp_params(options) || phase == Phase::optimizer || options.recomputing)
    return;
  const auto& layers = model.layers();
  const double d        = dtype_bytes(options.dtype);
  const bool regathers  = shards_parameters(options.zero); // ZeRO 3: gathered before the forward and the backward
  const LaunchPass pass = phase == Phase::forward ? LaunchPass::forward : LaunchPass::backward;
  for (std::size_t l = begin; l < end;) {
    std::size_t e    = l;
    double unsharded = 0, shard = 0; // the unit's own weights one tensor-parallel GPU holds, and its shard
    for (; e < end && layers[e].block == layers[l].block; ++e) {
      const bool experts = layers[e].kind == LayerKind::moe;
      const double held  = own_parameters(layers[e], options.tp) / (experts ? options.ep : 1); // tied: with their owner
      unsharded += held;
      shard += held / std::max(1, experts ? options.expert_shard : options.shard);
    }
    const Launches k{&layers[l], pass, static_cast<double>(samples), out};
    const std::size_t first = out.size();
    if (regathers) {
      k.add(0, shard * (fp32 + d)); // all-gather inputs: the fp32 shard cast to the param dtype,
      k.add(0, shard * 2 * d);      // then copied into the gather's input buffer
      k.add(0, unsharded * 2 * d);  // copy-out: the gathered weights split into the parameters
    }
    if (phase == Phase::backward) {
      k.add(0, unsharded * (d + fp32)); // reduce-scatter copy-in: the gradients cast to fp32
      k.add(0, shard * 3 * fp32);       // the shard's fp32 gradient accumulated
    }
    for (std::size_t i = first; i < out.size(); ++i)
      out[i].outside_graph = true;
    l = e;
  }
}

} // namespace framework_parts

using namespace framework_parts;

std::vector<KernelLaunch> pytorch_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                           int samples, const ComputeOptions& options)
{
  if (phase == Phase::optimizer) {
    // Fused AdamW over fp32 weights: reads weight, gradient and both moments, writes weight and moments.
    ComputeOptions fp32_weights = options;
    fp32_weights.framework = Framework::ideal;
    fp32_weights.dtype = Dtype::fp32;
    return range_launches(model, begin, end, phase, samples, fp32_weights);
  }
  const auto& layers = model.layers();
  const bool fsdp                  = fsdp_params(options);
  const std::vector<char> fp32_out = fp32_outputs(model, end, options.dtype, !fsdp);
  std::vector<KernelLaunch> out;
  for (std::size_t l = begin; l < end; ++l) {
    const bool eager = replaces_pointwise(layers[l].kind);
    for (auto& launch : layer_launches(layers[l], phase, samples, options.dtype, options.tp, options.scale,
                                       options.sequence_parallel, options.cp, options.ep)) {
      if (eager && !library_kernel(launch.kind))
        continue;
      launch.work.unaligned = unaligned(launch, options.dtype);
      out.push_back(launch);
    }
    if (!eager)
      continue;
    const Launches k{&layers[l], phase == Phase::forward ? LaunchPass::forward : LaunchPass::backward,
                     samples * options.scale / options.cp, out};
    const std::size_t first = out.size();
    layer_pointwise(model, l, fp32_out, phase, k, options.dtype, fsdp);
    // One tensor-parallel GPU's share, as for the library kernels: a divided layer's heads or columns,
    // or with sequence parallelism its tokens (a replicated layer's casts and norms run whole otherwise).
    const double share = tp_share(layers[l], options.tp, options.sequence_parallel);
    for (std::size_t i = first; i < out.size(); ++i)
      out[i].work.bytes *= share;
  }
  fsdp_copies(model, begin, end, phase, samples, options, out);
  return out;
}

namespace {

// The forward of the share `rerun` of a linear's columns, as eager PyTorch launches it.
std::vector<KernelLaunch> partial_gemm(const Layer& layer, double rerun, int samples, const ComputeOptions& options)
{
  std::vector<KernelLaunch> out = rerun_launches(layer, rerun, samples, options);
  for (KernelLaunch& launch : out)
    launch.work.unaligned = unaligned(launch, options.dtype);
  return out;
}

} // namespace

std::vector<KernelLaunch> op_checkpoint_reruns(const models::Model& model, std::size_t begin, std::size_t end,
                                               int samples, const ComputeOptions& rerun)
{
  const auto kept = models::op_checkpoint_layers(model, begin, end);
  std::map<const Layer*, double> share; // of each checkpointed layer's outputs kept
  for (const auto& [l, s] : kept)
    share[&model.layers()[l]] = s;
  // Eager PyTorch launches layer by layer; torch.compile fuses each checkpointed block's layers (its
  // partitioner recomputes what the policy tags and fuses the recomputed pointwise ops; torchtitan
  // compiles block by block, so nothing fuses across a block's edge): recomputed_runs' runs.
  const bool compiled = rerun.framework == Framework::pytorch_compile;
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  if (compiled)
    runs = recomputed_runs(model, begin, end, models::Recompute::selective_op);
  else
    for (const auto& [l, s] : kept)
      runs.emplace_back(l, l + 1);
  const auto list = compiled ? compiled_launches : pytorch_launches;
  std::vector<KernelLaunch> out;
  for (const auto& [first, last] : runs)
    for (KernelLaunch& launch : list(model, first, last, Phase::forward, samples, rerun)) {
      const auto it  = share.find(launch.layer);
      const double s = it == share.end() ? 0.0 : it->second;
      if (s == 0 || !library_kernel(launch.kind))
        out.push_back(std::move(launch)); // recomputed, or around a kept op (SDPA's copies)
      else if (s < 1 && launch.kind == models::KernelKind::gemm)
        for (KernelLaunch& part : partial_gemm(*launch.layer, 1 - s, samples, rerun))
          out.push_back(std::move(part));
    }
  return out;
}

StepDtypes step_dtypes(Framework framework, Dtype training)
{
  if (!is_megatron(framework))
    return {training, training, training, training};
  const Dtype weights = training == Dtype::fp8 ? Dtype::bf16 : training;  // TE keeps bf16 weights under FP8
  return {.gemm = training,
          .activations = weights,
          .weights = weights,
          .gradients = weights == Dtype::bf16 ? Dtype::fp32 : weights};
}

std::vector<KernelLaunch> megatron_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                            int samples, const ComputeOptions& options)
{
  const StepDtypes dt = step_dtypes(options.framework, options.dtype);
  const bool fp8 = dt.gemm == Dtype::fp8;
  ComputeOptions bf16 = options;
  bf16.framework = Framework::ideal;
  bf16.dtype = dt.activations;
  if (phase == Phase::optimizer) {
    // The distributed optimizer's step over fp32 master weights, moments and gradients (read the gradient,
    // read and write master weight and moments, write the bf16 weight: the ideal update with fp32 gradients),
    // the gradient norm for clipping (a read of the gradients) and the gradient buffer zeroed (a write);
    // with FP8 GEMMs, Transformer Engine's cast and transpose of each weight, once per step.
    std::vector<KernelLaunch> out = range_launches(model, begin, end, phase, samples, bf16);
    if (out.empty())
      return out;
    KernelLaunch& update = out.front();  // the ideal list's one fused update
    const double params = update.work.flop / 10;
    update.work.bytes += params * (dtype_bytes(dt.gradients) - dtype_bytes(dt.activations));  // fp32 gradients read
    KernelLaunch norm = update;
    norm.work.flop = 0;
    norm.work.bytes = params * dtype_bytes(dt.gradients);
    KernelLaunch zero = norm;
    KernelLaunch cast = norm;
    cast.work.bytes = params * (dtype_bytes(dt.weights) + 2 * dtype_bytes(Dtype::fp8));
    out.push_back(norm);
    out.push_back(zero);
    if (fp8)
      out.push_back(cast);
    return out;
  }
  std::vector<KernelLaunch> out;
  for (KernelLaunch& launch : range_launches(model, begin, end, phase, samples, bf16)) {
    const bool gemm = launch.kind == models::KernelKind::gemm && launch.work.kind != calibration::WorkKind::attention;
    // The output projection (the LM head) is Megatron's own ColumnParallelLinear, outside Transformer
    // Engine's fp8_autocast: bf16.
    const bool head =
        launch.layer != nullptr && model.feeds_loss(static_cast<std::size_t>(launch.layer - model.layers().data()));
    if (!fp8 || !gemm || launch.layer == nullptr || launch.layer->kind == models::LayerKind::softmax_loss || head) {
      out.push_back(launch);
      continue;
    }
    // An FP8 GEMM: its inputs a byte each, at the FP8 rate. Transformer Engine casts the activation it
    // reads (forward: the input, cast and transposed for the weight gradient; backward: the output
    // gradient, cast and transposed, before the data-gradient GEMM): read bf16, write two FP8 copies.
    const double ratio = dtype_bytes(Dtype::fp8) / dtype_bytes(dt.activations);
    launch.work.dtype = Dtype::fp8;
    launch.work.bytes *= ratio;
    out.push_back(launch);
    if (launch.pass != LaunchPass::backward_weight) {  // the weight gradient reuses the other two's casts
      const double elements = launch.gemm.m * launch.gemm.k * launch.gemm.batch;
      const double bytes = elements * (dtype_bytes(dt.activations) + 2 * dtype_bytes(Dtype::fp8));
      Launches{launch.layer, launch.pass, 0, out}.add(0, bytes);
    }
  }
  return out;
}

HostOps pytorch_host_ops(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, Dtype dtype,
                         bool autocast)
{
  const auto& layers = model.layers();
  HostOps ops{};
  if (phase == Phase::optimizer)  // optimizer.step and zero_grad are priced per tensor (host_durations)
    return ops;
  const std::vector<char> fp32_out = fp32_outputs(model, end, dtype, autocast);
  for (std::size_t l = begin; l < end; ++l) {
    const bool fp32_in = layers[l].inputs.empty() || fp32_out[layers[l].inputs.front()] != 0;
    const HostOps one  = layer_host_ops(model, layers[l], fp32_in, autocast && dtype != Dtype::fp32, phase);
    for (std::size_t k = 0; k < ops.size(); ++k)
      ops[k] += one[k];
  }
  return ops;
}

double optimizer_tensors(const models::Model& model, std::size_t begin, std::size_t end)
{
  double n = 0;
  for (std::size_t l = begin; l < end; ++l)
    n += parameter_tensors(model, model.layers()[l]);
  return n;
}

double host_seconds(const HostOps& ops, Phase phase, const calibration::CalibrationProfile& profile)
{
  double s = 0;
  for (HostOpKind kind : calibration::host_op_kinds)
    if (const double n = ops[static_cast<std::size_t>(kind)]; n > 0)
      s += n * profile.value(calibration::host_parameter(kind, phase == Phase::backward));
  return s;
}

namespace {

// Host seconds of one compiled task, but for the call into its graph: each kernel Inductor's wrapper
// launches, or none when the graph replays as a CUDA graph; after a backward, AccumulateGrad per
// parameter tensor, eagerly (its kernels are not the wrapper's).
double compiled_host_seconds(const ComputeTask& c, const models::Model& model, const ComputeOptions& options,
                             const calibration::CalibrationProfile& profile)
{
  double s = 0;
  if (!options.cuda_graphs) { // the backward's wrapper launches the recomputed forward's kernels too
    const auto launches = range_launches(model, c.layer_begin, c.layer_end, c.phase, std::max(1, c.samples), options);
    const auto wrapper =
        std::count_if(launches.begin(), launches.end(), [](const KernelLaunch& k) { return !k.outside_graph; });
    s += static_cast<double>(wrapper) * profile.value("host_compiled_kernel_s");
  }
  if (c.phase == Phase::backward)
    s += optimizer_tensors(model, c.layer_begin, c.layer_end) * profile.value("host_accumulate_s");
  return s;
}

// The host seconds of one task without its position in the step: memoised by layers and phase.
double task_host_seconds(const ComputeTask& c, const models::Model& model, const ComputeOptions& options,
                         const calibration::CalibrationProfile& profile)
{
  if (c.phase == Phase::optimizer)
    return optimizer_tensors(model, c.layer_begin, c.layer_end) * profile.value("host_optimizer_tensor_s");
  if (options.framework == Framework::pytorch_compile)
    return compiled_host_seconds(c, model, options, profile);
  const bool autocast = !fsdp_params(options);
  double s = host_seconds(pytorch_host_ops(model, c.layer_begin, c.layer_end, c.phase, options.dtype, autocast),
                          c.phase, profile);
  if (c.phase == Phase::backward) // activation checkpointing: the dropped layers' forward operators again
    for (const auto& [first, last] : recomputed_runs(model, c.layer_begin, c.layer_end, options.recompute))
      s += host_seconds(pytorch_host_ops(model, first, last, Phase::forward, options.dtype, autocast), Phase::forward,
                        profile);
  return s;
}

} // namespace

std::vector<double> host_durations(const TaskGraph& graph, const models::Model& model, const ComputeOptions& options,
                                   const calibration::CalibrationProfile& profile)
{
  std::vector<double> seconds(graph.size(), 0.0);
  std::map<std::tuple<Phase, std::uint32_t, std::uint32_t>, double> memo;
  // pytorch-compile: one call into the compiled graph per pass of a stage over a micro-batch (the tasks a
  // blocking collective or a gradient bucket splits it into run inside that call), or a CUDA graph replay.
  const bool compiled = options.framework == Framework::pytorch_compile;
  const double call   = compiled ? profile.value("host_compiled_graph_s") +
                                     (options.cuda_graphs ? profile.value("host_graph_replay_s") : 0.0)
                                 : 0.0;
  std::map<int, std::tuple<Phase, int, int>> pass_of_device; // the pass each GPU's host is in
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::compute)
      continue;
    const ComputeTask& c = graph.compute(id);
    const auto key = std::make_tuple(c.phase, c.layer_begin, c.layer_end);
    auto it = memo.find(key);
    if (it == memo.end())
      it = memo.emplace(key, task_host_seconds(c, model, options, profile)).first;
    seconds[id] = it->second;
    const auto pass  = std::make_tuple(c.phase, c.stage, c.micro_batch);
    auto [at, first] = pass_of_device.try_emplace(c.device, pass);
    if (compiled && c.phase != Phase::optimizer && (first || at->second != pass))
      seconds[id] += call;
    at->second = pass;
  }
  return seconds;
}

}  // namespace ddlsim::sim
