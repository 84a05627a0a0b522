#include "traces/KinetoImporter.hpp"

#include "common/Error.hpp"
#include "common/Text.hpp"
#include "common/Units.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoEvent.hpp"
#include "traces/KernelShapes.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <optional>
#include <set>

namespace ddlsim::traces {
namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// A finite, non-negative number that fits an int: grid and block sizes, devices, streams.
int small_int(const double* v)
{
  return v && std::isfinite(*v) && *v >= 0 && *v < 2147483647.0 ? static_cast<int>(*v) : -1;
}

std::array<int, 3> dims(const std::array<double, 3>& entries)
{
  std::array<int, 3> out{0, 0, 0};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = std::max(0, small_int(&entries[i]));
  return out;
}

// "allreduce", "all_reduce", "AllReduce" -> all_reduce, and so on.
std::string normalize_collective(const std::string& name)
{
  std::string n;
  for (char c : lower(name))
    if (std::isalnum(static_cast<unsigned char>(c)))
      n += c;
  if (n == "allreduce")
    return "all_reduce";
  if (n == "allgather" || n == "allgatherbase" || n == "allgatherintotensor")
    return "all_gather";
  if (n == "reducescatter" || n == "reducescatterbase" || n == "reducescattertensor")
    return "reduce_scatter";
  if (n == "alltoall" || n == "alltoallbase")
    return "all_to_all";
  if (n == "broadcast")
    return "broadcast";
  if (n == "reduce")
    return "reduce";
  if (n == "sendrecv" || n == "send" || n == "recv")
    return n == "sendrecv" ? "send_recv" : n;
  return n;
}

bool finite_non_negative(const double* v) { return v && std::isfinite(*v) && *v >= 0; }

// Whether `s` contains `needle` (lower case) in any case, without a lowered copy of `s`.
bool contains_ignoring_case(std::string_view s, std::string_view needle)
{
  const auto same = [](char a, char b) { return ascii_lower(a) == b; };
  return std::search(s.begin(), s.end(), needle.begin(), needle.end(), same) != s.end();
}

}  // namespace

std::string collective_from_name(const std::string& name)
{
  if (!contains_ignoring_case(name, "nccl"))  // most kernels: no lowered copy
    return "";
  const std::string l = lower(name);
  if (l.rfind("nccl:", 0) == 0)
    return normalize_collective(name.substr(5));
  if (!contains(l, "nccl"))
    return "";
  static const std::pair<const char*, const char*> kinds[] = {
      {"allreduce", "all_reduce"},         {"allgather", "all_gather"}, {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},          {"broadcast", "broadcast"},  {"sendrecv", "send_recv"},
      {"_send", "send"},                   {"_recv", "recv"},           {"_reduce", "reduce"}};
  for (const auto& [pattern, kind] : kinds)
    if (contains(l, pattern))
      return kind;
  return "nccl";
}


// The events stream through read_kineto_events, read straight from the text into flat events
// (memory stays near the file's size, no tree per event); the rest of the document (device
// properties, distributed info) comes back as `root`.
std::optional<TraceSet> import_kineto_text(std::string_view text, const std::string& path, JsonValue& root)
{
  // The event categories import_kineto_event reads: the others (ac2g flows, memcpy, ...) are
  // skipped unread. Add a category here when import_kineto_event starts reading it
  // (test_json_stream compares this path with the whole tree). Runtime calls link kernels to the
  // CPU ops that launched them (KernelShapes.hpp).
  // GPU memcpys and memsets count in the GPU's busy time (HostActivity.hpp).
  static const std::set<std::string, std::less<>> categories = {"kernel",       "user_annotation", "cpu_op",
                                                                 "cuda_runtime", "cuda_driver",     "gpu_memcpy",
                                                                 "gpu_memset"};
  TraceSet events;
  KinetoImport state;
  root = read_kineto_events(
      text, path, [](std::string_view cat) { return categories.count(cat) > 0; },
      [&](const KinetoEvent& e) { import_kineto_event(events, e, state); });
  if (!root.find("traceEvents"))
    return std::nullopt;
  finish_kineto_import(events, state, path);
  TraceSet set = import_kineto(root, path);  // the header; its events were streamed above
  set.kernels.insert(set.kernels.begin(), std::make_move_iterator(events.kernels.begin()),
                     std::make_move_iterator(events.kernels.end()));
  set.collectives.insert(set.collectives.begin(), std::make_move_iterator(events.collectives.begin()),
                         std::make_move_iterator(events.collectives.end()));
  set.host_ops = std::move(events.host_ops);
  set.host_steps = std::move(events.host_steps);
  for (const auto& [reason, n] : events.skipped)
    set.skipped[reason] += n;
  return set;
}

