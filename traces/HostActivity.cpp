#include "traces/HostActivity.hpp"

#include "traces/Json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace ddlsim::traces {
namespace {

using Event = HostActivity::Event;
using Category = HostActivity::Category;
constexpr double infinity = std::numeric_limits<double>::infinity();
constexpr std::string_view node_prefix = "autograd::engine::evaluate_function: ";
// The profiler's set-up of a thread at its first CUDA call: nothing recorded for this long or longer
// right before or after that call (0.4 to 2.5 ms in the H200 traces; no other silence before a CUDA
// call there reaches 0.3 ms).
constexpr double stall_min_us = 300;

bool is_node(std::string_view name) { return name.starts_with(node_prefix); }
std::string_view op_name(std::string_view name) { return is_node(name) ? name.substr(node_prefix.size()) : name; }
bool is_step(std::string_view name) { return name.starts_with("Optimizer.step#"); }
bool is_zero_grad(std::string_view name) { return name.starts_with("Optimizer.zero_grad#"); }
bool is_optimizer(std::string_view name) { return is_step(name) || is_zero_grad(name); }

bool usable(const KinetoMember& m) { return m.type == KinetoMember::Type::number && m.number >= 0; }
double id_of(const KinetoMember& m) { return m.type == KinetoMember::Type::number ? m.number : -1.0; }

// The tensors of a fused optimizer call: the length of its first TensorList input ("Input Dims"
// [[[768], [768, 3072], ...], ...]); 0 when the trace lists no shapes for it (PyTorch 2.x records [] for a
// TensorList).
int tensor_list_size(const KinetoEvent& e, std::string_view name)
{
  JsonValue parsed;
  const JsonValue* args = e.args_tree;
  if (args == nullptr && !e.args_json.empty()) {
    parsed = parse_json(e.args_json, std::string(name));
    args = &parsed;
  }
  const JsonValue* dims = args != nullptr ? args->find("Input Dims") : nullptr;
  if (dims == nullptr || !dims->is_array() || dims->as_array().empty() || !dims->as_array().front().is_array())
    return 0;
  const auto& list = dims->as_array().front().as_array();
  const bool shapes = std::all_of(list.begin(), list.end(), [](const JsonValue& v) { return v.is_array(); });
  return shapes ? static_cast<int>(list.size()) : 0;
}

// One thread's recorded events by start (the longest first at equal starts), and its top-level cpu_ops.
struct ThreadView {
  std::vector<const Event*> events;
  std::vector<double> starts;
  std::vector<const Event*> top;
  std::vector<std::pair<double, double>> stalls;  ///< the profiler's set-up at its first CUDA call

