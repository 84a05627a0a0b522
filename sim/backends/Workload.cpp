#include "sim/backends/Workload.hpp"

#include "common/Error.hpp"
#include "common/Statistics.hpp"
#include "traces/ChromeTrace.hpp"
#include "traces/Json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ddlsim::backends {
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;
using calibration::ConvPass;
using traces::JsonValue;

std::string num(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string ints(const std::vector<int>& v)
{
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

const char* kind_name(WorkTask::Kind k)
{
  switch (k) {
  case WorkTask::Kind::compute: return "compute";
  case WorkTask::Kind::transfer: return "transfer";
  case WorkTask::Kind::collective: return "collective";
  }
  return "?";
}

class Reader {
public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& where, const std::string& what) const
  {
    throw TraceError(origin_ + ": " + where + ": " + what);
  }
  const JsonValue& member(const JsonValue& o, const char* key, const std::string& where) const
  {
    const JsonValue* v = o.find(key);
    if (v == nullptr)
      fail(where + "." + key, "missing");
    return *v;
  }
  double number(const JsonValue& o, const char* key, const std::string& where, double fallback, bool required) const
  {
    const JsonValue* v = o.find(key);
    if (v == nullptr) {
      if (required)
        fail(where + "." + key, "missing");
      return fallback;
    }
    if (!v->is_number() || !std::isfinite(v->as_number()) || v->as_number() < 0)
      fail(where + "." + key, "must be a non-negative number");
    return v->as_number();
  }
  long long integer(const JsonValue& o, const char* key, const std::string& where, long long fallback, bool required) const
  {
    const double v = number(o, key, where, static_cast<double>(fallback), required);
    if (v != std::floor(v) || v > 9.0e15)
      fail(where + "." + key, "must be a whole number");
    return static_cast<long long>(v);
  }
  std::string string(const JsonValue& o, const char* key, const std::string& where, bool required) const
  {
    const JsonValue* v = o.find(key);
    if (v == nullptr) {
      if (required)
        fail(where + "." + key, "missing");
      return {};
    }
    if (!v->is_string())
      fail(where + "." + key, "must be a string");
    return v->as_string();
  }
  std::vector<int> int_list(const JsonValue& o, const char* key, const std::string& where) const
  {
    std::vector<int> out;
    const JsonValue* v = o.find(key);
    if (v == nullptr)
      return out;
    if (!v->is_array())
      fail(where + "." + key, "must be a list of whole numbers");
    for (const JsonValue& e : v->as_array()) {
      if (!e.is_number() || e.as_number() != std::floor(e.as_number()) || e.as_number() < 0 || e.as_number() > 1e9)
        fail(where + "." + key, "must be a list of whole numbers");
      out.push_back(static_cast<int>(e.as_number()));
    }
    return out;
  }

private:
  std::string origin_;
};

BenchOp parse_op(const Reader& r, const std::string& text, const std::string& where)
{
  for (BenchOp op : {BenchOp::gemm, BenchOp::batched_gemm, BenchOp::conv2d, BenchOp::pointwise})
    if (text == calibration::bench_op_name(op))
      return op;
  r.fail(where + ".op", "unknown op '" + text + "' (expected gemm, batched_gemm, conv2d or pointwise)");
}

}  // namespace

void write_workload(const Workload& w, std::ostream& out)
{
  out << "{\"format\":\"ddlsim-workload-1\",\"label\":\"" << traces::json_escape(w.label) << "\",\"devices\":" << w.devices
      << ",\"dtype\":\"" << traces::json_escape(w.dtype) << "\",\"tasks\":[\n";
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    const WorkTask& t = w.tasks[i];
    out << "{\"kind\":\"" << kind_name(t.kind) << "\",\"after\":" << ints(t.after);
    switch (t.kind) {
    case WorkTask::Kind::compute:
      out << ",\"device\":" << t.device;
      if (!t.phase.empty())
        out << ",\"phase\":\"" << traces::json_escape(t.phase) << "\"";
      out << ",\"launches\":[";
      for (std::size_t l = 0; l < t.launches.size(); ++l) {
        const BenchPoint& p = t.launches[l];
        out << (l ? "," : "") << "{\"op\":\"" << calibration::bench_op_name(p.op) << "\",\"dtype\":\"" << p.dtype << "\"";
        if (p.op == BenchOp::gemm || p.op == BenchOp::batched_gemm)
          out << ",\"m\":" << p.m << ",\"n\":" << p.n << ",\"k\":" << p.k << ",\"batch\":" << p.batch
              << ",\"layout\":\"" << calibration::gemm_layout_name(p.layout) << "\"";
        if (p.op == BenchOp::conv2d) {
          const auto& c = p.conv;
          out << ",\"pass\":\"" << calibration::conv_pass_name(p.pass) << "\",\"conv\":"
              << ints({c.n, c.c, c.h, c.w, c.k, c.r, c.s, c.stride, c.pad});
        }
        if (p.op == BenchOp::pointwise)
          out << ",\"bytes\":" << num(p.bytes);
        out << "}";
      }
      out << "]";
      break;
    case WorkTask::Kind::transfer:
      out << ",\"src\":" << t.src << ",\"dst\":" << t.dst << ",\"bytes\":" << num(t.bytes);
      break;
    case WorkTask::Kind::collective:
      out << ",\"collective\":\"" << t.collective << "\",\"group\":" << ints(t.group) << ",\"bytes\":" << num(t.bytes);
      break;
    }
    out << "}" << (i + 1 < w.tasks.size() ? ",\n" : "\n");
  }
  out << "]";
  if (!w.memory.empty()) {
    out << ",\"memory\":[";
    for (std::size_t d = 0; d < w.memory.size(); ++d) {
      const DeviceMemory& m = w.memory[d];
      out << (d ? "," : "") << "{\"weights\":" << num(m.weights) << ",\"gradients\":" << num(m.gradients)
          << ",\"optimizer_state\":" << num(m.optimizer_state) << ",\"activations\":" << num(m.activations)
          << ",\"workspace\":" << num(m.workspace) << ",\"reserve\":" << num(m.reserve) << "}";
    }
    out << "]";
  }
  out << "}\n";
}

