#include "gpu/Benchmarks.hpp"

#include "calibration/Measurement.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/Kernels.hpp"
#include "gpu/LibraryTypes.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <cublas_v2.h>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>

namespace ddlsim::gpu {
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;
using calibration::ConvPass;

constexpr std::size_t cublas_workspace_bytes = 32u << 20; // what cuBLAS asks for on Hopper

void require(cudaError_t status, const std::string& what)
{
  if (status != cudaSuccess)
    throw DeviceFailed(what + ": " + cuda_error_text(status));
}

// Makes `device` current for the scope; the collector otherwise keeps device 0 current.
class DeviceScope {
public:
  explicit DeviceScope(int device)
  {
    cudaGetDevice(&previous_);
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&)            = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

private:
  int previous_ = 0;
};

// Page-locked host memory, so that copies run at the link's speed and asynchronously.
class PinnedBuffer {
public:
  PinnedBuffer(std::size_t bytes, const std::string& what)
  {
    check_cuda(cudaMallocHost(&data_, std::max<std::size_t>(bytes, 1)),
               "cudaMallocHost of " + what + " (" + std::to_string(bytes) + " B)");
    std::memset(data_, 0x3c, bytes); // touch every page now, not inside a timed copy
  }
  ~PinnedBuffer() { cudaFreeHost(data_); }
  PinnedBuffer(const PinnedBuffer&)            = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return data_; }

private:
  void* data_ = nullptr;
};

void fill(const DeviceBuffer& buffer, FillType type, int device, cudaStream_t stream, unsigned seed)
{
  DeviceScope scope(device);
  check_cuda(launch_fill(buffer.get(), buffer.bytes() / fill_element_bytes(type), type, seed, stream),
             "filling an operand");
}

int to_int(long long v, const char* what)
{
  if (v <= 0 || v > INT_MAX)
    throw PointFailed(std::string(what) + " = " + std::to_string(v) + " is out of cuBLAS's int range");
  return static_cast<int>(v);
}

std::size_t to_size(double bytes)
{
  return bytes > 0 ? static_cast<std::size_t>(std::llround(bytes)) : 0;
}

using TensorDesc = std::unique_ptr<cudnnTensorStruct, decltype(&cudnnDestroyTensorDescriptor)>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, decltype(&cudnnDestroyFilterDescriptor)>;
using ConvDesc   = std::unique_ptr<cudnnConvolutionStruct, decltype(&cudnnDestroyConvolutionDescriptor)>;

TensorDesc tensor_desc(cudnnDataType_t type, int n, int c, int h, int w)
{
  cudnnTensorDescriptor_t raw = nullptr;
  check_cudnn(cudnnCreateTensorDescriptor(&raw), "cudnnCreateTensorDescriptor");
  TensorDesc desc(raw, &cudnnDestroyTensorDescriptor);
  check_cudnn(cudnnSetTensor4dDescriptor(raw, CUDNN_TENSOR_NCHW, type, n, c, h, w), "cudnnSetTensor4dDescriptor");
  return desc;
}

std::size_t max_algorithm_count(cudnnHandle_t handle, cudnnStatus_t (*get)(cudnnHandle_t, int*))
{
  int count = 0;
  check_cudnn(get(handle, &count), "cudnnGetConvolution*AlgorithmMaxCount");
  return static_cast<std::size_t>(std::max(count, 1));
}

const char* conv_call_name(ConvPass pass)
{
  switch (pass) {
  case ConvPass::forward:
    return "cudnnConvolutionForward";
  case ConvPass::backward_data:
    return "cudnnConvolutionBackwardData";
  case ConvPass::backward_filter:
    return "cudnnConvolutionBackwardFilter";
  }
  return "cudnnConvolution";
}

// ---- gemm, batched_gemm, conv2d, pointwise: one ComputeOp on buffers of its own ------------------------------

