#include "calibration/collector/Collector.hpp"

#include "calibration/Measurement.hpp"
#include "gpu/Benchmarks.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/CuptiTracer.hpp"
#include "gpu/GpuClocks.hpp"
#include "gpu/Kernels.hpp"
#include "gpu/Provenance.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <optional>

namespace ddlsim::collector {
using namespace ddlsim::gpu; // the op library, tracer and clocks this loop drives
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;
using Clock = std::chrono::steady_clock;

constexpr int max_gpus = 8;

double seconds_between(Clock::time_point from, Clock::time_point to)
{
  return std::chrono::duration<double>(to - from).count();
}

// One timed run, whichever way it was timed.
struct RunTiming {
  double start_s    = 0; // host steady_clock seconds since the collector started
  double duration_s = 0;
  double busy_s     = 0; // its kernels' and copies' own time, gaps left out (CUPTI only; else 0)
  int kernels       = 0; // how many kernels and copies it ran (CUPTI only; else 0)
  std::string name;
  int device = -1;
  int stream = -1;
  std::array<int, 3> grid{0, 0, 0};
  std::array<int, 3> block{0, 0, 0};
};

// A pair of CUDA events per run and GPU, created once and reused by every point.
class EventTimer {
public:
  EventTimer(int gpus, int runs)
  {
    for (int d = 0; d < gpus; ++d) {
      check_device(cudaSetDevice(d), "cudaSetDevice");
      auto& start = start_.emplace_back();
      auto& stop  = stop_.emplace_back();
      for (int r = 0; r < runs; ++r) {
        check_device(cudaEventCreate(&start.emplace_back()), "cudaEventCreate");
        check_device(cudaEventCreate(&stop.emplace_back()), "cudaEventCreate");
      }
    }
    check_device(cudaSetDevice(0), "cudaSetDevice");
  }
  ~EventTimer()
  {
    for (auto* events : {&start_, &stop_})
      for (auto& per_gpu : *events)
        for (cudaEvent_t e : per_gpu)
          cudaEventDestroy(e);
  }
  EventTimer(const EventTimer&)            = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void record_start(int run, int devices, const GpuContext& gpus) { record(start_, run, devices, gpus); }
  void record_stop(int run, int devices, const GpuContext& gpus) { record(stop_, run, devices, gpus); }

  // The run's time on its slowest GPU.
  double duration_s(int run, int devices) const
  {
    double longest = 0;
    for (int d = 0; d < devices; ++d)
      longest = std::max(longest, elapsed_s(start_[index(d)][index(run)], stop_[index(d)][index(run)]));
    return longest;
  }
  // When the run started on GPU 0, after the start of run 0.
  double offset_s(int run) const { return elapsed_s(start_[0][0], start_[0][index(run)]); }

private:
  static std::size_t index(int i) { return static_cast<std::size_t>(i); }
  static void check_device(cudaError_t status, const char* what)
  {
    if (status != cudaSuccess)
      throw DeviceFailed(std::string(what) + " for the CUDA-event timer: " + cuda_error_text(status));
  }
  static double elapsed_s(cudaEvent_t from, cudaEvent_t to)
  {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }
  void record(std::vector<std::vector<cudaEvent_t>>& events, int run, int devices, const GpuContext& gpus)
  {
    for (int d = 0; d < devices; ++d) {
      if (d > 0)
        check_cuda(cudaSetDevice(d), "cudaSetDevice");
      check_cuda(cudaEventRecord(events[index(d)][index(run)], gpus.stream(d)), "cudaEventRecord");
    }
    if (devices > 1)
      check_cuda(cudaSetDevice(0), "cudaSetDevice");
  }

