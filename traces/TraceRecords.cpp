#include "traces/TraceRecords.hpp"

#include "common/Error.hpp"
#include "common/Text.hpp"
#include "traces/ChromeTrace.hpp"
#include "traces/Json.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

namespace ddlsim::traces {
namespace {

std::string number(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Counts (flop, bytes) exactly when they are whole numbers a double holds exactly.
std::string count(double v)
{
  if (v == std::floor(v) && std::abs(v) < 9007199254740992.0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return number(v);
}

std::string triple(const std::array<int, 3>& a)
{
  return "[" + std::to_string(a[0]) + "," + std::to_string(a[1]) + "," + std::to_string(a[2]) + "]";
}

std::string quoted(const std::string& s) { return "\"" + json_escape(s) + "\""; }

std::string number_text(double v) { return number(v); }

void write_host_op(const HostOpRecord& h, std::ostream& out)
{
  out << "{\"type\":\"host_op\",\"trace\":" << quoted(h.trace) << ",\"pass\":" << quoted(h.pass)
      << ",\"op\":" << quoted(h.op) << (h.kind.empty() ? std::string() : ",\"kind\":" + quoted(h.kind))
      << ",\"count\":" << h.count << ",\"seconds\":" << number(h.seconds) << ",\"events\":" << h.events
      << ",\"max_s\":" << number(h.max_s)
      << (h.stall_s > 0 ? ",\"stall_s\":" + number(h.stall_s) : std::string()) << "}\n";
}

void write_host_step(const HostStepRecord& h, std::ostream& out)
{
  out << "{\"type\":\"host_step\",\"trace\":" << quoted(h.trace) << ",\"steps\":" << h.steps
      << ",\"backward_passes\":" << h.backward_passes << ",\"span_s\":" << number(h.span_s)
      << ",\"host_span_s\":" << number(h.host_span_s) << ",\"gpu_span_s\":" << number(h.gpu_span_s)
      << ",\"gpu_busy_s\":" << number(h.gpu_busy_s) << ",\"host_events\":" << h.host_events
      << ",\"profiler_stall_s\":" << number(h.profiler_stall_s)
      << ",\"optimizer_s\":" << number(h.optimizer_s) << ",\"optimizer_events\":" << h.optimizer_events
      << ",\"parameter_tensors\":" << h.parameter_tensors
      << ",\"parameter_tensors_from\":" << quoted(h.parameter_tensors_from)
      << (h.untraced_step_s > 0 ? ",\"untraced_step_s\":" + number(h.untraced_step_s) : std::string())
      << ",\"threads\":[";
  for (std::size_t i = 0; i < h.threads.size(); ++i) {
    const HostThread& t = h.threads[i];
    out << (i ? "," : "") << "{\"thread\":" << quoted(t.thread) << ",\"role\":" << quoted(t.role)
        << ",\"busy_s\":" << number(t.busy_s) << ",\"events\":" << t.events << ",\"ops\":" << t.ops << "}";
  }
  out << "]}\n";
}

}  // namespace

int TraceSet::skipped_total() const
{
  int n = 0;
  for (const auto& [reason, count] : skipped)
    n += count;
  return n;
}

void write_jsonl(const TraceSet& set, std::ostream& out)
{
  out << "{\"type\":\"provenance\"";
  for (const auto& [key, value] : set.provenance)
    out << "," << quoted(key) << ":" << quoted(value);
  out << "}\n";
  for (const auto& k : set.kernels)
    out << "{\"type\":\"kernel\",\"name\":" << quoted(k.name) << ",\"duration_s\":" << number(k.duration_s)
        << (k.kernels > 0 ? ",\"busy_s\":" + number(k.busy_s) + ",\"kernels\":" + std::to_string(k.kernels)
                          : std::string())
        << ",\"start_s\":" << number(k.start_s) << ",\"device\":" << k.device << ",\"stream\":" << k.stream
        << ",\"grid\":" << triple(k.grid) << ",\"block\":" << triple(k.block)
        << (k.op.empty() ? std::string() : ",\"op\":" + quoted(k.op))
        << (k.flop > 0 || k.bytes > 0 ? ",\"flop\":" + count(k.flop) + ",\"bytes\":" + count(k.bytes) +
                                           ",\"dtype\":" + quoted(k.dtype)
                                     : std::string())
        << (k.point > 0 ? ",\"point\":" + std::to_string(k.point) : std::string())
        << (k.shape.empty() ? std::string() : ",\"shape\":" + quoted(k.shape))
        << (k.cpu_op.empty() ? std::string() : ",\"cpu_op\":" + quoted(k.cpu_op))
        << (k.unusable.empty() ? std::string() : ",\"unusable\":" + quoted(k.unusable)) << "}\n";
  for (const auto& c : set.collectives)
    out << "{\"type\":\"collective\",\"collective\":" << quoted(c.collective) << ",\"bytes\":" << number(c.bytes)
        << ",\"dtype\":" << quoted(c.dtype) << ",\"group_size\":" << c.group_size
        << (c.nodes > 0 ? ",\"nodes\":" + std::to_string(c.nodes) : std::string()) << ",\"duration_s\":" << number(c.duration_s) << ",\"source\":" << quoted(c.source)
        << ",\"name\":" << quoted(c.name) << (c.point > 0 ? ",\"point\":" + std::to_string(c.point) : std::string())
        << "}\n";
  for (const auto& h : set.host_ops)
    write_host_op(h, out);
  for (const auto& h : set.host_steps)
    write_host_step(h, out);
}

namespace {

// Reads one record's fields, naming the file, line and key of what is wrong.
class RecordFields {
public:
  RecordFields(const JsonValue& record, std::string where) : record_(record), where_(std::move(where)) {}

  double number(const char* key, bool required, double fallback = 0) const
  {
    const JsonValue* v = record_.find(key);
    if (v == nullptr) {
      if (required)
        fail(key, "missing");
      return fallback;
    }
    if (!v->is_number())
      fail(key, "must be a number");
    return v->as_number();
  }
  int integer(const char* key, int fallback) const { return as_int(key, number(key, false, fallback), "must be an integer"); }
  std::string string(const char* key, bool required) const
  {
    const JsonValue* v = record_.find(key);
    if (v == nullptr) {
      if (required)
        fail(key, "missing");
      return {};
    }
    if (!v->is_string())
      fail(key, "must be a string");
    return v->as_string();
  }
  std::array<int, 3> triple(const char* key) const
  {
    std::array<int, 3> out{0, 0, 0};
    const JsonValue* v = record_.find(key);
    if (v == nullptr)
      return out;
    if (!v->is_array() || v->as_array().size() != 3)
      fail(key, "must be an array of 3 integers");
    for (std::size_t i = 0; i < 3; ++i) {
      const JsonValue& e = v->as_array()[i];
      if (!e.is_number())
        fail(key, "must be an array of 3 integers");
      out[i] = as_int(key, e.as_number(), "must be an array of 3 integers");
    }
    return out;
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const { throw TraceError(where_ + ": " + key + ": " + what); }
  // A whole number in int's range (casting anything else to int is undefined behaviour).
  int as_int(const char* key, double v, const char* what) const
  {
    if (!(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max()) || v != std::trunc(v))
      fail(key, what);
    return static_cast<int>(v);
  }

private:
  const JsonValue& record_;
  std::string where_;
};

HostOpRecord read_host_op(const RecordFields& f)
{
  HostOpRecord h;
  h.trace = f.string("trace", true);
  h.pass = f.string("pass", true);
  if (h.pass != "forward" && h.pass != "backward")
    f.fail("pass", "must be \"forward\" or \"backward\"");
  h.op = f.string("op", true);
  h.kind = f.string("kind", false);
  h.count = f.integer("count", 0);
  h.seconds = f.number("seconds", true);
  h.events = f.integer("events", 0);
  h.max_s = f.number("max_s", false);
  h.stall_s = f.number("stall_s", false);
  if (h.count < 1)
    f.fail("count", "must be at least 1");
  if (h.seconds < 0 || h.events < 0 || h.max_s < 0)
    f.fail(h.seconds < 0 ? "seconds" : h.events < 0 ? "events" : "max_s", "must not be negative");
  if (h.stall_s < 0 || h.stall_s > h.seconds * (1 + 1e-9))
    f.fail("stall_s", "must lie between 0 and seconds");
  return h;
}

HostStepRecord read_host_step(const JsonValue& record, const RecordFields& f, const std::string& where)
{
  HostStepRecord h;
  h.trace = f.string("trace", true);
  h.steps = f.integer("steps", 0);
  h.backward_passes = f.integer("backward_passes", 0);
  h.span_s = f.number("span_s", true);
  h.host_span_s = f.number("host_span_s", true);
  h.gpu_span_s = f.number("gpu_span_s", false);
  h.gpu_busy_s = f.number("gpu_busy_s", true);
  h.host_events = f.integer("host_events", 0);
  h.profiler_stall_s = f.number("profiler_stall_s", false);
  h.optimizer_s = f.number("optimizer_s", false);
  h.optimizer_events = f.integer("optimizer_events", 0);
  h.parameter_tensors = f.integer("parameter_tensors", 0);
  h.parameter_tensors_from = f.string("parameter_tensors_from", false);
  h.untraced_step_s = f.number("untraced_step_s", false);
  for (const auto& [key, v] : {std::pair{"steps", double(h.steps)}, {"backward_passes", double(h.backward_passes)},
                               {"span_s", h.span_s}, {"host_span_s", h.host_span_s}, {"gpu_span_s", h.gpu_span_s},
                               {"gpu_busy_s", h.gpu_busy_s}, {"host_events", double(h.host_events)},
                               {"profiler_stall_s", h.profiler_stall_s},
                               {"optimizer_s", h.optimizer_s}, {"optimizer_events", double(h.optimizer_events)},
                               {"parameter_tensors", double(h.parameter_tensors)},
                               {"untraced_step_s", h.untraced_step_s}})
    if (v < 0)
      f.fail(key, "must not be negative");
  const JsonValue* threads = record.find("threads");
  if (threads != nullptr && !threads->is_array())
    f.fail("threads", "must be a list of {thread, role, busy_s, events, ops}");
  for (std::size_t i = 0; threads != nullptr && i < threads->as_array().size(); ++i) {
    const JsonValue& t = threads->as_array()[i];
    const RecordFields tf(t, where + ": threads[" + std::to_string(i) + "]");
    if (!t.is_object())
      tf.fail("thread", "must be an object");
    h.threads.push_back({.thread = tf.string("thread", true), .role = tf.string("role", false),
                         .busy_s = tf.number("busy_s", false), .events = tf.integer("events", 0),
                         .ops = tf.integer("ops", 0)});
  }
  return h;
}

}  // namespace

TraceSet read_jsonl(const std::string& path)
{
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TraceError(path + ": cannot read: it is a directory");
  std::ifstream in(path);
  if (!in)
    throw TraceError(path + ": cannot open (" + std::strerror(errno) + ")");
  return read_jsonl(in, path);
}

TraceSet read_jsonl(std::istream& in, const std::string& path)
{
  TraceSet set;
  std::map<std::string, std::set<std::string>> provenance;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = path + ":" + std::to_string(number);
    const JsonValue r = parse_json(line, where);
    if (!r.is_object())
      throw TraceError(where + ": a record must be a JSON object");
    const RecordFields f(r, where);
    const std::string type = f.string("type", true);
    if (type == "provenance") {
      for (const auto& [key, value] : r.as_object())
        if (key != "type")
          provenance[key].insert(value.is_string() ? value.as_string() : value.is_number() ? number_text(value.as_number()) : "?");
    } else if (type == "kernel") {
      KernelRecord k;
      k.name = f.string("name", true);
      k.duration_s = f.number("duration_s", true);
      k.start_s = f.number("start_s", false);
      k.busy_s = f.number("busy_s", false);
      k.kernels = f.integer("kernels", 0);
      k.device = f.integer("device", -1);
      k.stream = f.integer("stream", -1);
      k.grid = f.triple("grid");
      k.block = f.triple("block");
      k.op = f.string("op", false);
      k.flop = f.number("flop", false);
      k.bytes = f.number("bytes", false);
      k.dtype = f.string("dtype", false);
      k.point = f.integer("point", 0);
      k.shape = f.string("shape", false);
      k.cpu_op = f.string("cpu_op", false);
      k.unusable = f.string("unusable", false);
      if (k.duration_s < 0 || k.flop < 0 || k.bytes < 0)
        f.fail(k.duration_s < 0 ? "duration_s" : k.flop < 0 ? "flop" : "bytes", "must not be negative");
      if (k.kernels < 0 || k.busy_s < 0 || k.busy_s > k.duration_s * (1 + 1e-9))
        f.fail(k.kernels < 0 ? "kernels" : "busy_s",
               k.kernels < 0 ? "must not be negative" : "must lie between 0 and duration_s");
      set.kernels.push_back(std::move(k));
    } else if (type == "collective") {
      CollectiveRecord c;
      c.collective = f.string("collective", true);
      c.bytes = f.number("bytes", true);
      c.dtype = f.string("dtype", false);
      c.group_size = f.integer("group_size", 0);
      c.nodes = f.integer("nodes", 0);
      c.duration_s = f.number("duration_s", true);
      c.source = f.string("source", false);
      c.name = f.string("name", false);
      c.point = f.integer("point", 0);
      if (c.duration_s < 0 || c.bytes < 0)
        f.fail(c.duration_s < 0 ? "duration_s" : "bytes", "must not be negative");
      set.collectives.push_back(std::move(c));
    } else if (type == "host_op") {
      set.host_ops.push_back(read_host_op(f));
    } else if (type == "host_step") {
      set.host_steps.push_back(read_host_step(r, f, where));
    } else {
      ++set.skipped["record of unknown type '" + type + "'"];
    }
  }
  for (const auto& [key, values] : provenance) {
    std::string joined;
    for (const auto& v : values)
      joined += (joined.empty() ? "" : "; ") + v;
    set.provenance[key] = joined;
  }
  if (set.kernels.empty() && set.collectives.empty() && set.host_ops.empty() && set.host_steps.empty())
    throw TraceError(path + ": holds no kernel, collective or host record (an empty file? `ddlsim calibrate import` "
                            "or `calibrate collect` write them)");
  return set;
}

void append(TraceSet& into, TraceSet more)
{
  int offset = 0;
  for (const auto& k : into.kernels)
    offset = std::max(offset, k.point);
  for (const auto& c : into.collectives)
    offset = std::max(offset, c.point);
  for (auto& k : more.kernels) {
    if (k.point > 0)
      k.point += offset;
    into.kernels.push_back(std::move(k));
  }
  for (auto& c : more.collectives) {
    if (c.point > 0)
      c.point += offset;
    into.collectives.push_back(std::move(c));
  }
  std::move(more.host_ops.begin(), more.host_ops.end(), std::back_inserter(into.host_ops));
  std::move(more.host_steps.begin(), more.host_steps.end(), std::back_inserter(into.host_steps));
  for (const auto& [reason, n] : more.skipped)
    into.skipped[reason] += n;
  for (const auto& [key, value] : more.provenance) {
    std::string& have = into.provenance[key];
    if (have.empty())
      have = value;
    else if (("; " + have + "; ").find("; " + value + "; ") == std::string::npos)
      have += "; " + value;
  }
}

double element_bytes(const std::string& dtype)
{
  std::string d = lower(dtype);
  if (d.rfind("c10::", 0) == 0)  // PyTorch's C++ names: c10::Half, c10::BFloat16
    d = d.substr(5);
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "uint32" || d == "tf32")
    return 4;
  if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "uint64")
    return 8;
  if (d == "half" || d == "float16" || d == "bfloat16" || d == "bf16" || d == "fp16" || d == "short" || d == "int16")
    return 2;
  if (d == "byte" || d == "char" || d == "int8" || d == "uint8" || d == "bool" || d == "fp8" ||
      d.rfind("float8", 0) == 0)
    return 1;
  return 0;
}

}  // namespace ddlsim::traces