class ComputeBench final : public Benchmark {
public:
  ComputeBench(const BenchPoint& p, GpuContext& gpus, int sets)
  {
    // The handle first, as before the op: a library that cannot start fails the point with its own message.
    where_.stream   = gpus.stream(0);
    where_.sm_count = std::max(1, gpus.sm_count());
    if (p.op == BenchOp::gemm || p.op == BenchOp::batched_gemm)
      where_.cublas = gpus.cublas();
    if (p.op == BenchOp::conv2d)
      where_.cudnn = gpus.cudnn();
    op_ = std::make_unique<ComputeOp>(p);

    static constexpr std::array<const char*, 3> gemm_names{"A", "B", "C"};
    static constexpr std::array<const char*, 3> conv_names{"the input", "the filters", "the output"};
    static constexpr std::array<const char*, 3> pointwise_names{"x", "", "y"};
    const auto& names                      = p.op == BenchOp::conv2d      ? conv_names
                                             : p.op == BenchOp::pointwise ? pointwise_names
                                                                          : gemm_names;
    const std::array<std::size_t, 3> bytes = op_->operand_bytes();
    // Every operand gets values; the pointwise kernel's output is only written.
    const std::size_t filled = p.op == BenchOp::pointwise ? 1 : 3;
    for (int set = 0; set < std::max(1, sets); ++set) {
      auto& operands     = operands_.emplace_back();
      OpBuffers& buffers = buffers_.emplace_back();
      for (std::size_t i = 0; i < 3; ++i) {
        operands[i]        = DeviceBuffer(bytes[i], 0, names[i]);
        buffers.operand[i] = operands[i].get();
      }
      for (std::size_t i = 0; i < filled; ++i)
        fill(operands[i], op_->fill_type(), 0, where_.stream, static_cast<unsigned>(i + 3 * set) + 1);
    }

    op_->choose_algorithm(where_, buffers_.front(), [this](std::size_t workspace_bytes) {
      if (workspace_.bytes() < workspace_bytes) {
        workspace_ = DeviceBuffer(); // the smaller one first
        workspace_ = DeviceBuffer(workspace_bytes, 0, "the cuDNN workspace");
      }
      return workspace_.get();
    });
    for (OpBuffers& buffers : buffers_) {
      buffers.workspace       = workspace_.get();
      buffers.workspace_bytes = workspace_.bytes();
    }
  }

  void launch(int run) override { op_->launch(where_, buffers_[static_cast<std::size_t>(run) % buffers_.size()]); }

private:
  OpStream where_;
  std::unique_ptr<ComputeOp> op_;
  std::vector<std::array<DeviceBuffer, 3>> operands_; // per set
  DeviceBuffer workspace_;
  std::vector<OpBuffers> buffers_; // per set
};

class CopyBench final : public Benchmark {
public:
  CopyBench(const BenchPoint& p, GpuContext& gpus, int sets) : stream_(gpus.stream(0)), bytes_(to_size(p.bytes))
  {
    sets = std::max(1, sets);
    switch (p.op) {
    case BenchOp::copy_h2d:
      kind_ = cudaMemcpyHostToDevice;
      host_ = std::make_unique<PinnedBuffer>(bytes_, "the host source");
      for (int s = 0; s < sets; ++s)
        device_dst_.emplace_back(bytes_, 0, "the destination");
      break;
    case BenchOp::copy_d2h:
      kind_ = cudaMemcpyDeviceToHost;
      for (int s = 0; s < sets; ++s) {
        device_src_.emplace_back(bytes_, 0, "the source");
        fill(device_src_.back(), FillType::f32, 0, stream_, static_cast<unsigned>(s) + 1);
      }
      host_ = std::make_unique<PinnedBuffer>(bytes_, "the host destination");
      break;
    default:
      kind_ = cudaMemcpyDeviceToDevice;
      for (int s = 0; s < sets; ++s) {
        device_src_.emplace_back(bytes_, 0, "the source");
        device_dst_.emplace_back(bytes_, 0, "the destination");
        fill(device_src_.back(), FillType::f32, 0, stream_, static_cast<unsigned>(s) + 1);
      }
      break;
    }
  }
  void launch(int run) override
  {
    const auto pick = [run](const std::vector<DeviceBuffer>& v) {
      return v[static_cast<std::size_t>(run) % v.size()].get();
    };
    void* dst       = kind_ == cudaMemcpyDeviceToHost ? host_->get() : pick(device_dst_);
    const void* src = kind_ == cudaMemcpyHostToDevice ? host_->get() : pick(device_src_);
    check_cuda(cudaMemcpyAsync(dst, src, bytes_, kind_, stream_), "cudaMemcpyAsync");
  }

private:
  cudaStream_t stream_;
  std::size_t bytes_;
  cudaMemcpyKind kind_ = cudaMemcpyDeviceToDevice;
  std::vector<DeviceBuffer> device_src_, device_dst_; // per set
  std::unique_ptr<PinnedBuffer> host_;
};

// ---- collectives -------------------------------------------------------------------------------------------------

enum class Collective { all_reduce, all_gather, reduce_scatter, broadcast, send_recv };

