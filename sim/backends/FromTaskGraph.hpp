// From the simulator's TaskGraph to a Workload that an execution backend runs (Workload.hpp).
//
// Each compute task becomes its KernelLaunch list (sim/OpCosts.hpp, the kernels the cost model
// priced) as microbenchmark points; transfers and collectives keep their bytes and devices; tasks are
// renumbered in a topological order.
//
//   Workload w = make_workload(graph, model, {.dtype = Dtype::bf16}, "demo point 3");
#pragma once

#include "models/Model.hpp"
#include "sim/OpCosts.hpp"
#include "sim/TaskGraph.hpp"
#include "sim/backends/Workload.hpp"

#include <string>

namespace ddlsim::backends {

/// Throws ExecutionError for what no backend runs yet: tensor parallelism (options.tp > 1), expert
/// parallelism (options.ep > 1), and
/// compute off the stream or on a share of a layer range (parameter servers).
Workload make_workload(const sim::TaskGraph& graph, const models::Model& model, const sim::ComputeOptions& options,
                       std::string label);

}  // namespace ddlsim::backends
