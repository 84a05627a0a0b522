// The CUDA execution backend: runs one training iteration, given as a Workload, for real on the visible NVIDIA
// GPUs and measures how long it takes.
//
// The layout is ExecutionPlan's (one host thread per GPU, a simulated device's compute / transfer / collective
// streams, a stream per NCCL communicator so that data-parallel and pipeline communication overlap compute and
// each other as in the simulator, NCCL per distinct group or copies that emulate it). Everything a step needs is
// made before the first timed iteration: per simulated device, the memory the memory model holds (weights,
// gradients, optimizer state, activations) with every launch's operands placed in it, cuBLAS and cuDNN handles,
// each convolution's algorithm (timed search) and workspace (gpu::ComputeOp, the code the microbenchmarks
// time), the NCCL communicators, the events; nothing is allocated while timing. Each iteration starts once every
// GPU has finished the previous one and every thread has met at a barrier, and lasts, in host wall time, until the
// last GPU has finished. `warmup` untimed iterations come first. The device memory in use (cudaMemGetInfo) is read
// after set-up, after each warm-up iteration and after the timed ones; its largest value on one GPU is the measured
// peak.
//
// Across machines (a ProcessGroup, ddlsim-run-cuda --mpi): every process (rank) plans the whole workload and runs
// the devices of its own G GPUs, [rank x G, (rank+1) x G); each NCCL communicator is made with ncclCommInitRank
// from a unique id that the rank of the group's first device broadcasts, transfers between ranks are
// ncclSend/ncclRecv, and all ranks meet at a barrier before each iteration. An iteration's time is its slowest
// rank's: from the barrier to that rank's last GPU finishing.
//
// With `trace`, CUPTI starts after the timed iterations (none of its cost is in them) and records the kernels of
// two more iterations; each launch of those becomes one traces::KernelRecord (its kernels' span, as the collector
// records a microbenchmark run; a launch that lost records is left out) carrying the launch's op, flop, bytes and
// dtype, with point = task index + 1: a cross-check also yields calibration data.
//
// Library code: nothing is printed; warnings go to on_warning_cb.
//
//   const Workload w = read_workload("point3.workload.json");
//   CudaRunResult r = run_on_gpus(w, {.warmup = 1, .iterations = 5});   // throws ExecutionError
//   write_execution_result(r.execution, out);
//   CudaRunResult mine = run_on_gpus(w, options, hooks, &mpi);           // collective: every rank calls it
#pragma once

#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/ProcessGroup.hpp"
#include "traces/TraceRecords.hpp"

#include <functional>
#include <optional>
#include <string>

namespace ddlsim::backends::cuda {

struct CudaRunOptions {
  int warmup       = 1;     ///< untimed iterations first
  int iterations   = 5;     ///< timed iterations, at least 1
  bool map_devices = false; ///< more simulated devices than GPUs: device d on GPU d % GPUs, on its own streams
  bool trace       = false; ///< after the timed iterations, trace two more with CUPTI
  /// Capture one iteration as a CUDA graph after the warm-up ones and replay it for the timed ones: the GPU runs the
  /// step's launches back to back, without the host's cost of issuing each (cuDNN's legacy calls cost tens of
  /// microseconds each). One simulated device on one GPU, no transfers or collectives. With `trace`, one eager
  /// iteration is traced (a record per launch), then two replays of the graph (a record per kernel).
  bool cuda_graph = false;
  std::string command;      ///< the command line, for the trace's provenance
};

struct CudaRunHooks {
  std::function<void(const std::string&)> on_warning_cb; ///< CUPTI unavailable, records lost
  /// Once, from the GPU thread that failed first, with the message run_on_gpus will throw, before anything is freed
  /// (which can wait on NCCL peers): a rank of a multi-machine run ends the run here, so that no rank waits for it.
  std::function<void(const std::string&)> on_failure_cb;
};

struct CudaRunResult {
  /// With several ranks: on rank 0, each iteration's time is the slowest rank's; elsewhere, the rank's own.
  ExecutionResult execution;
  std::optional<traces::TraceSet> trace; ///< with options.trace, unless CUPTI could not trace
};

/// Runs `workload` options.warmup + options.iterations times. Throws ExecutionError with one line naming what failed
/// (a task and launch: "task 12 (compute on device 1), launch 3 gemm bf16 m=4096 n=1024 k=1024: cublasGemmEx: ...";
/// a device's set-up; too few GPUs without map_devices), after freeing everything it made.
///
/// With `ranks` (several processes, one per machine), runs this rank's share, as a collective call: every rank
/// calls it with the same workload and options and must see the same number of GPUs, and the workload must have
/// exactly ranks x GPUs devices (map_devices is refused). A failure on one rank leaves the others waiting: end the
/// run (ProcessGroup::abort) from on_failure_cb, or on the exception.
CudaRunResult run_on_gpus(const Workload& workload, const CudaRunOptions& options, const CudaRunHooks& hooks = {},
                          ProcessGroup* ranks = nullptr);

} // namespace ddlsim::backends::cuda
