#include "traces/NcclTestsImporter.hpp"

#include "common/Error.hpp"
#include "common/Units.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoImporter.hpp"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace ddlsim::traces {
namespace {

// "all_reduce_perf" (or a path ending in it) -> all_reduce; "sendrecv_perf" -> send_recv.
std::string collective_from_program(std::string program)
{
  const auto slash = program.find_last_of('/');
  if (slash != std::string::npos)
    program = program.substr(slash + 1);
  const auto perf = program.find("_perf");
  if (perf == std::string::npos)
    return "";
  program = program.substr(0, perf);
  if (program == "sendrecv")
    return "send_recv";
  if (program == "alltoall")
    return "all_to_all";
  return program;
}

std::string collective_from_file(const std::string& path)
{
  static const char* known[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv",
                                "reduce"};
  const std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  for (const char* k : known)
    if (name.find(k) != std::string::npos)
      return collective_from_program(std::string(k) + "_perf");
  return "";
}

bool parse_number(const std::string& token, double& out)
{
  char* end = nullptr;
  out = std::strtod(token.c_str(), &end);
  return end != token.c_str() && *end == '\0' && std::isfinite(out);
}

TraceSet from_text(const std::string& text, const std::string& path)
{
  TraceSet set;
  set.provenance["source"] = "nccl-tests";
  set.provenance["file"] = path;
  std::string collective;
  int ranks = 0;
  std::set<std::string> hosts;  // "#  Rank  0 Group  0 Pid  1 on  HOST device ..."
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      const auto start = line.find("Collective test starting:");
      if (start != std::string::npos) {
        std::istringstream words(line.substr(start + 25));
        std::string program;
        words >> program;
        collective = collective_from_program(program);
      } else if (line.find(" Rank ") != std::string::npos && line.find(" device ") != std::string::npos) {
        ++ranks;
        if (const auto on = line.find(" on "); on != std::string::npos) {
          std::istringstream host(line.substr(on + 4));
          std::string name;
          if (host >> name)
            hosts.insert(name);
        }
        const auto bracket = line.find("] ");
        if (bracket != std::string::npos && !set.provenance.count("device"))
          set.provenance["device"] = line.substr(bracket + 2);
      } else if (const auto v = line.find("nccl-tests version"); v != std::string::npos) {
        // "# nccl-tests version 2.13.8 nccl-headers=..."; the version may be missing at the line's end
        const auto rest = line.find_first_not_of(' ', v + 18);
        if (rest != std::string::npos)
          set.provenance["nccl_tests"] = line.substr(rest);
      }
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string t; words >> t;)
      tokens.push_back(t);
    if (tokens.empty())
      continue;
    // size count type redop root time algbw busbw #wrong ...
    double size = 0, count = 0, time_us = 0;
    if (tokens.size() < 8 || !parse_number(tokens[0], size) || !parse_number(tokens[1], count) ||
        !parse_number(tokens[5], time_us) || size < 0 || time_us < 0) {
      ++set.skipped["line that is not a result row"];
      continue;
    }
    set.collectives.push_back({.collective = collective, .bytes = size, .dtype = tokens[2], .group_size = 0,
                               .duration_s = time_us * 1e-6, .source = "nccl-tests", .name = tokens[3]});
  }
  if (collective.empty())
    collective = collective_from_file(path);
  for (auto& c : set.collectives) {
    c.collective = collective.empty() ? "unknown" : collective;
    c.group_size = ranks;
    c.nodes = static_cast<int>(hosts.size());
  }
  return set;
}

TraceSet from_json(const JsonValue& root, const std::string& path)
{
  TraceSet set;
  set.provenance["source"] = "nccl-tests";
  set.provenance["file"] = path;
  std::string collective;
  if (const JsonValue* args = root.find("args"); args && args->is_array() && !args->as_array().empty() &&
                                                 args->as_array().front().is_string())
    collective = collective_from_program(args->as_array().front().as_string());
  if (collective.empty())
    collective = collective_from_file(path);
  if (const double* version = root.number("nccl_version"))
    set.provenance["nccl_version"] = format_count(*version);
  int ranks = 0;
  std::set<std::string> hosts;
  if (const JsonValue* config = root.find("config"))
    if (const JsonValue* devices = config->find("devices"); devices && devices->is_array()) {
      ranks = static_cast<int>(devices->as_array().size());
      for (const JsonValue& d : devices->as_array())
        if (const std::string* host = d.string("hostname"))
          hosts.insert(*host);
      if (ranks > 0)
        if (const std::string* info = devices->as_array().front().string("device_info"))
          set.provenance["device"] = *info;
    }
  const JsonValue* results = root.find("results");
  if (!results || !results->is_array())
    throw TraceError(path + ": nccl-tests JSON without a 'results' list");
  for (const JsonValue& r : results->as_array()) {
    const double* size = r.number("size");
    const std::string* type = r.string("type");
    const JsonValue* oop = r.find("out_of_place");
    const double* time = oop ? oop->number("time") : nullptr;
    if (!time && oop)
      time = oop->number("cpu_time");
    if (!size || !type || !time || !std::isfinite(*size) || *size < 0 || !std::isfinite(*time) || *time < 0) {
      ++set.skipped["result without size, type or out-of-place time"];
      continue;
    }
    set.collectives.push_back({.collective = collective.empty() ? "unknown" : collective, .bytes = *size,
                               .dtype = *type, .group_size = ranks, .nodes = static_cast<int>(hosts.size()),
                               .duration_s = *time * 1e-6,
                               .source = "nccl-tests", .name = r.string("redop") ? *r.string("redop") : ""});
  }
  return set;
}

bool looks_like_json(std::string_view text)
{
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    return c == '{';
  }
  return false;
}

TraceSet checked(TraceSet set, const std::string& path)
{
  if (set.collectives.empty())
    throw TraceError(path + ": no nccl-tests result rows");
  return set;
}

}  // namespace

TraceSet import_nccl_tests(const std::string& path)
{
  const std::string text = read_maybe_gzip(path);
  return checked(looks_like_json(text) ? from_json(parse_json(text, path), path) : from_text(text, path), path);
}

TraceSet import_trace(const std::string& path)
{
  const TraceText file(path);
  const std::string_view text = file.view();
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw TraceError(path + ": the file is empty");
  if (!looks_like_json(text))
    return checked(from_text(std::string(text), path), path);
  JsonValue root;  // a Kineto trace's events stream past; other documents come back whole
  if (std::optional<TraceSet> kineto = import_kineto_text(text, path, root)) {
    TraceSet set = std::move(*kineto);
    if (set.kernels.empty() && set.collectives.empty())
      throw TraceError(path + ": traceEvents: no GPU kernel and no NCCL collective among its " +
                       std::to_string(set.skipped_total()) +
                       " skipped events (a CPU-only profile? record with ProfilerActivity.CUDA)");
    return set;
  }
  if (root.find("results"))
    return checked(from_json(root, path), path);
  throw TraceError(path + ": neither a Kineto trace (traceEvents) nor nccl-tests output (results)");
}

}  // namespace ddlsim::traces
