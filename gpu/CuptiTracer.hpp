// CUPTI activity tracing for ddlsim-collect and ddlsim-run-cuda --trace: the GPU-side start and end of every
// kernel and memory copy, each tied to the microbenchmark run (or workload launch) that launched it.
//
// The records come from CUPTI's asynchronous Activity API. Kinds enabled: CONCURRENT_KERNEL (never KERNEL,
// which serialises kernels and would change what is measured), MEMCPY, EXTERNAL_CORRELATION, and the API
// records that external ids hang on: RUNTIME, and DRIVER too, because cuBLAS, cuDNN and NCCL launch many of
// their kernels through the driver API, and a kernel is only tied to an external id through the API record
// of its own launch. The caller pushes an external id, external_id(point, run), around each run it
// launches; after synchronising, take() returns every activity recorded since the last take(), each with
// the external id of its launch (0 when it was launched outside any pushed id: set-up, warm-up).
// Timestamps stay in CUPTI's clock (ns); host_seconds() converts one to host steady_clock seconds since the
// `origin` given to the constructor, from one reading of both clocks taken together at start.
// pause() disables every kind (what is timed on the host then, NCCL calls, carries none of CUPTI's per-call cost)
// and resume() enables them again.
//
// Records lost are counted three ways, each once: dropped_records() for want of buffer space (CUPTI's count,
// read and reset after every buffer and after every flush, so that a drop is counted by the take() that follows
// it), incomplete_records() for kernels and copies without timestamps, unreadable_buffers() for a buffer CUPTI
// could not walk to its end. A run that lost any record is left out by the caller (calibration::check_runs), never
// timed from the records that remain.
//
//   CuptiTracer tracer(std::chrono::steady_clock::now());  // throws CuptiUnavailable (another profiler, ...)
//   {
//     ExternalIdScope scope(tracer, external_id(point.id, run));
//     benchmark.launch();
//   }
//   cudaDeviceSynchronize();
//   for (const GpuActivity& a : tracer.take())
//     if (a.external_id == external_id(point.id, run)) ... tracer.host_seconds(a.start_ns) ...
#pragma once

#include "common/Error.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddlsim::gpu {

/// The external correlation id of one timed run of a point: point * 65536 + run (run < 65536).
constexpr std::uint64_t external_id(int point, int run)
{
  return static_cast<std::uint64_t>(point) * 65536u + static_cast<std::uint64_t>(run);
}

/// The external id of work launched around the timed runs (the wait a batch queues behind): point 0, which no
/// plan has, so no run's records include it, and not 0, so that matching runs by order leaves it out too.
constexpr std::uint64_t hold_external_id = external_id(0, 1);
static_assert(hold_external_id != 0 && hold_external_id < external_id(1, 0), "the wait's id is no run's");

/// One kernel execution or memory copy on a GPU, as CUPTI recorded it.
struct GpuActivity {
  enum class Kind { kernel, memcpy };
  Kind kind = Kind::kernel;
  std::string name;           ///< demangled kernel name, or "Memcpy HtoD" / "Memcpy DtoH" / "Memcpy DtoD" / ...
  std::uint64_t start_ns = 0; ///< CUPTI clock
  std::uint64_t end_ns   = 0;
  int device             = -1;
  int stream             = -1;
  std::array<int, 3> grid{0, 0, 0}; ///< kernels only
  std::array<int, 3> block{0, 0, 0};
  std::uint64_t external_id = 0; ///< the id pushed around its launch; 0 when none was
};

/// CUPTI cannot trace in this process: another profiler holds it, the user may not profile, CUPTI failed to
/// initialise. The message names the call and CUPTI's own description of the error.
class CuptiUnavailable : public Error {
public:
  using Error::Error;
};

/// One run's activities taken together (a microbenchmark run, a launch of a step), for its record: the span from
/// the first start to the last end, the busy time (calibration::busy_ns: the gaps between the activities left
/// out), how many there were, their names in order of first start, each once, joined by "+", and the longest
/// kernel (whose grid and block the record names; nullptr when the run holds no kernel). `run`: not empty, sorted
/// by start.
struct RunSpan {
  std::uint64_t first_ns = 0, last_ns = 0;
  double busy_s  = 0;
  int activities = 0;
  std::string names;
  const GpuActivity* longest_kernel = nullptr;
};
RunSpan run_span(const std::vector<const GpuActivity*>& run);

