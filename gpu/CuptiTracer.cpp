#include "gpu/CuptiTracer.hpp"

#include "calibration/Measurement.hpp"
#include "gpu/CudaCheck.hpp"

#include <algorithm>
#include <cstdlib>
#include <cupti.h>
#include <cxxabi.h>
#include <memory>

namespace ddlsim::gpu {
namespace {

// CUPTI writes the newest record layout of its own version; the fields read here (start, end, ids, grid, block,
// name, copy kind) keep their place across versions, so an older layout of the same kind reads them too.
#if CUPTI_API_VERSION >= 130100
using KernelActivity = CUpti_ActivityKernel11; // CUDA 13.1 added `priority`
#elif CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
#else
using KernelActivity = CUpti_ActivityKernel9; // CUDA 12
#endif
#if CUPTI_API_VERSION >= 130000
using MemcpyActivity = CUpti_ActivityMemcpy6;
#else
using MemcpyActivity = CUpti_ActivityMemcpy5;
#endif

// CUPTI's callbacks carry no user pointer: they reach the one live tracer through this.
std::atomic<CuptiTracer*> live_tracer{nullptr};

constexpr std::size_t buffer_bytes     = 8u << 20; // 8 MB: a few hundred thousand records
constexpr std::size_t buffer_alignment = 8;        // CUPTI wants record buffers aligned to 8 bytes

std::string cupti_error_text(CUptiResult status)
{
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr)
    return "CUPTI error " + std::to_string(static_cast<int>(status));
  return text;
}

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records)
{
  // A null buffer makes CUPTI drop records, which it counts: the tracer reports them.
  *buffer      = static_cast<std::uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size        = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0; // as many as fit
}

void CUPTIAPI on_buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid_bytes)
{
  if (CuptiTracer* tracer = live_tracer.load(); tracer != nullptr && buffer != nullptr)
    tracer->receive(buffer, valid_bytes);
  std::free(buffer);
}

const char* memcpy_name(std::uint8_t kind)
{
  switch (kind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "Memcpy HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "Memcpy DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "Memcpy DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
    return "Memcpy HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "Memcpy PtoP";
  default:
    return "Memcpy";
  }
}

struct KindName {
  CUpti_ActivityKind kind;
  const char* name;
};

// Enabled in this order; EXTERNAL_CORRELATION before the API kinds whose records it accompanies.
constexpr KindName traced_kinds[] = {
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
};

} // namespace

CuptiTracer::CuptiTracer(std::chrono::steady_clock::time_point origin)
{
  CuptiTracer* none = nullptr;
  if (!live_tracer.compare_exchange_strong(none, this))
    throw Error("a CuptiTracer already exists in this process");
  try {
    if (CUptiResult s = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed); s != CUPTI_SUCCESS)
      throw CuptiUnavailable("cuptiActivityRegisterCallbacks: " + cupti_error_text(s));
    for (const KindName& k : traced_kinds) {
      if (CUptiResult s = cuptiActivityEnable(k.kind); s != CUPTI_SUCCESS)
        throw CuptiUnavailable(std::string("cuptiActivityEnable(CUPTI_ACTIVITY_KIND_") + k.name +
                               "): " + cupti_error_text(s));
      enabled_kinds_.push_back(static_cast<int>(k.kind));
    }
    // Both clocks read together; the tightest of a few readings bounds the error by its host interval.
    double best_interval = 1e9;
    for (int attempt = 0; attempt < 5; ++attempt) {
      const auto before      = std::chrono::steady_clock::now();
      std::uint64_t cupti_ns = 0;
      if (CUptiResult s = cuptiGetTimestamp(&cupti_ns); s != CUPTI_SUCCESS)
        throw CuptiUnavailable("cuptiGetTimestamp: " + cupti_error_text(s));
      const auto after      = std::chrono::steady_clock::now();
      const double interval = std::chrono::duration<double>(after - before).count();
      if (interval < best_interval) {
        best_interval     = interval;
        host_at_sync_s_   = std::chrono::duration<double>(before - origin).count() + interval / 2;
        cupti_at_sync_ns_ = cupti_ns;
      }
    }
  } catch (...) {
    for (int kind : enabled_kinds_)
      cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
    enabled_kinds_.clear();
    live_tracer.store(nullptr);
    throw;
  }
}

CuptiTracer::~CuptiTracer()
{
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  count_dropped();
  for (int kind : enabled_kinds_)
    cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  // Buffers CUPTI hands back after this are only freed.
  live_tracer.store(nullptr);
}

void CuptiTracer::push_external_id(std::uint64_t id)
{
  if (CUptiResult s = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
      s != CUPTI_SUCCESS)
    throw PointFailed("cuptiActivityPushExternalCorrelationId: " + cupti_error_text(s));
}

void CuptiTracer::pop_external_id() noexcept
{
  std::uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void CuptiTracer::pause()
{
  if (paused_)
    return;
  for (int kind : enabled_kinds_)
    if (CUptiResult s = cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind)); s != CUPTI_SUCCESS)
      throw PointFailed("cuptiActivityDisable: " + cupti_error_text(s));
  paused_ = true;
}

void CuptiTracer::resume()
{
  if (!paused_)
    return;
  for (int kind : enabled_kinds_)
    if (CUptiResult s = cuptiActivityEnable(static_cast<CUpti_ActivityKind>(kind)); s != CUPTI_SUCCESS)
      throw PointFailed("cuptiActivityEnable: " + cupti_error_text(s));
  paused_ = false;
}

