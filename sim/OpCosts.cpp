#include "sim/OpCosts.hpp"

#include "sim/Framework.hpp"

#include "models/ExpertLoad.hpp"
#include "models/ModelBuilder.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace ddlsim::sim {

calibration::WorkKind work_kind(models::KernelKind kind)
{
  switch (kind) {
  case models::KernelKind::gemm: return calibration::WorkKind::gemm;
  case models::KernelKind::batched_gemm: return calibration::WorkKind::batched_gemm;
  case models::KernelKind::conv2d: return calibration::WorkKind::conv2d;
  case models::KernelKind::pointwise:
  case models::KernelKind::gather: return calibration::WorkKind::memory;
  case models::KernelKind::custom: return calibration::WorkKind::unknown;
  }
  return calibration::WorkKind::unknown;
}

namespace {

// The (implicit) GEMM a launch runs on one GPU, for the shape-aware cost model. `tp_share` < 1 when
// the layer's work divides over a tensor-parallel group: a row-parallel GEMM splits K, every other
// divided GEMM its output columns (N), an attention's batched GEMMs their heads, a convolution its
// output channels. A backward launch runs the data-gradient GEMM (m, k, n) or the weight-gradient
// GEMM (k, n, m) of the forward's (m, n, k); a convolution's passes are cuDNN's implicit GEMMs.
calibration::GemmDims launch_dims(const KernelLaunch& launch, models::TpRole role, double tp_share)
{
  const double divide = tp_share < 1 ? tp_share : 1.0;
  if (launch.kind == models::KernelKind::gemm || launch.kind == models::KernelKind::batched_gemm) {
    calibration::GemmDims g{.m = launch.gemm.m, .n = launch.gemm.n, .k = launch.gemm.k, .batch = launch.gemm.batch};
    if (launch.kind == models::KernelKind::batched_gemm)
      g.batch = std::max(1.0, g.batch * divide);
    else if (role == models::TpRole::row)
      g.k = std::max(1.0, g.k * divide);
    else
      g.n = std::max(1.0, g.n * divide);
    // launch.gemm already holds the pass's own shape (backward launches swap it); see layer_launches.
    return g;
  }
  if (launch.kind == models::KernelKind::conv2d) {
    const models::ConvShape& c = launch.conv;
    const double g = c.groups, n = launch.conv_batch;
    const double out_channels = std::max(1.0, c.k * divide);
    const double out_pixels = static_cast<double>(c.out_h()) * c.out_w(), in_pixels = static_cast<double>(c.h) * c.w;
    const double window = static_cast<double>(c.r) * c.s;
    switch (launch.pass) {
    case LaunchPass::backward_data:
      return {.m = n * in_pixels, .n = c.c / g, .k = out_channels / g * window, .batch = g};
    case LaunchPass::backward_weight:
      return {.m = out_channels / g, .n = c.c / g * window, .k = n * out_pixels, .batch = g};
    default: return {.m = n * out_pixels, .n = out_channels / g, .k = c.c / g * window, .batch = g};
    }
  }
  return {};
}

// A fused attention kernel's shape on one GPU: the scores part (QK^T, gemm m = n = s) has the head
// dimension as its K; the context part (PV) as its N. Heads divide over tp.
calibration::AttentionDims attention_dims(const models::Kernel& k, const KernelLaunch& launch, double tp_share,
                                          bool backward)
{
  const bool scores = k.gemm.m == k.gemm.n;
  return {.heads = std::max(1.0, launch.gemm.batch * (tp_share < 1 ? tp_share : 1.0)),
          .q = launch.gemm.m,
          .kv = scores ? k.gemm.n : k.gemm.k,
          .head_dim = scores ? k.gemm.k : k.gemm.n,
          .causal = k.causal,
          .backward = backward};
}

}  // namespace

calibration::KernelWork kernel_work(const models::Kernel& k, Phase phase, double samples, Dtype dtype)
{
  const double d = dtype_bytes(dtype);
  const double b = samples;
  if (phase == Phase::backward)
    return {.flop = b * k.backward_flop,
            .bytes = (b * k.backward_sample_elements + k.backward_fixed_elements) * d,
            .dtype = dtype,
            .kind = work_kind(k.kind),
            .shape = {}};
  return {.flop = b * k.forward_flop, .bytes = (b * k.forward_sample_elements + k.forward_fixed_elements) * d,
          .dtype = dtype, .kind = work_kind(k.kind), .shape = {}};
}

