// torch.compile's step (Framework::pytorch_compile, docs/frameworks.md#pytorch-compile).
//
// TorchInductor keeps the library kernels (cuBLAS GEMMs, cuDNN convolutions, the flash attention op)
// and fuses every chain of memory-bound operators between them into generated Triton kernels. A fused
// kernel reads the chain's inputs once and writes once what leaves it: what a later layer reads, and
// what the backward needs that it cannot recompute (a dropout's mask). The backward recomputes the
// chain from its saved inputs (AOTAutograd's min-cut partitioner saves a pointwise chain's inputs, not
// its intermediates), reads the gradients that come in and writes those that go out. Per chain, one
// kernel per reduction (a norm, the loss, a pooling; two for a batch norm: its statistics, then the
// rest); the backward adds one per norm with parameters (the parameters' gradients reduce over the
// tokens). Outside the chains, the autocast casts of the fp32 weights (one kernel each; different
// tensors are not fused), the weight gradients' casts back to fp32 and AccumulateGrad, which runs
// eagerly after the compiled backward, a linear's bias gradient, and the copies around the attention
// op. Inductor pads GEMMs with a dimension off 16 bytes (pad_mm): the aligned kernel's price, plus
// the padding's copy.
#include "sim/Framework.hpp"
#include "sim/FrameworkParts.hpp"

#include "calibration/EagerFit.hpp"

#include <algorithm>
#include <set>

namespace ddlsim::sim {

using namespace framework_parts;

namespace {

// Layers Inductor fuses into chains: every memory-bound layer the eager list models.
bool fusible(LayerKind kind)
{
  return replaces_pointwise(kind) && kind != LayerKind::linear && kind != LayerKind::conv2d &&
         kind != LayerKind::attention;
}

// Layers whose input a library kernel reads: a chain before them writes their input in the compute
// dtype (the autocast cast fused into it).
bool library_layer(LayerKind kind)
{
  return kind == LayerKind::linear || kind == LayerKind::conv2d || kind == LayerKind::attention;
}

// Reductions of a chain's forward: each a kernel.
int forward_reductions(LayerKind kind)
{
  switch (kind) {
  case LayerKind::layer_norm:
  case LayerKind::rms_norm:
  case LayerKind::group_norm:
  case LayerKind::softmax_loss:
  case LayerKind::pooling:
    return 1;
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
    return 2; // statistics over the batch, then normalise
  default:
    return 0;
  }
}

bool norm(LayerKind kind)
{
  return kind == LayerKind::layer_norm || kind == LayerKind::rms_norm || kind == LayerKind::group_norm ||
         kind == LayerKind::batch_norm || kind == LayerKind::sync_batch_norm;
}

// A norm over each token's features (layer, RMS): its parameters' gradients reduce over the tokens, a
// kernel of their own. A batch or group norm's come from the sums its input gradient needs.
bool token_norm(LayerKind kind)
{
  return kind == LayerKind::layer_norm || kind == LayerKind::rms_norm;
}

// The model's layers, who reads each layer's output, and in which dtype each output is stored.
struct Graph {
  const models::Model& model;
  const ComputeOptions& options;
  std::vector<std::vector<std::size_t>> users;
  std::vector<char> fp32_out;
  double d;