Workload parse_workload(const std::string& text, const std::string& origin)
{
  const Reader r(origin);
  const JsonValue doc = traces::parse_json(text, origin);
  if (!doc.is_object())
    r.fail("workload", "must be a JSON object");
  if (r.string(doc, "format", "workload", true) != "ddlsim-workload-1")
    r.fail("workload.format", "expected ddlsim-workload-1");
  Workload w;
  w.label = r.string(doc, "label", "workload", false);
  w.dtype = r.string(doc, "dtype", "workload", false);
  w.devices = static_cast<int>(r.integer(doc, "devices", "workload", 0, true));
  if (w.devices < 1 || w.devices > 1 << 20)
    r.fail("workload.devices", "must lie in [1, 1048576]");
  const JsonValue& tasks = r.member(doc, "tasks", "workload");
  if (!tasks.is_array())
    r.fail("workload.tasks", "must be a list");
  const int count = static_cast<int>(tasks.as_array().size());
  auto device = [&](const JsonValue& o, const char* key, const std::string& where) {
    const long long d = r.integer(o, key, where, 0, true);
    if (d >= w.devices)
      r.fail(where + "." + key, "device " + std::to_string(d) + " outside [0, " + std::to_string(w.devices) + ")");
    return static_cast<int>(d);
  };
  for (int i = 0; i < count; ++i) {
    const JsonValue& o = tasks.as_array()[static_cast<std::size_t>(i)];
    const std::string where = "tasks[" + std::to_string(i) + "]";
    if (!o.is_object())
      r.fail(where, "must be an object");
    WorkTask t;
    t.after = r.int_list(o, "after", where);
    for (int a : t.after)
      if (a >= i)
        r.fail(where + ".after", "task " + std::to_string(a) + " does not come before this one");
    const std::string kind = r.string(o, "kind", where, true);
    if (kind == "compute") {
      t.kind = WorkTask::Kind::compute;
      t.device = device(o, "device", where);
      t.phase = r.string(o, "phase", where, false);
      if (!t.phase.empty() && t.phase != "forward" && t.phase != "backward" && t.phase != "optimizer")
        r.fail(where + ".phase", "unknown phase '" + t.phase + "' (expected forward, backward or optimizer)");
      const JsonValue* launches = o.find("launches");
      if (launches && !launches->is_array())
        r.fail(where + ".launches", "must be a list");
      for (std::size_t l = 0; launches && l < launches->as_array().size(); ++l) {
        const JsonValue& p = launches->as_array()[l];
        const std::string lw = where + ".launches[" + std::to_string(l) + "]";
        if (!p.is_object())
          r.fail(lw, "must be an object");
        BenchPoint b;
        b.op = parse_op(r, r.string(p, "op", lw, true), lw);
        b.dtype = r.string(p, "dtype", lw, false);
        if (b.op == BenchOp::gemm || b.op == BenchOp::batched_gemm) {
          b.m = r.integer(p, "m", lw, 0, true);
          b.n = r.integer(p, "n", lw, 0, true);
          b.k = r.integer(p, "k", lw, 0, true);
          b.batch = r.integer(p, "batch", lw, 1, false);
          const std::string layout = r.string(p, "layout", lw, false);
          if (layout == "nt")
            b.layout = calibration::GemmLayout::nt;
          else if (layout == "tn")
            b.layout = calibration::GemmLayout::tn;
          else if (!layout.empty() && layout != "nn")
            r.fail(lw + ".layout", "unknown layout '" + layout + "' (expected nn, nt or tn)");
        } else if (b.op == BenchOp::conv2d) {
          const std::string pass = r.string(p, "pass", lw, true);
          if (pass == "fwd")
            b.pass = ConvPass::forward;
          else if (pass == "bwd_data")
            b.pass = ConvPass::backward_data;
          else if (pass == "bwd_filter")
            b.pass = ConvPass::backward_filter;
          else
            r.fail(lw + ".pass", "unknown pass '" + pass + "' (expected fwd, bwd_data or bwd_filter)");
          const std::vector<int> c = r.int_list(p, "conv", lw);
          if (c.size() != 9)
            r.fail(lw + ".conv", "expected [n, c, h, w, k, r, s, stride, pad]");
          b.conv = {.n = c[0], .c = c[1], .h = c[2], .w = c[3], .k = c[4], .r = c[5], .s = c[6], .stride = c[7], .pad = c[8]};
          if (b.conv.stride < 1 || b.conv.out_h() < 1 || b.conv.out_w() < 1)
            r.fail(lw + ".conv", "not a valid convolution");
        } else {
          b.bytes = r.number(p, "bytes", lw, 0, true);
        }
        t.launches.push_back(std::move(b));
      }
    } else if (kind == "transfer") {
      t.kind = WorkTask::Kind::transfer;
      t.src = device(o, "src", where);
      t.dst = device(o, "dst", where);
      t.bytes = r.number(o, "bytes", where, 0, true);
    } else if (kind == "collective") {
      t.kind = WorkTask::Kind::collective;
      t.collective = r.string(o, "collective", where, true);
      if (t.collective != "all_reduce" && t.collective != "all_gather" && t.collective != "reduce_scatter")
        r.fail(where + ".collective", "unknown collective '" + t.collective + "'");
      t.group = r.int_list(o, "group", where);
      for (int g : t.group)
        if (g >= w.devices)
          r.fail(where + ".group", "device " + std::to_string(g) + " outside [0, " + std::to_string(w.devices) + ")");
      t.bytes = r.number(o, "bytes", where, 0, true);
    } else {
      r.fail(where + ".kind", "unknown kind '" + kind + "' (expected compute, transfer or collective)");
    }
    w.tasks.push_back(std::move(t));
  }
  if (const JsonValue* memory = doc.find("memory")) {
    if (!memory->is_array() || memory->as_array().size() != static_cast<std::size_t>(w.devices))
      r.fail("workload.memory", "must be a list of one object per device (" + std::to_string(w.devices) + ")");
    for (std::size_t d = 0; d < memory->as_array().size(); ++d) {
      const JsonValue& m = memory->as_array()[d];
      const std::string where = "memory[" + std::to_string(d) + "]";
      if (!m.is_object())
        r.fail(where, "must be an object");
      w.memory.push_back({.weights = r.number(m, "weights", where, 0, true),
                          .gradients = r.number(m, "gradients", where, 0, true),
                          .optimizer_state = r.number(m, "optimizer_state", where, 0, true),
                          .activations = r.number(m, "activations", where, 0, true),
                          .workspace = r.number(m, "workspace", where, 0, false),
                          .reserve = r.number(m, "reserve", where, 0, false)});
    }
  }
  return w;
}

