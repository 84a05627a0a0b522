// The executors of the microbenchmark plan: one Benchmark per point, ready to launch runs on the GPUs.
//
//   gemm            cublasGemmEx in the point's layout (nn, nt, tn: calibration::GemmLayout, column-major
//                   C[m x n] = op(A) op(B)): fp32 (CUBLAS_COMPUTE_32F, as PyTorch's matmul by default), tf32
//                   (CUBLAS_COMPUTE_32F_FAST_TF32 on fp32 data), fp16 / bf16 data with fp32 accumulation
//   batched_gemm    cublasGemmStridedBatchedEx, the same types and layouts, point.batch products
//   conv2d          cuDNN, NCHW, forward / backward-data / backward-filter by point.pass; fp32 data on TF32 tensor
//                   cores (as PyTorch, whose torch.backends.cudnn.allow_tf32 defaults to True), fp16 / bf16 on
//                   tensor cores with fp32 accumulation (calibration::conv_math). The algorithm comes from a timed
//                   search, as PyTorch's torch.backends.cudnn.benchmark = True: every algorithm cuDNN offers runs
//                   once untimed and three times timed, and the fastest whose workspace can be allocated is kept
//                   (calibration::choose_fastest)
//   pointwise       y = a x + b over fp32 (Kernels.cu); point.bytes is what it reads plus writes
//   copy_*          cudaMemcpyAsync of point.bytes; host buffers pinned (cudaMallocHost)
//   collective      NCCL over GPUs 0 .. point.group-1 driven by this one thread (ncclCommInitAll, one communicator
//                   set per group size), one stream per GPU, ncclGroupStart/End around the per-GPU calls; in the
//                   point's dtype; buffers and send_recv peers as nccl-tests (calibration::collective_buffers)
// Operands are filled with values in [-1, 1) (never zeros, which run faster than real data). A Benchmark owns its
// buffers and frees them when destroyed, so points never share memory. A compute or copy benchmark can hold several
// copies of its operands (buffer sets; run r uses set r mod sets), so that a run finds none of its operands in L2
// (calibration::plan_l2_isolation); GpuContext::flush_l2 is the other way.
//
// The compute ops (gemm, batched_gemm, conv2d, pointwise) are also available on their own, as ComputeOp: an op
// at its shape and dtype that launches on any stream with library handles bound to it, over buffers the caller
// owns. The CUDA execution backend (sim/backends/cuda) runs a training step's kernels that way, on its own
// streams and on buffers it places per layer.
//
//   GpuContext gpus(2);
//   std::unique_ptr<Benchmark> bench = make_benchmark(point, gpus, 2);  // two operand sets; throws PointFailed
//   bench->launch(run);                                                 // enqueues one run
//   gpus.synchronize(bench->devices());
//
//   ComputeOp op(point);                                             // throws PointFailed
//   // ... DeviceBuffers of op.operand_bytes() on the current GPU, a cuBLAS / cuDNN handle on `stream`
//   op.choose_algorithm(where, buffers, grow_workspace);             // conv2d: the fastest algorithm, timed once
//   op.launch(where, buffers);                                       // enqueues one run on where.stream
#pragma once

#include "calibration/Microbench.hpp"
#include "gpu/Kernels.hpp"

#include <array>
#include <cstddef>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <functional>
#include <map>
#include <memory>
#include <nccl.h>
#include <string>
#include <vector>

namespace ddlsim::gpu {

/// The GPUs the collector drives: device 0 runs the kernel and copy points, devices 0..group-1 the collectives,
/// each GPU with one non-blocking stream. Library handles and communicators are created on first use.
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
  /// GPU 0's L2 cache, bytes.
  double l2_bytes() const { return l2_bytes_; }
  /// GPU 0's free memory now, bytes (0 when it cannot be read).
  double free_bytes() const;

  /// cuBLAS on device 0's stream, with a 32 MiB workspace. Throws PointFailed (every time) if it cannot start.
  cublasHandle_t cublas();
  /// cuDNN on device 0's stream. Throws PointFailed (every time) if it cannot start.
  cudnnHandle_t cudnn();
  /// One NCCL communicator per GPU of devices 0..group-1, rank = device. Throws PointFailed (every time for that
  /// group) if NCCL cannot start, or when group exceeds gpus().
  const std::vector<ncclComm_t>& nccl(int group);
  /// Writes `bytes` of device memory on GPU 0's stream (cudaMemsetAsync into a buffer kept for it), which evicts
  /// what the L2 cache held. CUPTI's kernel and copy records do not include it. Throws PointFailed when the buffer
  /// cannot be allocated.
  void flush_l2(double bytes);
  /// Keeps GPU 0's stream busy for `seconds` (gpu::launch_spin), so that the runs issued next queue up
  /// behind it and run back to back, however long the host takes to issue each.
  void hold(double seconds);

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
  double l2_bytes_        = 0;
  std::map<int, std::vector<ncclComm_t>> comms_; // per group size
  std::map<int, std::string> nccl_errors_;       // per group size: why NCCL could not start (not retried)
  void* flush_buffer_      = nullptr;
  std::size_t flush_bytes_ = 0;
  std::string cublas_error_, cudnn_error_; // why a library could not start (then not retried)
  bool lost_ = false;                      // a sticky error: tear down without waiting
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

  /// conv2d: times every algorithm cuDNN offers (cudnnGetConvolution*Algorithm_v7's list, each with the math
  /// type it was listed with) on `buffers`: one untimed and three timed runs on where.stream, with a workspace from
  /// `workspace(bytes)` (device memory of at least `bytes` on the stream's GPU, or PointFailed, out of memory:
  /// then that algorithm is left out), and keeps the fastest (calibration::choose_fastest). Waits for the stream.
  /// Other ops: nothing to choose. Throws PointFailed when no algorithm runs.
  void choose_algorithm(const OpStream& where, const OpBuffers& buffers,
                        const std::function<void*(std::size_t bytes)>& workspace);
  /// conv2d: the chosen algorithm ("fwd algo 1", ...) and the algorithms timed; empty before choose_algorithm.
  const std::string& algorithm_text() const { return algorithm_text_; }
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
  cublasOperation_t op_a_ = CUBLAS_OP_N, op_b_ = CUBLAS_OP_N;
  int lda_ = 0, ldb_ = 0;
  // conv2d
  std::unique_ptr<Conv> conv_;
  std::size_t workspace_bytes_ = 0;
  std::string algorithm_text_;
  // pointwise
  std::size_t elements_ = 0;
};

/// One point, prepared: buffers allocated and filled, algorithm chosen.
class Benchmark {
public:
  virtual ~Benchmark() = default;
  /// Enqueues run `run` (0, 1, ...; it picks the operand set run mod sets) on the stream(s) of devices
  /// 0..devices()-1 and returns without waiting. Throws PointFailed when a library rejects the call.
  virtual void launch(int run) = 0;
  /// How many GPUs a run uses (1 except for collectives).
  virtual int devices() const { return 1; }
};

/// Prepares `point` on `gpus` with `buffer_sets` copies of its operands (compute and copy points; collectives keep
/// one, as nccl-tests). Throws PointFailed (out of memory, a configuration the library rejects, a collective group
/// larger than the GPUs, ...).
std::unique_ptr<Benchmark> make_benchmark(const calibration::BenchPoint& point, GpuContext& gpus, int buffer_sets = 1);

/// Device memory one run of `point` reads and writes (its operands; a copy's device buffers), bytes: what
/// calibration::plan_l2_isolation keeps out of L2.
double footprint_bytes(const calibration::BenchPoint& point);

} // namespace ddlsim::gpu
