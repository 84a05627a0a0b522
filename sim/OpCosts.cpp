#include "sim/OpCosts.hpp"

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

calibration::KernelWork kernel_work(const models::Kernel& k, Phase phase, int samples, Dtype dtype)
{
  const double d = dtype_bytes(dtype);
  const double b = samples;
  if (phase == Phase::backward)
    return {.flop = b * k.backward_flop,
            .bytes = (b * k.backward_sample_elements + k.backward_fixed_elements) * d,
            .dtype = dtype,
            .kind = work_kind(k.kind)};
  return {.flop = b * k.forward_flop, .bytes = (b * k.forward_sample_elements + k.forward_fixed_elements) * d,
          .dtype = dtype, .kind = work_kind(k.kind)};
}

double layer_seconds(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                     const calibration::CostModel& cost, int tp)
{
  const double share = models::tp_divides(layer.tp) ? 1.0 / tp : 1.0;
  double total = 0;
  for (const auto& k : layer.kernels) {
    calibration::KernelWork w = kernel_work(k, phase, samples, dtype);
    w.flop *= share;
    w.bytes *= share;
    // The backward of a GEMM or convolution is two kernels of the forward's size (data gradient and
    // weight gradient), so a measured table is looked up at that size.
    const bool two_kernels = phase == Phase::backward && (w.kind == calibration::WorkKind::gemm ||
                                                          w.kind == calibration::WorkKind::batched_gemm ||
                                                          w.kind == calibration::WorkKind::conv2d);
    if (two_kernels) {
      w.flop /= 2;
      w.bytes /= 2;
      total += 2 * cost.seconds(w);
    } else {
      total += cost.seconds(w);
    }
  }
  return total;
}

double range_seconds(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                     const ComputeOptions& options, const calibration::CostModel& cost)
{
  const auto& layers = model.layers();
  if (phase == Phase::optimizer) {
    // One fused (multi-tensor) update, as PyTorch's foreach optimizers do. Memory-bound: it reads
    // and writes the fp32 state and master copy, reads gradients and writes weights.
    double params = 0;
    for (std::size_t l = begin; l < end; ++l)
      params += model.held_parameters(l, {begin, end}, options.tp);
    if (params <= 0)
      return 0.0;
    const double d = dtype_bytes(options.dtype);
    const double extra = models::optimizer_bytes_per_parameter(options.optimizer, options.dtype);
    return cost.seconds({.flop = 10 * params, .bytes = params * (2 * d + 2 * extra), .dtype = Dtype::fp32});
  }
  double total = 0;
  for (std::size_t l = begin; l < end; ++l) {
    total += layer_seconds(layers[l], phase, samples, options.dtype, cost, options.tp);
    if (phase == Phase::backward &&
        (options.recompute == models::Recompute::full ||
         (options.recompute == models::Recompute::selective && layers[l].recompute_cheap)))
      total += layer_seconds(layers[l], Phase::forward, samples, options.dtype, cost, options.tp);
  }
  return total;
}

std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, const ComputeOptions& options)
{
  std::vector<double> seconds(graph.size(), 0.0);
  std::map<std::tuple<Phase, std::uint32_t, std::uint32_t, int, double>, double> memo;
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::compute)
      continue;
    const ComputeTask& c = graph.compute(id);
    auto key = std::make_tuple(c.phase, c.layer_begin, c.layer_end, c.samples, c.share);
    auto it = memo.find(key);
    if (it == memo.end())
      it = memo.emplace(key, c.share * range_seconds(model, c.layer_begin, c.layer_end, c.phase, c.samples, options, cost))
               .first;
    seconds[id] = it->second;
  }
  return seconds;
}

}  // namespace ddlsim::sim
