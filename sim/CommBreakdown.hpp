// Where a GPU's exposed communication comes from: for each parallel dimension, the time its
// collectives and transfers are in flight while the GPU does not compute (the union of their
// intervals less the GPU's compute), as means over the GPUs of one iteration. The dimensions:
//   tp  tensor-parallel collectives (CollectiveRole::tensor_parallel)
//   dp  data parallelism: gradient reductions, parameter gathers, batch-norm sums, barriers, and a
//       parameter server's pushes and pulls (experiments/Evaluate.cpp does not report them for
//       parameter-server points, whose GPUs are each timed over their own runs)
//   pp  the pipeline's activation and gradient transfers
//   cp  context parallelism: K/V all-gathers, dK/dV reduce-scatters, ring attention's transfers
//   ep  expert all-to-alls (also their whole time in flight, hidden or not)
// Dimensions may overlap one another, so the five can add up to more than the GPU's exposed
// communication (Metrics' exposed_comm_s, the union of all of them less compute).
//
//   const sim::CommBreakdown b = sim::comm_breakdown(graph, result.timings, fold);
//   b.exposed(sim::CommDimension::tp)
#pragma once

#include "sim/Fold.hpp"
#include "sim/Metrics.hpp"
#include "sim/TaskGraph.hpp"

#include <array>

namespace ddlsim::sim {

enum class CommDimension : std::uint8_t { tp, dp, pp, cp, ep };
inline constexpr std::size_t comm_dimensions = 5;

struct CommBreakdown {
  /// Per dimension (index: CommDimension), mean seconds per GPU not hidden under its compute.
  std::array<double, comm_dimensions> exposed_s{};
  double expert_total_s = 0;  ///< mean seconds per GPU its expert all-to-alls are in flight at all

  double exposed(CommDimension d) const { return exposed_s[static_cast<std::size_t>(d)]; }
};

/// The breakdown of one replayed iteration. Under a fold (non-null), a device's intervals are its
/// representative's: an image of each task runs there.
CommBreakdown comm_breakdown(const TaskGraph& graph, const Timings& timings, const Fold* fold = nullptr);

}  // namespace ddlsim::sim
