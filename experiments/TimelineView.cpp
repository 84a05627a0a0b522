#include "experiments/TimelineView.hpp"

#include "common/Error.hpp"
#include "common/Units.hpp"
#include "experiments/Experiment.hpp"

#include <charconv>
#include <string_view>

namespace ddlsim::experiments {
namespace {

int parse_rank(std::string_view text, const std::string& spec)
{
  int value       = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || at != end || value < 0)
    throw Error("--trace-ranks " + spec + ": '" + std::string(text) +
                "' is not a rank (auto, all, replica0, or ranks and ranges such as 0-7,64)");
  return value;
}

TraceRanks parse_ranks(const std::string& spec)
{
  if (spec.empty() || spec == "auto")
    return {};
  if (spec == "all")
    return {.kind = TraceRanks::Kind::all, .ranges = {}};
  if (spec == "replica0")
    return {.kind = TraceRanks::Kind::replica0, .ranges = {}};
  TraceRanks out{.kind = TraceRanks::Kind::list, .ranges = {}};
  std::string_view rest = spec;
  while (true) {
    const std::size_t comma     = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t dash      = item.find('-');
    const int first             = parse_rank(item.substr(0, dash), spec);
    const int last              = dash == std::string_view::npos ? first : parse_rank(item.substr(dash + 1), spec);
    if (last < first)
      throw Error("--trace-ranks " + spec + ": range " + std::string(item) + " ends before it begins");
    out.ranges.emplace_back(first, last);
    if (comma == std::string_view::npos)
      break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

double parse_time(std::string_view text, const std::string& spec)
{
  try {
    const double t = parse_quantity(text, Dimension::time);
    if (t < 0 || t > 1e9)  // beyond 1e9 s whole nanoseconds leave int64 soon: no run is that long
      throw UnitError("out of range");
    return t;
  } catch (const UnitError&) {
    throw Error("--trace-window " + spec + ": '" + std::string(text) +
                "' is not a time (T0:T1 in seconds or with a unit, such as 0.5:1.2 or 200ms:; either side may be left out)");
  }
}

}  // namespace

TimelineView parse_timeline_view(const std::string& ranks, const std::string& window, const std::string& counters)
{
  TimelineView view;
  view.ranks = parse_ranks(ranks);
  if (!window.empty()) {
    const std::size_t colon = window.find(':');
    if (colon == std::string::npos)
      throw Error("--trace-window " + window + ": wants T0:T1 (such as 0.5:1.2 or 200ms:; either side may be left out)");
    const std::string_view text = window;
    if (colon > 0)
      view.begin_s = parse_time(text.substr(0, colon), window);
    if (colon + 1 < window.size())
      view.end_s = parse_time(text.substr(colon + 1), window);
    if (view.end_s <= view.begin_s)
      throw Error("--trace-window " + window + ": the window ends before it begins");
  }
  if (counters == "none" || counters == "memory")
    view.link_counters = false;
  if (counters == "none" || counters == "links")
    view.memory_counters = false;
  if (!counters.empty() && counters != "all" && counters != "none" && counters != "memory" && counters != "links")
    throw Error("--trace-counters " + counters + ": wants all, memory, links or none");
  return view;
}

void parse_timeline_format(const std::string& format, TimelineView& view)
{
  if (!format.empty() && format != "json" && format != "perfetto" && format != "both")
    throw Error("--trace-format " + format + ": wants json, perfetto or both");
  view.json_file     = format != "perfetto";
  view.perfetto_file = format == "perfetto" || format == "both";
}

std::vector<bool> drawn_ranks(const TraceRanks& ranks, const ParallelismSpec& par, int gpus)
{
  std::vector<bool> drawn(static_cast<std::size_t>(std::max(gpus, 0)), ranks.kind != TraceRanks::Kind::list);
  if (ranks.kind == TraceRanks::Kind::replica0 && !par.ps) {
    // Replica r = dp index x cp + cp index: replica 0 is r < cp, with all its stages and tensor ranks.
    const int tp = std::max(1, par.tp);
    for (int d = 0; d < gpus; ++d)
      drawn[static_cast<std::size_t>(d)] = (d / tp) % std::max(1, par.replicas()) < std::max(1, par.cp);
  }
  for (const auto& [first, last] : ranks.ranges)
    for (int d = first; d <= last && d < gpus; ++d)
      drawn[static_cast<std::size_t>(d)] = true;
  return drawn;
}

}  // namespace ddlsim::experiments
