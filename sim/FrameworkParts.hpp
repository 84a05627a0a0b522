// Parts the frameworks' kernel lists share (sim/Framework.cpp: eager PyTorch and Megatron;
// sim/FrameworkCompile.cpp: torch.compile). Internal to sim/: the public entry points are in
// Framework.hpp.
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/HostModel.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"
#include "sim/OpCosts.hpp"

#include <vector>

namespace ddlsim::sim::framework_parts {

using calibration::HostOpKind;
using models::fused_attention; // FlashAttention: SDPA's flash backend
using models::Layer;
using models::LayerKind;
using Access = calibration::MemoryAccess;

constexpr double fp32 = 4; // bytes: master weights, gradients, autocast's fp32 ops
constexpr double mask = 1; // bytes: a dropout mask element (bool)

// Collects one layer pass's memory-bound launches: `bytes` per sample times the samples, plus `fixed`
// bytes once (weights), as one kernel each.
struct Launches {
  const Layer* layer;
  LaunchPass pass;
  double samples;
  std::vector<KernelLaunch>& out;

  void add(double per_sample_bytes, double fixed_bytes = 0, Access access = Access::contiguous) const
  {
    KernelLaunch k;
    k.kind        = models::KernelKind::pointwise;
    k.pass        = pass;
    k.layer       = layer;
    k.work        = {.flop  = 0,
                     .bytes = per_sample_bytes * samples + fixed_bytes,
                     .dtype = Dtype::fp32,
                     .kind  = calibration::WorkKind::memory,
                     .shape = {}};
    k.work.access = access;
    if (k.work.bytes > 0)
      out.push_back(k);
  }
  void add(double per_sample_bytes, Access access) const { add(per_sample_bytes, 0, access); }
  void repeat(int n, double per_sample_bytes) const
  {
    for (int i = 0; i < n; ++i)
      add(per_sample_bytes);
  }
};

/// Whether each layer's output is stored in fp32 (layers [0, end)): under autocast what autocast keeps in
/// fp32; without it (`autocast` false: FSDP's mixed precision) the loss's logits.float() only.
std::vector<char> fp32_outputs(const models::Model& model, std::size_t end, Dtype dtype, bool autocast = true);
/// Elements of a layer's (first) input per sample: the model's input for the first layer.
double input_elements(const models::Model& model, const Layer& layer);
/// Weights a layer reads (its own and tied ones).
double weights(const Layer& layer);
/// SDPA's copies around the fused kernel: K and V repeated for grouped-query attention, heads merged.
void sdpa_attention(const Launches& k, Phase phase, const Layer& l, double d);
/// Eager PyTorch's memory-bound launches of layer `li` in `phase` (the library kernels aside); `fsdp`:
/// FSDP's mixed precision (fsdp_params): no autocast, weights in the training dtype, no AccumulateGrad.
void layer_pointwise(const models::Model& model, std::size_t li, const std::vector<char>& fp32_out, Phase phase,
                     const Launches& k, Dtype dtype, bool fsdp = false);
/// FSDP2's copies around its collectives for each unit (block) of layers [begin, end) under fsdp_params:
/// with ZeRO 3, per all-gather (before the forward, again before the backward) the fp32 shard cast into
/// the gather's input and the gathered weights copied out; per backward the gradients cast to fp32 into
/// the reduce-scatter's input, and the shard's fp32 gradient accumulated. Marked outside_graph.
void fsdp_copies(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                 const ComputeOptions& options, std::vector<KernelLaunch>& out);
/// Layers whose ideal memory-bound kernels the eager list replaces.
bool replaces_pointwise(LayerKind kind);
/// GEMMs and convolutions: the kernels a framework takes from its libraries.
bool library_kernel(models::KernelKind kind);
/// A GEMM with a dimension off 16 bytes, as PyTorch hands it to cuBLAS.
bool unaligned(const KernelLaunch& launch, Dtype dtype);
/// Parameter tensors of a layer: a weight, and a bias or a norm's shift where it has one.
double parameter_tensors(const models::Model& model, const Layer& l);
/// An embedding's tables: token rows, and position rows where it has them.
inline int tables(const Layer& l)
{
  return l.parameters > 0 && l.kernels.front().forward_flop > 0 ? 2 : 1;
}
/// A layer's own parameters (tied ones are its owner's) on one of `tp` GPUs: 1/tp of a divided layer's,
/// a replicated one's whole.
inline double own_parameters(const Layer& l, int tp)
{
  return l.parameters / (models::tp_divides(l.tp) ? tp : 1);
}

} // namespace ddlsim::sim::framework_parts
