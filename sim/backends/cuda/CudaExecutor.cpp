#include "sim/backends/cuda/CudaExecutor.hpp"

#include "calibration/Measurement.hpp"
#include "common/Error.hpp"
#include "gpu/Benchmarks.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/CuptiTracer.hpp"
#include "gpu/Kernels.hpp"
#include "gpu/LibraryTypes.hpp"
#include "gpu/Provenance.hpp"
#include "sim/backends/cuda/ExecutionPlan.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nccl.h>
#include <thread>
#include <utility>

namespace ddlsim::backends::cuda {
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;
using gpu::check_cublas;
using gpu::check_cuda;
using gpu::check_cudnn;
using gpu::ComputeOp;
using gpu::DeviceBuffer;
using gpu::fill_element_bytes;
using gpu::FillType;
using gpu::OpBuffers;
using gpu::OpStream;
using Clock = std::chrono::steady_clock;

constexpr std::size_t cublas_workspace_bytes = 32u << 20; // as the collector's handle: what cuBLAS asks for on Hopper

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

// Unwinds a GPU thread once another one has failed: the first failure is the one reported.
struct Aborted {};

std::size_t whole_bytes(double bytes)
{
  return bytes > 0 ? static_cast<std::size_t>(std::llround(bytes)) : 0;
}

std::string nccl_text(ncclResult_t status, ncclComm_t comm)
{
  std::string text = ncclGetErrorString(status);
  if (const char* detail = ncclGetLastError(comm); detail != nullptr && *detail != '\0')
    text += std::string(" (") + detail + ")";
  return text;
}

std::string launch_text(const Workload& w, int task, int launch)
{
  return describe_task(w, task) + ", launch " + std::to_string(launch) + " " +
         w.tasks[static_cast<std::size_t>(task)].launches[static_cast<std::size_t>(launch)].label();
}

// ---- what the GPU threads share ----------------------------------------------------------------------------------

// When this process's GPU threads met between iterations: when the last of them arrived (its GPUs had all
// finished), and when they went on, after meeting the other ranks' (the same instant with one rank).
struct Meeting {
  Clock::time_point arrived, released;
};

// The first failure, the iteration each cross-thread signal was last recorded in, and the barrier between
// iterations. One mutex and condition variable serve all three: waits are rare and short next to GPU work.
class Coordinator {
public:
  /// `on_all_arrived_cb`, when set, runs on the last thread to arrive at each meeting, before any goes on (the
  /// ranks' barrier); `on_failure_cb`, when set, on the first thread to fail.
  Coordinator(int threads, std::size_t signals, std::function<void()> on_all_arrived_cb,
              std::function<void(const std::string&)> on_failure_cb)
      : threads_(threads), recorded_(std::make_unique<std::atomic<int>[]>(signals)),
        on_all_arrived_cb_(std::move(on_all_arrived_cb)), on_failure_cb_(std::move(on_failure_cb))
  {
    for (std::size_t s = 0; s < signals; ++s)
      recorded_[s].store(-1);
  }

  void fail(const std::string& message)
  {
    bool first = false;
    {
      const std::lock_guard lock(mutex_);
      if (!failed_.load()) {
        error_ = message;
        failed_.store(true);
        first = true;
      }
    }
    cv_.notify_all();
    if (first && on_failure_cb_)
      on_failure_cb_(message);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string error() const
  {
    const std::lock_guard lock(mutex_);
    return error_;
  }

  // After the event of `signal` was recorded in `iteration`: lets other threads wait on it.
  void publish(int signal, int iteration)
  {
    {
      const std::lock_guard lock(mutex_);
      recorded_[static_cast<std::size_t>(signal)].store(iteration, std::memory_order_release);
    }
    cv_.notify_all();
  }

  // Until the event of `signal` has been recorded in `iteration`. Throws Aborted when another thread failed.
  void await(int signal, int iteration)
  {
    std::atomic<int>& recorded = recorded_[static_cast<std::size_t>(signal)];
    if (recorded.load(std::memory_order_acquire) >= iteration)
      return;
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return recorded.load(std::memory_order_acquire) >= iteration || failed_.load(); });
    if (recorded.load(std::memory_order_acquire) < iteration)
      throw Aborted{};
  }

  // Every thread meets here; returns once the last one arrived and on_all_arrived_cb returned. `last_cb`, when
  // given, runs first on the last thread to arrive (every thread passes the same). Throws Aborted when another
  // thread failed.
  Meeting meet(const std::function<void()>& last_cb = {})
  {
    std::unique_lock lock(mutex_);
    if (failed_.load())
      throw Aborted{};
    const long generation = generation_;
    if (++arrived_ == threads_) {
      Meeting met{.arrived = Clock::now(), .released = {}};
      if (last_cb) {
        lock.unlock();
        last_cb();
        lock.lock();
      }
      if (on_all_arrived_cb_) {
        // Without the lock: the others only wait for the generation to change, and no thread can fail now.
        lock.unlock();
        on_all_arrived_cb_();
        lock.lock();
        met.released = Clock::now();
      } else {
        met.released = met.arrived;
      }
      arrived_ = 0;
      ++generation_;
      met_ = met;
      lock.unlock();
      cv_.notify_all();
      return met;
    }
    cv_.wait(lock, [&] { return generation_ != generation || failed_.load(); });
    if (generation_ == generation)
      throw Aborted{};
    return met_; // nobody can open the next meeting before this thread arrives at it
  }

private:
  const int threads_;
  std::unique_ptr<std::atomic<int>[]> recorded_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> failed_{false};
  std::string error_;
  int arrived_     = 0;
  long generation_ = 0;
  Meeting met_;
  const std::function<void()> on_all_arrived_cb_;
  const std::function<void(const std::string&)> on_failure_cb_;
};

// The communication buffers of each GPU, which other GPUs' threads copy from and into: each thread writes its
// GPU's entries during set-up, and the others read them only after the set-up barrier.
struct CommBuffers {
  std::vector<void*> send, recv;
};

