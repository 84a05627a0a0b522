#include "calibration/ProfileFit.hpp"

#include "calibration/EagerFit.hpp"
#include "calibration/HostFit.hpp"
#include "calibration/KernelModel.hpp"
#include "calibration/KernelTable.hpp"
#include "common/Error.hpp"
#include "common/Statistics.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

// Kernel records that know their work, one per microbenchmark point (median of its runs) or per
// record when it names no point.
struct Measured {
  std::string op, dtype;
  double flop = 0, bytes = 0, seconds = 0;
  std::string shape;
};

// A record's time: the busy time of its kernels when it ran several (a cuDNN call's layout transforms around its
// convolution), else its span. A training step replayed as a CUDA graph runs a launch's kernels back to back,
// where the collector's stream under CUPTI leaves gaps of microseconds between them: on the H200, the step's
// kernels traced inside the graph took their cold busy time within 3%, the spans 15% more (docs/crosscheck-gpu.md).
bool counts_busy(const traces::KernelRecord& k) { return k.kernels > 1 && k.busy_s > 0; }
double record_seconds(const traces::KernelRecord& k) { return counts_busy(k) ? k.busy_s : k.duration_s; }

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
      out.push_back({k.op, k.dtype, k.flop, k.bytes, record_seconds(k), k.shape});
  }
  for (const auto& [id, runs] : points) {
    std::vector<double> t;
    for (const auto* r : runs)
      t.push_back(record_seconds(*r));
    const auto* first = runs.front();
    out.push_back({first->op, first->dtype, first->flop, first->bytes, median(std::move(t)), first->shape});
  }
  return out;
}

// Kernel records that carry no work, counted by reason, with the CPU ops most behind each.
std::string unusable_summary(const std::vector<traces::KernelRecord>& kernels)
{
  struct Reason {
    int count = 0;
    std::map<std::string, int> ops;
  };
  std::map<std::string, Reason> reasons;
  int total = 0;
  for (const auto& k : kernels)
    if (!(k.flop > 0 || k.bytes > 0)) {
      ++total;
      Reason& r = reasons[k.unusable.empty() ? "no work recorded (neither a microbenchmark nor a trace recorded with "
                                                 "record_shapes=True)"
                                               : k.unusable];
      ++r.count;
      if (!k.cpu_op.empty())
        ++r.ops[k.cpu_op];
    }
  if (total == 0)
    return {};
  auto by_count = [](const auto& counted) {
    std::vector<std::pair<int, std::string>> out;
    for (const auto& [name, n] : counted)
      out.emplace_back(-n, name);
    std::sort(out.begin(), out.end());
    return out;
  };
  std::map<std::string, int> counts;
  for (const auto& [reason, r] : reasons)
    counts[reason] = r.count;
  std::string out = std::to_string(total) + " of " + std::to_string(kernels.size()) + " kernel records carry no work:";
  for (const auto& [minus, reason] : by_count(counts)) {
    out += " " + std::to_string(-minus) + " " + reason;
    const auto ops = by_count(reasons[reason].ops);
    for (std::size_t i = 0; i < ops.size() && i < 3; ++i)
      out += (i ? ", " : " (") + ops[i].second + " " + std::to_string(-ops[i].first) + (i + 1 == std::min<std::size_t>(ops.size(), 3) ? ")" : "");
    out += ";";
  }
  out.pop_back();
  return out;
}

// gemm_efficiency of the shape-aware model that best predicts the GEMM records with shapes: golden
// section on [0.02, 1] of the squared log error (the model's time falls as the efficiency grows).
struct GemmFit {
  double efficiency = 0;
  double r2 = 0;
  double median_error = 0;
  int records = 0;
};