  // Bytes of a weight and its gradient: FSDP's parameter dtype, else fp32 under autocast.
  double weight_bytes() const { return fsdp_params(options) ? d : fp32; }
  bool feeds_library(std::size_t i) const
  {
    return std::any_of(users[i].begin(), users[i].end(), [&](std::size_t u) { return library_layer(layer(u).kind); });
  }
  Graph(const models::Model& m, const ComputeOptions& o)
      : model(m), options(o), users(m.layers().size()),
        fp32_out(fp32_outputs(m, m.layers().size(), o.dtype, !fsdp_params(o))), d(dtype_bytes(o.dtype))
  {
    for (std::size_t l = 0; l < users.size(); ++l)
      for (std::size_t i : m.layers()[l].inputs)
        users[i].push_back(l);
  }
  const Layer& layer(std::size_t l) const { return model.layers()[l]; }
  // Bytes of one element of layer i's stored output: a chain feeding only library kernels writes the
  // compute dtype (autocast's cast fused into it); else what autocast gives it.
  double stored(std::size_t i) const
  {
    const bool to_library = !users[i].empty() && std::all_of(users[i].begin(), users[i].end(), [&](std::size_t u) {
      return library_layer(layer(u).kind);
    });
    if (fusible(layer(i).kind) && to_library)
      return d;
    return fp32_out[i] != 0 ? std::max(fp32, d) : d;
  }
  // One GPU's share of layer l's memory-bound bytes under tensor parallelism (as eager PyTorch's).
  double share(std::size_t l) const { return tp_share(layer(l), options.tp, options.sequence_parallel); }
};

// Per-sample bytes of a chain [first, last] in `phase`, and how many kernels it takes.
struct Chain {
  double bytes = 0;
  int kernels  = 0;
  bool reduces = false; ///< it holds a reduction (a norm, the loss, a pooling)
};

Chain chain_bytes(const Graph& g, std::size_t first, std::size_t last, Phase phase)
{
  const bool fwd = phase == Phase::forward;
  Chain c;
  std::set<std::size_t> inputs; // produced outside the chain, each read once
  int reductions = 0;
  for (std::size_t l = first; l <= last; ++l) {
    const Layer& layer = g.layer(l);
    const double share = g.share(l);
    reductions += forward_reductions(layer.kind);
    for (std::size_t i : layer.inputs)
      if (i < first && inputs.insert(i).second)
        c.bytes += g.layer(i).output_elements() * g.stored(i) * share * (fwd ? 1 : 2); // backward: x, and dx written
    if (fwd && forward_reductions(layer.kind) == 2 && !layer.inputs.empty()) // a batch norm's statistics: x read first
      c.bytes += g.layer(layer.inputs.front()).output_elements() * g.stored(layer.inputs.front()) * share;
    if (layer.inputs.empty()) // the model's input: token ids (int64) or an fp32 image
      c.bytes += g.model.input_shape().elements() * (layer.kind == LayerKind::embedding ? 8 : fp32) * share;
    if (layer.kind == LayerKind::embedding) // the rows gathered; backward: scattered into the dense gradient
      c.bytes += tables(layer) * layer.output_elements() * g.weight_bytes() * share * (fwd ? 1 : 2);
    const bool leaves = g.users[l].empty() ||
                        std::any_of(g.users[l].begin(), g.users[l].end(), [&](std::size_t u) { return u > last; });
    if (leaves) // forward: the output written; backward: its gradient read
      c.bytes += layer.output_elements() * g.stored(l) * share;
    if (leaves && fwd && g.stored(l) > g.d && g.feeds_library(l)) // and a compute-dtype copy for a GEMM
      c.bytes += layer.output_elements() * g.d * share;
    c.bytes += layer.stashed_mask_bytes * share; // a dropout's mask: written, then read
    if (!fwd && norm(layer.kind) && layer.parameters > 0 && !layer.inputs.empty()) {
      // The parameters' gradients: dy (in the output's dtype) and x (in the input's) read again.
      const std::size_t x = layer.inputs.front();
      c.kernels += token_norm(layer.kind) ? 1 : 0;
      c.bytes += (layer.output_elements() * g.stored(l) + g.layer(x).output_elements() * g.stored(x)) * share;
    }
  }
  c.kernels += std::max(1, reductions);
  c.reduces = reductions > 0;
  return c;
}

// AccumulateGrad of `bytes` (grad += g), run eagerly after the compiled backward; none under FSDP, which
// reduce-scatters each micro-batch's gradients and accumulates the shard (fsdp_copies).
void accumulate(const Graph& g, const Launches& k, double bytes)
{
  if (fsdp_params(g.options))
    return;
  const std::size_t before = k.out.size();
  k.add(0, bytes);
  if (k.out.size() > before)
    k.out.back().outside_graph = true;
}

// The kernels of a library layer l beside its library launches: autocast's weight casts, the weight
// gradients' casts back and their accumulation, a linear's bias gradient, the attention op's copies.
void library_extras(const Graph& g, std::size_t l, Phase phase, const Launches& k)
{
  const Layer& layer = g.layer(l);
  const bool fwd     = phase == Phase::forward;
  const double w = weights(layer), d = g.d;
  if (layer.kind == LayerKind::attention) {
    if (fused_attention(layer)) {
      sdpa_attention(k, phase, layer, d);
      return;
    }
    // Eager attention's scale, mask, softmax, cast and dropout over the s x s scores: one kernel each way
    // (the backward reads the probabilities and the mask), and the heads merged (a copy).
    const double s = layer.output.tokens, S = layer.heads * s * s, T = layer.output_elements();
    const double mask_bytes = layer.stashed_mask_bytes > 0 ? S * mask : 0;
    k.add(fwd ? S * 2 * d + mask_bytes : S * 3 * d + mask_bytes, Access::reduction);
    k.add(T * 2 * d, Access::broadcast);
    return;
  }
  const bool autocast = d < fp32 && !fsdp_params(g.options);
  if (fwd) {
    if (autocast && layer.inputs.empty()) // an fp32 image cast for the first convolution
      k.add(g.model.input_shape().elements() * (fp32 + d));
    if (autocast)
      k.add(0, w * (fp32 + d)); // the layer's fp32 weights cast
    return;
  }
  if (autocast)
    k.add(0, w * (d + fp32)); // the weight gradient cast to fp32
  if (layer.kind == LayerKind::linear && parameter_tensors(g.model, layer) > 1)
    k.add(layer.output_elements() * d, Access::reduction); // the bias gradient
  accumulate(g, k, w * 3 * fp32);
}

// Inductor pads a GEMM with a dimension off 16 bytes (pad_mm): the aligned kernel, and a padded copy of
// each operand with an unaligned dimension (A[m x k] when m or k is, B[k x n] when k or n is: read and
// written); the padded output is sliced, a view. The attention op is never padded.
void padded(const KernelLaunch& launch, Dtype dtype, std::vector<KernelLaunch>& out)
{
  if (launch.work.kind == calibration::WorkKind::attention || !unaligned(launch, dtype))
    return;
  auto off       = [&](double dim) { return calibration::unaligned_gemm(dim, 64, 64, dtype); };
  const double m = launch.gemm.m, n = launch.gemm.n, k = launch.gemm.k;
  const double copied =
      ((off(m) || off(k) ? m * k : 0) + (off(k) || off(n) ? k * n : 0)) * std::max(1.0, launch.gemm.batch);
  KernelLaunch pad = launch;
  pad.kind         = models::KernelKind::pointwise;
  pad.gemm         = {};
  pad.work         = {.flop  = 0,
                      .bytes = 2 * dtype_bytes(dtype) * copied,
                      .dtype = Dtype::fp32,
                      .kind  = calibration::WorkKind::memory,
                      .shape = {}};
  out.push_back(pad);
}

// Layers [begin, end)'s chain starting at `l`: its kernels, then (backward) its parameters' eager
// AccumulateGrad and an embedding's zeroed dense gradient. Returns the chain's last layer.
std::size_t add_chain(const Graph& g, std::size_t l, std::size_t end, Phase phase, const Launches& k)
{
  std::size_t last = l;
  while (last + 1 < end && fusible(g.layer(last + 1).kind))
    ++last;
  const Chain c = chain_bytes(g, l, last, phase);
  for (int i = 0; i < c.kernels; ++i)
    k.add(c.bytes / c.kernels, c.reduces ? Access::reduction : Access::contiguous);
  if (phase == Phase::backward)
    for (std::size_t p = l; p <= last; ++p) {
      // A GPU holds 1/tp of a divided layer's parameters (the embedding's rows), a norm's whole.
      const Layer& held       = g.layer(p);
      const double parameters = own_parameters(held, g.options.tp);
      if (held.kind == LayerKind::embedding)
        k.add(0, parameters * g.weight_bytes()); // the dense gradient zeroed
      accumulate(g, k, parameters * 3 * fp32);
    }
  return last;
}

} // namespace

std::vector<KernelLaunch> compiled_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                            int samples, const ComputeOptions& options)
{
  if (phase == Phase::optimizer) // fused AdamW, eager: as under eager PyTorch
    return pytorch_launches(model, begin, end, phase, samples, options);
  const Graph g(model, options);
  const double per_sample = samples * options.scale / options.cp;
  const LaunchPass pass   = phase == Phase::forward ? LaunchPass::forward : LaunchPass::backward;
  std::vector<KernelLaunch> out;
  for (std::size_t l = begin; l < end; ++l) {
    const Layer& layer = g.layer(l);
    if (fusible(layer.kind)) {
      l = add_chain(g, l, end, phase, Launches{&layer, pass, per_sample, out});
      continue;
    }
    const bool modelled = library_layer(layer.kind);
    for (auto& launch : layer_launches(layer, phase, samples, options.dtype, options.tp, options.scale,
                                       options.sequence_parallel, options.cp, options.ep)) {
      if (modelled && !library_kernel(launch.kind))
        continue;
      padded(launch, options.dtype, out);
      out.push_back(launch);
    }
    if (!modelled)
      continue;
    const std::size_t first = out.size();
    library_extras(g, l, phase, Launches{&layer, pass, per_sample, out});
    for (std::size_t i = first; i < out.size(); ++i)
      out[i].work.bytes *= g.share(l);
  }
  fsdp_copies(model, begin, end, phase, samples, options, out);
  return out;
}

} // namespace ddlsim::sim