calibration::BenchPoint launch_point(const KernelLaunch& launch)
{
  calibration::BenchPoint p;
  p.dtype = std::string(dtype_table.name(launch.work.dtype));
  auto whole = [](double v) { return static_cast<long long>(std::llround(v)); };
  switch (launch.kind) {
  case models::KernelKind::gemm:
  case models::KernelKind::batched_gemm:
    p.op = launch.kind == models::KernelKind::gemm ? calibration::BenchOp::gemm : calibration::BenchOp::batched_gemm;
    p.m = whole(launch.gemm.m);
    p.n = whole(launch.gemm.n);
    p.k = whole(launch.gemm.k);
    p.batch = whole(launch.gemm.batch);
    // The layouts a training step runs: the data gradient reads the weights transposed, the weight gradient the
    // activations (calibration::GemmLayout).
    p.layout = launch.pass == LaunchPass::backward_data     ? calibration::GemmLayout::nt
               : launch.pass == LaunchPass::backward_weight ? calibration::GemmLayout::tn
                                                            : calibration::GemmLayout::nn;
    return p;
  case models::KernelKind::conv2d: {
    p.op = calibration::BenchOp::conv2d;
    const models::ConvShape& c = launch.conv;
    p.conv = {.n = launch.conv_batch, .c = c.c, .h = c.h, .w = c.w, .k = c.k, .r = c.r, .s = c.s, .stride = c.stride_h, .pad = c.pad_h};
    p.pass = launch.pass == LaunchPass::backward_data     ? calibration::ConvPass::backward_data
             : launch.pass == LaunchPass::backward_weight ? calibration::ConvPass::backward_filter
                                                                : calibration::ConvPass::forward;
    return p;
  }
  default:
    p.op = calibration::BenchOp::pointwise;
    p.bytes = launch.work.bytes;
    return p;
  }
}

double tp_share(const models::Layer& layer, int tp, bool sequence_parallel)
{
  const bool per_token = !layer.output.image;
  return models::tp_divides(layer.tp) || (sequence_parallel && per_token) ? 1.0 / tp : 1.0;
}

std::vector<KernelLaunch> layer_launches(const models::Layer& layer, Phase phase, int samples, Dtype dtype, int tp,
                                         double scale, bool sequence_parallel, int cp, int ep)
{
  const double share = tp_share(layer, tp, sequence_parallel);
  // The experts: the kept token copies, 1/ep of the weights, each expert over `shards` GPUs.
  const bool experts = layer.kind == models::LayerKind::moe;
  const double kept = experts ? models::expert_load(layer, 1).kept : 1.0;
  const double weights = experts ? 1.0 / ep : 1.0;
  const double shards = experts && ep > layer.experts ? static_cast<double>(ep / layer.experts) : 1.0;
  std::vector<KernelLaunch> out;
  for (const auto& k : layer.kernels) {
    if (phase == Phase::forward ? !k.in_forward : !k.in_backward)
      continue;  // a kernel of the other pass only (a norm's weight gradient)
    // The samples this kernel really runs: scaled rows are whole (at least one row, batch or image).
    double rows = samples * scale;
    if (scale != 1) {
      if (k.kind == models::KernelKind::gemm)
        rows = std::max(1.0, std::round(k.gemm.m * samples * scale)) / k.gemm.m;
      else if (k.kind == models::KernelKind::batched_gemm)
        rows = std::max(1.0, std::round(k.gemm.batch * samples * scale)) / k.gemm.batch;
      else if (k.kind == models::KernelKind::conv2d)
        rows = std::max(1.0, std::round(samples * scale));
    }
    rows *= kept;
    KernelLaunch launch{.kind = k.kind, .pass = phase == Phase::forward ? LaunchPass::forward : LaunchPass::backward,
                        .work = kernel_work(k, phase, rows, dtype), .gemm = k.gemm, .conv = k.conv,
                        .conv_batch = static_cast<int>(std::lround(rows)), .layer = &layer};
    launch.work.flop *= share;
    launch.work.bytes *= share;
    const double fixed = (phase == Phase::backward ? k.backward_fixed_elements : k.forward_fixed_elements) *
                         dtype_bytes(dtype) * share;
    launch.work.bytes -= fixed * (1 - weights);  // this GPU's experts' weights only
    if (cp > 1) {  // s/cp tokens of each sample; the weights are read whole
      launch.work.flop /= cp;
      launch.work.bytes = (launch.work.bytes - fixed * weights) / cp + fixed * weights;
    }
    if (k.kind == models::KernelKind::gemm && shards > 1) {  // a split expert: all its rows, part of its width
      launch.gemm.m *= shards;
      (k.gemm.k == layer.output.features ? launch.gemm.n : launch.gemm.k) /= shards;
    }
    if (k.kind == models::KernelKind::gemm) {
      launch.gemm.m = std::max(1.0, std::round(launch.gemm.m * rows / cp));  // one GEMM over the micro-batch's rows
    } else if (k.kind == models::KernelKind::batched_gemm) {
      launch.gemm.batch = std::round(launch.gemm.batch * rows);
      launch.gemm.m = std::max(1.0, std::round(launch.gemm.m / cp));  // this GPU's queries
    }
    const bool two_kernels = phase == Phase::backward && (k.kind == models::KernelKind::gemm ||
                                                          k.kind == models::KernelKind::batched_gemm ||
                                                          k.kind == models::KernelKind::conv2d);
    if (k.fused) {  // a part of a fused attention kernel: its own cost model, never a library GEMM's
      launch.work.kind = calibration::WorkKind::attention;
      launch.work.attention = attention_dims(k, launch, share, phase == Phase::backward);
    }
    if (!two_kernels) {
      launch.work.shape = k.fused ? std::string() : launch_point(launch).shape_key();
      if (!k.fused)
        launch.work.gemm = launch_dims(launch, layer.tp, share);
      out.push_back(launch);
      continue;
    }
    // Data gradient and weight gradient, each a kernel of the forward's size.
    launch.work.flop /= 2;
    launch.work.bytes /= 2;
    KernelLaunch data = launch, weight = launch;
    data.pass = LaunchPass::backward_data;
    weight.pass = LaunchPass::backward_weight;
    if (k.kind != models::KernelKind::conv2d) {
      const models::GemmShape g = launch.gemm;
      data.gemm = {.m = g.m, .n = g.k, .k = g.n, .batch = g.batch};    // dA = dC B^T
      weight.gemm = {.m = g.k, .n = g.n, .k = g.m, .batch = g.batch};  // dB = A^T dC
    }
    data.work.shape = k.fused ? std::string() : launch_point(data).shape_key();
    weight.work.shape = k.fused ? std::string() : launch_point(weight).shape_key();
    if (!k.fused) {
      // The tensor-parallel split applies to the forward's dimensions: split them first, then swap.
      KernelLaunch forward = launch;
      forward.pass = LaunchPass::forward;
      const calibration::GemmDims f = launch_dims(forward, layer.tp, share);
      if (k.kind == models::KernelKind::conv2d) {
        data.work.gemm = launch_dims(data, layer.tp, share);
        weight.work.gemm = launch_dims(weight, layer.tp, share);
      } else {
        data.work.gemm = {.m = f.m, .n = f.k, .k = f.n, .batch = f.batch};
        weight.work.gemm = {.m = f.k, .n = f.n, .k = f.m, .batch = f.batch};
      }
    }
    out.push_back(data);
    out.push_back(weight);
  }
  return out;
}

