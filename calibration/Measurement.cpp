#include "calibration/Measurement.hpp"

#include "common/Statistics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ddlsim::calibration {

L2Isolation plan_l2_isolation(double footprint_bytes, double l2_bytes, double budget_bytes, int max_sets)
{
  if (footprint_bytes < 0 || l2_bytes < 0 || budget_bytes < 0 || max_sets < 1)
    throw std::invalid_argument("plan_l2_isolation: sizes must not be negative and max_sets must be at least 1");
  L2Isolation out;
  if (l2_bytes == 0)
    return out;  // unknown cache: nothing to plan against
  // A set is evicted once 2 x L2 of other data went through the cache since its last use (the L2 is not a strict
  // LRU, hence the factor 2): the other sets' runs must touch that much.
  const double target = 2 * l2_bytes;
  if (footprint_bytes > 0) {
    const double others = std::ceil(target / footprint_bytes);
    const double sets = others + 1;
    if (sets <= max_sets && sets * footprint_bytes <= budget_bytes) {
      out.buffer_sets = static_cast<int>(sets);
      return out;
    }
  }
  out.flush = true;
  out.flush_bytes = target;
  return out;
}

float products_alpha(double reduction)
{
  if (!(reduction >= 1))
    throw std::invalid_argument("products_alpha: the reduction must be at least 1");
  return static_cast<float>(std::sqrt(3.0 / reduction));
}

std::uint64_t busy_ns(std::vector<GpuInterval> intervals)
{
  std::sort(intervals.begin(), intervals.end(),
            [](const GpuInterval& a, const GpuInterval& b) { return a.start_ns < b.start_ns; });
  std::uint64_t total = 0, covered_to = 0;  // the union so far ends at covered_to
  for (const GpuInterval& i : intervals) {
    const std::uint64_t from = std::max(i.start_ns, covered_to);
    if (i.end_ns > from) {
      total += i.end_ns - from;
      covered_to = i.end_ns;
    }
  }
  return total;
}

double graph_kernel_gap_s(double replay_seconds, int kernels, int replays, std::vector<double> durations_s)
{
  if (kernels < 1 || replays < 1 || !(replay_seconds > 0) || durations_s.empty())
    throw std::invalid_argument("graph_kernel_gap_s: needs at least one kernel, one replay, a positive time and the "
                                "kernel's durations");
  const double per_kernel = replay_seconds / (static_cast<double>(kernels) * replays);
  return std::max(0.0, per_kernel - median(std::move(durations_s)));
}

RunCheck check_runs(const std::vector<std::size_t>& activities_per_run)
{
  RunCheck check;
  std::map<std::size_t, int> counts;
  for (std::size_t n : activities_per_run)
    if (n > 0)
      ++counts[n];
  int best = 0;
  for (const auto& [n, runs] : counts)  // ascending: a tie goes to the larger count
    if (runs >= best) {
      best = runs;
      check.expected = n;
    }
  for (std::size_t n : activities_per_run) {
    const bool whole = n > 0 && n == check.expected;
    check.complete.push_back(whole);
    if (whole)
      ++check.whole;
    else if (n == 0)
      ++check.missing;
    else
      ++check.partial;
  }
  return check;
}

double bus_bandwidth(const std::string& collective, double bytes, double seconds, int group)
{
  if (!(seconds > 0) || group < 1)
    throw std::invalid_argument("bus_bandwidth: the time and the group must be positive");
  const double n = group;
  double factor = 0;
  if (collective == "all_reduce")
    factor = 2 * (n - 1) / n;
  else if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all")
    factor = (n - 1) / n;
  else if (collective == "broadcast" || collective == "reduce" || collective == "send_recv")
    factor = 1;
  else
    throw std::invalid_argument("bus_bandwidth: unknown collective '" + collective + "'");
  return bytes / seconds * factor;
}

