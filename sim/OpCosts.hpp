// From a TaskGraph's compute tasks to seconds, through a cost model.
//
// Each compute task covers layers [layer_begin, layer_end) of the model for one micro-batch of b
// samples; its time is the sum, over those layers' kernels, of the cost model's time for each
// kernel (a per-kernel roofline prices a GEMM by its flop and a layer norm by its bytes):
//   forward   flop = b * forward_flop    bytes = (b * forward_sample_elements + forward_fixed_elements) * dtype
//   backward  flop = b * backward_flop   bytes = (b * backward_sample_elements + backward_fixed_elements) * dtype
//             (a GEMM's or convolution's backward is priced as two kernels of half that work each: the
//             data and the weight gradient)
//             plus, with recomputation, the forward of what is recomputed (everything, or the
//             recompute_cheap layers)
//   optimizer one fused fp32 kernel over the stage's parameters: 10 flop and
//             2 dtype + 2 (state + master) bytes per parameter
#pragma once

#include "calibration/CostModel.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"
#include "sim/TaskGraph.hpp"

#include <vector>

namespace ddlsim::sim {

struct ComputeOptions {
  Dtype dtype = Dtype::bf16;
  models::Optimizer optimizer = models::Optimizer::adam;
  models::Recompute recompute = models::Recompute::none;
  int tp = 1;  ///< layers that tensor parallelism splits do 1/tp of their work on each GPU
};

/// Work of one kernel's forward or backward pass over `samples` samples.
calibration::KernelWork kernel_work(const models::Kernel& kernel, Phase phase, int samples, Dtype dtype);

/// Seconds of one layer's forward or backward pass (no recomputation), summed over its kernels,
/// on one of `tp` GPUs sharing it (each kernel's flop and bytes / tp when the layer divides).
double layer_seconds(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                     const calibration::CostModel& cost, int tp = 1);

/// Seconds of layers [begin, end) in `phase` for `samples` samples, recomputation included in backward.
/// Phase::optimizer gives the fused update of the parameters those layers hold (tied copies included).
double range_seconds(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                     const ComputeOptions& options, const calibration::CostModel& cost);

/// Seconds of every task of `graph` (0 for transfers and collectives, whose time the replay finds).
/// Identical tasks (same layers, phase and micro-batch size) are costed once.
std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, const ComputeOptions& options);

}  // namespace ddlsim::sim