namespace {

// Eager or compiled PyTorch's launches; a backward also reruns, as that framework runs it, the forward
// of each run of layers the recomputation drops (activation checkpointing).
std::vector<KernelLaunch> pytorch_step_launches(const models::Model& model, std::size_t begin, std::size_t end,
                                                Phase phase, int samples, const ComputeOptions& options)
{
  const auto list = options.framework == Framework::pytorch_compile ? compiled_launches : pytorch_launches;
  std::vector<KernelLaunch> out = list(model, begin, end, phase, samples, options);
  if (phase != Phase::backward)
    return out;
  ComputeOptions rerun = options;
  rerun.recomputing    = true;
  if (options.recompute == models::Recompute::selective_op) { // transformer blocks, ep 1 (the rules)
    for (auto& launch : op_checkpoint_reruns(model, begin, end, samples, rerun))
      out.push_back(std::move(launch));
    return out;
  }
  for (const auto& [first, last] : recomputed_runs(model, begin, end, options.recompute))
    for (auto& launch : list(model, first, last, Phase::forward, samples, rerun))
      out.push_back(launch);
  return out;
}

} // namespace

std::vector<KernelLaunch> rerun_launches(const models::Layer& layer, double rerun, int samples,
                                         const ComputeOptions& options)
{
  const auto launches = [&](const models::Layer& l) {
    return layer_launches(l, Phase::forward, samples, options.dtype, options.tp, options.scale,
                          options.sequence_parallel, options.cp, options.ep);
  };
  if (rerun <= 0)
    return {};
  if (rerun >= 1 || layer.kind != models::LayerKind::linear || layer.kernels.size() != 1)
    return launches(layer);
  const models::Kernel& whole = layer.kernels.front();
  models::Layer part          = layer;
  part.kernels = {models::gemm_kernel(whole.name, whole.gemm.m, std::round(whole.gemm.n * rerun), whole.gemm.k)};
  std::vector<KernelLaunch> out = launches(part);
  for (KernelLaunch& launch : out)
    launch.layer = &layer; // not the copy
  return out;
}