// One NCCL communicator per distinct group (and the world communicator of transfers between ranks), made before
// any thread starts. In one process, by ncclCommInitAll over the group's GPUs. Across ranks, every rank goes
// through the communicators in the plan's order: the rank of the group's first device makes a unique id and
// broadcasts it, and each rank with members joins with ncclCommInitRank per member GPU, in one NCCL group call
// (each call waits for the communicator's other members: one after the other, a rank's GPUs would wait for each
// other). Destroyed after a clean run; aborted after a failure, which also stops NCCL kernels still waiting for a
// peer that will never come (freeing memory under a running kernel would wait forever).
class Communicators {
public:
  Communicators(const Workload& w, const ExecutionPlan& plan, ProcessGroup* ranks)
  {
    for (std::size_t c = 0; c < plan.communicators.size(); ++c) {
      const std::vector<int>& group = plan.communicators[c];
      std::vector<ncclComm_t> comms(group.size(), nullptr); // null: another rank's member, or not made
      const std::string failed =
          ranks == nullptr ? init_all(plan, group, comms) : init_ranks(plan, group, *ranks, comms);
      comms_.push_back(std::move(comms)); // those made, even when another failed: release() aborts them
      if (!failed.empty()) {
        std::string first =
            static_cast<int>(c) == plan.world_communicator ? "the transfers between ranks" : "a collective";
        for (std::size_t t = 0; t < w.tasks.size(); ++t)
          if (w.tasks[t].kind == WorkTask::Kind::collective &&
              plan.collectives[t].communicator == static_cast<int>(c)) {
            first = describe_task(w, static_cast<int>(t));
            break;
          }
        abort_ = true;
        release(); // the communicators of the groups before: no destructor runs after a throwing constructor
        throw ExecutionError(first + ": " + failed);
      }
    }
  }
  ~Communicators() { release(); }
  Communicators(const Communicators&)            = delete;
  Communicators& operator=(const Communicators&) = delete;

  ncclComm_t get(int communicator, std::size_t rank) const
  {
    return comms_.at(static_cast<std::size_t>(communicator)).at(rank);
  }
  void abort_on_destroy() { abort_ = true; }

private:
  void release() noexcept
  {
    for (const auto& group : comms_)
      for (ncclComm_t comm : group) {
        if (comm == nullptr) // another rank's member
          continue;
        if (abort_)
          ncclCommAbort(comm);
        else
          ncclCommDestroy(comm);
      }
    comms_.clear();
  }

  // Every member on its GPU of this process. Returns what failed, or nothing.
  static std::string init_all(const ExecutionPlan& plan, const std::vector<int>& group, std::vector<ncclComm_t>& comms)
  {
    std::vector<int> gpus;
    std::string gpu_list;
    for (int d : group) {
      gpus.push_back(plan.cuda_device(plan.gpu_of[static_cast<std::size_t>(d)]));
      gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(gpus.back());
    }
    const ncclResult_t status = ncclCommInitAll(comms.data(), static_cast<int>(group.size()), gpus.data());
    if (status == ncclSuccess)
      return {};
    std::fill(comms.begin(), comms.end(), nullptr); // ncclCommInitAll leaves none made when it fails
    return "ncclCommInitAll over GPUs " + gpu_list + ": " + nccl_text(status, nullptr);
  }

  // This rank's members of a communicator over several ranks; the other members are made by their own ranks at the
  // same point of the same order. Returns what failed, or nothing; the other ranks then wait: the caller aborts them.
  static std::string init_ranks(const ExecutionPlan& plan, const std::vector<int>& group, ProcessGroup& ranks,
                                std::vector<ncclComm_t>& comms)
  {
    const int root = plan.rank_of(plan.gpu_of[static_cast<std::size_t>(group.front())]);
    ncclUniqueId id{};
    if (ranks.rank() == root)
      if (const ncclResult_t status = ncclGetUniqueId(&id); status != ncclSuccess)
        return "ncclGetUniqueId: " + nccl_text(status, nullptr);
    ranks.broadcast(&id, sizeof id, root);

    std::vector<std::pair<std::size_t, int>> mine; // (member, its CUDA device)
    std::string gpu_list;
    for (std::size_t k = 0; k < group.size(); ++k) {
      const int gpu = plan.gpu_of[static_cast<std::size_t>(group[k])];
      if (!plan.is_local(gpu))
        continue;
      mine.emplace_back(k, plan.cuda_device(gpu));
      gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(mine.back().second);
      // Checked before the group call: inside it, a member left out would keep the others waiting for it.
      if (const cudaError_t set = cudaSetDevice(mine.back().second); set != cudaSuccess)
        return "cudaSetDevice(" + std::to_string(mine.back().second) + "): " + gpu::cuda_error_text(set);
    }
    if (mine.empty())
      return {};
    const int n         = static_cast<int>(group.size());
    ncclResult_t status = ncclGroupStart();
    if (status == ncclSuccess) {
      for (const auto& [k, gpu] : mine) {
        cudaSetDevice(gpu); // succeeded just above
        status = ncclCommInitRank(&comms[k], n, id, static_cast<int>(k));
        if (status != ncclSuccess)
          break;
      }
      const ncclResult_t ended = ncclGroupEnd();
      if (status == ncclSuccess)
        status = ended;
    }
    if (status == ncclSuccess)
      return {};
    return "ncclCommInitRank of " + std::to_string(mine.size()) + " of its " + std::to_string(n) +
           " members, on GPU(s) " + gpu_list + ": " + nccl_text(status, nullptr);
  }

  std::vector<std::vector<ncclComm_t>> comms_;
  bool abort_ = false;
};

// ---- one GPU -----------------------------------------------------------------------------------------------------

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
  DeviceBuffer cublas_workspace, cudnn_workspace;
  std::array<DeviceBuffer, region_count> regions; // weights, gradients, optimizer state, activations
  OpStream where;
};

// A distinct launch of a GPU: its op, ready to run on any operands.
struct PreparedLaunch {
  std::unique_ptr<ComputeOp> op;
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
  void hold_busy(const SimDevice& d, FillType fill, double seconds);
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
  DeviceBuffer send_, recv_;
  std::vector<std::vector<OpBuffers>> task_buffers_; // [task][launch] of this GPU's compute tasks: placed operands
  std::vector<int> owned_signals_;
  std::vector<double> times_s_;
  double peak_memory_bytes_  = 0;
  cudaGraphExec_t graph_     = nullptr; // the captured iteration, with CudaRunOptions::cuda_graph
  int last_task_             = -1; // the last task this thread issued, to name it when the GPU reports an error later
};

GpuWorker::~GpuWorker()
{
  // Handles before the streams they are bound to; buffers go with the members (cudaFree finds their GPU itself).
  cudaSetDevice(cuda_);
  if (graph_ != nullptr)
    cudaGraphExecDestroy(graph_);
  for (int s : owned_signals_)
    if (events_[static_cast<std::size_t>(s)] != nullptr)
      cudaEventDestroy(events_[static_cast<std::size_t>(s)]);
  for (const auto& d : devices_) {
    if (d->cublas != nullptr)
      cublasDestroy(d->cublas);
    if (d->cudnn != nullptr)
      cudnnDestroy(d->cudnn);
    for (cudaStream_t s : {d->compute, d->transfer, d->collective})
      if (s != nullptr)
        cudaStreamDestroy(s);
  }
  for (const auto& [communicator, stream] : nccl_streams_)
    cudaStreamDestroy(stream);
}

