#include "calibration/HostFit.hpp"

#include "calibration/HostModel.hpp"
#include "common/Statistics.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

namespace ddlsim::calibration {
namespace {

// A host-bound trace leaves the GPU idle at least half its span: its host span is the step's time.
constexpr double host_bound_busy = 0.5;

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string joined(const std::set<std::string>& names)
{
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string us(double seconds) { return fmt::format("{:.3g} us", seconds * 1e6); }

Parameter parameter(const std::string& name, double value, std::string source)
{
  Parameter p{.name = name, .value = value, .unit = "s", .description = "", .source = std::move(source)};
  for (const ParameterSpec& spec : parameter_specs())
    if (spec.name == name)
      p.description = std::string(spec.help);
  return p;
}

// host_profiler_event_s: its value, and where it comes from.
Parameter profiler_event(const traces::TraceSet& records, std::vector<std::string>& notes)
{
  std::vector<double> estimates;
  std::string used, left_out;
  for (const auto& s : records.host_steps) {
    const std::string name = file_name(s.trace);
    const double busy = s.span_s > 0 ? s.gpu_busy_s / s.span_s : 1.0;
    if (s.untraced_step_s <= 0 || s.host_events <= 0 || busy >= host_bound_busy) {
      left_out += fmt::format("{}{} ({})", left_out.empty() ? "" : ", ", name,
                              s.untraced_step_s <= 0 ? "no untraced step time"
                                                     : fmt::format("GPU busy {:.0f}% of its span", 100 * busy));
      continue;
    }
    const double steps = std::max(1, s.steps);
    estimates.push_back((s.host_span_s - s.profiler_stall_s - steps * s.untraced_step_s) / s.host_events);
    used += fmt::format("{}{} {} ({:.2f} ms traced less {:.2f} ms of stalls, {:.2f} ms untraced, {} events)",
                        used.empty() ? "" : "; ", name, us(estimates.back()), s.host_span_s * 1e3,
                        s.profiler_stall_s * 1e3, steps * s.untraced_step_s * 1e3, s.host_events);
  }
  const std::string excluded = left_out.empty() ? "" : "; not used: " + left_out;
  if (estimates.empty()) {
    notes.push_back("host_profiler_event_s: no host-bound trace with an untraced step time (calibrate import "
                    "--untraced-step-s): the host costs keep the profiler's share");
    return parameter("host_profiler_event_s", 0,
                     "0: no host-bound trace (GPU busy under 50% of its span) with an untraced step time, so the "
                     "profiler's cost is not removed" + excluded);
  }
  const double e = median(estimates);
  std::string source = fmt::format("median over host-bound traces (GPU busy under 50% of the span) of (traced host "
                                   "span - the profiler's stalls - untraced step) / recorded host events: {}{}",
                                   used, excluded);
  if (e < 0)
    notes.push_back("host_profiler_event_s: the untraced steps are longer than the traced ones; set to 0");
  return parameter("host_profiler_event_s", std::max(0.0, e),
                   e < 0 ? "0 (clamped from " + us(e) + "): " + source : source);
}

// Pooled ops of one parameter.
struct Pool {
  int count = 0, events = 0;
  double seconds = 0, stall_s = 0;
  std::set<std::string> traces;
};

Parameter kind_cost(const std::string& name, const Pool& p, double e)
{
  const double cost = (p.seconds - p.stall_s - p.events * e) / p.count;
  const std::string stalls = p.stall_s > 0 ? fmt::format(" - {:.4g} ms of profiler stalls", p.stall_s * 1e3) : "";
  std::string source = fmt::format("{} ops in {}: ({:.4g} ms{} - {} profiler events x {}) / {}", p.count,
                                   joined(p.traces), p.seconds * 1e3, stalls, p.events, us(e), p.count);
  return parameter(name, std::max(0.0, cost), cost < 0 ? "0 (clamped from " + us(cost) + "): " + source : source);
}

// Kinds no trace holds: the median of their pass's fitted kinds.
void fill_missing(std::map<std::string, Parameter>& fitted, std::vector<std::string>& notes)
{
  for (const bool backward : {false, true}) {
    std::vector<double> values;
    for (const HostOpKind kind : host_op_kinds)
      if (kind != HostOpKind::accumulate)
        if (const auto it = fitted.find(host_parameter(kind, backward)); it != fitted.end())
          values.push_back(it->second.value);
    if (values.empty())
      continue;
    const double m = median(values);
    const char* pass = backward ? "backward" : "forward";
    for (const HostOpKind kind : host_op_kinds) {
      const std::string name = host_parameter(kind, backward);
      if (fitted.count(name) || (kind == HostOpKind::accumulate && !backward))
        continue;
      fitted.emplace(name, parameter(name, m,
                                     fmt::format("no {} op in the traces: the median of the {} fitted {} kinds",
                                                 host_kind_name(kind), values.size(), pass)));
      notes.push_back(fmt::format("{}: no {} op in the traces, set to the median of the {} kinds ({})", name,
                                  host_kind_name(kind), pass, us(m)));
    }
  }
}

std::optional<Parameter> optimizer_cost(const traces::TraceSet& records, double e, std::vector<std::string>& notes)
{
  Pool p;
  std::set<std::string> from;
  for (const auto& s : records.host_steps)
    if (s.parameter_tensors > 0 && s.optimizer_s > 0) {
      p.count += s.parameter_tensors * std::max(1, s.steps);
      p.events += s.optimizer_events;
      p.seconds += s.optimizer_s;
      p.traces.insert(file_name(s.trace));
      from.insert(s.parameter_tensors_from);
    }
  if (p.count == 0) {
    notes.push_back("host_optimizer_tensor_s: no trace with an annotated optimizer step and parameter tensors");
    return std::nullopt;
  }
  const double cost = (p.seconds - p.events * e) / p.count;
  std::string source = fmt::format("optimizer.step and zero_grad in {}: ({:.4g} ms - {} profiler events x {}) / {} "
                                   "parameter tensors (from {})",
                                   joined(p.traces), p.seconds * 1e3, p.events, us(e), p.count, joined(from));
  return parameter("host_optimizer_tensor_s", std::max(0.0, cost),
                   cost < 0 ? "0 (clamped from " + us(cost) + "): " + source : source);
}

// torch.compile's host costs (framework pytorch-compile): an eager step's trace holds no compiled graph,
// so the fit writes published measurements, each with its source, and says so.
void compiled_costs(std::map<std::string, Parameter>& fitted, std::vector<std::string>& notes)
{
  const std::string tritonbench = "meta-pytorch/tritonbench pull request 1017 (2026-04-14, GB200), Inductor's launch "
                                  "overhead: ";
  fitted.emplace("host_compiled_graph_s",
                 parameter("host_compiled_graph_s", 33.3e-6,
                           "published, not fitted (no compiled graph in the traces): " + tritonbench +
                               "a compiled graph of one 19-argument kernel costs 42.4 us end to end (guards, device "
                               "guard, the wrapper's call), its kernel's launch 9.1 us of it"));
  fitted.emplace("host_compiled_kernel_s",
                 parameter("host_compiled_kernel_s", 9.1e-6,
                           "published, not fitted (no compiled graph in the traces): " + tritonbench +
                               "CachingAutotuner.run of a 19-argument kernel, 9.1 us (cuLaunchKernel 3.3 us of it)"));
  fitted.emplace("host_graph_replay_s",
                 parameter("host_graph_replay_s", 169e-6,
                           "published, not fitted (no CUDA graph in the traces): pytorch/pytorch issue 150488 "
                           "(2025-04-01), one graph's replay under torch.compile: cudagraph trees' runtime checks "
                           "128 us and cudaGraphLaunch 41 us"));
  notes.push_back("host_compiled_graph_s, host_compiled_kernel_s, host_graph_replay_s: published values (the traces "
                  "hold no compiled step)");
}

}  // namespace

void classify_host_ops(std::vector<traces::HostOpRecord>& ops)
{
  for (auto& op : ops)
    op.kind = std::string(host_kind_name(host_op_kind(op.op)));
}

HostFit fit_host_costs(const traces::TraceSet& records)
{
  HostFit fit;
  if (records.host_ops.empty() && records.host_steps.empty())
    return fit;
  const Parameter event = profiler_event(records, fit.notes);
  std::map<std::string, Pool> pools;
  for (const auto& r : records.host_ops) {
    Pool& p = pools[host_parameter(host_op_kind(r.op), r.pass == "backward")];
    p.count += r.count;
    p.events += r.events;
    p.seconds += r.seconds;
    p.stall_s += r.stall_s;
    p.traces.insert(file_name(r.trace));
  }
  std::map<std::string, Parameter> fitted;
  for (const auto& [name, pool] : pools) {
    fitted.emplace(name, kind_cost(name, pool, event.value));
    if (fitted.at(name).source.starts_with("0 (clamped"))
      fit.notes.push_back(name + ": the profiler's share exceeds the measured time; set to 0");
  }
  fill_missing(fitted, fit.notes);
  if (auto optimizer = optimizer_cost(records, event.value, fit.notes))
    fitted.emplace(optimizer->name, std::move(*optimizer));
  fitted.emplace(event.name, event);
  compiled_costs(fitted, fit.notes);
  for (auto& [name, p] : fitted)
    fit.parameters.push_back(std::move(p));
  return fit;
}

}  // namespace ddlsim::calibration
