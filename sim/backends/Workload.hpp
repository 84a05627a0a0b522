// A workload: one training iteration as real work, the input of the execution backends.
//
// It is the simulator's TaskGraph with each compute task's kernels at their real shapes (the
// KernelLaunch list the cost model priced, sim/OpCosts.hpp), in a form that needs nothing but the
// C++ standard library, so that a backend builds where only its own toolkit is installed (the CUDA
// backend on a GPU machine without ddlsim's Debian packages). Each kernel is a microbenchmark point
// (calibration/Microbench.hpp), so the code that times a point also runs it as part of a step.
//
//   tasks        in an order where every task comes after the tasks in its `after` list
//   compute      runs `launches` in order on `device`'s compute stream
//   transfer     `bytes` from `src` to `dst` (pipeline activations and their gradients)
//   collective   `collective` (all_reduce, all_gather, reduce_scatter) of `bytes` over `group`
//
// File form (write_workload / read_workload), one JSON document:
//   {"format": "ddlsim-workload-1", "label": "...", "devices": 2, "dtype": "bf16", "tasks": [
//     {"kind": "compute", "device": 0, "after": [], "launches": [
//        {"op": "gemm", "dtype": "bf16", "m": 4096, "n": 1024, "k": 1024, "batch": 1, "layout": "nt"},
//        {"op": "conv2d", "dtype": "bf16", "pass": "bwd_data", "conv": [n, c, h, w, k, r, s, stride, pad]},
//        {"op": "pointwise", "bytes": 8388608}]},
//     {"kind": "transfer", "src": 0, "dst": 1, "bytes": 4194304, "after": [0]},
//     {"kind": "collective", "collective": "all_reduce", "group": [0, 1], "bytes": 1e8, "after": [3]}]}
//
// A compute task may name its "phase" (forward, backward, optimizer): the optimizer step works on the parameters
// and their optimizer state, not on activations. "memory" gives, per device, what the simulator's memory model
// holds at that device's peak (models/Memory.hpp), in bytes, so that a backend allocates the same and places each
// launch's operands in it (the weights a GEMM reads, the gradient it writes, the activations):
//   "memory": [{"weights": 2.5e8, "gradients": 2.5e8, "optimizer_state": 1.5e9, "activations": 4e9,
//               "workspace": 6e7, "reserve": 1073741824}, ...]
//
//   Workload w = read_workload("point3.workload.json");    // TraceError naming the file on bad input
#pragma once

#include "calibration/Microbench.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace ddlsim::backends {

struct WorkTask {
  enum class Kind { compute, transfer, collective };
  Kind kind = Kind::compute;
  std::string phase{};             ///< compute: forward, backward or optimizer (empty: not said)
  int device = 0;                  ///< compute
  int src = 0, dst = 0;            ///< transfer
  double bytes = 0;                ///< transfer, collective
  std::string collective{};        ///< collective: all_reduce, all_gather, reduce_scatter
  std::vector<int> group{};        ///< collective members, in ring order
  std::vector<int> after{};        ///< tasks (indices) that must finish first; all smaller than this task's
  std::vector<calibration::BenchPoint> launches{};  ///< compute: kernels in order (pointwise: `bytes` moved)
};

/// What the simulator's memory model holds on one device at its peak, bytes (models::MemoryBreakdown).
struct DeviceMemory {
  double weights = 0, gradients = 0, optimizer_state = 0, activations = 0, workspace = 0, reserve = 0;
  /// The simulator's peak_memory_bytes of this device: everything, the framework's reserve included.
  double total() const { return weights + gradients + optimizer_state + activations + workspace + reserve; }
};

struct Workload {
  std::string label;  ///< what it is (experiment, point), for messages
  int devices = 0;
  std::string dtype;  ///< the training dtype
  std::vector<WorkTask> tasks;
  std::vector<DeviceMemory> memory;  ///< per device, or empty when the workload does not say
};

void write_workload(const Workload& workload, std::ostream& out);
/// Reads a workload file. Throws TraceError (file: what) on malformed input, including a task
/// that waits for itself or a later task, or names a device outside [0, devices).
Workload read_workload(const std::string& path);
/// The same from text; `origin` names it in errors.
Workload parse_workload(const std::string& text, const std::string& origin);

/// What a backend measured: wall time of each timed iteration (after warm-up ones), on what, and the largest
/// device memory in use on one GPU (0 when not measured).
///   {"format": "ddlsim-execution-1", "device": "NVIDIA H100 80GB HBM3 x1", "iterations_s": [0.0123, ...],
///    "peak_memory_bytes": 1.9e10, "notes": ["4 devices mapped onto 1 GPU"]}
struct ExecutionResult {
  std::string device;
  std::vector<double> iterations_s;
  std::vector<std::string> notes;
  double peak_memory_bytes = 0;  ///< the GPU using the most: the CUDA context, libraries and buffers, bytes
  double median_s() const;
  double min_s() const;
  double max_s() const;
};

void write_execution_result(const ExecutionResult& result, std::ostream& out);
/// Throws TraceError (origin: what) on malformed input or no iterations.
ExecutionResult parse_execution_result(const std::string& text, const std::string& origin);

}  // namespace ddlsim::backends