TraceSet import_kineto(const std::string& path)
{
  const TraceText text(path);
  JsonValue root;
  if (auto set = import_kineto_text(text.view(), path, root))
    return std::move(*set);
  throw TraceError(path + ": not a Kineto/Chrome trace (no 'traceEvents' list)");
}

TraceSet import_kineto(const JsonValue& root, const std::string& path)
{
  const JsonValue* events = root.find("traceEvents");
  if (!root.is_object() || !events || !events->is_array())
    throw TraceError(path + ": not a Kineto/Chrome trace (no 'traceEvents' list)");

  TraceSet set;
  set.provenance["source"] = "kineto";
  set.provenance["file"] = path;
  if (const JsonValue* props = root.find("deviceProperties"); props && props->is_array() && !props->as_array().empty()) {
    const JsonValue& gpu = props->as_array().front();
    if (const std::string* name = gpu.string("name"))
      set.provenance["device"] = *name;
    if (const double* sms = gpu.number("numSms"))
      set.provenance["sm_count"] = format_count(*sms);
    if (const double* mem = gpu.number("totalGlobalMem"))
      set.provenance["device_memory_bytes"] = format_count(*mem);
    const double* major = gpu.number("computeMajor");
    const double* minor = gpu.number("computeMinor");
    if (major && minor)
      set.provenance["compute_capability"] =
          format_count(*major) + "." + format_count(*minor);
  }
  if (const JsonValue* dist = root.find("distributedInfo")) {
    if (const std::string* nccl = dist->string("nccl_version"))
      set.provenance["nccl_version"] = *nccl;
    if (const double* world = dist->number("world_size"))
      set.provenance["world_size"] = format_count(*world);
    if (const double* rank = dist->number("rank"))
      set.provenance["rank"] = format_count(*rank);
  }

  KinetoImport state;
  import_kineto_events(set, events->as_array(), state);
  finish_kineto_import(set, state, path);
  return set;
}

void import_kineto_events(TraceSet& set, const std::vector<JsonValue>& events, KinetoImport& state)
{
  for (const JsonValue& e : events)
    import_kineto_event(set, kineto_event(e), state);
}

void finish_kineto_import(TraceSet& set, KinetoImport& state, const std::string& path)
{
  attach_kernel_shapes(set.kernels, state.links.ops, state.links.launches, state.links.links);
  state.host.finish(path, set);
}