void GpuWorker::run(int warmup, int iterations, bool cuda_graph)
{
  try {
    setup();
    read_memory();
    Clock::time_point start = co_.meet().released; // every GPU set up and idle, on every rank
    for (int it = 0; it < warmup + iterations; ++it) {
      const int timed = it - warmup; // negative while warming up
      if (graph_ != nullptr && timed >= 0)
        check_cuda(cudaGraphLaunch(graph_, devices_.front()->compute), where() + ": cudaGraphLaunch");
      else
        issue(it, -1);
      synchronize(it, warmup, iterations);
      if (timed < 0)
        read_memory(); // libraries allocate on first use; a timed iteration's time has no such call in it
      if (cuda_graph && it == warmup - 1) {
        capture(it + 1); // after the warm-up, outside any timed iteration: the libraries have their memory
        read_memory();
      }
      const Meeting met = co_.meet();
      if (timed >= 0) // this rank's GPUs finished; the other ranks' may still run
        times_s_.push_back(std::chrono::duration<double>(met.arrived - start).count());
      start = met.released;
    }
    read_memory(); // after the timed iterations: nothing is freed during a step, so this is their peak too
    // CUPTI starts only now, so that none of its cost is in the timed iterations.
    if (trace_.wanted) {
      co_.meet([this] { trace_.start(); });
      if (trace_.tracer)
        // With a graph: one eager iteration (a record per launch, with its kernels' count) and then the graph
        // replayed as it was timed, whose kernels carry no launch's id (graph_kernel_records); in that order the
        // replays' kernels are the eager launches' kernels, the same algorithms in the same process.
        for (int t = 0; t < traced_iterations + (graph_ != nullptr ? 1 : 0); ++t) {
          const int it = warmup + iterations + t;
          if (graph_ != nullptr && t > 0)
            check_cuda(cudaGraphLaunch(graph_, devices_.front()->compute), where() + ": cudaGraphLaunch");
          else
            issue(it, t);
          synchronize(it, warmup, iterations);
          co_.meet();
        }
    }
  } catch (const Aborted&) {
  } catch (const std::exception& e) {
    co_.fail(e.what());
  } catch (...) {
    co_.fail(where() + ": unknown error");
  }
}

// ---- set-up ------------------------------------------------------------------------------------------------------

void GpuWorker::setup()
{
  check_cuda(cudaSetDevice(cuda_), "cudaSetDevice(" + std::to_string(cuda_) + ")");
  check_cuda(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, cuda_),
             where() + ": reading the SM count");
  sm_count_ = std::max(1, sm_count_);
  for (int communicator : plan_.nccl_streams[static_cast<std::size_t>(gpu_)])
    check_cuda(cudaStreamCreateWithFlags(&nccl_streams_[communicator], cudaStreamNonBlocking),
               where() + ": creating an NCCL stream");
  setup_devices();
  setup_launches();
  setup_communication();
  for (std::size_t s = 0; s < plan_.signals.size(); ++s)
    if (plan_.signals[s].gpu == gpu_) {
      owned_signals_.push_back(static_cast<int>(s));
      // No timing: such events are cheaper to record and to wait on.
      check_cuda(cudaEventCreateWithFlags(&events_[s], cudaEventDisableTiming), where() + ": creating an event");
    }
  check_cuda(cudaDeviceSynchronize(), where() + ": finishing set-up");
}

void GpuWorker::setup_devices()
{
  for (int d : plan_.devices_of[static_cast<std::size_t>(gpu_)]) {
    local_[static_cast<std::size_t>(d)] = static_cast<int>(devices_.size());
    auto& sim                           = *devices_.emplace_back(std::make_unique<SimDevice>());
    sim.device                          = d;
    const std::string who               = "device " + std::to_string(d) + " (GPU " + std::to_string(cuda_) + ")";
    for (cudaStream_t* s : {&sim.compute, &sim.transfer, &sim.collective})
      check_cuda(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), who + ": creating a stream");
  }
  // Which libraries each device's launches need: a cuDNN handle is slow to make and unused by GEMM-only steps.
  for (const WorkTask& t : w_.tasks)
    if (t.kind == WorkTask::Kind::compute && is_local(t.device))
      for (const BenchPoint& p : t.launches) {
        local(t.device).needs_cublas |= p.op == BenchOp::gemm || p.op == BenchOp::batched_gemm;
        local(t.device).needs_cudnn |= p.op == BenchOp::conv2d;
      }
  for (const auto& d : devices_) {
    const std::string who = "device " + std::to_string(d->device) + " (GPU " + std::to_string(cuda_) + ")";
    if (d->needs_cublas) {
      check_cublas(cublasCreate(&d->cublas), who + ": cublasCreate");
      // cublasSetStream resets the workspace to cuBLAS's default pool: set the stream first. A workspace per
      // device, not per GPU: cuBLAS may keep reduction flags in it, which concurrent GEMMs must not share.
      check_cublas(cublasSetStream(d->cublas, d->compute), who + ": cublasSetStream");
      d->cublas_workspace =
          DeviceBuffer(cublas_workspace_bytes, cuda_, "the cuBLAS workspace of device " + std::to_string(d->device));
      check_cublas(cublasSetWorkspace(d->cublas, d->cublas_workspace.get(), d->cublas_workspace.bytes()),
                   who + ": cublasSetWorkspace");
    }
    if (d->needs_cudnn) {
      check_cudnn(cudnnCreate(&d->cudnn), who + ": cudnnCreate");
      check_cudnn(cudnnSetStream(d->cudnn, d->compute), who + ": cudnnSetStream");
    }
    d->where = OpStream{.stream = d->compute, .cublas = d->cublas, .cudnn = d->cudnn, .sm_count = sm_count_};
  }
}

// Rewrites the device's largest memory region with the fill kernel for at least `seconds`, so that the GPU's clocks
// are at their working level afterwards.
void GpuWorker::hold_busy(const SimDevice& d, FillType fill, double seconds)
{
  const DeviceBuffer* largest = &d.regions.front();
  for (const DeviceBuffer& r : d.regions)
    if (r.bytes() > largest->bytes())
      largest = &r;
  if (largest->bytes() == 0)
    return;
  const Clock::time_point start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    for (unsigned k = 0; k < 16; ++k)
      check_cuda(gpu::launch_fill(largest->get(), largest->bytes() / fill_element_bytes(fill), fill, 100 + k,
                                        d.compute),
                 where() + ": warming the GPU up");
    check_cuda(cudaStreamSynchronize(d.compute), where() + ": warming the GPU up");
  }
}