Collective collective_kind(const std::string& name)
{
  if (name == "all_reduce")
    return Collective::all_reduce;
  if (name == "all_gather")
    return Collective::all_gather;
  if (name == "reduce_scatter")
    return Collective::reduce_scatter;
  if (name == "broadcast")
    return Collective::broadcast;
  if (name == "send_recv")
    return Collective::send_recv;
  throw PointFailed("unknown collective '" + name + "'");
}

// The types nccl-tests runs in: fp32 (a point naming none too), fp16, bf16.
ncclDataType_t nccl_data_type(const std::string& dtype)
{
  const std::optional<Dtype> d = dtype.empty() ? Dtype::fp32 : dtype_table.parse(dtype);
  if (!d || *d == Dtype::tf32 || *d == Dtype::fp8)
    throw PointFailed("no NCCL type for dtype '" + dtype + "'");
  return nccl_type(*d);
}

class CollectiveBench final : public Benchmark {
public:
  CollectiveBench(const BenchPoint& p, GpuContext& gpus)
      : kind_(collective_kind(p.collective)), ranks_(p.group), type_(nccl_data_type(p.dtype))
  {
    if (ranks_ < 2)
      throw PointFailed("a collective point needs a group of at least 2 GPUs, not " + std::to_string(ranks_));
    if (ranks_ > gpus.gpus())
      throw PointFailed("a group of " + std::to_string(ranks_) + " GPUs, " + std::to_string(gpus.gpus()) + " are used");
    const double element = p.element_bytes();
    comms_               = gpus.nccl(ranks_);
    for (int d = 0; d < ranks_; ++d) {
      calibration::CollectiveBuffers b;
      try {
        b = calibration::collective_buffers(p.collective, p.bytes, element, ranks_, d);
      } catch (const std::invalid_argument& e) {
        throw PointFailed(e.what());
      }
      plans_.push_back(b);
      streams_.push_back(gpus.stream(d));
      send_.emplace_back(to_size(element * static_cast<double>(b.send_count)), d, "the send buffer");
      recv_.emplace_back(to_size(element * static_cast<double>(b.recv_count)), d, "the receive buffer");
      fill(send_.back(), gpu::fill_type(p.dtype), d, streams_.back(), static_cast<unsigned>(d) + 1);
    }
  }

  void launch(int) override
  {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t first_error = ncclSuccess;
    std::string failed_call;
    for (int d = 0; d < ranks_ && first_error == ncclSuccess; ++d) {
      const auto i                            = static_cast<std::size_t>(d);
      const calibration::CollectiveBuffers& b = plans_[i];
      const void* send                        = send_[i].get();
      void* recv                              = recv_[i].get();
      ncclResult_t r                          = ncclSuccess;
      switch (kind_) {
      case Collective::all_reduce:
        r = ncclAllReduce(send, recv, b.send_count, type_, ncclSum, comms_[i], streams_[i]);
        break;
      case Collective::all_gather:
        r = ncclAllGather(send, recv, b.send_count, type_, comms_[i], streams_[i]);
        break;
      case Collective::reduce_scatter:
        r = ncclReduceScatter(send, recv, b.recv_count, type_, ncclSum, comms_[i], streams_[i]);
        break;
      case Collective::broadcast:
        r = ncclBroadcast(send, recv, b.send_count, type_, 0, comms_[i], streams_[i]);
        break;
      case Collective::send_recv: // nccl-tests' sendrecv: to the next rank, from the previous one
        r = ncclSend(send, b.send_count, type_, b.send_to, comms_[i], streams_[i]);
        if (r == ncclSuccess)
          r = ncclRecv(recv, b.recv_count, type_, b.recv_from, comms_[i], streams_[i]);
        break;
      }
      if (r != ncclSuccess) {
        first_error = r;
        failed_call = "NCCL call on GPU " + std::to_string(d);
      }
    }
    // The group is always closed, so that NCCL is left in a usable state after an error.
    const ncclResult_t end = ncclGroupEnd();
    check_nccl(first_error, failed_call);
    check_nccl(end, "ncclGroupEnd");
  }

  int devices() const override { return ranks_; }

private:
  Collective kind_;
  int ranks_;
  ncclDataType_t type_;
  std::vector<calibration::CollectiveBuffers> plans_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<DeviceBuffer> send_, recv_;
};

} // namespace

