// Microbenchmark points run on the CPU: the host executor of calibration/Microbench.hpp.
//
// The host backend runs every kernel of a workload through run_point(), and `ddlsim calibrate
// collect --host` times points through time_points(), so the host profile is measured by the code
// that later executes the step. Every dtype is computed in fp32 (a CPU has no tensor cores):
//   gemm, batched_gemm   cblas_sgemm (OpenBLAS, one thread per call), row-major C = A B
//   conv2d               per sample: im2col + GEMM (forward), GEMM + col2im (backward data),
//                        im2col + GEMM (backward filter)
//   pointwise            y = a x + b over bytes / 8 floats (bytes counts reads and writes)
// Buffers are sized once for the largest point (HostBuffers) and reused; their contents are
// pseudo-random values in [-1, 1).
//
//   HostBuffers buffers(points);
//   for (const auto& p : points) run_point(p, buffers);
#pragma once

#include "calibration/Microbench.hpp"
#include "traces/TraceRecords.hpp"

#include <vector>

namespace ddlsim::backends {

class HostBuffers {
public:
  /// Room for every point of `points` (and at least `bytes` for copies).
  explicit HostBuffers(const std::vector<calibration::BenchPoint>& points, double bytes = 0);
  float* a() { return a_.data(); }
  float* b() { return b_.data(); }
  float* c() { return c_.data(); }
  float* col() { return col_.data(); }

private:
  std::vector<float> a_, b_, c_, col_;
};

/// Runs one point once on the calling thread. Throws ExecutionError for a point it cannot run
/// (a collective or copy: those are not kernels on the host).
void run_point(const calibration::BenchPoint& point, HostBuffers& buffers);

/// Limits OpenBLAS to one thread per call (each backend thread stands for one device).
void use_single_threaded_blas();

/// Times every point (warm-up, then repeats per `policy`) on `threads` threads at once, each pinned to
/// its own core and timing the whole list, so that the kernels are measured with as many cores busy
/// as the execution will keep busy (they share caches and memory bandwidth). Returns one kernel record
/// per timed run (device = the thread), with op, flop, bytes, dtype, point id and shape.
traces::TraceSet time_points(const std::vector<calibration::BenchPoint>& points, const calibration::RepeatPolicy& policy,
                             int threads = 1);

/// Pins the calling thread to core (index mod cores).
void pin_to_core(int index);

/// "host: <CPU model>, <n> cores" from /proc/cpuinfo.
std::string host_description();

}  // namespace ddlsim::backends
