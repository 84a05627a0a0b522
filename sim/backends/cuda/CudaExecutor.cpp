#include "sim/backends/cuda/CudaExecutor.hpp"

#include "calibration/Measurement.hpp"
#include "common/Error.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/CuptiTracer.hpp"
#include "gpu/Provenance.hpp"
#include "sim/backends/cuda/Coordination.hpp"
#include "sim/backends/cuda/ExecutionPlan.hpp"
#include "sim/backends/cuda/GpuWorker.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <utility>

namespace ddlsim::backends::cuda {
namespace {

using calibration::BenchPoint;
using detail::Clock;
using detail::CommBuffers;
using detail::Communicators;
using detail::Coordinator;
using detail::GpuWorker;
using detail::id_field_bits;
using detail::id_field_limit;
using detail::id_task_limit;
using detail::traced_iterations;
using detail::TraceSlot;
using gpu::check_cuda;

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
    const gpu::RunSpan span = gpu::run_span(run); // every activity here is a kernel
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
  p["point"]           = options.cuda_graph
                             ? "workload task index + 1: one record per launch of one eager iteration; then none: "
                               "two replays of the captured CUDA graph, one record per kernel in the order it ran (a "
                               "graph's kernels carry no launch's id)"
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
