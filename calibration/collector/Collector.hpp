// Runs the microbenchmark plan on the visible GPUs and returns one trace record per timed run.
//
// Each point is prepared (gpu/Benchmarks.hpp), warmed up, then run at least RepeatPolicy::min_repeats times and until
// min_seconds have passed, at most max_repeats; runs are queued back to back and waited for in batches. Every run
// starts with a cold L2 (calibration::plan_l2_isolation: rotating operand copies, or a 2 x L2 memset before it,
// which is not timed). Timing of kernels and copies:
//   cupti        CUPTI activity records (gpu/CuptiTracer.hpp): a run lasts from its first kernel or copy's start to
//                its last one's end, on the GPU's own clock; kernel records name the kernels. A run that lost
//                records is left out (calibration::check_runs) and counted in the provenance
//   cuda_events  when CUPTI cannot be used (another profiler attached, no permission): cudaEventRecord before
//                and after each run on the point's stream(s); records name the op's label
// Collectives are timed on the host as nccl-tests times them, whatever the timing: 20 calls back to back, wall time
// per call, CUPTI paused (calibration/Measurement.hpp). Kernel, copy and pointwise points give traces::KernelRecord
// (op, flop, bytes, dtype, point filled in); collectives give traces::CollectiveRecord (group size, nccl-tests'
// size and type name, source "host"). GPU clocks and power state are read through NVML at the start and at the
// end (gpu/GpuClocks.hpp). A point that fails (out of memory, a shape a library rejects) is skipped and named through
// on_warning_cb; the run goes on. Library code: nothing is printed, the hooks report.
//
//   CollectOptions options;
//   options.plan.quick = true;
//   CollectResult result = collect(options, {.on_warning_cb = print_line, .on_group_done_cb = print_group});
//   write_file_atomically(path, "the trace records",
//                         [&](std::ostream& out) { traces::write_jsonl(result.traces, out); });
#pragma once

#include "calibration/Microbench.hpp"
#include "traces/TraceRecords.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::collector {

enum class Timing {
  automatic, ///< CUPTI, else CUDA events
  cupti,     ///< CUPTI or fail (CuptiUnavailable)
  events,    ///< CUDA events
};

struct CollectOptions {
  calibration::PlanOptions plan; ///< quick, only; `gpus` is set from the GPUs used
  int gpus      = 0;             ///< GPUs for the collectives: 0 for every visible one; at most 8
  Timing timing = Timing::automatic;
  calibration::RepeatPolicy repeat;
  std::string command;   ///< the command line, for the provenance
  std::string plan_name; ///< "quick" or "full", for the provenance
  /// Points timed besides the plan (the launches of workloads: exact shapes of a step), those not in it already.
  std::vector<calibration::BenchPoint> extra_points;
  std::string extra_points_source;               ///< what they came from, for the provenance
  std::map<std::string, std::string> provenance; ///< added to the records' provenance (commit, ...)
  /// Host seconds after which no further point is started (0: none): the points measured so far are kept, those
  /// not started are counted (`CollectResult::points_not_run`, the provenance's `points_not_run`).
  double time_limit_s = 0;
  /// Time the extra points (a workload's own launches) before the plan's, so that a time limit cuts the plan.
  bool extra_points_first = false;
  bool extra_points_only  = false; ///< time the extra points alone, not the plan
  /// Cold (the default): every timed run starts with none of its operands in the L2 (calibration::
  /// plan_l2_isolation). Warm: every run reuses one set of operands, which stay in the L2 when they fit, as a
  /// kernel finds the activation the kernel before it has just written; no flush.
  bool warm_l2 = false;
};

/// One op's points done (the plan lists the points of an op together).
struct GroupSummary {
  calibration::BenchOp op = calibration::BenchOp::gemm;
  int points              = 0; ///< points of the op in the plan
  int skipped             = 0; ///< of which failed
  int records             = 0; ///< records of the op (one per timed run)
  double seconds          = 0;
};

struct CollectHooks {
  /// Once the plan is known: its number of points, the GPUs used, the timing ("cupti", "cuda_events (<why>)").
  std::function<void(int points, int gpus, const std::string& timing)> on_start_cb;
  std::function<void(const std::string&)> on_warning_cb;     ///< a skipped point, lost records, the fallback to events
  std::function<void(const GroupSummary&)> on_group_done_cb; ///< after each op's points
};

struct CollectResult {
  traces::TraceSet traces; ///< records and provenance
  int points         = 0;  ///< points in the plan
  int skipped_points = 0;
  int points_not_run = 0;  ///< not started: the time limit had passed
  std::string timing; ///< "cupti" or "cuda_events (<why>)"
};

/// Measures the plan. Needs at least one visible GPU (gpu::visible_gpus). Throws gpu::DeviceFailed
/// (gpu/CudaCheck.hpp) when a GPU becomes unusable, gpu::CuptiUnavailable (gpu/CuptiTracer.hpp) under Timing::cupti
/// when CUPTI cannot trace.
CollectResult collect(const CollectOptions& options, const CollectHooks& hooks);

} // namespace ddlsim::collector