void import_kineto_event(TraceSet& set, const KinetoEvent& e, KinetoImport& state)
{
  KernelLinks& links = state.links;
  state.host.add(e);
  auto skip = [&](const std::string& reason) { ++set.skipped[reason]; };
  auto id_of = [](const KinetoMember& m) { return m.type == KinetoMember::Type::number ? m.number : -1.0; };
  const std::string_view* cat = e.cat.as_string();
  if (!cat)
    return;  // metadata and counters
  if (*cat == "cuda_runtime" || *cat == "cuda_driver") {
    if (e.args.type != KinetoMember::Type::absent && e.ts.as_number())
      links.launches.push_back({.correlation = id_of(e.correlation), .external_id = id_of(e.external_id),
                                .pid = id_of(e.pid), .tid = id_of(e.tid), .ts = e.ts.number});
    return;
  }
  const bool kernel = *cat == "kernel";
  const bool annotation = *cat == "user_annotation" || *cat == "cpu_op";
  if (!kernel && !annotation)
    return;
  const std::string_view* name = e.name.as_string();
  if (!name || !finite_non_negative(e.ts.as_number()) || !finite_non_negative(e.dur.as_number())) {
    if (kernel)
      skip("kernel without a name, ts or dur (or with negative or non-finite ones)");
    return;
  }
  const bool has_args = e.args.type != KinetoMember::Type::absent;
  const double ts = e.ts.number, dur = e.dur.number;
  if (*cat == "cpu_op") {
    CpuOp op{.name = std::string(*name), .ts = ts, .dur = dur, .pid = id_of(e.pid), .tid = id_of(e.tid),
             .external_id = id_of(e.external_id), .args = nullptr};
    if (has_args && priced_op(op.name)) {  // the shapes: a tree of args, for these ops only
      op.args = std::make_shared<const JsonValue>(e.args_tree ? *e.args_tree : parse_json(e.args_json, op.name));
    } else if (has_args && may_launch(op.name)) {  // the bytes a memory-bound op moves, if it is one
      const JsonValue args = e.args_tree ? *e.args_tree : parse_json(e.args_json, op.name);
      op.memory_bytes = memory_bound_bytes(op.name, &args);
    }
    links.ops.push_back(std::move(op));
  }
  if (annotation) {
    if (name->rfind("nccl:", 0) != 0)
      return;
    const std::string annotation_name(*name);
    CollectiveRecord c{.collective = collective_from_name(annotation_name), .bytes = 0, .dtype = "", .group_size = 0,
                       .duration_s = dur * 1e-6, .source = "annotation", .name = annotation_name};
    if (!e.input_dims_listed || !e.input_type) {
      skip("nccl annotation without Input Dims and Input type");
      return;
    }
    c.dtype = lower(*e.input_type);
    if (!e.input_elements.ok || element_bytes(c.dtype) == 0) {
      skip("nccl annotation with unusable Input Dims or Input type");
      return;
    }
    c.bytes = e.input_elements.elements * element_bytes(c.dtype);
    set.collectives.push_back(std::move(c));
    return;
  }

  KernelRecord k;
  k.name = std::string(*name);
  k.start_s = ts * 1e-6;
  k.duration_s = dur * 1e-6;
  if (has_args) {
    k.device = small_int(e.device.as_number());
    k.stream = small_int(e.stream.as_number());
    k.grid = dims(e.grid);
    k.block = dims(e.block);
  }
  set.kernels.push_back(k);
  links.links.push_back({.kernel = set.kernels.size() - 1, .external_id = id_of(e.external_id),
                         .correlation = id_of(e.correlation)});
  const std::string kind = collective_from_name(set.kernels.back().name);
  if (kind.empty())
    return;
  set.kernels.back().unusable = "NCCL kernel: timed by its collective record";
  CollectiveRecord c{.collective = kind, .bytes = 0, .dtype = "", .group_size = 0, .duration_s = k.duration_s,
                     .source = "kernel", .name = set.kernels.back().name};
  if (has_args) {
    if (const std::string_view* collective = e.collective_name.as_string())
      c.collective = normalize_collective(std::string(*collective));
    if (const std::string_view* dtype = e.dtype.as_string())
      c.dtype = lower(*dtype);
    if (const double* group = e.group_size.as_number())
      c.group_size = *group > 0 && *group < 1e9 ? static_cast<int>(*group) : 0;
    const double* nelems = e.in_msg_nelems.as_number();
    if (nelems && finite_non_negative(nelems) && element_bytes(c.dtype) > 0)
      c.bytes = *nelems * element_bytes(c.dtype);
    else if (nelems)
      skip("nccl kernel size unusable (In msg nelems or dtype)");
  }
  set.collectives.push_back(std::move(c));
}

}  // namespace ddlsim::traces