  // Events that start in [from, to).
  int count(double from, double to) const
  {
    const auto first = std::lower_bound(starts.begin(), starts.end(), from);
    return static_cast<int>(std::lower_bound(first, starts.end(), to) - first);
  }
  double busy_us() const;
  // Microseconds of [from, to) that are stalls.
  double stalled(double from, double to) const
  {
    double out = 0;
    for (const auto& [b, e] : stalls)
      out += std::max(0.0, std::min(e, to) - std::max(b, from));
    return out;
  }
};

// Union of intervals (microseconds), and their first start and last end.
struct Coverage {
  double busy = 0, begin = infinity, end = -infinity;
};

Coverage coverage(std::vector<std::pair<double, double>> intervals)
{
  std::sort(intervals.begin(), intervals.end());
  Coverage c;
  double open = 0, close = -infinity;
  for (const auto& [b, e] : intervals) {
    if (b > close) {
      c.busy += close > open ? close - open : 0.0;
      open = b;
    }
    close = std::max(close, e);
    c.begin = std::min(c.begin, b);
    c.end = std::max(c.end, e);
  }
  if (!intervals.empty())
    c.busy += close - open;
  return c;
}

double ThreadView::busy_us() const
{
  std::vector<std::pair<double, double>> intervals;
  for (const Event* e : events)
    intervals.emplace_back(e->ts, e->end());
  return coverage(std::move(intervals)).busy;
}

// The silences (nothing recorded starts or ends) of at least stall_min_us right before and right after
// the thread's first CUDA runtime or driver call.
std::vector<std::pair<double, double>> first_call_stalls(const std::vector<const Event*>& events)
{
  const auto call =
      std::find_if(events.begin(), events.end(), [](const Event* e) { return e->category == Category::runtime; });
  if (call == events.end())
    return {};
  const Event& c = **call;
  double before = -infinity, after = infinity;  // the nearest boundaries of the other events
  for (const Event* e : events) {
    if (e == &c)
      continue;
    for (const double t : {e->ts, e->end()}) {
      if (t <= c.ts)
        before = std::max(before, t);
      if (t >= c.end())
        after = std::min(after, t);
    }
  }
  std::vector<std::pair<double, double>> out;
  if (c.ts - before >= stall_min_us && std::isfinite(before))
    out.emplace_back(before, c.ts);
  if (after - c.end() >= stall_min_us && std::isfinite(after))
    out.emplace_back(c.end(), after);
  return out;
}

std::vector<ThreadView> thread_views(const std::vector<Event>& events, std::size_t threads)
{
  std::vector<ThreadView> out(threads);
  for (const Event& e : events)
    out[e.thread].events.push_back(&e);
  for (ThreadView& t : out) {
    std::sort(t.events.begin(), t.events.end(), [](const Event* a, const Event* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    double end = -infinity;
    for (const Event* e : t.events) {
      t.starts.push_back(e->ts);
      if (e->category == Category::cpu_op && e->ts >= end) {
        t.top.push_back(e);
        end = e->end();
      }
    }
    t.stalls = first_call_stalls(t.events);
  }
  return out;
}

// The thread of the first Optimizer.step (else zero_grad), else the one with the most top-level ops that are not
// autograd nodes.
std::uint32_t main_thread(const std::vector<ThreadView>& threads, const std::vector<std::string>& names)
{
  for (const auto& which : {is_step, is_zero_grad}) {
    std::optional<std::pair<double, std::uint32_t>> first;
    for (std::uint32_t t = 0; t < threads.size(); ++t)
      for (const Event* e : threads[t].events)
        if (e->category == Category::annotation && which(names[e->name]) && (!first || e->ts < first->first))
          first = {e->ts, t};
    if (first)
      return first->second;
  }
  std::uint32_t best = 0;
  long most = -1;
  for (std::uint32_t t = 0; t < threads.size(); ++t) {
    const auto& top = threads[t].top;
    const long ops = std::count_if(top.begin(), top.end(), [&](const Event* e) { return !is_node(names[e->name]); });
    if (ops > most)
      best = t, most = ops;
  }
  return best;
}

struct Region {
  double begin, end;  ///< microseconds
};

// Before each Optimizer.step: from the end of the optimizer annotations before it.
std::vector<Region> step_regions(const ThreadView& main, const std::vector<std::string>& names)
{
  std::vector<Region> out;
  double after = -infinity;
  for (const Event* e : main.events) {
    if (e->category != Category::annotation || !is_optimizer(names[e->name]))
      continue;
    if (is_step(names[e->name]))
      out.push_back({after, e->ts});
    after = std::max(after, e->end());
  }
  if (out.empty())
    out.push_back({-infinity, infinity});
  return out;
}

// The region that holds `ts` (regions are in order and apart), or -1.
int region_of(const std::vector<Region>& regions, double ts)
{
  const auto it =
      std::upper_bound(regions.begin(), regions.end(), ts, [](double t, const Region& r) { return t < r.end; });
  return it != regions.end() && ts >= it->begin ? static_cast<int>(it - regions.begin()) : -1;
}

enum class Role { main, autograd, other };

std::vector<Role> roles(const std::vector<ThreadView>& threads, std::uint32_t main,
                        const std::vector<std::string>& names)
{
  std::vector<Role> out(threads.size(), Role::other);
  for (std::uint32_t t = 0; t < threads.size(); ++t) {
    const auto& top = threads[t].top;
    if (t == main)
      out[t] = Role::main;
    else if (std::any_of(top.begin(), top.end(), [&](const Event* e) { return is_node(names[e->name]); }))
      out[t] = Role::autograd;
  }
  return out;
}

// A top-level op of the main or an autograd thread inside a region, timed.
struct TimedOp {
  const Event* op;
  bool backward;
  double seconds;
  int events;
  double stall_s;  ///< of seconds, the profiler's stall
};

class StepTimer {
public:
  StepTimer(const std::vector<ThreadView>& threads, const std::vector<Role>& roles, const std::vector<Region>& regions,
            const std::vector<std::string>& names)
      : threads_(threads), regions_(regions)
  {
    ops_.resize(threads.size());
    starts_.resize(threads.size());
    for (std::uint32_t t = 0; t < threads.size(); ++t)
      for (const Event* e : threads[t].top)
        if (roles[t] != Role::other && region_of(regions, e->ts) >= 0) {
          ops_[t].push_back({e, roles[t] == Role::autograd || is_node(names[e->name])});
          starts_[t].push_back(e->ts);
        }
  }

  // Every op, in order of start.
  std::vector<TimedOp> timed() const
  {
    std::vector<TimedOp> out;
    for (std::uint32_t t = 0; t < ops_.size(); ++t)
      for (std::size_t i = 0; i < ops_[t].size(); ++i)
        out.push_back(time(t, i));
    std::stable_sort(out.begin(), out.end(), [](const TimedOp& a, const TimedOp& b) { return a.op->ts < b.op->ts; });
    return out;
  }

private:
  struct Op {
    const Event* event;
    bool backward;
  };

  TimedOp time(std::uint32_t t, std::size_t i) const
  {
    const Event* op = ops_[t][i].event;
    double end = op->end();
    if (i + 1 < ops_[t].size() && region_of(regions_, ops_[t][i + 1].event->ts) == region_of(regions_, op->ts))
      end = std::max(end, ops_[t][i + 1].event->ts);
    for (std::uint32_t u = 0; u < starts_.size(); ++u) {  // another thread takes over first: the last of its pass
      const auto next = std::upper_bound(starts_[u].begin(), starts_[u].end(), op->ts);
      if (u != t && next != starts_[u].end() && *next < end)
        end = op->end();
    }
    return {op, ops_[t][i].backward, (end - op->ts) * 1e-6, threads_[t].count(op->ts, end),
            threads_[t].stalled(op->ts, end) * 1e-6};
  }

  const std::vector<ThreadView>& threads_;
  const std::vector<Region>& regions_;
  std::vector<std::vector<Op>> ops_;
  std::vector<std::vector<double>> starts_;
};

std::string thread_label(double pid, double tid)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f/%.0f", pid, tid);
  return buf;
}

const char* role_name(Role r) { return r == Role::main ? "main" : r == Role::autograd ? "autograd" : "other"; }

}  // namespace

std::uint32_t HostActivity::name_id(std::string_view name)
{
  if (const auto it = name_ids_.find(name); it != name_ids_.end())
    return it->second;
  names_.emplace_back(name);
  return name_ids_.emplace(std::string(name), static_cast<std::uint32_t>(names_.size() - 1)).first->second;
}

std::uint32_t HostActivity::thread_id(double pid, double tid)
{
  const auto [it, added] = thread_ids_.try_emplace({pid, tid}, static_cast<std::uint32_t>(threads_.size()));
  if (added)
    threads_.emplace_back(pid, tid);
  return it->second;
}

void HostActivity::add(const KinetoEvent& e)
{
  const std::string_view* cat = e.cat.as_string();
  if (cat == nullptr || !usable(e.ts) || !usable(e.dur))
    return;
  if (*cat == "kernel" || *cat == "gpu_memcpy" || *cat == "gpu_memset") {
    gpu_.emplace_back(e.ts.number, e.ts.number + e.dur.number);
    return;
  }
  const bool op = *cat == "cpu_op", annotation = *cat == "user_annotation";
  if (!op && !annotation && *cat != "cuda_runtime" && *cat != "cuda_driver")
    return;
  const std::string_view* name = e.name.as_string();
  if ((op || annotation) && name == nullptr)
    return;
  Event event{.ts = e.ts.number, .dur = e.dur.number, .name = no_name, .thread = thread_id(id_of(e.pid), id_of(e.tid)),
              .category = op ? Category::cpu_op : annotation ? Category::annotation : Category::runtime};
  if (op || annotation)
    event.name = name_id(*name);
  events_.push_back(event);
  if (op && name->starts_with("aten::_fused_adam"))
    fused_optimizer_tensors_ += tensor_list_size(e, *name);
}

void HostActivity::finish(const std::string& trace, TraceSet& set)
{
  if (std::none_of(events_.begin(), events_.end(), [](const Event& e) { return e.category == Category::cpu_op; }))
    return;
  const std::vector<ThreadView> threads = thread_views(events_, threads_.size());
  const std::uint32_t main = main_thread(threads, names_);
  const std::vector<Region> regions = step_regions(threads[main], names_);
  const std::vector<Role> role = roles(threads, main, names_);
  const std::vector<TimedOp> ops = StepTimer(threads, role, regions, names_).timed();

  std::map<std::pair<std::string, std::string>, HostOpRecord> by_op;
  HostStepRecord step{.trace = trace};
  int accumulate = 0;
  bool in_backward = false;
  for (const TimedOp& t : ops) {
    const std::string pass = t.backward ? "backward" : "forward";
    const std::string name(op_name(names_[t.op->name]));
    HostOpRecord& r = by_op.try_emplace({pass, name}, HostOpRecord{.trace = trace, .pass = pass, .op = name})
                          .first->second;
    ++r.count;
    r.seconds += t.seconds;
    r.events += t.events;
    r.max_s = std::max(r.max_s, t.seconds);
    r.stall_s += t.stall_s;
    step.backward_passes += t.backward && !in_backward;
    in_backward = t.backward;
    accumulate += t.backward && name.ends_with("AccumulateGrad");
  }
  for (auto& [key, r] : by_op)
    set.host_ops.push_back(std::move(r));

  for (const Event* e : threads[main].events)
    if (e->category == Category::annotation && is_optimizer(names_[e->name])) {
      step.steps += is_step(names_[e->name]);
      step.optimizer_s += e->dur * 1e-6;
      step.optimizer_events += threads[main].count(e->ts, e->end());
    }
  if (fused_optimizer_tensors_ > 0 && step.steps > 0) {
    step.parameter_tensors = fused_optimizer_tensors_ / step.steps;
    step.parameter_tensors_from = "fused optimizer input";
  } else if (accumulate > 0) {
    step.parameter_tensors = accumulate / std::max(1, step.backward_passes);
    step.parameter_tensors_from = "AccumulateGrad nodes";
  }

  std::vector<std::pair<double, double>> host;
  for (const Event& e : events_)
    host.emplace_back(e.ts, e.end());
  const Coverage h = coverage(std::move(host)), g = coverage(gpu_);
  step.host_span_s = (h.end - h.begin) * 1e-6;
  step.host_events = static_cast<int>(events_.size());
  step.gpu_busy_s = g.busy * 1e-6;
  step.gpu_span_s = gpu_.empty() ? 0.0 : (g.end - g.begin) * 1e-6;
  step.span_s = (std::max(h.end, g.end) - std::min(h.begin, g.begin)) * 1e-6;
  for (const ThreadView& t : threads)
    step.profiler_stall_s += t.stalled(-infinity, infinity) * 1e-6;
  for (std::uint32_t t = 0; t < threads.size(); ++t)
    step.threads.push_back({.thread = thread_label(threads_[t].first, threads_[t].second), .role = role_name(role[t]),
                            .busy_s = threads[t].busy_us() * 1e-6,
                            .events = static_cast<int>(threads[t].events.size()),
                            .ops = static_cast<int>(threads[t].top.size())});
  set.host_steps.push_back(std::move(step));
}

}  // namespace ddlsim::traces
