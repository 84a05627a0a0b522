// The host execution backend: a workload's iteration run for real on CPU threads.
//
// One thread per simulated device, pinned to core (device mod cores). Each thread runs the compute
// tasks of its device (every launch through HostOps' run_point: OpenBLAS GEMMs at the launch's
// shape, im2col convolutions, memory-bound loops), the transfers into its device (a copy from the
// sender's buffer: the receiver pulls), and its share of each collective it belongs to
// (reduce-scatter then all-gather over the members' buffers, meeting at a barrier between phases).
// A thread takes, among its tasks whose dependencies are done, the first in workload order, except
// that its compute tasks keep their stream order and its collectives keep one order on every member
// (as NCCL requires), so no two members can wait on each other.
//
//   ExecutionResult r = execute_on_host(workload, {.warmup = 1, .iterations = 5});
//   r.median_s();
#pragma once

#include "sim/backends/Workload.hpp"

namespace ddlsim::backends {

struct HostOptions {
  int warmup = 1;      ///< untimed iterations first
  int iterations = 5;  ///< timed iterations
  bool pin = true;     ///< pin thread d to core d mod cores
};

/// Runs the workload's iteration warmup + iterations times; the result holds each timed iteration's
/// wall time (from the moment every thread is ready to the end of the last task). Throws
/// ExecutionError for what the host cannot run.
ExecutionResult execute_on_host(const Workload& workload, const HostOptions& options);

}  // namespace ddlsim::backends
