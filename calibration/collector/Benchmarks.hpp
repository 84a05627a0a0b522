// The executors of the microbenchmark plan: one Benchmark per point, ready to launch runs on the GPUs.
//
//   gemm            cublasGemmEx: fp32 (CUBLAS_COMPUTE_32F), tf32 (CUBLAS_COMPUTE_32F_FAST_TF32 on fp32 data),
//                   fp16 / bf16 data with fp32 accumulation; column-major C[m x n] = A[m x k] B[k x n]
//   batched_gemm    cublasGemmStridedBatchedEx, the same types, point.batch products
//   conv2d          cuDNN, NCHW, forward / backward-data / backward-filter by point.pass; fp32 with FMA math
//                   (tf32: fp32 data, tensor-core math allowed), fp16 / bf16 on tensor cores with fp32
//                   accumulation; the algorithm is cuDNN's heuristic choice (cudnnGetConvolution*Algorithm_v7,
//                   as PyTorch without benchmark mode), taking the next one when its workspace does not fit
//   pointwise       y = a x + b over fp32 (Kernels.cu); point.bytes is what it reads plus writes
//   copy_*          cudaMemcpyAsync of point.bytes; host buffers pinned (cudaMallocHost)
//   collective      NCCL over GPUs 0..n-1 driven by this one thread (ncclCommInitAll), one stream per GPU,
//                   ncclGroupStart/End around the per-GPU calls; fp32; see collective_shape() for sizes
// Operands are filled with values in [-1, 1) (never zeros, which run faster than real data).
// A Benchmark owns its buffers and frees them when destroyed, so points never share memory.
//
// The compute ops (gemm, batched_gemm, conv2d, pointwise) are also available on their own, as ComputeOp: an op
// at its shape and dtype that launches on any stream with library handles bound to it, over buffers the caller
// owns. The CUDA execution backend (sim/backends/cuda) runs a training step's kernels that way, on its own
// streams and on buffers it shares between launches.
//
//   GpuContext gpus(2);
//   std::unique_ptr<Benchmark> bench = make_benchmark(point, gpus);  // throws PointFailed
//   bench->launch();                                                 // enqueues one run
//   gpus.synchronize(bench->devices());
//
//   ComputeOp op(point);                                             // throws PointFailed
//   // ... DeviceBuffers of op.operand_bytes() on the current GPU, a cuBLAS / cuDNN handle on `stream`
//   op.choose_algorithm(where, buffers, grow_workspace);             // conv2d: cuDNN's algorithm, tried once
//   op.launch(where, buffers);                                       // enqueues one run on where.stream
#pragma once

#include "calibration/Microbench.hpp"
#include "calibration/collector/Kernels.hpp"

#include <array>
#include <cstddef>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <functional>
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

/// Device memory on one GPU, freed on destruction (cudaFree, whichever GPU is current then). Zero bytes allocate
/// nothing.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on GPU `device`. Throws PointFailed ("cudaMalloc of <what> (<bytes> B on GPU <device>): out
  /// of memory (cudaErrorMemoryAllocation)") when it cannot.
  DeviceBuffer(std::size_t bytes, int device, const std::string& what);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&)            = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }

private:
  void release() noexcept;
  void* data_        = nullptr;
  std::size_t bytes_ = 0;
};

/// Where a ComputeOp runs: a stream on the current GPU and the library handles the op needs, already bound to that
/// stream by the caller (cublasSetStream with a workspace, cudnnSetStream): cuBLAS for gemm and batched_gemm,
/// cuDNN for conv2d; the pointwise kernel needs neither.
struct OpStream {
  cudaStream_t stream   = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn   = nullptr;
  int sm_count          = 1; ///< of the GPU: the pointwise kernel runs 8 blocks per SM
};

/// The device memory a ComputeOp runs on, on the stream's GPU, owned by the caller: its three operands in the op's
/// own order (gemm A, B, C; conv2d x, w, y, which are dx, dw, dy in the backward passes; pointwise x, none, y), at
/// least ComputeOp::operand_bytes() each, and a workspace of at least ComputeOp::workspace_bytes().
struct OpBuffers {
  std::array<void*, 3> operand{nullptr, nullptr, nullptr};
  void* workspace             = nullptr;
  std::size_t workspace_bytes = 0;
};

/// One compute op (gemm, batched_gemm, conv2d, pointwise) at its shape and dtype: library types resolved and, for a
/// convolution, cuDNN's descriptors built. It owns no device memory and no handle, so one op can run on any stream
/// and buffers; what it runs is what the microbenchmark of its point times. A gemm point with batch > 1 runs as a
/// strided batched GEMM, so that it does the work BenchPoint::flop() counts.
class ComputeOp {
public:
  /// Throws PointFailed for an op that is not a compute op, a dtype the library has no type for (fp8), sizes out
  /// of cuBLAS's int range, or a convolution cuDNN rejects.
  explicit ComputeOp(const calibration::BenchPoint& point);
  ~ComputeOp();
  ComputeOp(const ComputeOp&)            = delete;
  ComputeOp& operator=(const ComputeOp&) = delete;

  const calibration::BenchPoint& point() const { return point_; }
  /// Bytes of each operand, in OpBuffers order (0 for pointwise's missing second operand).
  std::array<std::size_t, 3> operand_bytes() const;
  /// The operand a run writes (gemm C; conv2d y forward, x backward-data, w backward-filter; pointwise y); it
  /// reads the others.
  int written_operand() const;
  /// The element type the operands hold (the pointwise kernel works on fp32 whatever the point's dtype).
  FillType fill_type() const;

  /// conv2d: takes the first algorithm, in cuDNN's heuristic order, whose workspace `workspace(bytes)` can provide
  /// (it returns device memory of at least `bytes` on the stream's GPU, or throws PointFailed, out of memory: then
  /// the next algorithm is tried) and which runs on `buffers`: one trial run, enqueued on where.stream, doubles as
  /// a warm-up. Other ops: nothing to choose. Throws PointFailed when no algorithm runs.
  void choose_algorithm(const OpStream& where, const OpBuffers& buffers,
                        const std::function<void*(std::size_t bytes)>& workspace);
  /// The workspace the chosen algorithm needs (0 before choose_algorithm and for other ops), bytes.
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  /// Enqueues one run on where.stream and returns without waiting. Throws PointFailed when the library rejects the
  /// call (the message starts with the call: "cublasGemmEx: ...").
  void launch(const OpStream& where, const OpBuffers& buffers) const;

private:
  struct Conv;
  cudnnStatus_t run_conv(const OpStream& where, const OpBuffers& buffers) const;

  calibration::BenchPoint point_;
  // gemm, batched_gemm
  int m_ = 0, n_ = 0, k_ = 0, batch_ = 1;
  bool batched_                = false;
  cudaDataType gemm_type_      = CUDA_R_32F;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  // conv2d
  std::unique_ptr<Conv> conv_;
  std::size_t workspace_bytes_ = 0;
  // pointwise
  std::size_t elements_ = 0;
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