void GpuWorker::setup_launches()
{
  const auto& points = plan_.launches[static_cast<std::size_t>(gpu_)];
  const auto& first  = plan_.first_use[static_cast<std::size_t>(gpu_)];
  if (points.empty())
    return;
  bool f32 = false, f16 = false, bf16 = false;
  for (std::size_t i = 0; i < points.size(); ++i) {
    PreparedLaunch& launch = launches_.emplace_back();
    try {
      launch.op = std::make_unique<ComputeOp>(points[i]);
    } catch (const Error& e) {
      throw ExecutionError(launch_text(w_, first[i].first, first[i].second) + ": " + e.what());
    }
    if (points[i].op != BenchOp::pointwise) {
      const FillType type = launch.op->fill_type();
      f32 |= type == FillType::f32;
      f16 |= type == FillType::f16;
      bf16 |= type == FillType::bf16;
    }
  }
  // Each device's memory as the memory model holds it (ExecutionPlan::memory): weights, gradients, optimizer state
  // and activations, each launch's operands placed in them, so that consecutive launches touch different memory.
  // Launches of several element types read the same regions: fp16 bit patterns of values in [-1, 1) read as finite,
  // modest numbers in every type (fp32 words, bf16 halves), where fp32's low halves read as bf16 need not.
  const FillType fill = (f32 + f16 + bf16 > 1) ? FillType::f16
                        : bf16                 ? FillType::bf16
                        : f16                  ? FillType::f16
                                               : FillType::f32;
  for (const auto& d : devices_) {
    const DeviceMemoryPlan& m = plan_.memory[static_cast<std::size_t>(d->device)];
    for (std::size_t r = 0; r < region_count; ++r) {
      const std::string what =
          std::string("the ") + region_name(static_cast<Region>(r)) + " of device " + std::to_string(d->device);
      d->regions[r] = DeviceBuffer(m.region_bytes[r], cuda_, what);
      check_cuda(gpu::launch_fill(d->regions[r].get(), d->regions[r].bytes() / fill_element_bytes(fill), fill,
                                        static_cast<unsigned>(r) + 1, d->compute),
                 where() + ": filling " + what);
    }
  }
  task_buffers_.resize(w_.tasks.size());
  for (std::size_t task = 0; task < w_.tasks.size(); ++task) {
    const WorkTask& t = w_.tasks[task];
    if (t.kind != WorkTask::Kind::compute || !is_local(t.device))
      continue;
    SimDevice& d = local(t.device);
    for (const auto& places : plan_.placement[task]) {
      OpBuffers& b = task_buffers_[task].emplace_back();
      for (std::size_t o = 0; o < 3; ++o)
        b.operand[o] =
            places[o].bytes == 0
                ? nullptr
                : static_cast<char*>(d.regions[static_cast<std::size_t>(places[o].region)].get()) + places[o].offset;
    }
  }

  // Each convolution's algorithm, timed once on the first device that launches it, on that launch's operands; the
  // workspace grows to the largest algorithm's, and each device then gets one as large as its own convolutions need.
  // The GPU is kept busy for a while first: an idle GPU starts at a fraction of its top clock, and a search timed
  // while the clock rises favours whichever algorithms were timed last.
  if (std::any_of(points.begin(), points.end(), [](const calibration::BenchPoint& p) { return p.op == BenchOp::conv2d; }))
    hold_busy(*devices_.front(), fill, 0.25);
  DeviceBuffer trial_workspace;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    if (points[i].op != BenchOp::conv2d)
      continue;
    const auto [task, launch] = first[i];
    SimDevice& d              = local(w_.tasks[static_cast<std::size_t>(task)].device);
    try {
      launches_[i].op->choose_algorithm(d.where,
                                        task_buffers_[static_cast<std::size_t>(task)][static_cast<std::size_t>(launch)],
                                        [&](std::size_t bytes) -> void* {
                                          if (trial_workspace.bytes() < bytes) {
                                            trial_workspace = DeviceBuffer(); // free the smaller one first
                                            trial_workspace = DeviceBuffer(bytes, cuda_, "the cuDNN workspace");
                                          }
                                          return trial_workspace.get();
                                        });
    } catch (const Error& e) {
      throw ExecutionError(launch_text(w_, task, launch) + ": " + e.what());
    }
  }
  for (std::size_t task = 0; task < w_.tasks.size(); ++task) {
    const WorkTask& t = w_.tasks[task];
    if (t.kind == WorkTask::Kind::compute && is_local(t.device))
      for (int i : plan_.launch_index[task]) {
        std::size_t& need = local(t.device).conv_workspace;
        need              = std::max(need, launches_[static_cast<std::size_t>(i)].op->workspace_bytes());
      }
  }
  for (std::size_t k = 0; k < devices_.size(); ++k) {
    SimDevice& d = *devices_[k];
    if (d.conv_workspace == 0)
      continue;
    if (k == 0 && trial_workspace.bytes() >= d.conv_workspace)
      d.cudnn_workspace = std::move(trial_workspace); // one device per GPU, the usual case: no second allocation
    else
      d.cudnn_workspace =
          DeviceBuffer(d.conv_workspace, cuda_, "the cuDNN workspace of device " + std::to_string(d.device));
  }
  for (std::size_t task = 0; task < w_.tasks.size(); ++task)
    for (OpBuffers& b : task_buffers_[task]) {
      const SimDevice& d = local(w_.tasks[task].device);
      b.workspace        = d.cudnn_workspace.get();
      b.workspace_bytes  = d.cudnn_workspace.bytes();
    }
}

void GpuWorker::read_memory()
{
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) // this thread's GPU is current
    peak_memory_bytes_ = std::max(peak_memory_bytes_, static_cast<double>(total - free));
  else
    cudaGetLastError();
}

void GpuWorker::setup_communication()
{
  const std::size_t bytes = plan_.comm_bytes[static_cast<std::size_t>(gpu_)];
  if (bytes == 0)
    return;
  const std::string gpu_name = where();
  send_                      = DeviceBuffer(bytes, cuda_, "the send buffer");
  recv_                      = DeviceBuffer(bytes, cuda_, "the receive buffer");
  const FillType fill        = gpu::fill_type(w_.dtype);
  check_cuda(gpu::launch_fill(send_.get(), bytes / fill_element_bytes(fill), fill, 3, devices_.front()->compute),
             gpu_name + ": filling the send buffer");
  comm_.send[static_cast<std::size_t>(gpu_)] = send_.get();
  comm_.recv[static_cast<std::size_t>(gpu_)] = recv_.get();
}

// ---- one iteration -----------------------------------------------------------------------------------------------

cudaStream_t GpuWorker::stream_of(const PlannedSignal& s)
{
  switch (s.lane) {
  case Lane::compute:
    return local(s.device).compute;
  case Lane::transfer:
    return local(s.device).transfer;
  case Lane::collective:
    return local(s.device).collective;
  case Lane::nccl:
    return nccl_stream(s.communicator);
  }
  return nullptr;
}

void GpuWorker::wait_for(const std::vector<int>& signals, cudaStream_t stream, int iteration, int task)
{
  for (int s : signals) {
    const PlannedSignal& p = plan_.signals[static_cast<std::size_t>(s)];
    if (p.gpu != gpu_)
      co_.await(s, iteration); // recorded by another thread: only once it has, is there something to wait on
    else if (stream_of(p) == stream)
      continue; // earlier work on the same stream: already in order
    check(cudaStreamWaitEvent(stream, events_[static_cast<std::size_t>(s)], 0), task, "cudaStreamWaitEvent");
  }
}

