#include "sim/OpCosts.hpp"

#include <map>
#include <tuple>

namespace ddlsim::sim {

calibration::KernelWork layer_work(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                                   models::Optimizer optimizer)
{
  const double d = dtype_bytes(dtype);
  const double b = samples;
  switch (phase) {
  case Phase::forward:
    return {.flop = b * layer.forward_flop, .bytes = (layer.parameters + b * layer.traffic_elements) * d, .dtype = dtype};
  case Phase::backward:
    return {.flop = b * layer.backward_flop,
            .bytes = 2 * (layer.parameters + b * layer.traffic_elements) * d,
            .dtype = dtype};
  case Phase::optimizer: {
    // Read and write the optimizer's fp32 state and master copy, read gradients, write weights;
    // memory-bound, so the kernel runs in fp32 whatever the training dtype.
    const double state = optimizer == models::Optimizer::adam ? 8.0 : optimizer == models::Optimizer::momentum ? 4.0 : 0.0;
    const double master = d < 4.0 ? 4.0 : 0.0;
    return {.flop = 10 * layer.parameters, .bytes = layer.parameters * (2 * d + 2 * (state + master)), .dtype = Dtype::fp32};
  }
  }
  return {};
}

std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, Dtype dtype, models::Optimizer optimizer)
{
  std::vector<double> seconds(graph.size(), 0.0);
  std::map<std::tuple<Phase, std::uint32_t, std::uint32_t, int>, double> memo;
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::compute)
      continue;
    const ComputeTask& c = graph.compute(id);
    auto key = std::make_tuple(c.phase, c.layer_begin, c.layer_end, c.samples);
    auto it = memo.find(key);
    if (it == memo.end()) {
      double total = 0;
      if (c.phase == Phase::optimizer) {
        // One fused (multi-tensor) update over the whole stage, as PyTorch's foreach optimizers do.
        calibration::KernelWork fused{.flop = 0, .bytes = 0, .dtype = Dtype::fp32};
        for (std::uint32_t l = c.layer_begin; l < c.layer_end; ++l) {
          auto w = layer_work(model.layers()[l], c.phase, c.samples, dtype, optimizer);
          fused.flop += w.flop;
          fused.bytes += w.bytes;
        }
        total = fused.bytes > 0 ? cost.seconds(fused) : 0.0;
      } else {
        for (std::uint32_t l = c.layer_begin; l < c.layer_end; ++l)
          total += cost.seconds(layer_work(model.layers()[l], c.phase, c.samples, dtype, optimizer));
      }
      it = memo.emplace(key, total).first;
    }
    seconds[id] = it->second;
  }
  return seconds;
}

}  // namespace ddlsim::sim
