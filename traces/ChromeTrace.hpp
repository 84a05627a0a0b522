// A writer of Chrome's Trace Event Format (JSON), which Perfetto (ui.perfetto.dev, trace_processor)
// and chrome://tracing open: named processes and tracks (threads), complete slices ("ph": "X"),
// flow events joining slices ("ph": "s", "t", "f") and counters ("ph": "C"); and of the same trace
// in Perfetto's own protobuf format (write_perfetto, a `.perfetto-trace` file).
//
// Times are given in seconds and written in microseconds rounded to whole nanoseconds: a slice's
// start and end are rounded each (its "dur" is their difference), so a slice that ends where the
// next starts still does after rounding, and slices that do not overlap never do. Arguments are
// JSON numbers or strings, as given. Perfetto takes pid 0 and tid 0 for the kernel's swapper: number
// processes and threads from 1.
//
//   ChromeTrace trace;
//   trace.set_track_name(1, 1, "gpu0", "compute");
//   trace.add({.name = "F s0 mb1", .category = "forward", .pid = 1, .tid = 1, .start_s = 0.1, .end_s = 0.12,
//              .args = {{"samples", 8.0}}});
//   trace.add_flow({.phase = FlowPhase::start, .id = 7, .pid = 1, .tid = 1, .time_s = 0.11, .name = "transfer"});
//   trace.add_counter({.pid = 1, .name = "memory", .time_s = 0.1, .values = {{"bytes", 2e9}}});
//   trace.add_metadata("intra_node_link_Bps", 450e9);
//   trace.write(out_stream);
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ddlsim::traces {

/// An argument's value: a JSON number or a JSON string.
using TraceValue = std::variant<double, std::string>;

/// A complete slice ("ph": "X") on track (pid, tid).
struct TraceEvent {
  std::string name;
  std::string category;
  int pid        = 0;  ///< process id: one per GPU
  int tid        = 0;  ///< thread id: one per track of that GPU
  double start_s = 0;
  double end_s   = 0;
  std::vector<std::pair<std::string, TraceValue>> args;  ///< shown in the viewer's detail pane
};

enum class FlowPhase : char { start = 's', step = 't', end = 'f' };

/// A flow event: it binds to the slice that encloses `time_s` on track (pid, tid) (an end too: it is
/// written with "bp": "e"). The events of one flow share id, name and category, and run in time
/// order: one start, any steps, one end.
struct TraceFlow {
  FlowPhase phase  = FlowPhase::start;
  std::uint64_t id = 0;
  int pid          = 0;
  int tid          = 0;
  double time_s    = 0;
  std::string name;
  std::string category;
};

/// A sample of the counters `name` of process pid ("ph": "C"): each value is its own series
/// (Perfetto names the track "<name> <key>").
struct TraceCounter {
  int pid = 0;
  std::string name;
  double time_s = 0;
  std::vector<std::pair<std::string, double>> values;
};

class ChromeTrace {
public:
  void set_track_name(int pid, int tid, const std::string& process_name, const std::string& thread_name);
  void add(TraceEvent event) { events_.push_back(std::move(event)); }
  void add_flow(TraceFlow flow) { flows_.push_back(std::move(flow)); }
  void add_counter(TraceCounter counter) { counters_.push_back(std::move(counter)); }
  /// A fact about the whole trace, written in "otherData" (the format's metadata, which viewers
  /// show and do not draw), in insertion order.
  void add_metadata(std::string key, TraceValue value) { metadata_.emplace_back(std::move(key), std::move(value)); }
  /// Slices added so far.
  std::size_t size() const { return events_.size(); }
  /// Writes the whole trace as one JSON object: names, then slices, flows and counters, each in
  /// insertion order.
  void write(std::ostream& out) const;
  /// Writes the same trace in Perfetto's protobuf format (a `.perfetto-trace` file, traces/
  /// perfetto_trace.proto): every slice, flow, counter sample and fact of write()'s, smaller and
  /// faster to load (traces/PerfettoTrace.cpp says how each is encoded).
  void write_perfetto(std::ostream& out) const;

  /// A time in seconds as the whole nanoseconds the trace writes (rounded to nearest).
  static std::int64_t nanoseconds(double seconds);

private:
  std::map<int, std::string> process_names_;
  std::map<std::pair<int, int>, std::string> thread_names_;
  std::vector<TraceEvent> events_;
  std::vector<TraceFlow> flows_;
  std::vector<TraceCounter> counters_;
  std::vector<std::pair<std::string, TraceValue>> metadata_;
};

/// Escapes a string for a JSON string literal (without the quotes).
std::string json_escape(const std::string& text);

/// A number as JSON: whole numbers below 2^53 without a fraction or exponent, others with 12
/// significant digits; NaN and infinities (which JSON lacks) as null.
std::string json_number(double value);

}  // namespace ddlsim::traces
