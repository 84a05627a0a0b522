// Which part of a point its timeline draws: `ddlsim run --trace-dir DIR` with
//   --trace-ranks auto|all|replica0|LIST   GPUs drawn; LIST of ranks and ranges: "0-7,64,120-127"
//   --trace-window T0:T1                   tasks that overlap [T0, T1] (seconds, or with a unit:
//                                          "1.2s", "300ms"; either side may be left out)
//   --trace-counters all|memory|links|none which per-GPU counters are written
//   --trace-format json|perfetto|both      Chrome's JSON (<name>.json, the default), Perfetto's
//                                          protobuf (<name>.perfetto-trace), or both files
// `auto` (the default) draws every GPU while the whole timeline stays within about 50 MB
// (timeline_budget_slices), past it the fold's representatives (a folded point) where they fit, else
// the GPUs of data-parallel replica 0; the row's message says which.
//
//   TimelineView view = parse_timeline_view("replica0", "0:0.5s", "links");
//   std::vector<bool> drawn = drawn_ranks(view.ranks, point.parallelism, point.parallelism.gpus());
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::experiments {

struct ParallelismSpec;

/// Slices a timeline holds at most when --trace-ranks is auto: about 50 MB at about 320 bytes per
/// slice with its share of flow events and counter samples (measured: Llama 3 8B with ZeRO-3 on 64
/// GPUs, 208,192 slices in 66 MB; tests/cli/test_cli_timeline_view.py).
inline constexpr double timeline_budget_slices = 150e3;

struct TraceRanks {
  enum class Kind { automatic, all, replica0, list } kind = Kind::automatic;
  std::vector<std::pair<int, int>> ranges;  ///< kind list: inclusive ranges of ranks
};

struct TimelineView {
  TraceRanks ranks;
  double begin_s = 0;                                         ///< tasks that end before are left out
  double end_s   = std::numeric_limits<double>::infinity();  ///< tasks that start after are left out
  bool memory_counters = true;
  bool link_counters   = true;
  bool json_file       = true;  ///< write <name>.json (Chrome's Trace Event Format)
  bool perfetto_file   = false; ///< write <name>.perfetto-trace (Perfetto's protobuf format)
};

/// Parses the three options (texts as given on the command line; empty: the default). Throws Error
/// naming the option and what it accepts.
TimelineView parse_timeline_view(const std::string& ranks, const std::string& window, const std::string& counters);

/// Sets the view's files from a --trace-format value: json, perfetto or both (empty: json). Throws
/// Error naming the option and what it accepts.
void parse_timeline_format(const std::string& format, TimelineView& view);

/// Per GPU of a point of `gpus` GPUs laid out by `par` (device (s, r, t) = (s dp' + r) tp + t, r = dp
/// index x cp + cp index): whether `ranks` draws it. `automatic` and `all` draw every GPU (the caller
/// applies the budget); ranks past the point's GPUs are ignored.
std::vector<bool> drawn_ranks(const TraceRanks& ranks, const ParallelismSpec& par, int gpus);

}  // namespace ddlsim::experiments