const char* math_mode_name(MathMode mode)
{
  switch (mode) {
  case MathMode::fp32: return "fp32";
  case MathMode::tf32: return "tf32";
  case MathMode::tensor_op: return "tensor_op";
  }
  return "?";
}

MathMode gemm_math(const std::string& dtype)
{
  if (dtype == "fp32")
    return MathMode::fp32;
  if (dtype == "tf32")
    return MathMode::tf32;
  return MathMode::tensor_op;
}

MathMode conv_math(const std::string& dtype)
{
  if (dtype == "fp32" || dtype == "tf32")
    return MathMode::tf32;
  return MathMode::tensor_op;
}

int choose_fastest(const std::vector<AlgorithmTrial>& trials, double workspace_limit_bytes)
{
  int best = -1;
  double best_s = 0;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const AlgorithmTrial& t = trials[i];
    if (!t.runs || t.seconds.empty() || t.workspace_bytes > workspace_limit_bytes)
      continue;
    const double s = median(t.seconds);
    if (best < 0 || s < best_s) {
      best = static_cast<int>(i);
      best_s = s;
    }
  }
  return best;
}

std::string slowdown_reason_names(std::uint64_t reasons)
{
  if (reasons == 0)
    return "none";
  static constexpr std::pair<std::uint64_t, const char*> names[] = {
      {0x1, "gpu_idle"},           {0x2, "applications_clocks_setting"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},        {0x10, "sync_boost"},                 {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"},  {0x100, "display_clock_setting"},
  };
  std::string out;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : names)
    if (reasons & bit) {
      out += (out.empty() ? "" : "+") + std::string(name);
      known |= bit;
    }
  if (const std::uint64_t rest = reasons & ~known; rest != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(rest));
    out += (out.empty() ? "" : "+") + std::string(hex);
  }
  return out;
}

std::string describe_clocks(const GpuClockReading& r)
{
  if (!r.valid)
    return "unavailable (" + (r.error.empty() ? std::string("not read") : r.error) + ")";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "P%d, SM %u/%u MHz, memory %u/%u MHz, application %u/%u MHz, %.0f/%.0f W, %.0f C, slowdown: %s, "
                "persistence %s",
                r.pstate, r.sm_mhz, r.max_sm_mhz, r.memory_mhz, r.max_memory_mhz, r.app_sm_mhz, r.app_memory_mhz,
                r.power_w, r.power_limit_w, r.temperature_c, slowdown_reason_names(r.slowdown_reasons).c_str(),
                r.persistence_mode ? "on" : "off");
  return buf;
}

void add_clock_provenance(std::map<std::string, std::string>& provenance, const std::vector<GpuClockReading>& readings,
                          const std::string& when)
{
  if (readings.empty())
    return;
  std::string text;
  std::string warning;
  for (const GpuClockReading& r : readings) {
    const std::string one = describe_clocks(r);
    text += readings.size() == 1 ? one : (text.empty() ? "" : "; ") + ("GPU " + std::to_string(r.device) + ": " + one);
    if (when != "end" || !r.valid)
      continue;
    // After a measurement the GPU should still be at its top clocks; anything else slowed the last points.
    const std::uint64_t slowing = r.slowdown_reasons & ~std::uint64_t{0x1};  // idle is no slowdown
    if (slowing != 0 || (r.max_sm_mhz > 0 && r.sm_mhz < r.max_sm_mhz && !(r.slowdown_reasons & 0x1)))
      warning += (warning.empty() ? "" : "; ") + ("GPU " + std::to_string(r.device) + " at SM " + std::to_string(r.sm_mhz) +
                                                  " of " + std::to_string(r.max_sm_mhz) + " MHz, slowdown: " +
                                                  slowdown_reason_names(r.slowdown_reasons));
  }
  provenance["clocks_" + when] = text;
  if (!warning.empty())
    provenance["clocks_warning"] = warning;
}

}  // namespace ddlsim::calibration
