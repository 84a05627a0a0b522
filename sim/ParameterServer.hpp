// Parameter-server training (Langer et al. 2020's taxonomy): W workers each train a full replica
// on their own data; S servers each own 1/S of the parameters. Per iteration k a worker computes
// its gradients (M micro-batches), pushes shard j to server j, the server applies it (one
// optimizer update of its shard per push), and the worker pulls its shards back before iteration
// k + 1. A server applies the pushes one at a time in the order they arrive, on its GPU's arrival
// queue (TaskGraph's off-stream tasks): no push waits for another worker's push of the same
// iteration. Consistency decides what a pull waits for, that is when a worker may start its next
// iteration:
//   bsp    every worker's update of iteration k: a barrier every iteration
//   ssp    every worker's update of iteration k - s, and its own of k (bounded staleness s; s = 0
//          is BSP). This is Ho et al. 2013's rule: a worker at clock c (c iterations done, about
//          to run iteration c = k + 1) proceeds only while the slowest worker is at clock >= c - s,
//          i.e. has had iteration c - s - 1 = k - s applied; so it reads every update up to
//          k - s and runs at most s iterations ahead of the slowest
//   async  only its own update of k: no worker ever waits for another
// Several iterations are simulated, each worker doing the same K, so that workers can drift apart;
// the staleness a worker actually saw on each pull is measured from the replay's timings
// (observed_staleness).
//
// Throughput (ps_throughput) counts the samples the workers train on per second, each worker at
// its own pace (the staleness above is the price of that pace, the other side of the taxonomy's
// comparison): worker w's K iterations of b samples end with its last pull at T_w (when it may
// start iteration K), and
//   throughput = sum_w K b / T_w,     iteration time = W b / throughput
// (the harmonic mean of the workers' own iteration times T_w / K). In steady state that is the
// samples all workers process per second within any time window. A worker that never waits is
// credited with its own rate: n workers, one at half speed, compute-bound, give (n - 1/2)/n of the
// straggler-free throughput under async, 1/2 under BSP, and under SSP 1/2 plus a transient that
// vanishes as K grows (the fast workers finish their K iterations s straggler iterations before
// the straggler does). The makespan of the K iterations would instead time everyone at the
// straggler's pace. Where workers share links, those that finish early leave the others' last
// iterations less contended: an end effect of the fixed K.
//
//   PsPlan plan{.workers = 4, .servers = 2, .server_devices = {4, 5}, .iterations = 8, ...};
//   PsGraph g = build_parameter_server(plan);   // g.graph is an ordinary TaskGraph
//   ReplayResult r = replay(g.graph, cluster, seconds);
//   PsThroughput x = ps_throughput(plan, g, r.timings);   // x.samples_per_s
#pragma once

#include "common/EnumTable.hpp"
#include "models/Model.hpp"
#include "sim/Metrics.hpp"
#include "sim/TaskGraph.hpp"

#include <vector>

namespace ddlsim::sim {

enum class Consistency { bsp, ssp, async };

inline constexpr EnumTable<Consistency, 3> consistency_table{{{
    {"bsp", Consistency::bsp, "bulk synchronous: a pull waits for every worker's update of the iteration"},
    {"ssp", Consistency::ssp, "stale synchronous: a pull waits for every worker's update of iteration k - staleness"},
    {"async", Consistency::async, "asynchronous: a pull waits only for the worker's own update"},
}}};

struct PsPlan {
  int workers = 1;
  int servers = 1;
  std::vector<int> server_devices;  ///< device of each server (dedicated GPUs, or workers' GPUs)
  int iterations = 1;
  int micro_batches = 1;       ///< per worker and iteration
  int micro_batch_size = 1;
  models::StageRange layers;   ///< the whole model
  double gradient_bytes = 0;   ///< bytes of all gradients (one worker's push, all shards together)
  Consistency consistency = Consistency::bsp;
  int staleness = 0;           ///< ssp only
  int devices = 0;             ///< devices in the graph (>= workers and every server device)
};

/// The graph and the tasks the staleness measure needs.
struct PsGraph {
  TaskGraph graph{1};
  /// update[(k * workers + w) * servers + j]: server j applying worker w's push of iteration k.
  std::vector<TaskId> updates;
  /// pull[(k * workers + w) * servers + j]: worker w pulling shard j after iteration k.
  std::vector<TaskId> pulls;
};

/// Worker w runs on device w. Throws std::invalid_argument on sizes < 1, a staleness < 0, or a
/// server device outside [0, devices).
PsGraph build_parameter_server(const PsPlan& plan);

struct StalenessStats {
  double max = 0;   ///< iterations
  double mean = 0;  ///< iterations, over all pulls
};

struct PsThroughput {
  std::vector<double> worker_time_s;  ///< s, per worker: T_w, when its last pull of iteration K - 1 ended
  double samples_per_s = 0;           ///< samples/s: sum_w K b / T_w, b = micro_batches x micro_batch_size
  double iteration_time_s = 0;        ///< s: W b / samples_per_s
};

/// The workers' throughput as defined above, from the replay's timings of `g`.
PsThroughput ps_throughput(const PsPlan& plan, const PsGraph& g, const Timings& timings);

/// Per-device statistics over each GPU's own run rather than the whole replay: worker w's ends at
/// T_w, a server's with the last pull it serves (a GPU that is both: the later), a GPU with no task
/// keeps the whole replay. Compute, exposed communication and idle time are scaled from that run
/// to K x x.iteration_time_s, so that averaged over GPUs against that time they give each GPU's own
/// shares (a fast worker that finished early is not idle); bytes are unchanged. `devices` is the
/// replay's (ReplayResult::devices, over [0, makespan]).
std::vector<DeviceStats> ps_device_stats(const PsPlan& plan, const PsGraph& g, const Timings& timings,
                                         const std::vector<DeviceStats>& devices, const PsThroughput& x);

/// Staleness a worker saw at each pull: after iteration k, how many iterations behind k the least
/// advanced other worker's updates on that server were (k minus the newest iteration of that
/// worker the server had applied), 0 when every worker's update of k was in.
StalenessStats observed_staleness(const PsPlan& plan, const PsGraph& g, const Timings& timings);

}  // namespace ddlsim::sim
