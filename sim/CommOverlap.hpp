// Internal to sim/ (Replay.cpp only): compute slowed by the communication it overlaps.
//
// NCCL kernels run on the GPU's SMs and use its memory bandwidth, so compute that overlaps a
// collective or a transfer of its GPU runs slower (Lee et al. 2025 measured 18.9% on average,
// profiles' `comm_compute_slowdown`). Each GPU host gets two power states: full speed, and speed /
// (1 + slowdown). A GPU switches to the slow one when its first transfer or collective starts (as
// sender, receiver or member) and back when its last one ends; SimGrid rescales the running Exec at
// each switch, so a compute task of C seconds overlapped by communication for D of them ends after
// C + D x slowdown / (1 + slowdown) (tests/sim/test_overlap.cpp). The switches happen at simulated
// event times in the replay's deterministic order, so results stay bit-identical run to run.
//
// The replay runs compute as timers that follow their GPU's state (run_chain: the time an Exec
// alone on the host takes, without the solver; a GPU's consecutive stream tasks as one such timer),
// and Execs where off-stream tasks share a GPU.
//
// Analytic tensor-parallel collectives block their stream like compute, and tensor-parallel folding
// merges them into the compute of one device per group (experiments/Evaluate.cpp). So that folding
// changes no number, they count as stream work, not as communication: they do not slow their GPUs,
// and they run at the slowed rate while any of their members is slowed (run_blocking).
#pragma once

#include "sim/TaskGraph.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>

#include <functional>
#include <map>
#include <vector>

namespace ddlsim::sim::detail {

/// Speeds of a GPU host: {full} without slowdown, {full, full / (1 + slowdown)} with one.
std::vector<double> gpu_speeds(double full_speed, double slowdown);

class CommOverlap {
public:
  /// `gpus` are the platform's hosts (built with gpu_speeds); slowdown 0 turns everything off.
  /// Under a fold (Fold.hpp) `representative[d]` is the device whose host and state device d shares
  /// (empty: every device its own): an image of each of d's transfers and collectives runs on its
  /// representative at the same times, so that the representative is busy exactly when d is.
  CommOverlap(const std::vector<simgrid::s4u::Host*>& gpus, double slowdown, std::vector<int> representative = {});
  /// A transfer or collective task starts / ends: its devices' counts move, their pstates follow.
  /// Compute tasks and stream-blocking collectives (blocks_stream) are ignored.
  void begin(const TaskGraph& graph, TaskId id) { update(graph, id, +1); }
  void end(const TaskGraph& graph, TaskId id) { update(graph, id, -1); }
  /// The device whose host and state `device` shares (itself where nothing is folded).
  int representative(int device) const { return rep(device); }
  /// True for a collective that runs as stream work (an analytic tensor-parallel one) when enabled.
  bool blocks_stream(const CollectiveTask& task) const;
  /// Runs a stream-blocking collective of `seconds` at full speed, slowed while any member is:
  /// `done` is called when it ends.
  void run_blocking(TaskId id, const CollectiveTask& task, double seconds, std::function<void()> done);
  /// Runs stream work of `parts` seconds (at the device's full speed) one after the other on
  /// `device`, as one timer, slowed while the device is (the time an Exec alone on its host takes):
  /// `done` gets each part's end. A part starts where the previous one ends, and a switch of the
  /// device's state moves the timer after closing the parts ended by then (the same additions in
  /// the same order as a timer per part). A compute task alone is a chain of one part.
  void run_chain(TaskId id, int device, std::vector<double> parts, std::function<void(const std::vector<double>&)> done);

private:
  struct Blocking {
    std::vector<int> group;
    std::vector<double> parts;            // seconds at full speed of each part (one but for chains)
    std::size_t part                     = 0; // the part running
    std::vector<double> ends;             // the ends of the parts before it
    double remaining                     = 0; // seconds left of the running part at full speed
    double rate                          = 1; // 1, or 1 / (1 + slowdown)
    double since                         = 0; // simulated time of the last update
    simgrid::kernel::timer::Timer* timer = nullptr;
    std::function<void(const std::vector<double>&)> done;
  };
  void update(const TaskGraph& graph, TaskId id, int delta);
  void add(int device, int delta);
  double rate_of(const std::vector<int>& group) const;
  void schedule(TaskId id, Blocking& b);
  void start(TaskId id, std::vector<int> group, std::vector<double> parts, std::function<void(const std::vector<double>&)> done);
  int rep(int device) const { return representative_.empty() ? device : representative_[static_cast<std::size_t>(device)]; }
  const std::vector<simgrid::s4u::Host*>& gpus_;
  std::vector<int> representative_;
  std::vector<int> in_flight_; // per device: transfers and collectives running
  double slowdown_;
  std::map<TaskId, Blocking> blocking_; // stream work running (collectives, compute timers), by task (ordered: deterministic)
  // Per device: the stream work running on it (the keys of blocking_ whose group holds it), in
  // increasing order, so that a device's switch visits only its own work, in blocking_'s order.
  std::vector<std::vector<TaskId>> running_on_;
};

} // namespace ddlsim::sim::detail
