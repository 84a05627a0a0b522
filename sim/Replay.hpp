// Replays a TaskGraph on a SimGrid model of the cluster and measures the iteration.
//
// Every task becomes SimGrid activities created just in time, when its last dependency finishes
// (creating them all up front with add_successor is quadratic in SimGrid 3.32):
//   compute     a timer of its duration over the GPU's speed: a GPU runs its stream's tasks one at a
//               time (the graph serialises them), and an Exec alone on the host takes that time, by
//               the solver. With comm_compute_slowdown the timer follows the GPU's power state
//               (CommOverlap::run_chain), as the Exec's rate would. A run of a GPU's consecutive
//               stream tasks with nothing else waiting in between is one timer (a stream chain),
//               each task timed as its own timer would time it (ReplayOptions::chain_stream).
//               Graphs with off-stream tasks (parameter servers) use Execs: those tasks
//               share the GPU with the stream, wait for the device's arrival queue and run one at a
//               time in the order they became ready (ties: the order the replay readied them, which
//               Execs keep as before)
//   transfer    a timer for the route latency, then one Comm between the two GPU hosts
//   collective  flow fidelity: decomposed into point-to-point messages (Collectives.hpp), each a
//               latency timer then a Comm, so that collectives contend on links like any other
//               traffic; analytic fidelity: one timer of the algorithm's closed-form time
// Network model: CM02 (no TCP-over-Ethernet factors), no cross-traffic, no TCP window cap, and
// zero-latency links so that flows share a bottleneck equally (see Platform.hpp): every flow has
// weight 1 on each link of its route and is bounded by its slowest link.
//
// Folded (ReplayOptions::fold, Fold.hpp): the platform is the quotient of the cluster's links by
// the fold (a link per link orbit O, of bandwidth B |O| / |G|, FATPIPE links unchanged), a message
// crosses the orbits of its route's links, collectives send their folded messages
// (FoldedCollectives), and each GPU's statistics are its representative's.
//
//   auto result = replay(graph, cluster, durations);   // once per process: SimGrid's engine is a singleton
//   result.makespan_s;                                 // simulated iteration time
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/Metrics.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddlsim::sim {

/// How far a replay has come, for progress lines.
struct ReplayProgress {
  double simulated_s = 0;        ///< simulated time reached
  std::uint64_t activities = 0;  ///< activities started so far (as ReplayResult::activities)
  double wall_s = 0;             ///< host time since the replay began
  double estimated_activities = 0;  ///< ReplayOptions::estimated_activities
};

struct ReplayOptions {
  /// Extra SimGrid settings, each "name:value" as for --cfg= (e.g. "maxmin/precision:1e-9").
  std::vector<std::string> simgrid_config;
  /// SimGrid log settings as for --log= (default: only critical messages).
  std::vector<std::string> simgrid_log;
  /// The fold the graph was built under (Schedules.hpp, Fold.hpp): only its representatives' tasks
  /// are in the graph; null or trivial: every device's.
  const Fold* fold = nullptr;
  /// Called with the replay's progress about every progress_interval_s of host time.
  std::function<void(const ReplayProgress&)> on_progress;
  double progress_interval_s = 0.5;
  /// The activities the replay is expected to simulate (0: unknown), passed on to on_progress.
  double estimated_activities = 0;
  /// Extra share of time compute takes while a transfer or collective of its GPU runs (the profile's
  /// comm_compute_slowdown; 0: none). See CommOverlap.hpp.
  double comm_compute_slowdown = 0;
  /// Run a GPU's stream tasks that follow one another with nothing else waiting in between (compute,
  /// analytic tensor-parallel collectives) as one timer, each task timed as its own would be; false:
  /// a timer per task (slower, the same numbers: `ddlsim run --no-stream-chains` checks it).
  bool chain_stream = true;
  /// The host that issues each GPU's kernels (framework pytorch, Framework.hpp): compute task `id` starts
  /// no earlier than host_start_s[id] and ends no earlier than host_end_s[id] (its last kernel issued,
  /// then run). Such a task is a timer on its GPU. Empty: no host (the GPU never waits to be fed).
  std::vector<double> host_start_s;
  std::vector<double> host_end_s;
};

struct ReplayResult {
  double makespan_s = 0;             ///< simulated time at which the last task finished
  Timings timings;   ///< per task
  std::vector<DeviceStats> devices;  ///< per GPU (under a fold: each GPU its representative's)
  /// Activities simulated: compute tasks (a timer on a GPU that runs one task at a time, else an
  /// Exec) and Comms. Analytic collectives and latencies are timers and do not count.
  std::uint64_t activities = 0;
  double wall_time_s = 0;            ///< host time spent in the replay (platform build included)
};

/// Simulates one iteration. `compute_seconds[id]` is the duration of compute task `id` (see OpCosts.hpp).
/// Throws FoldError (Fold.hpp) when a collective of a folded graph does not fold: before anything
/// is simulated, or, for collectives run apart (FoldedMessages::isolated) that met other traffic,
/// after a replay in a child process, so that the caller can replay again in this one;
/// SimulationError if called twice in one process (fork one process per
/// simulation), if the graph does not fit the cluster, or if some task never becomes ready (a
/// dependency cycle).
ReplayResult replay(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& compute_seconds,
                    const ReplayOptions& options = {});

}  // namespace ddlsim::sim
