// Parameter-server training (Langer et al. 2020's taxonomy): W workers each train a full replica
// on their own data; S servers each own 1/S of the parameters. Per iteration k a worker computes
// its gradients (M micro-batches), pushes shard j to server j, the server applies it (one
// optimizer update of its shard per push, in arrival order), and the worker pulls its shards back
// before iteration k + 1. Consistency decides what a pull waits for:
//   bsp    every worker's update of iteration k (a barrier on each server)
//   ssp    every worker's update of iteration k - s, and its own of k (bounded staleness s;
//          s = 0 is BSP)
//   async  only its own update of k
// Several iterations are simulated, so that workers can drift apart; the staleness a worker
// actually saw on each pull is measured from the replay's timings (observed_staleness).
//
//   PsPlan plan{.workers = 4, .servers = 2, .server_devices = {4, 5}, .iterations = 8, ...};
//   PsGraph g = build_parameter_server(plan);   // g.graph is an ordinary TaskGraph
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

/// Staleness a worker saw at each pull: after iteration k, how many iterations behind k the least
/// advanced other worker's updates on that server were (k minus the newest iteration of that
/// worker the server had applied), 0 when every worker's update of k was in.
StalenessStats observed_staleness(const PsPlan& plan, const PsGraph& g, const std::vector<TaskTiming>& timings);

}  // namespace ddlsim::sim
