// One GPU of a CUDA run: the host thread that makes the GPU's resources and issues its simulated devices' work,
// iteration by iteration. Internal to ddlsim-run-cuda (CudaExecutor.cpp runs one GpuWorker per local GPU).
//
//   set-up     streams (compute, transfer, collective per simulated device; one per NCCL communicator), cuBLAS and
//              cuDNN handles, the memory model's regions with every launch's operands placed in them, each
//              convolution's algorithm and workspace, the send and receive buffers, the events of its signals
//   iteration  every task of the workload in order: compute launches, transfers (peer copies or ncclSend/Recv),
//              collectives (NCCL or emulated with copies), each waiting on its signals and recording its own
//   timing     the GPU threads meet (Coordinator) before and after each iteration; an iteration lasts from one
//              meeting's release to the next meeting's arrival
#pragma once

#include "gpu/Benchmarks.hpp"
#include "gpu/CuptiTracer.hpp"
#include "gpu/Kernels.hpp"
#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/Coordination.hpp"
#include "sim/backends/cuda/ExecutionPlan.hpp"

#include <array>
#include <cstdint>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ddlsim::backends::cuda::detail {

// The external correlation id of one launch of one timed iteration, as pushed to CUPTI: task + 1 in the top bits
// (0 means "no id"), then the launch and the timed iteration, 20 bits each.
constexpr int id_field_bits            = 20;
constexpr std::uint64_t id_field_limit = std::uint64_t{1} << id_field_bits;
constexpr std::uint64_t id_task_limit  = std::uint64_t{1} << (64 - 2 * id_field_bits);

constexpr std::uint64_t trace_id(int task, int launch, int traced_iteration)
{
  return (static_cast<std::uint64_t>(task) + 1) << (2 * id_field_bits) |
         static_cast<std::uint64_t>(launch) << id_field_bits | static_cast<std::uint64_t>(traced_iteration);
}

// Iterations traced with CUPTI after the timed ones (--trace): never inside what is timed.
constexpr int traced_iterations = 2;

// The CUPTI tracer of the traced iterations, made once the timed ones are over (by the last GPU thread to finish
// them) and read by every thread after that meeting.
struct TraceSlot {
  bool wanted = false;
  std::function<void(const std::string&)> warn;
  std::function<void()> on_made_cb; // notes that it traced
  Clock::time_point origin;
  std::unique_ptr<gpu::CuptiTracer> tracer;
  void start()
  {
    try {
      tracer = std::make_unique<gpu::CuptiTracer>(origin);
      if (on_made_cb)
        on_made_cb();
    } catch (const gpu::CuptiUnavailable& e) {
      if (warn)
        warn(std::string("CUPTI cannot trace here (") + e.what() + "); no trace");
    }
  }
};

// A simulated device on its GPU: its streams, and the library handles and workspaces of its compute stream.
struct SimDevice {
  int device                 = 0;
  cudaStream_t compute       = nullptr;
  cudaStream_t transfer      = nullptr;
  cudaStream_t collective    = nullptr;
  cublasHandle_t cublas      = nullptr;
  cudnnHandle_t cudnn        = nullptr;
  bool needs_cublas          = false;
  bool needs_cudnn           = false;
  std::size_t conv_workspace = 0; // bytes its convolutions' algorithms need
  gpu::DeviceBuffer cublas_workspace, cudnn_workspace;
  std::array<gpu::DeviceBuffer, region_count> regions; // weights, gradients, optimizer state, activations
  gpu::OpStream where;
};

// A distinct launch of a GPU: its op, ready to run on any operands.
struct PreparedLaunch {
  std::unique_ptr<gpu::ComputeOp> op;
};

// Everything of one GPU, and the host thread that issues its simulated devices' work. The thread makes the GPU's
// resources (set-up runs on every GPU at once); the main thread frees them, after every thread has stopped.
class GpuWorker {
public:
  GpuWorker(int gpu, const Workload& w, const ExecutionPlan& plan, Coordinator& coordinator, const Communicators& comms,
            std::vector<cudaEvent_t>& events, CommBuffers& comm, TraceSlot& trace)
      : gpu_(gpu), cuda_(plan.cuda_device(gpu)), w_(w), plan_(plan), co_(coordinator), comms_(comms), events_(events),
        comm_(comm), trace_(trace), local_(static_cast<std::size_t>(w.devices), -1)
  {
  }
  ~GpuWorker();
  GpuWorker(const GpuWorker&)            = delete;
  GpuWorker& operator=(const GpuWorker&) = delete;

  /// The thread's body: set-up, then warm-up and timed iterations. Reports a failure to the coordinator.
  void run(int warmup, int iterations, bool cuda_graph);
  const std::vector<double>& times_s() const { return times_s_; }
  /// The most device memory in use on this GPU (cudaMemGetInfo: context, libraries, buffers), after set-up, after
  /// every warm-up iteration and after the timed ones (outside their times), bytes.
  double peak_memory_bytes() const { return peak_memory_bytes_; }

private:
  void setup();
  void setup_devices();
  void setup_launches();
  void hold_busy(const SimDevice& d, gpu::FillType fill, double seconds);
  void setup_communication();
  void issue(int iteration, int traced_iteration);
  void issue_compute(int task, int iteration, int traced_iteration);
  void read_memory();
  cudaStream_t nccl_stream(int communicator) const { return nccl_streams_.at(communicator); }
  void issue_transfer(int task, int iteration);
  void issue_rank_transfer(int task, int iteration);
  void issue_collective(int task, int iteration);
  void check(cudaError_t status, int task, const char* call) const;
  void copy(void* dst, int dst_gpu, const void* src, int src_gpu, std::size_t bytes, cudaStream_t stream,
            int task) const;
  void wait_for(const std::vector<int>& signals, cudaStream_t stream, int iteration, int task);
  void record(int signal, cudaStream_t stream, int iteration, int task);
  void synchronize(int iteration, int warmup, int timed);
  void capture(int iteration);
  SimDevice& local(int device) { return *devices_[static_cast<std::size_t>(local_[static_cast<std::size_t>(device)])]; }
  bool is_local(int device) const { return plan_.gpu_of[static_cast<std::size_t>(device)] == gpu_; }
  cudaStream_t stream_of(const PlannedSignal& s);
  std::string where() const { return "GPU " + std::to_string(cuda_); }

  const int gpu_;  // the plan's number
  const int cuda_; // CUDA's, in this process: the same but in a multi-machine run
  const Workload& w_;
  const ExecutionPlan& plan_;
  Coordinator& co_;
  const Communicators& comms_;
  std::vector<cudaEvent_t>& events_;
  CommBuffers& comm_;
  TraceSlot& trace_;

  int sm_count_ = 1;
  std::map<int, cudaStream_t> nccl_streams_; // per communicator this GPU belongs to
  std::vector<int> local_;                   // simulated device -> index into devices_, -1 on other GPUs
  std::vector<std::unique_ptr<SimDevice>> devices_;
  std::vector<PreparedLaunch> launches_;
  gpu::DeviceBuffer send_, recv_;
  std::vector<std::vector<gpu::OpBuffers>> task_buffers_; // [task][launch] of this GPU's compute tasks: placed operands
  std::vector<int> owned_signals_;
  std::vector<double> times_s_;
  double peak_memory_bytes_ = 0;
  cudaGraphExec_t graph_    = nullptr; // the captured iteration, with CudaRunOptions::cuda_graph
  int last_task_            = -1; // the last task this thread issued, to name it when the GPU reports an error later
};

} // namespace ddlsim::backends::cuda::detail