double ExecutionResult::median_s() const { return median(iterations_s); }

double ExecutionResult::min_s() const { return iterations_s.empty() ? 0.0 : *std::min_element(iterations_s.begin(), iterations_s.end()); }
double ExecutionResult::max_s() const { return iterations_s.empty() ? 0.0 : *std::max_element(iterations_s.begin(), iterations_s.end()); }

void write_execution_result(const ExecutionResult& r, std::ostream& out)
{
  out << "{\"format\":\"ddlsim-execution-1\",\"device\":\"" << traces::json_escape(r.device) << "\",\"iterations_s\":[";
  for (std::size_t i = 0; i < r.iterations_s.size(); ++i)
    out << (i ? "," : "") << num(r.iterations_s[i]);
  out << "],\"peak_memory_bytes\":" << num(r.peak_memory_bytes) << ",\"notes\":[";
  for (std::size_t i = 0; i < r.notes.size(); ++i)
    out << (i ? "," : "") << "\"" << traces::json_escape(r.notes[i]) << "\"";
  out << "]}\n";
}

ExecutionResult parse_execution_result(const std::string& text, const std::string& origin)
{
  const Reader r(origin);
  const JsonValue doc = traces::parse_json(text, origin);
  if (!doc.is_object() || r.string(doc, "format", "result", true) != "ddlsim-execution-1")
    r.fail("result.format", "expected ddlsim-execution-1");
  ExecutionResult out;
  out.device = r.string(doc, "device", "result", false);
  const JsonValue& its = r.member(doc, "iterations_s", "result");
  if (!its.is_array() || its.as_array().empty())
    r.fail("result.iterations_s", "must be a non-empty list of seconds");
  for (const JsonValue& v : its.as_array()) {
    if (!v.is_number() || !(v.as_number() > 0))
      r.fail("result.iterations_s", "must be a non-empty list of positive seconds");
    out.iterations_s.push_back(v.as_number());
  }
  out.peak_memory_bytes = r.number(doc, "peak_memory_bytes", "result", 0, false);
  if (const JsonValue* notes = doc.find("notes"); notes && notes->is_array())
    for (const JsonValue& v : notes->as_array())
      if (v.is_string())
        out.notes.push_back(v.as_string());
  return out;
}

Workload read_workload(const std::string& path)
{
  std::ifstream in(path);
  if (!in)
    throw TraceError(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return parse_workload(text.str(), path);
}

}  // namespace ddlsim::backends