  std::vector<std::vector<cudaEvent_t>> start_, stop_;
};

// A run's record timing from its activities (sorted by start): its span, busy time and names (run_span).
RunTiming span_of(const std::vector<const GpuActivity*>& activities, const CuptiTracer& tracer)
{
  const RunSpan span = run_span(activities);
  RunTiming t;
  t.start_s    = tracer.host_seconds(span.first_ns);
  t.duration_s = static_cast<double>(span.last_ns - span.first_ns) * 1e-9;
  t.busy_s     = span.busy_s;
  t.kernels    = span.activities;
  t.name       = span.names;
  t.device     = activities.front()->device;
  t.stream     = activities.front()->stream;
  if (span.longest_kernel != nullptr) {
    t.grid  = span.longest_kernel->grid;
    t.block = span.longest_kernel->block;
  }
  return t;
}

// Timed runs launched back to back and waited for together, with CUPTI's clock around them.
struct Batch {
  int first_run = 0, end_run = 0;
  std::uint64_t begin_ns = 0, end_ns = 0;
};

// The activities of each timed run of `point`: those whose launch carried the run's external id. A batch none of
// whose runs got any (a library that launches from a thread of its own would leave its launches without the id)
// falls back on order: every benchmark keeps each GPU's work on one stream, so the activities without an id that
// ran inside the batch's time window are, per GPU and in order of start, the same number per run. Counts the
// runs matched that way in `runs_by_order`.
std::vector<std::vector<const GpuActivity*>> activities_by_run(const std::vector<GpuActivity>& activities, int point,
                                                               int runs, const std::vector<Batch>& batches,
                                                               int& runs_by_order)
{
  std::vector<std::vector<const GpuActivity*>> by_run(static_cast<std::size_t>(runs));
  for (const GpuActivity& a : activities)
    if (a.external_id >= external_id(point, 0) && a.external_id < external_id(point, runs))
      by_run[static_cast<std::size_t>(a.external_id - external_id(point, 0))].push_back(&a);
  for (const Batch& batch : batches) {
    const auto first = by_run.begin() + batch.first_run, end = by_run.begin() + batch.end_run;
    if (std::any_of(first, end, [](const auto& run) { return !run.empty(); }))
      continue;
    std::map<int, std::vector<const GpuActivity*>> per_gpu; // ordered: deterministic
    for (const GpuActivity& a : activities)
      if (a.external_id == 0 && a.start_ns >= batch.begin_ns && a.start_ns <= batch.end_ns)
        per_gpu[a.device].push_back(&a);
    const auto n = static_cast<std::size_t>(batch.end_run - batch.first_run);
    bool matched = false;
    for (auto& [device, list] : per_gpu) {
      if (list.size() % n != 0)
        continue; // not the same work per run: leave these runs out rather than guess
      std::stable_sort(list.begin(), list.end(),
                       [](const GpuActivity* x, const GpuActivity* y) { return x->start_ns < y->start_ns; });
      const std::size_t per_run = list.size() / n;
      for (std::size_t i = 0; i < list.size(); ++i)
        by_run[static_cast<std::size_t>(batch.first_run) + i / per_run].push_back(list[i]);
      matched = true;
    }
    if (matched)
      runs_by_order += batch.end_run - batch.first_run;
  }
  return by_run;
}

// The gap a CUDA graph leaves between two dependent kernels (calibration::graph_kernel_gap_s): a graph of
// `kernels` launches of the pointwise kernel on 256 floats, replayed `replays` times with CUPTI paused and timed
// with CUDA events, then replayed twice more with CUPTI on for the kernel's own duration. What a step replayed
// as a graph spends per kernel beyond the kernels' busy time; seconds, or a negative value with `why` set when it
// could not be measured (no CUPTI, or CUDA refused).
double measure_graph_kernel_gap(GpuContext& gpus, CuptiTracer* tracer, std::string& why)
{
  constexpr int kernels = 200, replays = 20;
  if (tracer == nullptr) {
    why = "no CUPTI: the kernel's duration is not known";
    return -1;
  }
  const cudaStream_t stream = gpus.stream(0);
  float* data               = nullptr;
  cudaGraph_t graph         = nullptr;
  cudaGraphExec_t exec      = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto release = [&] {
    if (exec != nullptr)
      cudaGraphExecDestroy(exec);
    if (graph != nullptr)
      cudaGraphDestroy(graph);
    if (start != nullptr)
      cudaEventDestroy(start);
    if (stop != nullptr)
      cudaEventDestroy(stop);
    if (data != nullptr)
      cudaFree(data);
  };
  try {
    check_cuda(cudaMalloc(&data, 2 * 256 * sizeof(float)), "cudaMalloc for the graph's kernels");
    check_cuda(cudaMemsetAsync(data, 0, 2 * 256 * sizeof(float), stream), "cudaMemsetAsync");
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    for (int k = 0; k < kernels; ++k)
      if (const cudaError_t status = launch_axpb(data, data + 256, 256, 1.0f, 0.0f, 1, stream); status != cudaSuccess) {
        cudaStreamEndCapture(stream, &graph);
        check_cuda(status, "launching the graph's kernels");
      }
    check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    check_cuda(cudaGraphUpload(exec, stream), "cudaGraphUpload");
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); // warm-up
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    tracer->take();
    tracer->pause();
    gpus.hold(2e-3); // the replays queue up behind a wait: the events time the GPU, not the host
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < replays; ++r)
      check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    tracer->resume();
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    for (int r = 0; r < 2; ++r)
      check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::vector<double> durations;
    for (const GpuActivity& a : tracer->take())
      if (a.kind == GpuActivity::Kind::kernel && a.name.find("axpb_kernel") != std::string::npos)
        durations.push_back(static_cast<double>(a.end_ns - a.start_ns) * 1e-9);
    release();
    if (durations.empty()) {
      why = "CUPTI recorded none of the graph's kernels";
      return -1;
    }
    return calibration::graph_kernel_gap_s(static_cast<double>(ms) * 1e-3, kernels, replays, std::move(durations));
  } catch (const std::exception& e) {
    release();
    cudaGetLastError();
    why = e.what();
    return -1;
  }
}