std::optional<GemmFit> fit_gemm_efficiency(const CalibrationProfile& base, const std::vector<Measured>& kernels)
{
  if (base.gemm_tiles.tiles.empty() || !base.find("gemm_efficiency"))
    return std::nullopt;
  struct Sample {
    GemmDims dims;
    Dtype dtype;
    double bytes, seconds;
  };
  std::vector<Sample> samples;
  for (const auto& k : kernels) {
    long long m = 0, n = 0, kk = 0, batch = 0;
    const auto dtype = dtype_table.parse(k.dtype);
    if ((k.op == "gemm" || k.op == "batched_gemm") && dtype && base.find("peak_flops_" + k.dtype) &&
        parse_gemm_shape(k.shape, m, n, kk, batch) && m > 0 && n > 0 && kk > 0 && batch > 0)
      samples.push_back({{static_cast<double>(m), static_cast<double>(n), static_cast<double>(kk), static_cast<double>(batch)},
                         *dtype, k.bytes, k.seconds});
  }
  if (samples.size() < 3)
    return std::nullopt;
  CalibrationProfile trial = base;
  auto errors = [&](double e) {
    trial.parameters["gemm_efficiency"].value = e;
    const KernelModel model = *KernelModel::from_profile(trial);
    std::vector<double> out;
    for (const Sample& s : samples)
      out.push_back(std::log(model.gemm(s.dims, s.dtype, s.bytes).seconds / s.seconds));
    return out;
  };
  auto cost = [&](double e) {
    double sum = 0;
    for (double r : errors(e))
      sum += r * r;
    return sum;
  };
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double lo = 0.02, hi = 1.0;
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo), fa = cost(a), fb = cost(b);
  for (int i = 0; i < 60; ++i) {
    if (fa <= fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - phi * (hi - lo);
      fa = cost(a);
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + phi * (hi - lo);
      fb = cost(b);
    }
  }
  GemmFit fit;
  fit.efficiency = 0.5 * (lo + hi);
  fit.records = static_cast<int>(samples.size());
  const std::vector<double> residuals = errors(fit.efficiency);
  double mean = 0, ss_tot = 0, ss_res = 0;
  for (const Sample& s : samples)
    mean += std::log(s.seconds) / static_cast<double>(samples.size());
  std::vector<double> relative;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    ss_tot += std::pow(std::log(samples[i].seconds) - mean, 2);
    ss_res += residuals[i] * residuals[i];
    relative.push_back(std::abs(std::exp(residuals[i]) - 1));
  }
  fit.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1.0;
  fit.median_error = median(relative);
  return fit;
}

// The commands that made the profile: the imports the records name, then the fit.
std::string full_command(const traces::TraceSet& records, const std::string& fit_command)
{
  const auto it = records.provenance.find("import_command");
  return it == records.provenance.end() || it->second.empty() ? fit_command : it->second + "; " + fit_command;
}

// Adds the host parameters the records hold (HostFit.hpp); returns how many.
std::size_t add_host_costs(CalibrationProfile& profile, const traces::TraceSet& records, std::vector<std::string>& notes)
{
  HostFit host = fit_host_costs(records);
  for (auto& p : host.parameters)
    profile.parameters[p.name] = std::move(p);
  notes.insert(notes.end(), host.notes.begin(), host.notes.end());
  return host.parameters.size();
}

}  // namespace

