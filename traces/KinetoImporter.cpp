#include "traces/KinetoImporter.hpp"

#include "common/Error.hpp"
#include "common/Text.hpp"
#include "common/Units.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"
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
int small_int(const JsonValue* v)
{
  if (!v || !v->is_number())
    return -1;
  const double d = v->as_number();
  return std::isfinite(d) && d >= 0 && d < 2147483647.0 ? static_cast<int>(d) : -1;
}

std::array<int, 3> dims(const JsonValue* v)
{
  std::array<int, 3> out{0, 0, 0};
  if (!v || !v->is_array())
    return out;
  for (std::size_t i = 0; i < 3 && i < v->as_array().size(); ++i)
    out[i] = std::max(0, small_int(&v->as_array()[i]));
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
  const auto same = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; };
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


// The events stream through parse_json_streaming (memory stays near the file's size); the rest of
// the document (device properties, distributed info) comes back as `root`.
std::optional<TraceSet> import_kineto_text(std::string& text, const std::string& path, JsonValue& root)
{
  // The event categories import_kineto_events reads: the others (ac2g flows, memcpy, ...) are
  // skipped unbuilt. Add a category here when import_kineto_events starts reading it
  // (test_json_stream compares this path with the whole tree). Runtime calls link kernels to the
  // CPU ops that launched them (KernelShapes.hpp).
  static const std::set<std::string, std::less<>> categories = {"kernel", "user_annotation", "cpu_op", "cuda_runtime",
                                                                 "cuda_driver"};
  const JsonFilter read_categories{.key = "cat", .keep = [](std::string_view cat) { return categories.count(cat) > 0; }};
  constexpr std::size_t batch_size = 1024;
  std::vector<JsonValue> batch;
  batch.reserve(batch_size);
  TraceSet events;
  KernelLinks links;
  root = parse_json_streaming(
      text, path, "traceEvents",
      [&](JsonValue&& e) {
        batch.push_back(std::move(e));
        if (batch.size() == batch_size) {
          import_kineto_events(events, batch, links);
          batch.clear();
        }
      },
      &read_categories);
  if (!root.find("traceEvents"))
    return std::nullopt;
  import_kineto_events(events, batch, links);
  attach_kernel_shapes(events.kernels, links.ops, links.launches, links.links);
  TraceSet set = import_kineto(root, path);  // the header; its events were streamed above
  set.kernels.insert(set.kernels.begin(), std::make_move_iterator(events.kernels.begin()),
                     std::make_move_iterator(events.kernels.end()));
  set.collectives.insert(set.collectives.begin(), std::make_move_iterator(events.collectives.begin()),
                         std::make_move_iterator(events.collectives.end()));
  for (const auto& [reason, n] : events.skipped)
    set.skipped[reason] += n;
  return set;
}

TraceSet import_kineto(const std::string& path)
{
  std::string text = read_maybe_gzip(path, json_padding());
  JsonValue root;
  if (auto set = import_kineto_text(text, path, root))
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

  KernelLinks links;
  import_kineto_events(set, events->as_array(), links);
  attach_kernel_shapes(set.kernels, links.ops, links.launches, links.links);
  return set;
}