int device_attribute(cudaDeviceAttr attribute, int device)
{
  int value = 0;
  return cudaDeviceGetAttribute(&value, attribute, device) == cudaSuccess ? value : 0;
}

// Where the numbers were measured: GPU, clocks, driver and library versions, date, host.
void describe_setup(std::map<std::string, std::string>& p, int gpus)
{
  std::vector<std::string> names;
  for (int d = 0; d < gpus; ++d) {
    cudaDeviceProp prop{};
    names.push_back(cudaGetDeviceProperties(&prop, d) == cudaSuccess ? prop.name : "?");
  }
  p["device"] = names.empty() ? "?" : names.front();
  if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n != names.front(); })) {
    std::string all;
    for (const auto& n : names)
      all += (all.empty() ? "" : "; ") + n;
    p["devices"] = all;
  }
  p["gpus"]                  = std::to_string(gpus);
  p["sm_count"]              = std::to_string(device_attribute(cudaDevAttrMultiProcessorCount, 0));
  p["sm_clock_mhz"]          = std::to_string(device_attribute(cudaDevAttrClockRate, 0) / 1000); // kHz
  p["memory_clock_mhz"]      = std::to_string(device_attribute(cudaDevAttrMemoryClockRate, 0) / 1000);
  p["memory_bus_width_bits"] = std::to_string(device_attribute(cudaDevAttrGlobalMemoryBusWidth, 0));

  add_software_provenance(p);
  if (const std::string cublas = cublas_version(); !cublas.empty())
    p["cublas"] = cublas;
  add_date_and_host(p);
}

// Runs the points and turns their runs into records.
class PlanRunner {
public:
  PlanRunner(const CollectOptions& options, Clock::time_point origin, GpuContext& gpus, CuptiTracer* tracer,
             EventTimer* events, traces::TraceSet& out)
      : options_(options), origin_(origin), gpus_(gpus), tracer_(tracer), events_(events), out_(out)
  {
    unsigned long long id = 0;
    if (cudaStreamGetId(gpus.stream(0), &id) == cudaSuccess)
      stream0_id_ = static_cast<int>(id);
  }