void CuptiTracer::count_dropped() noexcept
{
  // CUPTI resets its count on every read: each drop is counted by exactly one read.
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
    dropped_ += dropped;
}

double CuptiTracer::host_seconds(std::uint64_t cupti_ns) const
{
  // Signed difference: a timestamp may precede the clock reading.
  const auto delta_ns = static_cast<std::int64_t>(cupti_ns - cupti_at_sync_ns_);
  return host_at_sync_s_ + static_cast<double>(delta_ns) * 1e-9;
}

std::uint64_t CuptiTracer::timestamp_ns() const
{
  std::uint64_t now = 0;
  cuptiGetTimestamp(&now);
  return now;
}

std::vector<GpuActivity> CuptiTracer::take()
{
  // Forced: hands back the buffers still being filled too, so this point's records are all in after it.
  if (CUptiResult s = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); s != CUPTI_SUCCESS)
    throw PointFailed("cuptiActivityFlushAll: " + cupti_error_text(s));
  // Drops since the last completed buffer (a request that got no buffer hands none back) belong to this take().
  count_dropped();
  std::vector<GpuActivity> out;
  const std::lock_guard lock(mutex_);
  out.reserve(pending_.size());
  for (Pending& p : pending_) {
    auto it = external_ids_.find(p.correlation_id);
    if (it == external_ids_.end() && p.runtime_correlation_id != 0)
      it = external_ids_.find(p.runtime_correlation_id);
    if (it != external_ids_.end())
      p.activity.external_id = it->second;
    out.push_back(std::move(p.activity));
  }
  pending_.clear();
  external_ids_.clear();
  return out;
}

const std::string& CuptiTracer::demangled(const char* mangled)
{
  if (mangled == nullptr)
    mangled = "?";
  auto [it, inserted] = names_.try_emplace(mangled);
  if (inserted) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                     &std::free);
    it->second = status == 0 && text ? text.get() : mangled; // extern "C" kernels are not mangled
  }
  return it->second;
}

void CuptiTracer::receive(std::uint8_t* buffer, std::size_t valid_bytes)
{
  const std::lock_guard lock(mutex_);
  CUpti_Activity* record = nullptr;
  CUptiResult next       = CUPTI_SUCCESS;
  while ((next = cuptiActivityGetNextRecord(buffer, valid_bytes, &record)) == CUPTI_SUCCESS) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const KernelActivity*>(record);
      if (k->start == 0 || k->end < k->start) { // no timestamps: CUPTI lacked device memory for them
        ++incomplete_;
        break;
      }
      Pending p;
      p.activity.kind     = GpuActivity::Kind::kernel;
      p.activity.name     = demangled(k->name);
      p.activity.start_ns = k->start;
      p.activity.end_ns   = k->end;
      p.activity.device   = static_cast<int>(k->deviceId);
      p.activity.stream   = static_cast<int>(k->streamId);
      p.activity.grid     = {k->gridX, k->gridY, k->gridZ};
      p.activity.block    = {k->blockX, k->blockY, k->blockZ};
      p.correlation_id    = k->correlationId;
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const MemcpyActivity*>(record);
      if (m->start == 0 || m->end < m->start) {
        ++incomplete_;
        break;
      }
      Pending p;
      p.activity.kind          = GpuActivity::Kind::memcpy;
      p.activity.name          = memcpy_name(m->copyKind);
      p.activity.start_ns      = m->start;
      p.activity.end_ns        = m->end;
      p.activity.device        = static_cast<int>(m->deviceId);
      p.activity.stream        = static_cast<int>(m->streamId);
      p.correlation_id         = m->correlationId;
      p.runtime_correlation_id = m->runtimeCorrelationId;
      pending_.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        external_ids_[e->correlationId] = e->externalId;
      break;
    }
    default: // RUNTIME and DRIVER records only carry the external ids above
      break;
    }
  }
  if (next != CUPTI_ERROR_MAX_LIMIT_REACHED) // the end of the valid bytes; anything else stopped the walk early
    ++unreadable_;
  count_dropped();
}

RunSpan run_span(const std::vector<const GpuActivity*>& run)
{
  RunSpan span;
  span.first_ns = run.front()->start_ns;
  span.last_ns  = run.front()->end_ns;
  std::vector<calibration::GpuInterval> intervals;
  std::vector<const std::string*> seen;
  for (const GpuActivity* a : run) {
    intervals.push_back({a->start_ns, a->end_ns});
    span.first_ns = std::min(span.first_ns, a->start_ns);
    span.last_ns  = std::max(span.last_ns, a->end_ns);
    if (a->kind == GpuActivity::Kind::kernel &&
        (span.longest_kernel == nullptr ||
         a->end_ns - a->start_ns > span.longest_kernel->end_ns - span.longest_kernel->start_ns))
      span.longest_kernel = a;
    if (std::none_of(seen.begin(), seen.end(), [&](const std::string* n) { return *n == a->name; })) {
      seen.push_back(&a->name);
      span.names += (span.names.empty() ? "" : "+") + a->name;
    }
  }
  span.busy_s     = static_cast<double>(calibration::busy_ns(std::move(intervals))) * 1e-9;
  span.activities = static_cast<int>(run.size());
  return span;
}

} // namespace ddlsim::gpu