FitResult fit_host_profile(CalibrationProfile base, const traces::TraceSet& records, const FitOptions& options)
{
  FitResult result;
  CalibrationProfile& profile = result.profile;
  profile = std::move(base);
  if (add_host_costs(profile, records, result.notes) == 0)
    throw CalibrationError("the records hold no host record: import a PyTorch profiler trace of a training step "
                           "(recorded with CPU activities) with `ddlsim calibrate import`");
  EagerFit eager = fit_eager(records.kernels, profile, options.sources);  // against the base's own tables
  for (auto& p : eager.parameters)
    profile.parameters[p.name] = std::move(p);
  result.notes.insert(result.notes.end(), eager.notes.begin(), eager.notes.end());
  profile.name = options.name;
  if (auto it = records.provenance.find("device"); profile.device.empty() && it != records.provenance.end())
    profile.device = it->second;
  if (auto it = profile.provenance.find("command"); it != profile.provenance.end())
    profile.provenance["base_command"] = it->second;
  profile.provenance["base_profile"] = options.base;
  profile.provenance["command"] = full_command(records, options.command);
  profile.provenance["host_traces"] = options.sources;
  profile.provenance["host_date"] = options.date;
  profile.provenance["host_parameters"] = "host_*, memory_efficiency_<access> and gemm_unaligned_efficiency fitted by "
                                          "ddlsim calibrate fit --host-only from PyTorch profiler traces; everything "
                                          "else is the base profile's";
  return result;
}

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

  // A PyTorch trace's own memory-bound kernels and unaligned GEMMs fit their efficiencies (EagerFit.hpp),
  // not the tables: the microbenchmarks' kernels are what those efficiencies are relative to.
  std::vector<traces::KernelRecord> plain;
  std::copy_if(records.kernels.begin(), records.kernels.end(), std::back_inserter(plain),
               [](const traces::KernelRecord& k) { return !eager_record(k); });
  const std::vector<Measured> kernels = per_point(plain);

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
  // With a shape-aware base, kernels that know their GEMM or convolution shape are priced by that
  // model, not by the roofline: they fit gemm_efficiency below instead.
  const bool shape_aware = !profile.gemm_tiles.tiles.empty();
  std::vector<KernelSample> roofline;
  for (const auto& k : kernels) {
    if (k.op.rfind("copy_", 0) == 0)
      continue;
    if (shape_aware && !k.shape.empty() && (k.op == "gemm" || k.op == "batched_gemm" || k.op == "conv2d"))
      continue;
    const Parameter* peak = profile.find("peak_flops_" + k.dtype);
    if (k.flop == 0 || peak)
      roofline.push_back({k.flop, k.bytes, peak ? peak->value : 0.0, k.seconds});
  }
  double roofline_r2 = 1;  // of the roofline fit, when there is one
  std::string roofline_how;
  if (!roofline.empty()) {
    try {
      const RooflineFit f = fit_roofline(roofline, profile.value("memory_bandwidth"));
      roofline_r2 = f.r2;
      roofline_how = fmt::format("fit of {} kernel records ({} compute-, {} memory-bound), R^2 {:.4f}, max "
                                 "error {:.1f}%",
                                 roofline.size(), f.compute_bound, f.memory_bound, f.r2, 100 * f.max_relative_error);
      auto set = [&](const std::string& key, double value, const std::string& unit) {
        Parameter& p = profile.parameters[key];
        p.name = key;
        p.value = value;
        p.unit = unit;
        p.source = roofline_how;
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
  const std::string unusable = unusable_summary(records.kernels);
  const std::size_t host = add_host_costs(profile, records, result.notes);
  if (profile.collectives.empty() && profile.kernel_tables.empty() && roofline.empty() && host == 0)
    throw CalibrationError("the records hold nothing to fit: no collective with 3 distinct sizes, no kernel that knows its "
                           "flop or bytes and no host record (import nccl-tests output, traces recorded with "
                           "record_shapes=True, or collect microbenchmarks)" +
                           (unusable.empty() ? std::string() : "; " + unusable));
  if (!unusable.empty())
    result.notes.push_back(unusable);

  // Poor fits: refused unless the caller accepts them.
  std::vector<std::string> poor;
  char line[200];
  for (const auto& c : profile.collectives)
    for (const auto& r : c.regimes)
      if (r.r2 < options.min_r2) {
        std::snprintf(line, sizeof line, "%s over %d ranks, %.0f to %.0f bytes: R^2 %.3f (%d points, largest error %.1f%%)",
                      c.collective.c_str(), c.group_size, r.min_bytes, r.max_bytes, r.r2, r.points,
                      100 * r.max_relative_error);
        poor.emplace_back(line);
      }
  if (roofline_r2 < options.min_r2)
    poor.push_back("the roofline (compute_efficiency, memory_efficiency, kernel_overhead): " + roofline_how);
  if (const std::optional<GemmFit> g = fit_gemm_efficiency(profile, kernels)) {
    std::snprintf(line, sizeof line, "fit of %d GEMM records with shapes (shape-aware model), R^2 %.4f of log time, median error %.1f%%",
                  g->records, g->r2, 100 * g->median_error);
    Parameter& p = profile.parameters["gemm_efficiency"];
    p.value = std::min(g->efficiency, 1.0);
    p.source = line;
    if (g->r2 < options.min_r2)
      poor.push_back(std::string("the GEMM model (gemm_efficiency): ") + line);
  }
  if (plain.size() < records.kernels.size()) {
    EagerFit eager = fit_eager(records.kernels, profile, options.sources);
    for (auto& p : eager.parameters)
      profile.parameters[p.name] = std::move(p);
    result.notes.insert(result.notes.end(), eager.notes.begin(), eager.notes.end());
  }
  if (!poor.empty()) {
    std::string all;
    for (const auto& p : poor)
      all += (all.empty() ? "" : "; ") + p;
    if (!options.accept_poor_fit) {
      char threshold[32];
      std::snprintf(threshold, sizeof threshold, "%g", options.min_r2);
      throw CalibrationError(std::string("a fit is too poor to use (R^2 below ") + threshold + "): " + all +
                             (unusable.empty() ? std::string() : "; " + unusable) +
                             "; check the records, or write the profile anyway with --accept-poor-fit");
    }
    result.notes.push_back("accepted poor fits (--accept-poor-fit): " + all);
  }

  if (auto it = records.provenance.find("device"); it != records.provenance.end() && !it->second.empty())
    profile.device = it->second;
  profile.provenance = {{"source", "ddlsim calibrate fit"}, {"measured", "yes"}, {"date", options.date},
                        {"command", full_command(records, options.command)},
                        {"compute_parameters", "from base profile " + options.base},
                        {"traces", options.sources}};
  if (std::any_of(records.kernels.begin(), records.kernels.end(), counts_busy))
    profile.provenance["kernel_time"] = "a point's median time; a run of several kernels counts their busy time, the "
                                        "gaps between them left out, as a CUDA graph runs them back to back";
  for (const char* key : {"nccl_version", "driver", "cuda_runtime", "cublas", "cudnn", "sm_count", "timing", "clocks_start",
                          "clocks_end", "clocks_warning", "commit", "collective_timing", "l2_isolation", "math",
                          "graph_kernel_gap_s", "graph_kernel_gap"})
    if (auto it = records.provenance.find(key); it != records.provenance.end())
      profile.provenance[key] = it->second;
  return result;
}

}  // namespace ddlsim::calibration
