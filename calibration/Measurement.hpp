// How a GPU measurement is taken, as plain rules: the host-side decisions of the CUPTI collector
// (calibration/collector/) and of the CUDA execution backend (sim/backends/cuda/), kept apart from the CUDA calls
// so that unit tests check them without a GPU.
//
//   cold L2        plan_l2_isolation: every timed run of a kernel starts with none of its operands in the GPU's L2
//                  cache, as in a training step, where the kernels in between have swept it. Either the point
//                  rotates through enough copies of its operands that the others evict each one before its next
//                  run, or, when that would take too many copies or too much memory, a write of 2 x L2 bytes
//                  (cudaMemsetAsync, which CUPTI's kernel records do not see and CUDA events exclude) runs
//                  before each run.
//   whole runs     check_runs: a run whose kernel or copy records CUPTI lost (or mixed up) is left out, never
//                  timed from the records that remain, which would make it look short.
//   collectives    host time per call, as nccl-tests reports it: `collective_calls_per_record` calls issued back
//                  to back, host wall time from the first call to the end of the last (streams synchronised),
//                  divided by the calls; CUPTI paused meanwhile. bus_bandwidth() is nccl-tests' busbw.
//   math           gemm_math / conv_math: what PyTorch runs for a dtype by default (torch.backends.cuda.matmul.
//                  allow_tf32 = False, torch.backends.cudnn.allow_tf32 = True): fp32 GEMMs in fp32, fp32
//                  convolutions on TF32 tensor cores.
//   algorithms     choose_fastest: cuDNN convolution algorithms by a timed search, as PyTorch's
//                  torch.backends.cudnn.benchmark = True: the fastest of those that run within the workspace limit.
//   clocks         GpuClockReading and clock_provenance: the SM and memory clocks, performance state, power and
//                  what slows the clocks down, read through NVML at the start and at the end of a measurement,
//                  into the records' provenance. Clocks are recorded, never changed.
// Units: bytes, seconds, MHz, watts, degrees Celsius.
//
//   const L2Isolation iso = plan_l2_isolation(operand_bytes, 50e6, 40e9);   // sets of operands, or a flush
//   const RunCheck check = check_runs({7, 7, 6, 7});                        // run 2 lost a record: left out
//   const int best = choose_fastest(trials, workspace_limit_bytes);         // -1 when none runs
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::calibration {

/// How the timed runs of one point keep their operands out of L2.
struct L2Isolation {
  int buffer_sets = 1;         ///< copies of the operands; run r uses copy r mod buffer_sets
  bool flush = false;          ///< write flush_bytes before each run
  double flush_bytes = 0;      ///< 2 x L2 when flushing
};

/// `footprint_bytes`: the operands one run touches; `l2_bytes`: the GPU's L2 (0: unknown, then nothing is done);
/// `budget_bytes`: device memory the copies may take. Rotation when (buffer_sets - 1) x footprint >= 2 x L2 with
/// at most `max_sets` sets within the budget, else a flush. Throws std::invalid_argument on negative sizes or
/// max_sets < 1.
L2Isolation plan_l2_isolation(double footprint_bytes, double l2_bytes, double budget_bytes, int max_sets = 4);

/// Which timed runs of a point have all their records. Every run of a point launches the same work, so the runs
/// agree on how many kernels and copies they hold: the most common non-zero count (the larger on a tie) is what
/// a whole run holds, and a run with another count lost records (fewer) or was given someone else's (more).
struct RunCheck {
  std::size_t expected = 0;      ///< activities in a whole run
  std::vector<bool> complete;    ///< per run
  int whole = 0;                 ///< runs with `expected` activities
  int partial = 0;               ///< runs with some activities, but not `expected`: left out
  int missing = 0;               ///< runs with none
};
RunCheck check_runs(const std::vector<std::size_t>& activities_per_run);

/// A kernel's or copy's time on the GPU, [start_ns, end_ns) on CUPTI's clock.
struct GpuInterval {
  std::uint64_t start_ns = 0, end_ns = 0;
};
/// The time some of the GPU's work ran: the length of the union of the intervals, so that the gaps between
/// back-to-back kernels are left out and overlapping ones are counted once. A run of several kernels (a cuDNN
/// call's layout transforms around its convolution) is timed by its span, first start to last end, which holds
/// the gaps between its kernels; inside a CUDA graph those gaps are shorter than on a stream under CUPTI
/// (docs/crosscheck-gpu.md), so records carry both (traces::KernelRecord::busy_s). Nanoseconds; end < start
/// counts as empty.
std::uint64_t busy_ns(std::vector<GpuInterval> intervals);

/// The gap a CUDA graph leaves between two dependent kernels, from a graph of `kernels` back-to-back launches of
/// one small kernel replayed for `replay_seconds` in all (CUDA events, CUPTI off) over `replays` replays, and that
/// kernel's own durations (CUPTI): the time per kernel less its median duration, never below 0. Seconds. Throws
/// std::invalid_argument when kernels or replays is below 1, the time is not positive, or no duration is given.
double graph_kernel_gap_s(double replay_seconds, int kernels, int replays, std::vector<double> durations_s);

/// Calls per collective record: nccl-tests' default `-n 20` (its warm-up is `-w 5`).
inline constexpr int collective_calls_per_record = 20;
inline constexpr int collective_warmup_calls = 5;

/// nccl-tests' bus bandwidth of a collective of `bytes` (its "size") over `group` ranks taking `seconds` per call:
/// algbw = bytes / seconds, times 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
/// all_to_all, 1 for broadcast, reduce and send_recv (nccl-tests doc/PERFORMANCE.md). B/s. Throws
/// std::invalid_argument for an unknown collective or a non-positive time or group.
double bus_bandwidth(const std::string& collective, double bytes, double seconds, int group);

/// Values a step's kernels keep as they pass them on. The operands start in [-1, 1) (a fill: variance 1/3), and in
/// a step each launch reads what earlier ones wrote: with alpha = 1 a GEMM or convolution summing `reduction`
/// products multiplies the variance by reduction / 3, so that a dozen layers overflow to inf (and a contraction
/// would shrink values to zero), and tensor cores run faster on such constant bit patterns than on training's
/// data (GPT-2 small's GEMMs by 7% to 13% on an H200, docs/crosscheck-gpu.md). `products_alpha` is the scale
/// that keeps the variance: sqrt(3 / reduction); the pointwise kernel runs y = -x (`pointwise_a`, `pointwise_b`),
/// which keeps every magnitude. Throws std::invalid_argument when reduction is below 1.
float products_alpha(double reduction);
inline constexpr float pointwise_a = -1.0f, pointwise_b = 0.0f;

/// Arithmetic a GEMM or convolution runs for a dtype.
enum class MathMode {
  fp32,       ///< fp32 FMA, no tensor cores
  tf32,       ///< fp32 data, TF32 tensor cores allowed
  tensor_op,  ///< fp16 / bf16 (fp8) data on tensor cores, fp32 accumulation
};
/// "fp32", "tf32", "tensor_op".
const char* math_mode_name(MathMode mode);
/// fp32 -> fp32 (PyTorch's matmul default since 1.12), tf32 -> tf32, fp16 / bf16 / fp8 -> tensor_op.
MathMode gemm_math(const std::string& dtype);
/// fp32 and tf32 -> tf32 (torch.backends.cudnn.allow_tf32 defaults to True), fp16 / bf16 -> tensor_op.
MathMode conv_math(const std::string& dtype);

/// One candidate of a timed algorithm search.
struct AlgorithmTrial {
  int algorithm = 0;
  bool runs = false;              ///< the library accepted it and a trial run succeeded
  double workspace_bytes = 0;
  std::vector<double> seconds;    ///< timed runs
};
/// Index in `trials` of the algorithm with the smallest median time among those that run within
/// `workspace_limit_bytes`; ties go to the earlier trial (the library's own order). -1 when none qualifies.
int choose_fastest(const std::vector<AlgorithmTrial>& trials, double workspace_limit_bytes);

/// One GPU's clocks and power state, as NVML reports them.
struct GpuClockReading {
  int device = 0;                      ///< CUDA's number
  bool valid = false;                  ///< false: `error` says why nothing was read
  std::string error;
  unsigned sm_mhz = 0, memory_mhz = 0;             ///< now
  unsigned max_sm_mhz = 0, max_memory_mhz = 0;     ///< the highest the GPU can run
  unsigned app_sm_mhz = 0, app_memory_mhz = 0;     ///< application clocks (the target under load)
  int pstate = -1;                                 ///< 0 (P0, fastest) .. 15; -1 unknown
  double power_w = 0, power_limit_w = 0;
  double temperature_c = 0;
  std::uint64_t slowdown_reasons = 0;              ///< NVML's clocks event (throttle) reason bits
  bool persistence_mode = false;
};

/// NVML's clock event reason bits by name, joined by "+" ("none" for 0; unknown bits as hexadecimal):
/// gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost, sw_thermal_slowdown,
/// hw_thermal_slowdown, hw_power_brake_slowdown, display_clock_setting.
std::string slowdown_reason_names(std::uint64_t reasons);
/// "P0, SM 1980/1980 MHz, memory 2619/2619 MHz, application 1980/2619 MHz, 312/700 W, 41 C, slowdown: none,
/// persistence on" for a valid reading; "unavailable (<error>)" otherwise.
std::string describe_clocks(const GpuClockReading& reading);
/// Adds "clocks_<when>" (GPU 0's, or "GPU 0: ...; GPU 1: ..." for several) to a provenance map; `when` is
/// "start" or "end". Clocks at the end below their maximum, or any slowdown reason but idle, also add
/// "clocks_warning".
void add_clock_provenance(std::map<std::string, std::string>& provenance, const std::vector<GpuClockReading>& readings,
                          const std::string& when);

}  // namespace ddlsim::calibration
