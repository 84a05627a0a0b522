#include "sim/backends/cuda/GpuWorker.hpp"

#include "common/Error.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/LibraryTypes.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

namespace ddlsim::backends::cuda::detail {
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

constexpr std::size_t cublas_workspace_bytes = 32u << 20; // as the collector's handle: what cuBLAS asks for on Hopper

std::size_t whole_bytes(double bytes)
{
  return bytes > 0 ? static_cast<std::size_t>(std::llround(bytes)) : 0;
}

std::string launch_text(const Workload& w, int task, int launch)
{
  return describe_task(w, task) + ", launch " + std::to_string(launch) + " " +
         w.tasks[static_cast<std::size_t>(task)].launches[static_cast<std::size_t>(launch)].label();
}

} // namespace

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
      check_cuda(
          gpu::launch_fill(largest->get(), largest->bytes() / fill_element_bytes(fill), fill, 100 + k, d.compute),
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
  if (std::any_of(points.begin(), points.end(),
                  [](const calibration::BenchPoint& p) { return p.op == BenchOp::conv2d; }))
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

} // namespace ddlsim::backends::cuda::detail
