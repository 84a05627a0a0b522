// Replays a TaskGraph on a SimGrid model of the cluster and measures the iteration.
//
// Every task becomes SimGrid activities created just in time, when its last dependency finishes
// (creating them all up front with add_successor is quadratic in SimGrid 3.32):
//   compute     one Exec on the device's host (one stream per GPU: the graph serialises them);
//               off-stream tasks wait for the device's arrival queue and run one at a time, in
//               the order they became ready (ties: the order the replay readied them, deterministic)
//   transfer    a timer for the route latency, then one Comm between the two GPU hosts
//   collective  flow fidelity: decomposed into point-to-point messages (Collectives.hpp), each a
//               latency timer then a Comm, so that collectives contend on links like any other
//               traffic; analytic fidelity: one timer of the algorithm's closed-form time
// Network model: CM02 (no TCP-over-Ethernet factors), no cross-traffic, no TCP window cap, and
// zero-latency links so that flows share a bottleneck equally (see Platform.hpp).
//
//   auto result = replay(graph, cluster, durations);   // once per process: SimGrid's engine is a singleton
//   result.makespan_s;                                 // simulated iteration time
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/Metrics.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ddlsim::sim {

struct ReplayOptions {
  /// Extra SimGrid settings, each "name:value" as for --cfg= (e.g. "maxmin/precision:1e-9").
  std::vector<std::string> simgrid_config;
  /// SimGrid log settings as for --log= (default: only critical messages).
  std::vector<std::string> simgrid_log;
  /// Extra share of time compute takes while a transfer or collective of its GPU runs (the profile's
  /// comm_compute_slowdown; 0: none). See CommOverlap.hpp.
  double comm_compute_slowdown = 0;
};

struct ReplayResult {
  double makespan_s = 0;             ///< simulated time at which the last task finished
  std::vector<TaskTiming> timings;   ///< per task
  std::vector<DeviceStats> devices;  ///< per GPU
  std::uint64_t activities = 0;      ///< SimGrid Exec and Comm activities created
  double wall_time_s = 0;            ///< host time spent in the replay (platform build included)
};

/// Simulates one iteration. `compute_seconds[id]` is the duration of compute task `id` (see OpCosts.hpp).
/// Throws SimulationError if called twice in one process (fork one process per simulation), if the
/// graph does not fit the cluster, or if some task never becomes ready (a dependency cycle).
ReplayResult replay(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& compute_seconds,
                    const ReplayOptions& options = {});

}  // namespace ddlsim::sim