void GpuWorker::record(int signal, cudaStream_t stream, int iteration, int task)
{
  check(cudaEventRecord(events_[static_cast<std::size_t>(signal)], stream), task, "cudaEventRecord");
  if (plan_.signals[static_cast<std::size_t>(signal)].cross_thread)
    co_.publish(signal, iteration);
}

void GpuWorker::issue(int iteration, int traced_iteration)
{
  for (std::size_t i = 0; i < w_.tasks.size(); ++i) {
    const WorkTask& t = w_.tasks[i];
    const int task    = static_cast<int>(i);
    switch (t.kind) {
    case WorkTask::Kind::compute:
      if (is_local(t.device)) {
        last_task_ = task;
        issue_compute(task, iteration, traced_iteration);
      }
      break;
    case WorkTask::Kind::transfer:
      if (is_local(t.src) || (plan_.transfers[i].nccl && is_local(t.dst))) {
        last_task_ = task;
        issue_transfer(task, iteration);
      }
      break;
    case WorkTask::Kind::collective:
      if (std::any_of(t.group.begin(), t.group.end(), [&](int d) { return is_local(d); })) {
        last_task_ = task;
        issue_collective(task, iteration);
      }
      break;
    }
  }
}

void GpuWorker::issue_compute(int task, int iteration, int traced_iteration)
{
  const auto i      = static_cast<std::size_t>(task);
  const WorkTask& t = w_.tasks[i];
  SimDevice& d      = local(t.device);
  wait_for(plan_.waits[i][0], d.compute, iteration, task);
  for (std::size_t l = 0; l < t.launches.size(); ++l) {
    const PreparedLaunch& launch = launches_[static_cast<std::size_t>(plan_.launch_index[i][l])];
    const OpBuffers& buffers     = task_buffers_[i][l];
    try {
      if (trace_.tracer && traced_iteration >= 0) {
        const gpu::ExternalIdScope scope(*trace_.tracer, trace_id(task, static_cast<int>(l), traced_iteration));
        launch.op->launch(d.where, buffers);
      } else {
        launch.op->launch(d.where, buffers);
      }
    } catch (const Error& e) {
      throw ExecutionError(launch_text(w_, task, static_cast<int>(l)) + ": " + e.what());
    }
  }
  record(plan_.task_signal[i], d.compute, iteration, task);
}

void GpuWorker::check(cudaError_t status, int task, const char* call) const
{
  // The message is only built on failure: this runs for every task of every timed iteration.
  if (status != cudaSuccess)
    throw ExecutionError(describe_task(w_, task) + ": " + call + ": " + gpu::cuda_error_text(status));
}

void GpuWorker::copy(void* dst, int dst_gpu, const void* src, int src_gpu, std::size_t bytes, cudaStream_t stream,
                     int task) const
{
  if (src_gpu == dst_gpu)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), task, "cudaMemcpyAsync");
  else
    check(cudaMemcpyPeerAsync(dst, plan_.cuda_device(dst_gpu), src, plan_.cuda_device(src_gpu), bytes, stream), task,
          "cudaMemcpyPeerAsync");
}

void GpuWorker::issue_transfer(int task, int iteration)
{
  const auto i      = static_cast<std::size_t>(task);
  const WorkTask& t = w_.tasks[i];
  if (plan_.transfers[i].nccl) {
    issue_rank_transfer(task, iteration);
    return;
  }
  SimDevice& src = local(t.src);
  wait_for(plan_.waits[i][0], src.transfer, iteration, task);
  if (const std::size_t bytes = whole_bytes(t.bytes); bytes > 0) {
    // Pushed from the source's stream, as a pipeline stage sends its activations.
    const int dst_gpu = plan_.gpu_of[static_cast<std::size_t>(t.dst)];
    copy(comm_.recv[static_cast<std::size_t>(dst_gpu)], dst_gpu, send_.get(), gpu_, bytes, src.transfer, task);
  }
  record(plan_.task_signal[i], src.transfer, iteration, task);
}

// Between ranks: sent from src's GPU and received on dst's, over the world communicator, whose rank of a device is
// the device. On the GPU's NCCL stream, as its collectives: every GPU meets its NCCL work in workload order.
void GpuWorker::issue_rank_transfer(int task, int iteration)
{
  const auto i            = static_cast<std::size_t>(task);
  const WorkTask& t       = w_.tasks[i];
  const std::size_t bytes = whole_bytes(t.bytes);
  const bool sending      = is_local(t.src);
  const int device        = sending ? t.src : t.dst;
  const ncclComm_t comm   = comms_.get(plan_.world_communicator, static_cast<std::size_t>(device));
  cudaStream_t stream     = nccl_stream(plan_.world_communicator);
  if (sending)
    wait_for(plan_.waits[i][0], stream, iteration, task);
  if (bytes > 0) {
    const ncclResult_t status = sending ? ncclSend(send_.get(), bytes, ncclInt8, t.dst, comm, stream)
                                        : ncclRecv(recv_.get(), bytes, ncclInt8, t.src, comm, stream);
    if (status != ncclSuccess)
      throw ExecutionError(describe_task(w_, task) + ", on device " + std::to_string(device) + ": " +
                           (sending ? "ncclSend" : "ncclRecv") + ": " + nccl_text(status, comm));
  }
  record(sending ? plan_.task_signal[i] : plan_.transfers[i].received, stream, iteration, task);
}