  // Records of one point's timed runs; throws PointFailed.
  int measure(const BenchPoint& p)
  {
    if (p.op == BenchOp::collective)
      return measure_collective(p);
    const calibration::RepeatPolicy& repeat = options_.repeat;
    // Cold L2 for every run: rotating operand sets, or a flush before each run (outside what is timed).
    const calibration::L2Isolation iso =
        options_.warm_l2 ? calibration::L2Isolation{}
                         : calibration::plan_l2_isolation(footprint_bytes(p), gpus_.l2_bytes(), gpus_.free_bytes() / 2);
    iso.flush ? ++flushed_points_ : ++rotated_points_;
    std::unique_ptr<Benchmark> bench = make_benchmark(p, gpus_, iso.buffer_sets);
    const int devices                = bench->devices();
    auto prepare_run                 = [&] {
      if (iso.flush)
        gpus_.flush_l2(iso.flush_bytes);
    };
    for (int i = 0; i < repeat.warmup; ++i) {
      prepare_run();
      bench->launch(i);
    }
    gpus_.synchronize(devices);
    if (tracer_ != nullptr)
      tracer_->take(); // set-up and warm-up: not measured

    const int max_runs = max_runs_of(repeat);
    int target         = std::clamp(repeat.min_repeats, 1, max_runs);
    int done           = 0;
    double spent_s = 0, events_origin_s = 0, hold_s = 0;
    std::vector<Batch> batches;
    // Runs go back to back, as in training, and are waited for once per batch.
    while (done < target) {
      const Clock::time_point batch_start = Clock::now();
      if (done == 0)
        events_origin_s = seconds_between(origin_, batch_start);
      Batch& batch = batches.emplace_back(Batch{.first_run = done, .end_run = target});
      if (tracer_ != nullptr)
        batch.begin_ns = tracer_->timestamp_ns();
      {
        // The batch queues up behind a wait on the GPU (150 us a run, at most 25 ms), so that its runs go back to
        // back on the GPU even where the host takes longer to issue a run than the GPU to execute it (cuDNN's
        // calls): a run's span is then the GPU's time, as in a CUDA graph. The wait's kernel carries an id of no
        // run, so it is in no run's records.
        std::optional<ExternalIdScope> scope;
        if (tracer_ != nullptr)
          scope.emplace(*tracer_, hold_external_id);
        hold_s = std::min(25e-3, 150e-6 * (target - done));
        gpus_.hold(hold_s);
      }
      for (int r = done; r < target; ++r) {
        prepare_run();
        if (tracer_ != nullptr) {
          ExternalIdScope scope(*tracer_, external_id(p.id, r));
          bench->launch(repeat.warmup + r);
        } else {
          events_->record_start(r, devices, gpus_);
          bench->launch(repeat.warmup + r);
          events_->record_stop(r, devices, gpus_);
        }
      }
      gpus_.synchronize(devices);
      if (tracer_ != nullptr)
        batch.end_ns = tracer_->timestamp_ns();
      spent_s += std::max(0.0, seconds_between(batch_start, Clock::now()) - hold_s); // the runs' time, not the wait's
      done = target;
      if (spent_s < repeat.min_seconds && done < max_runs) {
        const double per_run = spent_s / done;
        const double more    = per_run > 0 ? std::ceil((repeat.min_seconds - spent_s) / per_run) : max_runs;
        target               = static_cast<int>(std::min<double>(max_runs, done + std::max(1.0, more)));
      }
    }

    int records = 0;
    if (tracer_ != nullptr) {
      const std::vector<GpuActivity> activities = tracer_->take();
      const auto by_run                         = activities_by_run(activities, p.id, done, batches, runs_by_order_);
      std::vector<std::size_t> counts;
      for (const auto& run : by_run)
        counts.push_back(run.size());
      // A run that lost a record (or got one of another run) is left out: its span would be wrong.
      const calibration::RunCheck check = calibration::check_runs(counts);
      runs_partial_ += check.partial;
      runs_missing_ += check.missing;
      last_left_out_ = check.partial + check.missing;
      for (std::size_t r = 0; r < by_run.size(); ++r)
        if (check.complete[r]) {
          std::vector<const GpuActivity*> run = by_run[r];
          std::stable_sort(run.begin(), run.end(),
                           [](const GpuActivity* a, const GpuActivity* b) { return a->start_ns < b->start_ns; });
          add_record(p, span_of(run, *tracer_));
          ++records;
        }
    } else {
      last_left_out_ = 0;
      for (int r = 0; r < done; ++r) {
        RunTiming t;
        t.start_s    = events_origin_s + events_->offset_s(r);
        t.duration_s = events_->duration_s(r, devices);
        t.name       = p.label();
        t.device     = 0;
        t.stream     = stream0_id_;
        add_record(p, t);
        ++records;
      }
    }
    if (records == 0)
      throw PointFailed("CUPTI recorded no whole run of it (" + std::to_string(last_left_out_) + " runs lost records)");
    return records;
  }

  /// Runs of the last point left out because CUPTI lost some of their records (or recorded none).
  int last_left_out() const { return last_left_out_; }
  int runs_partial() const { return runs_partial_; }
  int runs_missing() const { return runs_missing_; }
  int flushed_points() const { return flushed_points_; }
  int rotated_points() const { return rotated_points_; }

