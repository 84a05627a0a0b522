// From a TaskGraph's compute tasks to seconds, through a cost model.
//
// Each compute task covers layers [layer_begin, layer_end) of the model for one micro-batch; its
// time is the sum of the cost model's time for each layer pass, where a layer pass moves its weights
// and its activation traffic through memory:
//   forward   flop = b * forward_flop    bytes = (parameters + b * traffic_elements) * dtype
//   backward  flop = b * backward_flop   bytes = 2 * (parameters + b * traffic_elements) * dtype
//   optimizer flop = 10 * parameters     bytes = parameters * (2 dtype + 2 * optimizer state and master bytes)
#pragma once

#include "calibration/CostModel.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"
#include "sim/TaskGraph.hpp"

#include <vector>

namespace ddlsim::sim {

/// Work of one layer pass, for the cost model.
calibration::KernelWork layer_work(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                                   models::Optimizer optimizer);

/// Seconds of every task of `graph` (0 for transfers and collectives, whose time the replay finds).
/// Identical tasks (same layers, phase and micro-batch size) are costed once.
std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, Dtype dtype, models::Optimizer optimizer);

}  // namespace ddlsim::sim