void GpuWorker::issue_collective(int task, int iteration)
{
  const auto i               = static_cast<std::size_t>(task);
  const WorkTask& t          = w_.tasks[i];
  const PlannedCollective& c = plan_.collectives[i];
  const std::size_t n        = t.group.size();
  if (c.nccl) {
    cudaStream_t stream = nccl_stream(c.communicator);
    for (std::size_t k = 0; k < n; ++k) {
      if (!is_local(t.group[k]))
        continue;
      wait_for(plan_.waits[i][k], stream, iteration, task);
      if (c.count > 0) {
        const ncclComm_t comm     = comms_.get(c.communicator, k);
        const ncclDataType_t type = gpu::nccl_type(dtype_table.parse(w_.dtype).value_or(Dtype::fp32));
        ncclResult_t status       = ncclSuccess;
        const char* call          = "ncclAllReduce";
        if (t.collective == "all_reduce") {
          status = ncclAllReduce(send_.get(), recv_.get(), c.count, type, ncclSum, comm, stream);
        } else if (t.collective == "all_gather") {
          call   = "ncclAllGather";
          status = ncclAllGather(send_.get(), recv_.get(), c.count / n, type, comm, stream);
        } else {
          call   = "ncclReduceScatter";
          status = ncclReduceScatter(send_.get(), recv_.get(), c.count / n, type, ncclSum, comm, stream);
        }
        if (status != ncclSuccess)
          throw ExecutionError(describe_task(w_, task) + ", on device " + std::to_string(t.group[k]) + ": " + call +
                               ": " + nccl_text(status, comm));
      }
      record(c.done[k], stream, iteration, task);
    }
    return;
  }
  // Emulated: every local member marks that it reached the collective, then, once all members have, pulls its share
  // of the ring's traffic from its predecessor.
  for (std::size_t k = 0; k < n; ++k)
    if (is_local(t.group[k])) {
      SimDevice& d = local(t.group[k]);
      wait_for(plan_.waits[i][k], d.collective, iteration, task);
      record(c.ready[k], d.collective, iteration, task);
    }
  for (std::size_t k = 0; k < n; ++k) {
    if (!is_local(t.group[k]))
      continue;
    SimDevice& d = local(t.group[k]);
    wait_for(c.ready, d.collective, iteration, task);
    if (c.copy_bytes > 0) {
      const int pred_gpu = plan_.gpu_of[static_cast<std::size_t>(t.group[(k + n - 1) % n])];
      const void* src    = comm_.send[static_cast<std::size_t>(pred_gpu)];
      const int copies   = t.collective == "all_reduce" ? 2 : 1; // reduce-scatter, then all-gather
      for (int phase = 0; phase < copies; ++phase) // pulled from the predecessor, on this member's own stream
        copy(recv_.get(), gpu_, src, pred_gpu, c.copy_bytes, d.collective, task);
    }
    record(c.done[k], d.collective, iteration, task);
  }
}

void GpuWorker::synchronize(int iteration, int warmup, int timed)
{
  const std::string when = iteration < warmup ? "warm-up iteration " + std::to_string(iteration + 1)
                           : iteration < warmup + timed
                               ? "timed iteration " + std::to_string(iteration - warmup + 1)
                               : "traced iteration " + std::to_string(iteration - warmup - timed + 1);
  // Polled rather than blocked on: a thread stuck in a stream whose NCCL peer failed would never see the failure.
  auto drain = [&](cudaStream_t stream) {
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaSuccess)
        return;
      if (status != cudaErrorNotReady)
        throw ExecutionError(
            where() + ", " + when + ": the GPU reported an error running its work" +
            (last_task_ >= 0 ? " (the last task it was given: " + describe_task(w_, last_task_) + ")" : std::string()) +
            ": " + gpu::cuda_error_text(status));
      if (co_.failed())
        throw Aborted{};
      std::this_thread::yield();
    }
  };
  for (const auto& d : devices_)
    for (cudaStream_t s : {d->compute, d->transfer, d->collective})
      drain(s);
  for (const auto& [communicator, stream] : nccl_streams_)
    drain(stream);
}

// One iteration's work, issued as for `iteration` but captured from the compute stream into a graph instead of run.
// The plan has one simulated device on this GPU and nothing but compute tasks (run_on_gpus checks), so every launch
// and event record lands on that stream.
void GpuWorker::capture(int iteration)
{
  const cudaStream_t stream = devices_.front()->compute;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), where() + ": cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    issue(iteration, -1);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr)
      cudaGraphDestroy(graph);
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph), where() + ": capturing the step as a CUDA graph");
  const cudaError_t status = cudaGraphInstantiate(&graph_, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(status, where() + ": cudaGraphInstantiate");
  // The first launch of an instantiated graph also uploads it to the GPU: done here, with one untimed replay, so
  // that the first timed iteration is a replay like the others.
  check_cuda(cudaGraphUpload(graph_, stream), where() + ": cudaGraphUpload");
  check_cuda(cudaGraphLaunch(graph_, stream), where() + ": an untimed replay of the captured step");
  check_cuda(cudaStreamSynchronize(stream), where() + ": an untimed replay of the captured step");
}

// ---- around the run ----------------------------------------------------------------------------------------------

// "NVIDIA H100 80GB HBM3 x2 (driver 13.0)": the GPUs used, grouped by name; "NVIDIA H100 80GB HBM3 x8 per rank x
// 2 ranks (driver 13.0)" across machines, from this rank's GPUs.
std::string describe_gpus(const ExecutionPlan& plan)
{
  std::vector<std::pair<std::string, int>> names;
  for (int g = 0; g < plan.gpus_per_rank; ++g) {
    cudaDeviceProp prop{};
    const std::string name = cudaGetDeviceProperties(&prop, g) == cudaSuccess ? prop.name : "unknown GPU";
    if (!names.empty() && names.back().first == name)
      ++names.back().second;
    else
      names.emplace_back(name, 1);
  }
  std::string out;
  for (const auto& [name, count] : names)
    out += (out.empty() ? "" : " + ") + name + " x" + std::to_string(count);
  if (plan.ranks > 1)
    out += " per rank x " + std::to_string(plan.ranks) + " ranks";
  if (const std::string driver = gpu::driver_version(); !driver.empty())
    out += " (driver " + driver + ")";
  return out;
}

// Peer access for the GPU pairs of this rank that copy to each other, so that copies go over NVLink or PCIe
// directly. In CUDA's numbers: the same as the plan's in one process.
void enable_peer_access(const ExecutionPlan& plan, std::vector<std::string>& notes)
{
  for (const auto& [plan_a, plan_b] : plan.peer_pairs) {
    if (!plan.is_local(plan_a))
      continue; // another rank's (both GPUs of a pair are on one rank)
    const int a = plan.cuda_device(plan_a), b = plan.cuda_device(plan_b);
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      int can = 0;
      check_cuda(cudaDeviceCanAccessPeer(&can, from, to),
                 "cudaDeviceCanAccessPeer(" + std::to_string(from) + ", " + std::to_string(to) + ")");
      if (can == 0) {
        if (from == a)
          notes.push_back("GPUs " + std::to_string(a) + " and " + std::to_string(b) +
                          " have no peer access: copies between them are staged through the host");
        break;
      }
      check_cuda(cudaSetDevice(from), "cudaSetDevice(" + std::to_string(from) + ")");
      const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError(); // not an error here, but the runtime keeps it as the last one
      else
        check_cuda(status, "enabling peer access from GPU " + std::to_string(from) + " to GPU " + std::to_string(to));
    }
  }
}