  /// Runs whose activities came without their external id, matched to them by order (see activities_by_run).
  int runs_by_order() const { return runs_by_order_; }

  static int max_runs_of(const calibration::RepeatPolicy& repeat)
  {
    return std::clamp(repeat.max_repeats, 1, 65535); // a run index must fit the low 16 bits of its external id
  }

private:
  // nccl-tests' definition: host wall time of `collective_calls_per_record` calls issued back to back, from before
  // the first to the end of the last on every GPU of the group, divided by the calls; CUPTI paused meanwhile, so
  // that none of its per-call cost is in the time.
  int measure_collective(const BenchPoint& p)
  {
    const calibration::RepeatPolicy& repeat = options_.repeat;
    std::unique_ptr<Benchmark> bench        = make_benchmark(p, gpus_);
    const int devices                       = bench->devices();
    struct Paused {
      CuptiTracer* tracer;
      explicit Paused(CuptiTracer* t) : tracer(t)
      {
        if (tracer != nullptr)
          tracer->pause();
      }
      ~Paused()
      {
        if (tracer != nullptr) {
          try {
            tracer->resume();
          } catch (const PointFailed&) {
          }
        }
      }
    } paused(tracer_);
    const int calls = calibration::collective_calls_per_record;
    for (int c = 0; c < calibration::collective_warmup_calls; ++c)
      bench->launch(c);
    gpus_.synchronize(devices);
    const int max_records = std::clamp(repeat.max_repeats, 1, 1000);
    int records           = 0;
    double spent_s        = 0;
    while (records < max_records && (records < repeat.min_repeats || spent_s < repeat.min_seconds)) {
      const Clock::time_point start = Clock::now();
      for (int c = 0; c < calls; ++c)
        bench->launch(c);
      gpus_.synchronize(devices);
      const Clock::time_point end = Clock::now();
      spent_s += seconds_between(start, end);
      RunTiming t;
      t.start_s    = seconds_between(origin_, start);
      t.duration_s = seconds_between(start, end) / calls;
      t.name       = p.label();
      add_record(p, t);
      ++records;
    }
    if (tracer_ != nullptr)
      tracer_->take(); // nothing was traced; clears what the set-up left
    return records;
  }

  void add_record(const BenchPoint& p, const RunTiming& run)
  {
    if (p.op == BenchOp::collective) {
      traces::CollectiveRecord c;
      c.collective = p.collective;
      c.bytes      = calibration::collective_buffers(p.collective, p.bytes, p.element_bytes(), p.group, 0).bytes;
      c.dtype      = calibration::nccl_type_name(p.dtype);
      c.group_size = p.group;
      c.duration_s = run.duration_s;
      c.source     = "host";
      c.name       = run.name;
      c.point      = p.id;
      out_.collectives.push_back(std::move(c));
      return;
    }
    traces::KernelRecord k;
    k.name       = run.name;
    k.start_s    = run.start_s;
    k.duration_s = run.duration_s;
    k.busy_s     = run.busy_s;
    k.kernels    = run.kernels;
    k.device     = run.device;
    k.stream     = run.stream;
    k.grid       = run.grid;
    k.block      = run.block;
    k.op         = calibration::bench_op_name(p.op);
    k.flop       = p.flop();
    k.bytes      = p.traffic_bytes();
    k.dtype      = p.dtype;
    k.point      = p.id;
    k.shape      = p.shape_key();
    out_.kernels.push_back(std::move(k));
  }

  const CollectOptions& options_;
  Clock::time_point origin_;
  GpuContext& gpus_;
  CuptiTracer* tracer_;
  EventTimer* events_;
  traces::TraceSet& out_;
  int stream0_id_    = -1;
  int runs_by_order_ = 0;
  int runs_partial_ = 0, runs_missing_ = 0, last_left_out_ = 0;
  int flushed_points_ = 0, rotated_points_ = 0;
};

} // namespace