// ---- DeviceBuffer ------------------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device, const std::string& what) : bytes_(bytes)
{
  if (bytes == 0)
    return;
  DeviceScope scope(device);
  check_cuda(cudaMalloc(&data_, bytes),
             "cudaMalloc of " + what + " (" + std::to_string(bytes) + " B on GPU " + std::to_string(device) + ")");
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0))
{
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept
{
  if (this != &other) {
    release();
    data_  = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer()
{
  release();
}

void DeviceBuffer::release() noexcept
{
  if (data_ != nullptr)
    cudaFree(data_);
  data_ = nullptr;
}

// ---- ComputeOp ---------------------------------------------------------------------------------------------------

struct ComputeOp::Conv {
  TensorDesc x{nullptr, &cudnnDestroyTensorDescriptor};
  TensorDesc y{nullptr, &cudnnDestroyTensorDescriptor};
  FilterDesc w{nullptr, &cudnnDestroyFilterDescriptor};
  ConvDesc conv{nullptr, &cudnnDestroyConvolutionDescriptor};
  int algo = 0;
};

ComputeOp::ComputeOp(const BenchPoint& p) : point_(p)
{
  switch (p.op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm: {
    m_       = to_int(p.m, "m");
    n_       = to_int(p.n, "n");
    k_       = to_int(p.k, "k");
    batch_   = to_int(p.batch, "batch");
    batched_ = p.op == BenchOp::batched_gemm || batch_ > 1;
    if (p.dtype == "fp32" || p.dtype == "tf32") {
      gemm_type_ = CUDA_R_32F;
    } else if (p.dtype == "fp16" || p.dtype == "bf16") {
      gemm_type_ = p.dtype == "fp16" ? CUDA_R_16F : CUDA_R_16BF;
    } else {
      throw PointFailed("no cuBLAS type for dtype '" + p.dtype + "'");
    }
    // fp32 as PyTorch's matmul runs it by default (no TF32); half types accumulate in fp32, as frameworks ask for.
    compute_ = calibration::gemm_math(p.dtype) == calibration::MathMode::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                              : CUBLAS_COMPUTE_32F;
    // Column-major, C[m x n] = op(A) op(B): A is stored m x k unless transposed (k x m), B k x n unless
    // transposed (n x k); the leading dimension is the stored matrix's row count.
    op_a_ = p.layout == calibration::GemmLayout::tn ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_b_ = p.layout == calibration::GemmLayout::nt ? CUBLAS_OP_T : CUBLAS_OP_N;
    lda_  = op_a_ == CUBLAS_OP_N ? m_ : k_;
    ldb_  = op_b_ == CUBLAS_OP_N ? k_ : n_;
    return;
  }
  case BenchOp::conv2d: {
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    if (p.dtype == "fp16")
      type = CUDNN_DATA_HALF;
    else if (p.dtype == "bf16")
      type = CUDNN_DATA_BFLOAT16;
    else if (p.dtype != "fp32" && p.dtype != "tf32")
      throw PointFailed("no cuDNN type for dtype '" + p.dtype + "'");
    conv_                             = std::make_unique<Conv>();
    const calibration::ConvProblem& c = p.conv;
    conv_->x                          = tensor_desc(type, c.n, c.c, c.h, c.w);

    cudnnFilterDescriptor_t filter = nullptr;
    check_cudnn(cudnnCreateFilterDescriptor(&filter), "cudnnCreateFilterDescriptor");
    conv_->w.reset(filter);
    check_cudnn(cudnnSetFilter4dDescriptor(filter, type, CUDNN_TENSOR_NCHW, c.k, c.c, c.r, c.s),
                "cudnnSetFilter4dDescriptor");

    cudnnConvolutionDescriptor_t conv = nullptr;
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    conv_->conv.reset(conv);
    // Accumulation in fp32 for every data type (half types need it for bf16, and frameworks ask for it).
    check_cudnn(cudnnSetConvolution2dDescriptor(conv, c.pad, c.pad, c.stride, c.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    // As PyTorch by default: fp32 data on TF32 tensor cores (torch.backends.cudnn.allow_tf32 = True; CUDNN_DEFAULT_MATH
    // permits TF32 on float data), half types on tensor cores. The search then uses each algorithm's own math type.
    const cudnnMathType_t math =
        calibration::conv_math(p.dtype) == calibration::MathMode::tf32 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    check_cudnn(cudnnSetConvolutionMathType(conv, math), "cudnnSetConvolutionMathType");

    int on = 0, oc = 0, oh = 0, ow = 0;
    check_cudnn(cudnnGetConvolution2dForwardOutputDim(conv, conv_->x.get(), filter, &on, &oc, &oh, &ow),
                "cudnnGetConvolution2dForwardOutputDim");
    if (on != c.n || oc != c.k || oh != c.out_h() || ow != c.out_w())
      throw PointFailed("cuDNN's output shape " + std::to_string(on) + "x" + std::to_string(oc) + "x" +
                        std::to_string(oh) + "x" + std::to_string(ow) + " differs from the point's");
    conv_->y = tensor_desc(type, on, oc, oh, ow);
    return;
  }
  case BenchOp::pointwise:
    // point.bytes counts x read and y written: each array is half of it.
    elements_ = std::max<std::size_t>(1, to_size(p.bytes) / 8);
    return;
  default:
    throw PointFailed(std::string("'") + calibration::bench_op_name(p.op) + "' is not a compute op");
  }
}

ComputeOp::~ComputeOp() = default;

std::array<std::size_t, 3> ComputeOp::operand_bytes() const
{
  return point_.operand_bytes(); // the same sizes the execution backend's memory plan places
}

int ComputeOp::written_operand() const
{
  if (conv_ && point_.pass == ConvPass::backward_data)
    return 0;
  if (conv_ && point_.pass == ConvPass::backward_filter)
    return 1;
  return 2;
}

FillType ComputeOp::fill_type() const
{
  return point_.op == BenchOp::pointwise ? FillType::f32 : gpu::fill_type(point_.dtype);
}

void ComputeOp::choose_algorithm(const OpStream& where, const OpBuffers& buffers,
                                 const std::function<void*(std::size_t)>& workspace)
{
  if (!conv_)
    return;
  if (where.cudnn == nullptr)
    throw PointFailed("no cuDNN handle to run " + point_.label());
  // Every algorithm cuDNN lists is timed where it will run (PyTorch's benchmark mode): one untimed run, then
  // three timed with events; calibration::choose_fastest keeps the fastest that ran.
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  const std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> start_owner(start, &cudaEventDestroy);
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  const std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> stop_owner(stop, &cudaEventDestroy);
  constexpr int timed_runs = 3;
  auto search              = [&](const auto& candidates) {
    std::vector<calibration::AlgorithmTrial> trials;
    std::vector<cudnnMathType_t> math;
    std::vector<std::size_t> runnable; // trials whose untimed run succeeded
    std::string last = "cuDNN proposed none";
    // The buffers of a trial, asked for again before each run: the workspace may have been reallocated since.
    auto prepare = [&](std::size_t t, OpBuffers& trial_buffers) {
      check_cudnn(cudnnSetConvolutionMathType(conv_->conv.get(), math[t]), "cudnnSetConvolutionMathType");
      trial_buffers                 = buffers;
      trial_buffers.workspace       = workspace(static_cast<std::size_t>(trials[t].workspace_bytes));
      trial_buffers.workspace_bytes = static_cast<std::size_t>(trials[t].workspace_bytes);
      conv_->algo                   = trials[t].algorithm;
    };
    for (const auto& perf : candidates) {
      calibration::AlgorithmTrial& trial = trials.emplace_back();
      trial.algorithm                    = static_cast<int>(perf.algo);
      trial.workspace_bytes              = static_cast<double>(perf.memory);
      math.push_back(perf.mathType);
      if (perf.status != CUDNN_STATUS_SUCCESS)
        continue;
      OpBuffers trial_buffers;
      try {
        prepare(trials.size() - 1, trial_buffers);
      } catch (const PointFailed& e) {
        cudaGetLastError(); // out of memory is not sticky; the others may need less
        last = e.what();
        continue;
      }
      if (cudnnStatus_t status = run_conv(where, trial_buffers); status != CUDNN_STATUS_SUCCESS) {
        cudaGetLastError();
        last = "algorithm " + std::to_string(conv_->algo) + ": " + cudnnGetErrorString(status);
        continue;
      }
      runnable.push_back(trials.size() - 1);
      trials.back().runs = true;
    }
    // Timed in rounds, one run of every algorithm per round, so that a GPU clock still rising (a search right after
    // set-up) or any drift in between weighs on every algorithm alike rather than on the first ones timed.
    for (int r = 0; r < timed_runs; ++r)
      for (std::size_t t : runnable) {
        calibration::AlgorithmTrial& trial = trials[t];
        if (!trial.runs)
          continue;
        OpBuffers trial_buffers;
        try {
          prepare(t, trial_buffers);
        } catch (const PointFailed& e) { // its workspace could not be had again: out of this search
          cudaGetLastError();
          trial.runs = false;
          last       = e.what();
          continue;
        }
        // Queued behind a wait on the GPU: the events then time the GPU's work, not the host's cost of the call.
        check_cuda(launch_spin(300e-6, where.stream), "holding the stream before a timed algorithm");
        check_cuda(cudaEventRecord(start, where.stream), "cudaEventRecord");
        trial.runs = run_conv(where, trial_buffers) == CUDNN_STATUS_SUCCESS;
        check_cuda(cudaEventRecord(stop, where.stream), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(stop), "timing a cuDNN algorithm");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        trial.seconds.push_back(static_cast<double>(ms) * 1e-3);
        if (!trial.runs) {
          cudaGetLastError(); // not left for the next launch's check to find
          last = "algorithm " + std::to_string(trial.algorithm) + " failed while timed";
        }
      }
    const int best = calibration::choose_fastest(trials, std::numeric_limits<double>::infinity());
    if (best < 0)
      throw PointFailed(std::string("no cuDNN algorithm runs this convolution (") + last + ")");
    const calibration::AlgorithmTrial& chosen = trials[static_cast<std::size_t>(best)];
    conv_->algo                               = chosen.algorithm;
    workspace_bytes_                          = static_cast<std::size_t>(chosen.workspace_bytes);
    check_cudnn(cudnnSetConvolutionMathType(conv_->conv.get(), math[static_cast<std::size_t>(best)]),
                             "cudnnSetConvolutionMathType");
    int timed = 0;
    for (const auto& t : trials)
      timed += t.runs ? 1 : 0;
    algorithm_text_ = std::string(conv_pass_name(point_.pass)) + " algo " + std::to_string(chosen.algorithm) +
                      " (fastest of " + std::to_string(timed) + " timed)";
  };
  cudnnHandle_t handle = where.cudnn;
  Conv& c              = *conv_;
  switch (point_.pass) {
  case ConvPass::forward: {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(
        max_algorithm_count(handle, cudnnGetConvolutionForwardAlgorithmMaxCount));
    int returned = 0;
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, c.x.get(), c.w.get(), c.conv.get(), c.y.get(),
                                                       static_cast<int>(perf.size()), &returned, perf.data()),
                "cudnnGetConvolutionForwardAlgorithm_v7");
    perf.resize(static_cast<std::size_t>(std::max(returned, 0)));
    search(perf);
    break;
  }
  case ConvPass::backward_data: {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(
        max_algorithm_count(handle, cudnnGetConvolutionBackwardDataAlgorithmMaxCount));
    int returned = 0;
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, c.w.get(), c.y.get(), c.conv.get(), c.x.get(),
                                                            static_cast<int>(perf.size()), &returned, perf.data()),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    perf.resize(static_cast<std::size_t>(std::max(returned, 0)));
    search(perf);
    break;
  }
  case ConvPass::backward_filter: {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(
        max_algorithm_count(handle, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount));
    int returned = 0;
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, c.x.get(), c.y.get(), c.conv.get(), c.w.get(),
                                                              static_cast<int>(perf.size()), &returned, perf.data()),
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    perf.resize(static_cast<std::size_t>(std::max(returned, 0)));
    search(perf);
    break;
  }
  }
}

cudnnStatus_t ComputeOp::run_conv(const OpStream& where, const OpBuffers& b) const
{
  // Float scaling for float, half and bfloat16 data; alpha keeps the values' spread (calibration::products_alpha)
  // over what each pass sums: c r s inputs of an output, k r s gradients of an input, n p q of a filter's.
  const calibration::ConvProblem& p = point_.conv;
  const double reduction = point_.pass == ConvPass::forward         ? double(p.c) * p.r * p.s
                           : point_.pass == ConvPass::backward_data ? double(p.k) * p.r * p.s
                                                                    : double(p.n) * p.out_h() * p.out_w();
  const float alpha = calibration::products_alpha(std::max(1.0, reduction)), beta = 0.0f;
  const Conv& c = *conv_;
  void* x       = b.operand[0];
  void* w       = b.operand[1];
  void* y       = b.operand[2];
  switch (point_.pass) {
  case ConvPass::forward:
    return cudnnConvolutionForward(where.cudnn, &alpha, c.x.get(), x, c.w.get(), w, c.conv.get(),
                                   static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), b.workspace, b.workspace_bytes,
                                   &beta, c.y.get(), y);
  case ConvPass::backward_data:
    return cudnnConvolutionBackwardData(where.cudnn, &alpha, c.w.get(), w, c.y.get(), y, c.conv.get(),
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), b.workspace,
                                        b.workspace_bytes, &beta, c.x.get(), x);
  case ConvPass::backward_filter:
    return cudnnConvolutionBackwardFilter(where.cudnn, &alpha, c.x.get(), x, c.y.get(), y, c.conv.get(),
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), b.workspace,
                                          b.workspace_bytes, &beta, c.w.get(), w);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