void import_kineto_events(TraceSet& set, const std::vector<JsonValue>& events, KernelLinks& links)
{
  auto skip = [&](const std::string& reason) { ++set.skipped[reason]; };
  auto id_of = [](const JsonValue* args, const char* key) {
    const double* v = args ? args->number(key) : nullptr;
    return v && std::isfinite(*v) ? *v : -1.0;
  };
  auto thread_of = [](const JsonValue& e, const char* key) {
    const double* v = e.number(key);
    return v && std::isfinite(*v) ? *v : -1.0;
  };
  for (const JsonValue& e : events) {
    const std::string* cat = e.string("cat");
    if (!cat)
      continue;  // metadata and counters
    if (*cat == "cuda_runtime" || *cat == "cuda_driver") {
      const JsonValue* args = e.find("args");
      const double* ts = e.number("ts");
      if (args && ts && std::isfinite(*ts))
        links.launches.push_back({.correlation = id_of(args, "correlation"), .external_id = id_of(args, "External id"),
                            .pid = thread_of(e, "pid"), .tid = thread_of(e, "tid"), .ts = *ts});
      continue;
    }
    const bool kernel = *cat == "kernel";
    const bool annotation = *cat == "user_annotation" || *cat == "cpu_op";
    if (!kernel && !annotation)
      continue;
    const std::string* name = e.string("name");
    const double* ts = e.number("ts");
    const double* dur = e.number("dur");
    if (!name || !finite_non_negative(ts) || !finite_non_negative(dur)) {
      if (kernel)
        skip("kernel without a name, ts or dur (or with negative or non-finite ones)");
      continue;
    }
    const JsonValue* args = e.find("args");
    if (*cat == "cpu_op")
      links.ops.push_back({.name = *name, .ts = *ts, .dur = *dur, .pid = thread_of(e, "pid"),
                           .tid = thread_of(e, "tid"), .external_id = id_of(args, "External id"),
                           .args = args && priced_op(*name) ? std::make_shared<const JsonValue>(*args) : nullptr});
    if (annotation) {
      if (name->rfind("nccl:", 0) != 0)
        continue;
      CollectiveRecord c{.collective = collective_from_name(*name), .bytes = 0, .dtype = "", .group_size = 0,
                         .duration_s = *dur * 1e-6, .source = "annotation", .name = *name};
      const JsonValue* input_dims = args ? args->find("Input Dims") : nullptr;
      const JsonValue* input_type = args ? args->find("Input type") : nullptr;
      if (!input_dims || !input_dims->is_array() || input_dims->as_array().empty() ||
          !input_dims->as_array().front().is_array() || !input_type || !input_type->is_array() ||
          input_type->as_array().empty() || !input_type->as_array().front().is_string()) {
        skip("nccl annotation without Input Dims and Input type");
        continue;
      }
      double elements = 1;
      bool ok = true;
      for (const JsonValue& d : input_dims->as_array().front().as_array())
        ok = ok && d.is_number() && std::isfinite(d.as_number()) && d.as_number() >= 0 &&
             (elements *= d.as_number(), std::isfinite(elements));
      c.dtype = lower(input_type->as_array().front().as_string());
      if (!ok || element_bytes(c.dtype) == 0) {
        skip("nccl annotation with unusable Input Dims or Input type");
        continue;
      }
      c.bytes = elements * element_bytes(c.dtype);
      set.collectives.push_back(std::move(c));
      continue;
    }

    KernelRecord k;
    k.name = *name;
    k.start_s = *ts * 1e-6;
    k.duration_s = *dur * 1e-6;
    if (args) {
      k.device = small_int(args->find("device"));
      k.stream = small_int(args->find("stream"));
      k.grid = dims(args->find("grid"));
      k.block = dims(args->find("block"));
    }
    set.kernels.push_back(k);
    links.links.push_back({.kernel = set.kernels.size() - 1, .external_id = id_of(args, "External id"),
                     .correlation = id_of(args, "correlation")});
    const std::string kind = collective_from_name(*name);
    if (kind.empty())
      continue;
    set.kernels.back().unusable = "NCCL kernel: timed by its collective record";
    CollectiveRecord c{.collective = kind, .bytes = 0, .dtype = "", .group_size = 0, .duration_s = k.duration_s,
                       .source = "kernel", .name = *name};
    if (args) {
      if (const std::string* collective = args->string("Collective name"))
        c.collective = normalize_collective(*collective);
      if (const std::string* dtype = args->string("dtype"))
        c.dtype = lower(*dtype);
      if (const double* group = args->number("Group size"))
        c.group_size = std::isfinite(*group) && *group > 0 && *group < 1e9 ? static_cast<int>(*group) : 0;
      const double* nelems = args->number("In msg nelems");
      if (nelems && finite_non_negative(nelems) && element_bytes(c.dtype) > 0)
        c.bytes = *nelems * element_bytes(c.dtype);
      else if (nelems)
        skip("nccl kernel size unusable (In msg nelems or dtype)");
    }
    set.collectives.push_back(std::move(c));
  }
}

}  // namespace ddlsim::traces
