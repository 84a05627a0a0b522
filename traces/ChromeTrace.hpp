// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one process per GPU, one
// thread (track) per stream, complete events ("ph": "X") with microsecond timestamps.
//
//   ChromeTrace trace;
//   trace.set_track_name(0, 0, "gpu0", "compute");
//   trace.add({.name = "F s0 mb1", .category = "forward", .pid = 0, .tid = 0, .start_s = 0.1, .duration_s = 0.02});
//   trace.write(out_stream);
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::traces {

struct TraceEvent {
  std::string name;
  std::string category;
  int pid = 0;  ///< process id: one per GPU
  int tid = 0;  ///< thread id: one per stream of that GPU
  double start_s = 0;
  double duration_s = 0;
  std::vector<std::pair<std::string, std::string>> args;  ///< shown in the viewer's detail pane
};

class ChromeTrace {
public:
  void set_track_name(int pid, int tid, const std::string& process_name, const std::string& thread_name);
  void add(TraceEvent event) { events_.push_back(std::move(event)); }
  std::size_t size() const { return events_.size(); }
  /// Writes the whole trace as one JSON object; events in insertion order.
  void write(std::ostream& out) const;

private:
  std::map<int, std::string> process_names_;
  std::map<std::pair<int, int>, std::string> thread_names_;
  std::vector<TraceEvent> events_;
};

/// Escapes a string for a JSON string literal (without the quotes).
std::string json_escape(const std::string& text);

}  // namespace ddlsim::traces