CollectResult collect(const CollectOptions& options, const CollectHooks& hooks)
{
  const Clock::time_point origin = Clock::now();
  auto warn                      = [&](const std::string& message) {
    if (hooks.on_warning_cb)
      hooks.on_warning_cb(message);
  };
  const VisibleGpus visible = visible_gpus();
  if (visible.count <= 0)
    throw DeviceFailed(visible.why_none());
  int gpus = std::min(visible.count, max_gpus);
  if (options.gpus > 0) {
    if (options.gpus > gpus)
      warn("asked for " + std::to_string(options.gpus) + " GPUs, " + std::to_string(gpus) +
           " can be used: the collectives run over " + std::to_string(gpus));
    gpus = std::min(options.gpus, gpus);
  }

  CollectResult result;
  // Declared before the GPU context so that it is destroyed after it: CUPTI traces everything the context does.
  std::unique_ptr<CuptiTracer> tracer;
  if (options.timing == Timing::events) {
    result.timing = "cuda_events (requested)";
  } else {
    try {
      tracer        = std::make_unique<CuptiTracer>(origin);
      result.timing = "cupti";
    } catch (const CuptiUnavailable& e) {
      if (options.timing == Timing::cupti)
        throw;
      result.timing = std::string("cuda_events (CUPTI unavailable: ") + e.what() + ")";
      warn(std::string("CUPTI cannot trace here (") + e.what() + "); timing with CUDA events instead");
    }
  }
  const std::vector<calibration::GpuClockReading> clocks_start = read_gpu_clocks(gpus);
  GpuContext context(gpus);
  std::unique_ptr<EventTimer> events;
  if (tracer == nullptr)
    events = std::make_unique<EventTimer>(gpus, PlanRunner::max_runs_of(options.repeat));

  calibration::PlanOptions plan  = options.plan;
  plan.gpus                      = gpus;
  const calibration::CollectionPoints collection =
      calibration::collection_points(plan, options.extra_points, options.extra_points_first, options.extra_points_only);
  const std::vector<BenchPoint>& points = collection.points;
  result.points                         = static_cast<int>(points.size());

  traces::TraceSet& out = result.traces;
  PlanRunner runner(options, origin, context, tracer.get(), events.get(), out);
  if (hooks.on_start_cb)
    hooks.on_start_cb(result.points, gpus, result.timing);
  std::optional<GroupSummary> group;
  Clock::time_point group_start = Clock::now();
  auto finish_group             = [&] {
    if (!group)
      return;
    group->seconds = seconds_between(group_start, Clock::now());
    if (hooks.on_group_done_cb)
      hooks.on_group_done_cb(*group);
    group.reset();
  };
  std::uint64_t dropped_seen = 0, incomplete_seen = 0;
  bool warned_order = false;
  const Clock::time_point collect_start = Clock::now();
  for (const BenchPoint& p : points) {
    if (options.time_limit_s > 0 && seconds_between(collect_start, Clock::now()) >= options.time_limit_s) {
      result.points_not_run = static_cast<int>(points.size()) - (p.id - 1);
      warn("time limit of " + std::to_string(options.time_limit_s) + " s reached: " +
           std::to_string(result.points_not_run) + " point(s) from " + p.label() + " on were not run");
      break;
    }
    if (group && group->op != p.op)
      finish_group();
    if (!group) {
      group       = GroupSummary{.op = p.op};
      group_start = Clock::now();
    }
    ++group->points;
    try {
      group->records += runner.measure(p);
    } catch (const PointFailed& e) {
      ++group->skipped;
      ++result.skipped_points;
      warn("skipped " + p.label() + ": " + e.what());
      context.recover(p.label()); // throws DeviceFailed when the GPU is gone
      if (tracer != nullptr) {
        try {
          tracer->take(); // whatever the failed point left behind
        } catch (const PointFailed&) {
        }
      }
    }
    if (runner.last_left_out() > 0)
      warn(std::to_string(runner.last_left_out()) + " run(s) of " + p.label() +
           " left out: CUPTI lost some of their kernel or copy records");
    if (runner.runs_by_order() > 0 && !warned_order) {
      warn("CUPTI gave some launches of " + p.label() +
           " no external id: their runs were matched to their kernels by order on each GPU");
      warned_order = true;
    }
    if (tracer != nullptr &&
        (tracer->dropped_records() > dropped_seen || tracer->incomplete_records() > incomplete_seen)) {
      warn("CUPTI lost " + std::to_string(tracer->dropped_records() - dropped_seen) + " activity record(s) (" +
           std::to_string(tracer->incomplete_records() - incomplete_seen) + " more without timestamps) while timing " +
           p.label() + ": runs that lost a kernel or copy record are left out");
      dropped_seen    = tracer->dropped_records();
      incomplete_seen = tracer->incomplete_records();
    }
  }
  finish_group();

  std::string gap_why;
  const double graph_gap_s = measure_graph_kernel_gap(context, tracer.get(), gap_why);
  const std::vector<calibration::GpuClockReading> clocks_end = read_gpu_clocks(gpus); // right after the last point
  auto& prov                                                 = out.provenance;
  prov["source"]                                             = "ddlsim-collect";
  describe_setup(prov, gpus);
  calibration::add_clock_provenance(prov, clocks_start, "start");
  calibration::add_clock_provenance(prov, clocks_end, "end");
  for (const auto& [key, value] : options.provenance)
    prov[key] = value;
  if (collection.added > 0)
    prov["extra_points"] = std::to_string(collection.added) + " launch(es) of " + options.extra_points_source;
  prov["command"]         = options.command;
  prov["plan"]            = options.plan_name;
  prov["timing"]          = result.timing;
  prov["dropped_records"] = std::to_string(tracer != nullptr ? tracer->dropped_records() : 0);
  if (tracer != nullptr && tracer->incomplete_records() > 0)
    prov["incomplete_records"] = std::to_string(tracer->incomplete_records());
  if (tracer != nullptr && tracer->unreadable_buffers() > 0)
    prov["unreadable_buffers"] = std::to_string(tracer->unreadable_buffers());
  prov["runs_left_out"] = std::to_string(runner.runs_partial() + runner.runs_missing()) + " (" +
                          std::to_string(runner.runs_partial()) + " with records lost, " +
                          std::to_string(runner.runs_missing()) + " with none)";
  char l2[256];
  if (options.warm_l2)
    std::snprintf(l2, sizeof l2,
                  "warm L2 (%.0f MB): every run reuses one set of operands, in the L2 when they fit; no flush",
                  context.l2_bytes() / 1e6);
  else
    std::snprintf(l2, sizeof l2,
                  "cold L2 (%.0f MB) before every timed run: %d point(s) rotate operand copies, %d write 2 x L2 first",
                  context.l2_bytes() / 1e6, runner.rotated_points(), runner.flushed_points());
  prov["l2_isolation"]      = l2;
  if (graph_gap_s >= 0) {
    char gap[32];
    std::snprintf(gap, sizeof gap, "%.4g", graph_gap_s);
    prov["graph_kernel_gap_s"] = gap;
    prov["graph_kernel_gap"]   = "time per kernel of a CUDA graph of 200 dependent launches of a 256-float "
                                 "pointwise kernel (CUDA events, CUPTI paused, 20 replays) less the kernel's "
                                 "median duration (CUPTI)";
  } else {
    prov["graph_kernel_gap"] = "not measured: " + gap_why;
  }
  prov["collective_timing"] = "host wall time per call of " + std::to_string(calibration::collective_calls_per_record) +
                              " back-to-back calls after " + std::to_string(calibration::collective_warmup_calls) +
                              " warm-up, as nccl-tests' out-of-place time; CUPTI paused";
  prov["math"] = "fp32 GEMMs in fp32, fp32 convolutions on TF32 (PyTorch's defaults); cuDNN algorithms by a timed "
                 "search (cudnn.benchmark)";
  if (runner.runs_by_order() > 0)
    prov["runs_matched_by_order"] = std::to_string(runner.runs_by_order());
  prov["skipped_points"]             = std::to_string(result.skipped_points);
  if (result.points_not_run > 0)
    prov["points_not_run"] = std::to_string(result.points_not_run) + " (time limit " +
                             std::to_string(options.time_limit_s) + " s)";
  prov["points"]                     = std::to_string(result.points);
  const calibration::RepeatPolicy& r = options.repeat;
  char repeat[128];
  std::snprintf(repeat, sizeof repeat, "%d warm-up, %d to %d timed runs, at least %g s", r.warmup, r.min_repeats,
                r.max_repeats, r.min_seconds);
  prov["repeat"]  = repeat;
  prov["start_s"] = "host steady_clock seconds since the collector started";
  return result;
}

} // namespace ddlsim::collector