class CuptiTracer {
public:
  /// Registers the buffer callbacks, enables the activity kinds and reads both clocks. Throws CuptiUnavailable
  /// when CUPTI refuses (nothing stays enabled then), Error when another CuptiTracer exists.
  explicit CuptiTracer(std::chrono::steady_clock::time_point origin);
  /// Flushes and disables the activity kinds; activities not taken are dropped.
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&)            = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  /// Ties the kernels and copies the calling thread launches from now on to `id`, until pop_external_id().
  /// Throws PointFailed when CUPTI refuses.
  void push_external_id(std::uint64_t id);
  void pop_external_id() noexcept;

  /// Disables every activity kind until resume(); records of work already done stay to be taken. Throws
  /// PointFailed when CUPTI refuses.
  void pause();
  /// Enables the kinds again. Throws PointFailed when CUPTI refuses.
  void resume();

  /// Flushes CUPTI's buffers and returns every kernel and copy recorded since the last call, oldest
  /// buffer first. Synchronise the GPUs first: a flush does not wait for work still running.
  std::vector<GpuActivity> take();

  /// A CUPTI timestamp as host steady_clock seconds since the constructor's `origin`.
  double host_seconds(std::uint64_t cupti_ns) const;
  /// CUPTI's clock now (ns), the clock of GpuActivity::start_ns and end_ns.
  std::uint64_t timestamp_ns() const;

  /// Records CUPTI dropped for want of buffer space, since the start (cuptiActivityGetNumDroppedRecords).
  std::uint64_t dropped_records() const { return dropped_.load(); }
  /// Kernel and copy records that came without valid timestamps (left out of take()), since the start.
  std::uint64_t incomplete_records() const { return incomplete_.load(); }
  /// Buffers whose records could not all be read (cuptiActivityGetNextRecord failed before the end), since the
  /// start: their remaining records are lost.
  std::uint64_t unreadable_buffers() const { return unreadable_.load(); }

  /// Called by CUPTI's buffer-completed callback: parses one buffer of records.
  void receive(std::uint8_t* buffer, std::size_t valid_bytes);

private:
  const std::string& demangled(const char* mangled);
  void count_dropped() noexcept;

  std::vector<int> enabled_kinds_;
  double host_at_sync_s_          = 0;
  std::uint64_t cupti_at_sync_ns_ = 0;
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> incomplete_{0};
  std::atomic<std::uint64_t> unreadable_{0};
  bool paused_ = false;

  // A kernel or copy before its external id is known: the external-correlation record of its launch may
  // come in a later buffer, so ids are looked up in take(), once everything is in.
  struct Pending {
    GpuActivity activity;
    std::uint32_t correlation_id         = 0; // of the (driver or runtime) API call that launched it
    std::uint32_t runtime_correlation_id = 0; // copies: of the runtime call, when it differs
  };

  std::mutex mutex_; // receive() may run on CUPTI's worker thread while the collector calls take()
  std::vector<Pending> pending_;
  std::map<std::uint32_t, std::uint64_t> external_ids_; // CUPTI correlation id -> pushed external id
  std::unordered_map<std::string, std::string> names_;  // mangled -> demangled kernel names
};

/// Pushes an external id for the lifetime of the scope (popped on the way out, exceptions included).
class ExternalIdScope {
public:
  ExternalIdScope(CuptiTracer& tracer, std::uint64_t id) : tracer_(tracer) { tracer_.push_external_id(id); }
  ~ExternalIdScope() { tracer_.pop_external_id(); }
  ExternalIdScope(const ExternalIdScope&)            = delete;
  ExternalIdScope& operator=(const ExternalIdScope&) = delete;

private:
  CuptiTracer& tracer_;
};

} // namespace ddlsim::gpu