// One record per launch of a timed iteration: its kernels' span, as the collector times a microbenchmark run.
void add_kernel_records(const Workload& w, const gpu::CuptiTracer& tracer,
                        const std::vector<gpu::GpuActivity>& activities, traces::TraceSet& out)
{
  std::map<std::uint64_t, std::vector<const gpu::GpuActivity*>> runs;
  for (const gpu::GpuActivity& a : activities)
    if (a.kind == gpu::GpuActivity::Kind::kernel && a.external_id != 0)
      runs[a.external_id].push_back(&a);
  // A launch runs the same kernels in every traced iteration: one that lost records is left out.
  std::map<std::uint64_t, std::vector<std::uint64_t>> by_launch; // (task, launch) -> ids of its iterations
  for (const auto& [id, run] : runs)
    by_launch[id >> id_field_bits].push_back(id);
  for (const auto& [launch_key, ids] : by_launch) {
    std::vector<std::size_t> counts(traced_iterations, 0);
    for (std::uint64_t id : ids)
      if ((id & (id_field_limit - 1)) < static_cast<std::uint64_t>(traced_iterations))
        counts[id & (id_field_limit - 1)] = runs[id].size();
    const calibration::RunCheck check = calibration::check_runs(counts);
    for (std::uint64_t id : ids)
      if ((id & (id_field_limit - 1)) >= static_cast<std::uint64_t>(traced_iterations) ||
          !check.complete[id & (id_field_limit - 1)])
        runs.erase(id);
  }
  for (auto& [id, run] : runs) {
    const std::uint64_t task   = (id >> (2 * id_field_bits)) - 1;
    const std::uint64_t launch = (id >> id_field_bits) & (id_field_limit - 1);
    if (task >= w.tasks.size() || launch >= w.tasks[task].launches.size())
      continue; // not one of ours
    const BenchPoint& p = w.tasks[task].launches[launch];
    std::stable_sort(run.begin(), run.end(), [](const auto* x, const auto* y) { return x->start_ns < y->start_ns; });
    const gpu::RunSpan span = gpu::run_span(run);  // every activity here is a kernel
    traces::KernelRecord k;
    k.name       = span.names;
    k.start_s    = tracer.host_seconds(span.first_ns);
    k.duration_s = static_cast<double>(span.last_ns - span.first_ns) * 1e-9;
    k.busy_s     = span.busy_s;
    k.kernels    = span.activities;
    k.device     = run.front()->device;
    k.stream     = run.front()->stream;
    k.grid       = span.longest_kernel->grid;
    k.block      = span.longest_kernel->block;
    k.op         = calibration::bench_op_name(p.op);
    k.flop       = p.flop();
    k.bytes      = p.traffic_bytes();
    k.dtype      = p.dtype;
    k.point      = static_cast<int>(task) + 1;
    k.shape      = p.shape_key();
    out.kernels.push_back(std::move(k));
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const traces::KernelRecord& x, const traces::KernelRecord& y) { return x.start_s < y.start_s; });
}

// The traced replays of a CUDA graph (--cuda-graph --trace): one record per kernel, in the order the GPU ran them.
// A graph's kernels carry no launch's id, so no record names its launch; the eager iteration traced before them
// says how many kernels each launch ran, in the same order. The trace times the step's kernels and the gaps
// between them as the timed replays ran them (docs/crosscheck-gpu.md).
void graph_kernel_records(const gpu::CuptiTracer& tracer, const std::vector<gpu::GpuActivity>& activities,
                          traces::TraceSet& out)
{
  for (const gpu::GpuActivity& a : activities) {
    if (a.kind != gpu::GpuActivity::Kind::kernel || a.external_id != 0)
      continue;
    traces::KernelRecord k;
    k.name       = a.name;
    k.start_s    = tracer.host_seconds(a.start_ns);
    k.duration_s = static_cast<double>(a.end_ns - a.start_ns) * 1e-9;
    k.device     = a.device;
    k.stream     = a.stream;
    k.grid       = a.grid;
    k.block      = a.block;
    out.kernels.push_back(std::move(k));
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const traces::KernelRecord& x, const traces::KernelRecord& y) { return x.start_s < y.start_s; });
}

void describe_trace(const Workload& w, const ExecutionPlan& plan, const CudaRunOptions& options,
                    const gpu::CuptiTracer& tracer, const std::string& device, traces::TraceSet& out)
{
  // Several ranks: each traces its own GPUs, as CUDA numbers them on its machine, into a file of its own.
  auto& p     = out.provenance;
  p["source"] = "ddlsim-run-cuda";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    p["device"]   = prop.name;
    p["sm_count"] = std::to_string(prop.multiProcessorCount);
  }
  p["gpus"] = std::to_string(plan.gpus_per_rank);
  if (plan.ranks > 1) {
    p["rank"]      = std::to_string(plan.rank);
    p["ranks"]     = std::to_string(plan.ranks);
    p["first_gpu"] = std::to_string(plan.first_local_gpu()) + " (device " + std::to_string(plan.first_local_gpu()) +
                     " of the workload is this rank's GPU 0)";
  }
  p["devices"]           = device;
  p["workload"]          = w.label;
  p["simulated_devices"] = std::to_string(w.devices);
  gpu::add_software_provenance(p);
  gpu::add_date_and_host(p);
  p["command"]    = options.command;
  p["timing"]     = "cupti";
  p["iterations"] = (options.cuda_graph ? "1 eager and " + std::to_string(traced_iterations) + " graph replays"
                                        : std::to_string(traced_iterations)) +
                    " traced after " + std::to_string(options.iterations) + " timed and " +
                    std::to_string(options.warmup) + " warm-up (CUPTI off while timing)";
  p["point"] = options.cuda_graph
                  ? "workload task index + 1: one record per launch of one eager iteration; then none: two replays "
                    "of the captured CUDA graph, one record per kernel in the order it ran (a graph's kernels carry "
                    "no launch's id)"
                  : "workload task index + 1; one record per launch and traced iteration";
  p["start_s"]         = "host steady_clock seconds since ddlsim-run-cuda started";
  p["dropped_records"] = std::to_string(tracer.dropped_records());
}

} // namespace

