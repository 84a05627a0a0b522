// Simulated versus measured: every point of a sweep simulated and executed for real, side by side.
//
//   host   the step runs on this machine's CPU (sim/backends/HostBackend.hpp), one thread per
//          simulated device. The simulator is calibrated on the same machine in the same run: the
//          host times every distinct kernel the sweep launches plus a grid of GEMMs and memory-bound
//          sizes with the code that will execute them (time_points), fits a profile on top of
//          calibration/profiles/host-cpu.yaml, and measures its copy bandwidth and thread hand-off
//          latency for a one-node "cluster" of as many devices as the sweep needs. Everything runs
//          in fp32, and the points' dtype becomes fp32.
//   cuda   the step runs on this machine's GPUs through ddlsim-run-cuda (sim/backends/cuda/), one
//          child process per point (or one MPI job per point, through `launcher`), with the
//          experiment's own calibration profile and cluster. Its CUPTI kernel records (of iterations traced
//          after the timed ones) are kept (work_dir/trace-<point>.jsonl): every cross-check is also calibration
//          data. The measured peak device memory goes beside the simulated one (measured_peak_memory_bytes).
//          On a GPU machine without ddlsim, in two steps: prepare_workloads writes workload-<point>.json, the
//          machine runs each with ddlsim-run-cuda into measured-<point>.json, and cross_check with
//          `measured_dir` reads those instead of running anything (the workloads must be unchanged).
//   torch  the step runs as real PyTorch: each point's model, training settings and dp go to
//          work_dir/point-<point>.json (sim/backends/TorchPoint.hpp), which `python` runs with
//          sim/backends/torch/run_point.py in a child process (dp ranks under DDP when dp > 1, started
//          by launch_ranks.py as torchrun starts them), on the GPU PyTorch sees or the CPU; the simulated
//          side keeps the experiment's own profile and cluster. One profiled step per point is kept
//          (work_dir/torch-trace-<point>.json, a PyTorch profiler trace `calibrate import` reads), and the
//          run's output (torch-<point>.log). Only data parallelism runs: pp, tp, cp, ep > 1, ZeRO,
//          parameter servers and recomputation are refused per point. prepare_workloads and
//          `measured_dir` work as for cuda, with point files.
// Simulations run through the forking sweep runner; executions run one after the other, each in a
// child process, so a crash or a GPU error becomes that point's `error` row and the sweep goes on.
//
// With `scale` < 1, the simulated and the executed step both run every kernel at that fraction of its
// rows (and activation transfers likewise): a large model's step, shrunk to fit a small machine.
//
//   CrossCheckOptions o{.backend = Backend::host};
//   CrossCheck result = cross_check(points, o);   // rows with measured_iteration_time_s, error_pct, ...
#pragma once

#include "experiments/SweepRunner.hpp"
#include "traces/TraceRecords.hpp"

#include <functional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

enum class Backend { host, cuda, torch };

struct CrossCheckOptions {
  Backend backend = Backend::host;
  int warmup = 1;
  int iterations = 5;
  int jobs = 1;                         ///< simulation processes (executions run one at a time)
  double scale = 1;                     ///< every kernel at this fraction of its rows, simulated and executed
  std::string cuda_runner;              ///< path of ddlsim-run-cuda (cuda backend)
  std::string python = "python3";       ///< torch: the interpreter with PyTorch (a name on PATH or a path)
  bool map_devices = false;             ///< cuda: run more simulated devices than GPUs on the GPUs there are
  bool cuda_graph = false;              ///< cuda: the runner's --cuda-graph (timed iterations replay a CUDA graph)
  /// cuda: a command that starts the runner on several machines, e.g. {"mpirun", "-np", "2", "-H", "a,b"};
  /// the runner then gets --mpi (NCCL bootstrapped through MPI). Empty: one process on this machine.
  std::vector<std::string> launcher;
  std::string work_dir;                 ///< where the host records and profile (cuda workloads, torch points) go
  /// cuda, torch: read each point's measured-<point>.json (and check its workload-<point>.json or
  /// point-<point>.json) from this folder instead of running anything
  std::string measured_dir;
  std::function<void(const std::string&)> on_status;  ///< progress lines
};

struct CrossCheck {
  std::vector<ResultRow> rows;
  double mean_abs_error_pct = 0;  ///< over points with both times
  int compared = 0;
  std::string profile_path;       ///< host: the fitted profile the simulations used
};

/// Simulates and executes every point. Throws Error when the host calibration itself fails.
CrossCheck cross_check(std::vector<PointConfig> points, const CrossCheckOptions& options);

/// Writes options.work_dir/workload-<point>.json (cuda) or point-<point>.json (torch) for every valid point the
/// backend can run, for ddlsim-run-cuda or run_point.py on another machine; returns the files written. Throws
/// Error when a file cannot be written.
std::vector<std::string> prepare_workloads(const std::vector<PointConfig>& points, const CrossCheckOptions& options);

}  // namespace ddlsim::experiments