void ComputeOp::launch(const OpStream& where, const OpBuffers& b) const
{
  if (conv_) {
    if (where.cudnn == nullptr)
      throw PointFailed("no cuDNN handle to run " + point_.label());
    check_cudnn(run_conv(where, b), conv_call_name(point_.pass));
    return;
  }
  if (point_.op == BenchOp::pointwise) {
    check_cuda(launch_axpb(static_cast<const float*>(b.operand[0]), static_cast<float*>(b.operand[2]), elements_,
                           calibration::pointwise_a, calibration::pointwise_b, std::max(1, where.sm_count) * 8,
                           where.stream), // 8 blocks of 256 threads fill an SM
               "the pointwise kernel");
    return;
  }
  if (where.cublas == nullptr)
    throw PointFailed("no cuBLAS handle to run " + point_.label());
  // Read by cuBLAS before the call returns (host pointer mode); alpha keeps the values' spread over k products.
  const float alpha = calibration::products_alpha(std::max(1, k_)), beta = 0.0f;
  const void* a  = b.operand[0];
  const void* bm = b.operand[1];
  void* c        = b.operand[2];
  if (!batched_) {
    check_cublas(cublasGemmEx(where.cublas, op_a_, op_b_, m_, n_, k_, &alpha, a, gemm_type_, lda_, bm, gemm_type_, ldb_,
                              &beta, c, gemm_type_, m_, compute_, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return;
  }
  const long long stride_a = static_cast<long long>(m_) * k_;
  const long long stride_b = static_cast<long long>(k_) * n_;
  const long long stride_c = static_cast<long long>(m_) * n_;
  check_cublas(cublasGemmStridedBatchedEx(where.cublas, op_a_, op_b_, m_, n_, k_, &alpha, a, gemm_type_, lda_, stride_a,
                                          bm, gemm_type_, ldb_, stride_b, &beta, c, gemm_type_, m_, stride_c, batch_,
                                          compute_, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

// ---- GpuContext --------------------------------------------------------------------------------------------------

GpuContext::GpuContext(int gpus)
{
  for (int d = 0; d < gpus; ++d) {
    require(cudaSetDevice(d), "cudaSetDevice(" + std::to_string(d) + ")");
    cudaStream_t stream = nullptr;
    require(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream on GPU " + std::to_string(d));
    streams_.push_back(stream);
  }
  require(cudaSetDevice(0), "cudaSetDevice(0)");
  require(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, 0), "reading GPU 0's SM count");
  int l2 = 0;
  require(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "reading GPU 0's L2 size");
  l2_bytes_ = l2;
}

GpuContext::~GpuContext()
{
  for (auto& [group, comms] : comms_)
    for (ncclComm_t comm : comms) {
      if (lost_)
        ncclCommAbort(comm); // does not wait for work a lost context will never finish
      else
        ncclCommDestroy(comm);
    }
  if (flush_buffer_ != nullptr)
    cudaFree(flush_buffer_);
  if (cublas_ != nullptr)
    cublasDestroy(cublas_);
  if (cublas_workspace_ != nullptr)
    cudaFree(cublas_workspace_);
  if (cudnn_ != nullptr)
    cudnnDestroy(cudnn_);
  for (cudaStream_t stream : streams_)
    cudaStreamDestroy(stream);
}

double GpuContext::free_bytes() const
{
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<double>(free);
}

void GpuContext::hold(double seconds)
{
  check_cuda(launch_spin(seconds, streams_.at(0)), "holding the stream before the timed runs");
}

void GpuContext::flush_l2(double bytes)
{
  const std::size_t want = to_size(bytes);
  if (want == 0)
    return;
  if (flush_bytes_ < want) {
    if (flush_buffer_ != nullptr)
      cudaFree(flush_buffer_);
    flush_buffer_ = nullptr;
    flush_bytes_  = 0;
    check_cuda(cudaMalloc(&flush_buffer_, want), "cudaMalloc of the L2 flush buffer (" + std::to_string(want) + " B)");
    flush_bytes_ = want;
  }
  // A memset rather than a kernel of ours: CUPTI records it as MEMSET, a kind the collector does not trace.
  check_cuda(cudaMemsetAsync(flush_buffer_, 0x5a, want, streams_.at(0)), "flushing the L2 cache");
}

cublasHandle_t GpuContext::cublas()
{
  if (cublas_ != nullptr)
    return cublas_;
  if (!cublas_error_.empty())
    throw PointFailed(cublas_error_);
  try {
    check_cublas(cublasCreate(&cublas_), "cublasCreate");
    // cublasSetStream resets the workspace to cuBLAS's default pool: set the stream first.
    check_cublas(cublasSetStream(cublas_, streams_.at(0)), "cublasSetStream");
    check_cuda(cudaMalloc(&cublas_workspace_, cublas_workspace_bytes), "cudaMalloc of the cuBLAS workspace");
    check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes), "cublasSetWorkspace");
  } catch (const PointFailed& e) {
    cublas_error_ = e.what();
    if (cublas_ != nullptr)
      cublasDestroy(cublas_);
    cublas_ = nullptr;
    throw;
  }
  return cublas_;
}

cudnnHandle_t GpuContext::cudnn()
{
  if (cudnn_ != nullptr)
    return cudnn_;
  if (!cudnn_error_.empty())
    throw PointFailed(cudnn_error_);
  try {
    check_cudnn(cudnnCreate(&cudnn_), "cudnnCreate");
    check_cudnn(cudnnSetStream(cudnn_, streams_.at(0)), "cudnnSetStream");
  } catch (const PointFailed& e) {
    cudnn_error_ = e.what();
    if (cudnn_ != nullptr)
      cudnnDestroy(cudnn_);
    cudnn_ = nullptr;
    throw;
  }
  return cudnn_;
}

const std::vector<ncclComm_t>& GpuContext::nccl(int group)
{
  if (auto it = comms_.find(group); it != comms_.end())
    return it->second;
  if (auto it = nccl_errors_.find(group); it != nccl_errors_.end())
    throw PointFailed(it->second);
  if (group < 1 || group > gpus())
    throw PointFailed("a group of " + std::to_string(group) + " GPUs, " + std::to_string(gpus()) + " are used");
  std::vector<int> devices(static_cast<std::size_t>(group));
  std::iota(devices.begin(), devices.end(), 0);
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  const ncclResult_t status = ncclCommInitAll(comms.data(), group, devices.data());
  cudaSetDevice(0); // NCCL visits every device while it sets up
  if (status != ncclSuccess) {
    std::string error = "ncclCommInitAll over " + std::to_string(group) + " GPU(s): " + ncclGetErrorString(status);
    if (const char* detail = ncclGetLastError(nullptr); detail != nullptr && *detail != '\0')
      error += std::string(" (") + detail + ")";
    nccl_errors_[group] = error;
    throw PointFailed(error);
  }
  return comms_[group] = std::move(comms);
}

void GpuContext::synchronize(int devices) const
{
  for (int d = 0; d < devices && d < gpus(); ++d)
    check_cuda(cudaStreamSynchronize(streams_[static_cast<std::size_t>(d)]), "waiting for GPU " + std::to_string(d));
}

void GpuContext::recover(const std::string& point)
{
  for (int d = 0; d < gpus(); ++d) {
    cudaSetDevice(d);
    cudaGetLastError(); // clears an error that is not sticky (out of memory, a bad launch configuration)
    if (cudaDeviceSynchronize() == cudaSuccess)
      continue;
    cudaGetLastError();
    if (const cudaError_t again = cudaDeviceSynchronize(); again != cudaSuccess) {
      lost_ = true;
      throw DeviceFailed("GPU " + std::to_string(d) + " cannot be used after '" + point +
                         "': " + cuda_error_text(again) + " persists (a sticky error: the CUDA context is lost)");
    }
  }
  cudaSetDevice(0);
}

// ---- factory -----------------------------------------------------------------------------------------------------

double footprint_bytes(const BenchPoint& point)
{
  switch (point.op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm:
  case BenchOp::conv2d:
  case BenchOp::pointwise: {
    const std::array<std::size_t, 3> bytes = point.operand_bytes();
    return static_cast<double>(bytes[0] + bytes[1] + bytes[2]);
  }
  case BenchOp::copy_d2d:
    return 2 * point.bytes;
  case BenchOp::copy_h2d:
  case BenchOp::copy_d2h:
    return point.bytes;
  case BenchOp::collective:
    return 0;
  }
  return 0;
}

std::unique_ptr<Benchmark> make_benchmark(const BenchPoint& point, GpuContext& gpus, int buffer_sets)
{
  switch (point.op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm:
  case BenchOp::conv2d:
  case BenchOp::pointwise:
    return std::make_unique<ComputeBench>(point, gpus, buffer_sets);
  case BenchOp::copy_d2d:
  case BenchOp::copy_h2d:
  case BenchOp::copy_d2h:
    return std::make_unique<CopyBench>(point, gpus, buffer_sets);
  case BenchOp::collective:
    return std::make_unique<CollectiveBench>(point, gpus);
  }
  throw PointFailed("no executor for op '" + std::string(calibration::bench_op_name(point.op)) + "'");
}

} // namespace ddlsim::gpu