CudaRunResult run_on_gpus(const Workload& w, const CudaRunOptions& options, const CudaRunHooks& hooks,
                          ProcessGroup* ranks)
{
  auto warn = [&](const std::string& message) {
    if (hooks.on_warning_cb)
      hooks.on_warning_cb(message);
  };
  if (options.warmup < 0 || options.iterations < 1 || static_cast<std::uint64_t>(options.iterations) >= id_field_limit)
    throw ExecutionError("iterations must lie in [1, " + std::to_string(id_field_limit - 1) +
                         "] and warm-up iterations must not be negative");
  const Clock::time_point origin = Clock::now();
  const gpu::VisibleGpus visible = gpu::visible_gpus();
  if (visible.count < 1)
    throw ExecutionError(visible.why_none());
  if (ranks != nullptr && ranks->size() > 1) {
    // Every rank must plan alike, and a rank that throws here has not yet made anything the others wait for.
    const std::int64_t fewest = ranks->min_over_ranks(visible.count), most = ranks->max_over_ranks(visible.count);
    if (fewest != most)
      throw ExecutionError("the ranks see from " + std::to_string(fewest) + " to " + std::to_string(most) +
                           " GPUs: every rank must see as many");
  }
  const ExecutionPlan plan = plan_execution(w, {.visible_gpus = visible.count,
                                                .map_devices  = options.map_devices,
                                                .ranks        = ranks != nullptr ? ranks->size() : 1,
                                                .rank         = ranks != nullptr ? ranks->rank() : 0});

  if (options.cuda_graph)
    if (const std::string why = cuda_graph_refusal(w, plan, options.warmup); !why.empty())
      throw ExecutionError(why);

  CudaRunResult result;
  std::vector<std::string>& notes = result.execution.notes;
  if (options.cuda_graph)
    notes.push_back("timed iterations replay one CUDA graph captured after the warm-up (no host cost per launch)");
  if (plan.ranks > 1) {
    notes.push_back(std::to_string(plan.ranks) + " ranks (MPI) of " + std::to_string(plan.gpus_per_rank) +
                    " GPU(s) each: an iteration's time is its slowest rank's, from the barrier that starts it to that "
                    "rank's last GPU finishing");
    if (plan.rank_transfers > 0)
      notes.push_back(std::to_string(plan.rank_transfers) +
                      " transfer(s) between ranks with ncclSend/ncclRecv, in workload order with the collectives");
    if (plan.unenforced_waits > 0)
      notes.push_back(std::to_string(plan.unenforced_waits) +
                      " dependency(ies) on another rank's work that no transfer or collective carries were not "
                      "enforced");
  }
  if (plan.mapped)
    notes.push_back(std::to_string(w.devices) + " devices mapped onto " + std::to_string(plan.gpus) +
                    (plan.gpus == 1 ? " GPU" : " GPUs"));
  if (plan.emulated_collectives > 0)
    notes.push_back(std::to_string(plan.emulated_collectives) +
                    " collective(s) over devices that share a GPU emulated with device-to-device copies (NCCL holds "
                    "one rank per GPU): 2(n-1)/n x bytes per member for all_reduce, (n-1)/n x bytes otherwise");

  // Declared first, so that its tracer is destroyed last: CUPTI sees everything the traced iterations do. The
  // tracer itself is made only after the timed iterations (GpuWorker::run), so that none of CUPTI's cost is in them.
  TraceSlot trace;
  trace.origin = origin;
  trace.warn   = warn;
  if (options.trace) {
    const bool fits = w.tasks.size() + 1 < id_task_limit &&
                      std::all_of(w.tasks.begin(), w.tasks.end(),
                                  [](const WorkTask& t) { return t.launches.size() < id_field_limit; });
    if (!fits)
      warn("the workload is too large to tie CUPTI records to its launches; running without a trace");
    trace.wanted = fits;
  }
  {
    std::size_t allocated = 0;
    double simulated      = 0;
    std::string grown;
    for (int d = 0; d < w.devices; ++d)
      if (plan.is_local(plan.gpu_of[static_cast<std::size_t>(d)])) {
        const DeviceMemoryPlan& m = plan.memory[static_cast<std::size_t>(d)];
        allocated                 = std::max(allocated, m.total());
        simulated                 = std::max(simulated, m.simulated_bytes);
        for (Region r : m.grown)
          grown += (grown.empty() ? "" : ", ") + ("device " + std::to_string(d) + " " + region_name(r));
      }
    char line[256];
    if (!plan.memory.empty() && plan.memory.front().from_model)
      std::snprintf(line, sizeof line,
                    "memory as the memory model holds it: up to %.3g GiB per device of weights, gradients, optimizer "
                    "state and activations (the model's peak with workspace and reserve: %.3g GiB)",
                    static_cast<double>(allocated) / (1 << 30), simulated / (1 << 30));
    else
      std::snprintf(line, sizeof line,
                    "the workload gives no memory model: up to %.3g GiB per device, each region as large as its "
                    "largest operand",
                    static_cast<double>(allocated) / (1 << 30));
    notes.push_back(line);
    if (!grown.empty())
      notes.push_back("regions grown to their largest operand beyond the memory model: " + grown);
  }

  std::function<void()> barrier;
  if (plan.ranks > 1)
    barrier = [ranks] { ranks->barrier(); };
  Coordinator coordinator(plan.gpus_per_rank, plan.signals.size(), std::move(barrier), hooks.on_failure_cb);
  std::vector<cudaEvent_t> events(plan.signals.size(), nullptr);
  CommBuffers comm{std::vector<void*>(static_cast<std::size_t>(plan.gpus), nullptr),
                   std::vector<void*>(static_cast<std::size_t>(plan.gpus), nullptr)};
  // The workers are declared before the communicators and so freed after them: aborting NCCL after a failure stops
  // kernels still waiting for a peer, which freeing their memory would otherwise wait for forever.
  std::vector<std::unique_ptr<GpuWorker>> workers;
  enable_peer_access(plan, notes);
  Communicators comms(w, plan, plan.ranks > 1 ? ranks : nullptr);
  for (int g = plan.first_local_gpu(); g < plan.first_local_gpu() + plan.gpus_per_rank; ++g)
    workers.push_back(std::make_unique<GpuWorker>(g, w, plan, coordinator, comms, events, comm, trace));

  std::vector<std::thread> threads;
  try {
    for (std::size_t k = 0; k < workers.size(); ++k)
      threads.emplace_back([&, k] { workers[k]->run(options.warmup, options.iterations, options.cuda_graph); });
  } catch (const std::exception& e) {
    coordinator.fail(std::string("cannot start a host thread per GPU: ") + e.what()); // those running stop
  }
  for (std::thread& t : threads)
    t.join();
  if (coordinator.failed()) {
    comms.abort_on_destroy();
    throw ExecutionError(coordinator.error());
  }

  result.execution.device       = describe_gpus(plan);
  result.execution.iterations_s = workers.front()->times_s();
  double peak                   = 0;
  for (const auto& worker : workers)
    peak = std::max(peak, worker->peak_memory_bytes());
  if (plan.ranks > 1) {
    result.execution.iterations_s = ranks->max_to_root(result.execution.iterations_s, 0);
    peak                          = static_cast<double>(ranks->max_over_ranks(static_cast<std::int64_t>(peak)));
  }
  result.execution.peak_memory_bytes = peak;
  auto& tracer                       = trace.tracer;
  if (tracer) {
    notes.push_back("CUPTI traced " + std::to_string(traced_iterations) +
                    " more iteration(s) after the timed ones (--trace); their times are not in the result");
    traces::TraceSet set;
    const std::vector<gpu::GpuActivity> activities = tracer->take();
    add_kernel_records(w, *tracer, activities, set);
    if (options.cuda_graph)
      graph_kernel_records(*tracer, activities, set);
    describe_trace(w, plan, options, *tracer, result.execution.device, set);
    if (tracer->dropped_records() > 0 || tracer->incomplete_records() > 0)
      warn("CUPTI lost " + std::to_string(tracer->dropped_records()) + " activity record(s) (" +
           std::to_string(tracer->incomplete_records()) + " more without timestamps): some launches have no record");
    result.trace = std::move(set);
  }
  return result;
}

} // namespace ddlsim::backends::cuda