std::vector<std::pair<std::size_t, std::size_t>> recomputed_runs(const models::Model& model, std::size_t begin,
                                                                 std::size_t end, models::Recompute recompute)
{
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  if (recompute == models::Recompute::none)
    return runs;
  // Per-op checkpointing reruns every operator of a checkpointed block (it skips kernels, not ops),
  // one run per block: each is its own checkpoint (and, compiled, its own graph).
  if (recompute == models::Recompute::selective_op) {
    const auto& layers = model.layers();
    for (const auto& [l, kept] : models::op_checkpoint_layers(model, begin, end))
      if (!runs.empty() && runs.back().second == l && layers[l].block == layers[runs.back().first].block)
        ++runs.back().second;
      else
        runs.emplace_back(l, l + 1);
    return runs;
  }
  for (std::size_t l = begin; l < end;) {
    std::size_t r = l;
    while (r < end && models::reruns_forward(recompute, model.layers()[r]))
      ++r;
    if (r == l)
      ++l;
    else {
      runs.emplace_back(l, r);
      l = r;
    }
  }
  return runs;
}

std::vector<KernelLaunch> range_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                         int samples, const ComputeOptions& options)
{
  if (is_pytorch(options.framework))
    return pytorch_step_launches(model, begin, end, phase, samples, options);
  if (is_megatron(options.framework))
    return megatron_launches(model, begin, end, phase, samples, options);
  const auto& layers = model.layers();
  if (phase == Phase::optimizer) {
    // One fused (multi-tensor) update, as PyTorch's foreach optimizers do. Memory-bound: it reads
    // and writes the fp32 state and master copy, reads gradients and writes weights.
    double params = 0;
    for (std::size_t l = begin; l < end; ++l)
      params += model.held_parameters(l, {begin, end}, options.tp) / (layers[l].kind == models::LayerKind::moe ? options.ep : 1);
    if (params <= 0)
      return {};
    const double d = dtype_bytes(options.dtype);
    const double extra = models::optimizer_bytes_per_parameter(options.optimizer, options.dtype);
    KernelLaunch update;
    update.kind = models::KernelKind::pointwise;
    update.pass = LaunchPass::optimizer;
    update.work = {.flop = 10 * params, .bytes = params * (2 * d + 2 * extra), .dtype = Dtype::fp32,
                   .kind = calibration::WorkKind::memory, .shape = {}};
    return {update};
  }
  std::vector<KernelLaunch> out;
  for (std::size_t l = begin; l < end; ++l) {
    for (auto& launch : layer_launches(layers[l], phase, samples, options.dtype, options.tp, options.scale,
                                       options.sequence_parallel, options.cp, options.ep))
      out.push_back(launch);
    if (phase == Phase::backward && options.recompute != models::Recompute::selective_op &&
        models::reruns_forward(options.recompute, layers[l]))
      for (auto& launch : layer_launches(layers[l], Phase::forward, samples, options.dtype, options.tp, options.scale,
                                         options.sequence_parallel, options.cp, options.ep))
        out.push_back(launch);
  }
  // Per-op checkpointing: each checkpointed block's layers again, less what the policy kept.
  if (phase == Phase::backward && options.recompute == models::Recompute::selective_op)
    for (const auto& [l, kept] : models::op_checkpoint_layers(model, begin, end))
      for (auto& launch : rerun_launches(layers[l], 1 - kept, samples, options))
        out.push_back(launch);
  return out;
}

double layer_seconds(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                     const calibration::CostModel& cost, int tp)
{
  double total = 0;
  for (const auto& launch : layer_launches(layer, phase, samples, dtype, tp))
    total += cost.seconds(launch.work);
  return total;
}

bool in_part(const KernelLaunch& launch, ComputePart part)
{
  switch (part) {
  case ComputePart::whole:
    return true;
  case ComputePart::weight_gradient:
    return launch.pass == LaunchPass::backward_weight;
  case ComputePart::input_gradient:
    return launch.pass != LaunchPass::backward_weight;
  }
  return true;
}

double range_seconds(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                     const ComputeOptions& options, const calibration::CostModel& cost, ComputePart part)
{
  double total = 0;
  for (const auto& launch : range_launches(model, begin, end, phase, samples, options))
    if (in_part(launch, part))
      total += cost.seconds(launch.work);
  return total;
}

std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, const ComputeOptions& options)
{
  std::vector<double> seconds(graph.size(), 0.0);
  std::map<std::tuple<Phase, std::uint32_t, std::uint32_t, int, double, ComputePart>, double> memo;
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::compute)
      continue;
    const ComputeTask& c = graph.compute(id);
    auto key             = std::make_tuple(c.phase, c.layer_begin, c.layer_end, c.samples, c.share, c.part);
    auto it = memo.find(key);
    if (it == memo.end())
      it = memo.emplace(key, c.share * range_seconds(model, c.layer_begin, c.layer_end, c.phase, c.samples, options,
                                                     cost, c.part))
               .first;
    seconds[id] = it->second;
  }
  return seconds;
}

}  // namespace ddlsim::sim
