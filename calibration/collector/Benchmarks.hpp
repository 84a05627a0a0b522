// The executors of the microbenchmark plan: one Benchmark per point, ready to launch runs on the GPUs.
//
//   gemm            cublasGemmEx: fp32 (CUBLAS_COMPUTE_32F), tf32 (CUBLAS_COMPUTE_32F_FAST_TF32 on fp32 data),
//                   fp16 / bf16 data with fp32 accumulation; column-major C[m x n] = A[m x k] B[k x n]
//   batched_gemm    cublasGemmStridedBatchedEx, the same types, point.batch products
//   conv2d          cuDNN, NCHW, forward / backward-data / backward-filter by point.pass; fp32 with FMA math
//                   (tf32 would be another dtype), fp16 / bf16 on tensor cores with fp32 accumulation; the
//                   algorithm is cuDNN's heuristic choice (cudnnGetConvolution*Algorithm_v7, as PyTorch
//                   without benchmark mode), taking the next one when its workspace does not fit
//   pointwise       y = a x + b over fp32 (Kernels.cu); point.bytes is what it reads plus writes
//   copy_*          cudaMemcpyAsync of point.bytes; host buffers pinned (cudaMallocHost)
//   collective      NCCL over GPUs 0..n-1 driven by this one thread (ncclCommInitAll), one stream per GPU,
//                   ncclGroupStart/End around the per-GPU calls; fp32; see collective_shape() for sizes
// Operands are filled with values in [-1, 1) (never zeros, which run faster than real data).
// A Benchmark owns its buffers and frees them when destroyed, so points never share memory.
//
//   GpuContext gpus(2);
//   std::unique_ptr<Benchmark> bench = make_benchmark(point, gpus);  // throws PointFailed
//   bench->launch();                                                 // enqueues one run
//   gpus.synchronize(bench->devices());
#pragma once

#include "calibration/Microbench.hpp"

#include <cstddef>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <memory>
#include <nccl.h>
#include <string>
#include <vector>

namespace ddlsim::collector {

/// The GPUs the collector drives: device 0 runs the kernel and copy points, devices 0..gpus()-1 the collectives,
/// each GPU with one non-blocking stream. Library handles are created on first use.
class GpuContext {
public:
  /// Streams on devices 0..gpus-1. Throws DeviceFailed when one cannot be created.
  explicit GpuContext(int gpus);
  ~GpuContext();
  GpuContext(const GpuContext&)            = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int gpus() const { return static_cast<int>(streams_.size()); }
  cudaStream_t stream(int device) const { return streams_.at(static_cast<std::size_t>(device)); }
  int sm_count() const { return sm_count_; }

  /// cuBLAS on device 0's stream, with a 32 MiB workspace. Throws PointFailed (every time) if it cannot start.
  cublasHandle_t cublas();
  /// cuDNN on device 0's stream. Throws PointFailed (every time) if it cannot start.
  cudnnHandle_t cudnn();
  /// One NCCL communicator per GPU, rank = device. Throws PointFailed (every time) if NCCL cannot start.
  const std::vector<ncclComm_t>& nccl();

  /// Waits for the streams of devices 0..devices-1. Throws PointFailed with the error a run raised.
  void synchronize(int devices) const;
  /// After a failed point: clears the error it left behind on every GPU, and throws DeviceFailed, naming
  /// `point`, when the error is sticky (the CUDA context is lost).
  void recover(const std::string& point);

private:
  std::vector<cudaStream_t> streams_;
  int sm_count_           = 0;
  cublasHandle_t cublas_  = nullptr;
  void* cublas_workspace_ = nullptr;
  cudnnHandle_t cudnn_    = nullptr;
  std::vector<ncclComm_t> comms_;
  std::string cublas_error_, cudnn_error_, nccl_error_; // why a library could not start (then not retried)
  bool lost_ = false;                                   // a sticky error: tear down without waiting
};

/// One point, prepared: buffers allocated and filled, algorithm chosen.
class Benchmark {
public:
  virtual ~Benchmark() = default;
  /// Enqueues one run on the stream(s) of devices 0..devices()-1 and returns without waiting.
  /// Throws PointFailed when a library rejects the call.
  virtual void launch() = 0;
  /// How many GPUs a run uses (1 except for collectives).
  virtual int devices() const { return 1; }
};

/// Prepares `point` on `gpus`. Throws PointFailed (out of memory, a configuration the library rejects, send_recv
/// on one GPU, ...).
std::unique_ptr<Benchmark> make_benchmark(const calibration::BenchPoint& point, GpuContext& gpus);

/// The buffers of a collective point over `ranks` GPUs, fp32: `count` elements in the larger buffer of each
/// rank, point.bytes / 4 rounded, and for all_gather (receive count) and reduce_scatter (send count) rounded up to
/// a multiple of `ranks`, as nccl-tests sizes them; `bytes` = 4 count, the size the records give.
struct CollectiveShape {
  std::size_t count = 0;
  double bytes      = 0;
};
CollectiveShape collective_shape(const calibration::BenchPoint& point, int ranks);

} // namespace ddlsim::collector
