#include "calibration/ProfileFit.hpp"

#include "calibration/KernelTable.hpp"
#include "common/Error.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Kernel records that know their work, one per microbenchmark point (median of its runs) or per
// record when it names no point.
struct Measured {
  std::string op, dtype;
  double flop = 0, bytes = 0, seconds = 0;
  std::string shape;
};

std::vector<Measured> per_point(const std::vector<traces::KernelRecord>& kernels)
{
  std::map<int, std::vector<const traces::KernelRecord*>> points;
  std::vector<Measured> out;
  for (const auto& k : kernels) {
    if (!(k.duration_s > 0) || !(k.flop > 0 || k.bytes > 0))
      continue;
    if (k.point > 0)
      points[k.point].push_back(&k);
    else
      out.push_back({k.op, k.dtype, k.flop, k.bytes, k.duration_s, k.shape});
  }
  for (const auto& [id, runs] : points) {
    std::vector<double> t;
    for (const auto* r : runs)
      t.push_back(r->duration_s);
    const auto* first = runs.front();
    out.push_back({first->op, first->dtype, first->flop, first->bytes, median(std::move(t)), first->shape});
  }
  return out;
}

}  // namespace

FitResult fit_profile(CalibrationProfile base, const traces::TraceSet& records, const FitOptions& options)
{
  FitResult result;
  CalibrationProfile& profile = result.profile;
  profile = std::move(base);
  profile.name = options.name;
  profile.kind = ProfileKind::measured;
  profile.collectives.clear();
  profile.kernel_tables.clear();
  for (auto& [key, param] : profile.parameters)
    param.source = "base profile " + options.base + " (" + (param.source.empty() ? "unfitted" : param.source) + ")";

  // Collectives: (collective, group size, nodes) -> size -> times.
  std::map<std::tuple<std::string, int, int>, std::map<double, std::vector<double>>> samples;
  for (const auto& c : records.collectives)
    if (c.bytes > 0 && c.duration_s > 0)
      samples[{c.collective, c.group_size, c.nodes}][c.bytes].push_back(c.duration_s);
  for (auto& [key, by_size] : samples) {
    std::vector<SizeTime> points;
    for (auto& [bytes, times] : by_size)
      points.push_back({bytes, median(times)});
    const std::string what =
        fmt::format("{} over {} ranks{}", std::get<0>(key), std::get<1>(key),
                    std::get<2>(key) > 1 ? fmt::format(" on {} nodes", std::get<2>(key)) : std::string());
    if (points.size() < 3) {
      result.notes.push_back(what + ": only " + std::to_string(points.size()) + " distinct sizes, not fitted");
      continue;
    }
    CollectiveCurve curve;
    curve.collective = std::get<0>(key);
    curve.group_size = std::get<1>(key);
    curve.nodes = std::get<2>(key);
    curve.source = options.sources;
    curve.regimes = fit_regimes(points);
    curve.held_out_error = points.size() >= 6 ? held_out_error(points) : -1.0;  // -1: too few points
    profile.collectives.push_back(std::move(curve));
  }

  const std::vector<Measured> kernels = per_point(records.kernels);

  // Lookup tables per (op, dtype); memory ops are keyed by bytes whatever their dtype.
  std::map<std::pair<std::string, std::string>, std::vector<WorkTime>> tables;
  for (const auto& k : kernels) {
    if (k.op.empty())
      continue;
    const bool compute = is_compute_op(k.op);
    const double work = compute ? k.flop : k.bytes;
    if (work > 0)
      tables[{k.op, compute ? k.dtype : std::string()}].push_back({work, k.seconds, compute ? k.shape : std::string()});
  }
  for (auto& [key, points] : tables) {
    try {
      KernelTable t = fit_kernel_table(key.first, key.second, std::move(points));
      t.source = options.sources;
      profile.kernel_tables.push_back(std::move(t));
    } catch (const std::invalid_argument& e) {
      result.notes.push_back(std::string("table not fitted: ") + e.what());
    }
  }

  // Roofline over compute and memory-bound kernels (copies cross PCIe or the copy engines, not the SMs).
  std::vector<KernelSample> roofline;
  for (const auto& k : kernels) {
    if (k.op.rfind("copy_", 0) == 0)
      continue;
    const Parameter* peak = profile.find("peak_flops_" + k.dtype);
    if (k.flop == 0 || peak)
      roofline.push_back({k.flop, k.bytes, peak ? peak->value : 0.0, k.seconds});
  }
  if (!roofline.empty()) {
    try {
      const RooflineFit f = fit_roofline(roofline, profile.value("memory_bandwidth"));
      const std::string how = fmt::format("fit of {} kernel records ({} compute-, {} memory-bound), R^2 {:.4f}, max "
                                          "error {:.1f}%",
                                          roofline.size(), f.compute_bound, f.memory_bound, f.r2,
                                          100 * f.max_relative_error);
      auto set = [&](const std::string& key, double value, const std::string& unit) {
        Parameter& p = profile.parameters[key];
        p.name = key;
        p.value = value;
        p.unit = unit;
        p.source = how;
        for (const auto& spec : parameter_specs())
          if (spec.name == key)
            p.description = std::string(spec.help) + " (fitted)";
      };
      // An efficiency above 1 means the base profile's peak is below what the device reached.
      for (auto [key, value] : {std::pair{"compute_efficiency", f.compute_efficiency}, std::pair{"memory_efficiency", f.memory_efficiency}})
        if (value > 1.0)
          result.notes.push_back(std::string(key) + " fitted as " + std::to_string(value) +
                                 " (above 1: the base profile's peak is too low); kept at 1");
      set("compute_efficiency", std::min(f.compute_efficiency, 1.0), "1");
      set("memory_efficiency", std::min(f.memory_efficiency, 1.0), "1");
      set("kernel_overhead", f.overhead_s, "s");
    } catch (const std::invalid_argument& e) {
      result.notes.push_back(std::string("kernel records not fitted (") + e.what() + "); efficiencies stay the base profile's");
    }
  }
  if (profile.collectives.empty() && profile.kernel_tables.empty() && roofline.empty())
    throw CalibrationError("the records hold nothing to fit: no collective with 3 distinct sizes and no kernel that knows its "
                           "flop or bytes (import nccl-tests output, or collect microbenchmarks)");

  if (auto it = records.provenance.find("device"); it != records.provenance.end() && !it->second.empty())
    profile.device = it->second;
  profile.provenance = {{"source", "ddlsim calibrate fit"}, {"measured", "yes"}, {"date", options.date},
                        {"command", options.command}, {"compute_parameters", "from base profile " + options.base},
                        {"traces", options.sources}};
  for (const char* key : {"nccl_version", "driver", "cuda_runtime", "cublas", "cudnn", "sm_count", "timing", "clocks_start",
                          "clocks_end", "clocks_warning", "commit", "collective_timing", "l2_isolation", "math"})
    if (auto it = records.provenance.find(key); it != records.provenance.end())
      profile.provenance[key] = it->second;
  return result;
}

}  // namespace ddlsim::calibration
