// A bare SimGrid workload for comparison with ddlsim's replay: `activities` Execs and Comms on
// `hosts` hosts, created just in time as in Replay.cpp but with no TaskGraph, cost model or
// metrics. Each host runs a chain: an Exec, then a Comm to the next host, then the next Exec once
// both its own Comm and the one from the previous host have arrived, until the budget is spent.
// Measures what SimGrid itself costs per activity on this machine.
//
//   double seconds = run_bare_dag(100000, 128);   // wall time; once per process (SimGrid's engine)
#pragma once

#include <cstdint>

namespace ddlsim::sim {

struct BareDagResult {
  std::uint64_t activities = 0;  ///< activities actually run
  double wall_time_s = 0;        ///< platform build and simulation
  double makespan_s = 0;         ///< simulated time
};

/// Throws SimulationError when called twice in one process or with hosts < 2.
BareDagResult run_bare_dag(std::uint64_t activities, int hosts);

}  // namespace ddlsim::sim
