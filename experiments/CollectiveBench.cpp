#include "experiments/CollectiveBench.hpp"

#include "common/Units.hpp"
#include "experiments/Evaluate.hpp"
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>

namespace ddlsim::experiments {
namespace {

struct TypeName {
  std::string_view name;
  int bytes;
};
// nccl-tests' type names (src/common.cu: test_typenames).
constexpr std::array<TypeName, 12> type_names{{{"int8", 1},
                                                {"uint8", 1},
                                                {"int32", 4},
                                                {"uint32", 4},
                                                {"int64", 8},
                                                {"uint64", 8},
                                                {"half", 2},
                                                {"float", 4},
                                                {"double", 8},
                                                {"bfloat16", 2},
                                                {"f8e4m3", 1},
                                                {"f8e5m2", 1}}};

enum class Op { all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv };

Op parse_op(std::string op)
{
  if (const auto perf = op.find("_perf"); perf != std::string::npos)
    op = op.substr(0, perf);
  if (op == "all_reduce" || op == "allreduce")
    return Op::all_reduce;
  if (op == "all_gather" || op == "allgather")
    return Op::all_gather;
  if (op == "reduce_scatter" || op == "reducescatter")
    return Op::reduce_scatter;
  if (op == "broadcast")
    return Op::broadcast;
  if (op == "send_recv" || op == "sendrecv")
    return Op::send_recv;
  if (op == "all_to_all" || op == "alltoall")
    return Op::all_to_all;
  throw std::invalid_argument("--op '" + op +
                              "': expected all_reduce, all_gather, reduce_scatter, broadcast, all_to_all or send_recv");
}

sim::CollectiveKind kind_of(Op op)
{
  switch (op) {
  case Op::all_gather: return sim::CollectiveKind::all_gather;
  case Op::reduce_scatter: return sim::CollectiveKind::reduce_scatter;
  case Op::broadcast: return sim::CollectiveKind::broadcast;
  case Op::all_to_all: return sim::CollectiveKind::all_to_all;
  case Op::all_reduce:
  case Op::send_recv: break;
  }
  return sim::CollectiveKind::all_reduce;
}

// A row's printed size and count for a requested size (nccl-tests' GetCollByteCount; all-to-all: the
// count each rank sends each peer).
std::pair<double, long long> row_shape(Op op, double requested, int type_bytes, int ranks)
{
  const auto count = static_cast<long long>(requested / type_bytes);
  if (op == Op::all_gather || op == Op::reduce_scatter || op == Op::all_to_all) {
    const long long align = std::max(1, 16 / type_bytes);
    const long long base = (count / ranks) / align * align;
    return {static_cast<double>(base) * ranks * type_bytes, base};
  }
  return {static_cast<double>(count) * type_bytes, count};
}

double bus_factor(Op op, int ranks)
{
  return op == Op::send_recv ? 1.0 : sim::bus_bandwidth_factor(kind_of(op), ranks);
}

// nccl-tests' number format: 2 decimals if they fit the width, else fewer, else exponent.
std::string fixed(double value, int width)
{
  char buf[64];
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"})
    if (std::snprintf(buf, sizeof buf, format, width, value) <= width)
      return buf;
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

}  // namespace

std::vector<double> nccl_tests_sizes(double min_bytes, double max_bytes, double factor, double step_bytes)
{
  if (!(min_bytes >= 0) || !(max_bytes >= min_bytes))
    throw std::invalid_argument("sizes: -b must be at least 0 and at most -e");
  if (factor <= 1 && step_bytes <= 0)
    throw std::invalid_argument("sizes: -f must be above 1, or -i above 0");
  std::vector<double> sizes;
  for (double size = min_bytes; size <= max_bytes; size = factor > 1 ? size * factor : size + step_bytes) {
    sizes.push_back(size);
    if (sizes.size() > 10000)
      throw std::invalid_argument("sizes: more than 10,000 sizes from -b to -e");
    if (factor > 1 && size <= 0) {  // 0 x factor never advances: nccl-tests would loop forever
      if (max_bytes <= 0)
        break;
      throw std::invalid_argument("sizes: -b 0 with a factor never grows; use -b 1 or -i");
    }
  }
  return sizes;
}

double parse_nccl_tests_size(const std::string& text)
{
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string suffix = end ? std::string(end) : std::string();
  static const std::map<std::string, double> binary{{"", 1.0},         {"k", 1024.0},        {"K", 1024.0},
                                                     {"m", 1048576.0}, {"M", 1048576.0},     {"g", 1073741824.0},
                                                     {"G", 1073741824.0}, {"t", 1099511627776.0}, {"T", 1099511627776.0}};
  if (end != text.c_str() && std::isfinite(value) && value >= 0)
    if (auto it = binary.find(suffix); it != binary.end())
      return value * it->second;
  try {
    return parse_quantity(text, Dimension::bytes);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (nccl-tests style: 8, 64K, 128M, 1G; or 1GiB, 512MB)");
  }
}

int nccl_tests_type_bytes(const std::string& dtype)
{
  for (const auto& t : type_names)
    if (t.name == dtype)
      return t.bytes;
  std::string names;
  for (const auto& t : type_names)
    names += (names.empty() ? "" : ", ") + std::string(t.name);
  throw std::invalid_argument("--dtype '" + dtype + "': expected one of nccl-tests' types: " + names);
}

std::string nccl_tests_program(const std::string& op)
{
  switch (parse_op(op)) {
  case Op::all_reduce: return "all_reduce_perf";
  case Op::all_gather: return "all_gather_perf";
  case Op::reduce_scatter: return "reduce_scatter_perf";
  case Op::broadcast: return "broadcast_perf";
  case Op::all_to_all: return "alltoall_perf";
  case Op::send_recv: return "sendrecv_perf";
  }
  return "";
}

std::vector<CollectiveRow> simulate_collective_sweep(const CollectiveSweep& sweep)
{
  const Op op = parse_op(sweep.op);
  const int w = nccl_tests_type_bytes(sweep.dtype);
  const int n = sweep.gpus > 0 ? sweep.gpus : sweep.cluster.gpu_count();
  if (n < 1 || n > sweep.cluster.gpu_count())
    throw std::invalid_argument("--gpus " + std::to_string(n) + ": cluster '" + sweep.cluster.name + "' has " +
                                std::to_string(sweep.cluster.gpu_count()) + " GPUs");
  if (op == Op::broadcast && (sweep.root < 0 || sweep.root >= n))
    throw std::invalid_argument("--root " + std::to_string(sweep.root) + ": ranks go from 0 to " + std::to_string(n - 1));
  const sim::ClusterSpec& cluster = sweep.cluster;

  // One graph: per size, its collective (or its n transfers), then a zero-time barrier task that
  // the next size waits for.
  sim::TaskGraph graph(n);
  std::vector<CollectiveRow> rows;
  std::vector<std::vector<sim::TaskId>> work;  // per size, the tasks it times
  std::vector<sim::TaskId> barriers;
  for (double requested : sweep.sizes) {
    CollectiveRow row;
    const auto [size, count] = row_shape(op, requested, w, n);
    row.size_bytes = size;
    row.count = count;
    const double bytes = op == Op::all_gather || op == Op::reduce_scatter || op == Op::all_to_all
                             ? size
                             : static_cast<double>(count) * w;
    std::vector<sim::TaskId> tasks;
    if (op == Op::send_recv) {
      row.how = "p2p";
      if (n > 1)
        for (int r = 0; r < n; ++r) {
          sim::TransferTask t{.src = r, .dst = (r + 1) % n, .bytes = bytes};
          if (sweep.profile != nullptr && apply_measured_transfer(t, cluster, *sweep.profile))
            row.how = "p2p fitted";
          tasks.push_back(graph.add_transfer(t));
        }
    } else if (n > 1) {
      sim::CollectiveTask c{.kind = kind_of(op), .algorithm = sweep.algorithm, .group = {}, .bytes = bytes};
      for (int r = 0; r < n; ++r)
        c.group.push_back(op == Op::broadcast ? (r + sweep.root) % n : r);  // the root first
      sim::resolve_collective(c, cluster, sweep.protocol);
      row.how = std::string(sim::collective_algorithm_table.name(c.algorithm)) + "/" +
                std::string(sim::collective_protocol_table.name(c.protocol));
      if (sweep.profile != nullptr && apply_measured_collective(c, cluster, *sweep.profile, 1))
        row.how = "fitted";
      const bool flow = sweep.fidelity == CollectiveFidelityChoice::flow ||
                        (sweep.fidelity == CollectiveFidelityChoice::automatic &&
                         static_cast<double>(sim::message_count(c, cluster.gpus_per_node)) <= max_flow_messages);
      c.fidelity = flow ? sim::CollectiveFidelity::flow : sim::CollectiveFidelity::analytic;
      row.how += flow ? " flow" : " analytic";
      tasks.push_back(graph.add_collective(std::move(c)));
    }
    if (!barriers.empty())
      for (sim::TaskId t : tasks)
        graph.add_dependency(barriers.back(), t);
    const sim::TaskId barrier = graph.add_compute({.device = 0, .phase = sim::Phase::optimizer, .micro_batch = -1});
    for (sim::TaskId t : tasks)
      graph.add_dependency(t, barrier);
    barriers.push_back(barrier);
    work.push_back(std::move(tasks));
    rows.push_back(std::move(row));
  }
  const sim::ReplayResult result = sim::replay(graph, cluster, std::vector<double>(graph.size(), 0.0));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double start = std::numeric_limits<double>::infinity(), end = 0;
    for (sim::TaskId t : work[i]) {
      start = std::min(start, result.timings[t].start_s);
      end = std::max(end, result.timings[t].end_s);
    }
    CollectiveRow& row = rows[i];
    row.time_s = work[i].empty() ? 0.0 : end - start;
    row.algbw_Bps = row.time_s > 0 ? row.size_bytes / row.time_s : 0.0;
    row.busbw_Bps = row.algbw_Bps * bus_factor(op, n);
  }
  return rows;
}

void print_nccl_tests(std::ostream& out, const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows)
{
  const Op op = parse_op(sweep.op);
  const std::string program = nccl_tests_program(sweep.op);
  const int n = sweep.gpus > 0 ? sweep.gpus : sweep.cluster.gpu_count();
  char line[512];
  out << "# Collective test starting: " << program << "\n";
  out << "# ddlsim collective: simulated on " << sweep.cluster_label << " (" << n << " GPUs)"
      << (sweep.profile_label.empty() ? "" : ", measured curves of " + sweep.profile_label) << "\n";
  const double min = sweep.sizes.empty() ? 0 : sweep.sizes.front();
  const double max = sweep.sizes.empty() ? 0 : sweep.sizes.back();
  std::snprintf(line, sizeof line,
                "# nThread 1 nGpus 1 minBytes %.0f maxBytes %.0f step: %g(factor) warmup iters: 0 iters: 1 agg iters: 1 "
                "validation: 0 graph: 0\n",
                min, max, sweep.sizes.size() > 1 ? sweep.sizes[1] / std::max(min, 1.0) : 1.0);
  out << line << "#\n# Using devices\n";
  for (int r = 0; r < n; ++r) {
    const std::string host = "node" + std::to_string(sweep.cluster.node_of(r));
    std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [sim] %s\n", r, 0, host.c_str(),
                  r % sweep.cluster.gpus_per_node,
                  sweep.cluster.gpu_names.empty() ? sweep.cluster.gpu_name.c_str()
                                                  : sweep.cluster.gpu_names[static_cast<std::size_t>(r)].c_str());
    out << line;
  }
  out << "#\n";
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
  out << line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "simulated as");
  out << line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  out << line;
  double busbw_sum = 0;
  const int root = op == Op::broadcast ? sweep.root : -1;
  // nccl-tests prints "none" for the operations that do not reduce (all_gather.cu, broadcast.cu, alltoall.cu).
  const bool reduces = op == Op::all_reduce || op == Op::reduce_scatter || op == Op::send_recv;
  const std::string redop = reduces ? sweep.redop : "none";
  for (const CollectiveRow& r : rows) {
    const std::string t = fixed(r.time_s * 1e6, 7), alg = fixed(r.algbw_Bps / 1e9, 6), bus = fixed(r.busbw_Bps / 1e9, 6);
    std::snprintf(line, sizeof line, "%12.0f  %12lld  %8s  %6s  %6d  %7s  %6s  %6s    N/A  %7s  %6s  %6s    N/A  %s\n",
                  r.size_bytes, r.count, sweep.dtype.c_str(), redop.c_str(), root, t.c_str(), alg.c_str(), bus.c_str(),
                  t.c_str(), alg.c_str(), bus.c_str(), r.how.c_str());
    out << line;
    busbw_sum += r.busbw_Bps / 1e9;
  }
  out << "# Out of bounds values : 0 OK\n";
  std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %g \n", rows.empty() ? 0.0 : busbw_sum / static_cast<double>(rows.size()));
  out << line << "#\n# Collective test concluded: " << program << "\n";
}

std::vector<ComparedSize> compare_with_log(const traces::TraceSet& log, const CollectiveSweep& sweep,
                                           const std::vector<CollectiveRow>& rows)
{
  const int n = sweep.gpus > 0 ? sweep.gpus : sweep.cluster.gpu_count();
  const double factor = bus_factor(parse_op(sweep.op), n);
  std::vector<ComparedSize> out;
  std::map<double, bool> seen;
  std::size_t next = 0;
  for (const auto& record : log.collectives) {
    if (seen[record.bytes] || next >= rows.size())
      continue;
    seen[record.bytes] = true;
    const CollectiveRow& row = rows[next++];
    ComparedSize c;
    c.size_bytes = record.bytes;
    c.measured_s = record.duration_s;
    c.simulated_s = row.time_s;
    c.measured_busbw_Bps = record.duration_s > 0 ? record.bytes / record.duration_s * factor : 0;
    c.simulated_busbw_Bps = row.busbw_Bps;
    c.error_pct = record.duration_s > 0 ? 100 * (row.time_s - record.duration_s) / record.duration_s : 0;
    out.push_back(c);
  }
  return out;
}

void print_comparison(std::ostream& out, const std::string& log_path, const CollectiveSweep& sweep,
                      const std::vector<ComparedSize>& sizes)
{
  const int n = sweep.gpus > 0 ? sweep.gpus : sweep.cluster.gpu_count();
  out << "# " << nccl_tests_program(sweep.op) << " measured (" << log_path << ") against simulated on "
      << sweep.cluster_label << " (" << n << " GPUs)\n";
  char line[256];
  std::snprintf(line, sizeof line, "# %10s  %10s  %10s  %8s  %9s  %9s\n", "size", "measured", "simulated", "error", "busbw", "busbw");
  out << line;
  std::snprintf(line, sizeof line, "# %10s  %10s  %10s  %8s  %9s  %9s\n", "(B)", "(us)", "(us)", "(%)", "meas GB/s", "sim GB/s");
  out << line;
  double sum = 0;
  for (const ComparedSize& c : sizes) {
    std::snprintf(line, sizeof line, "%12.0f  %10.2f  %10.2f  %+8.1f  %9.2f  %9.2f\n", c.size_bytes, c.measured_s * 1e6,
                  c.simulated_s * 1e6, c.error_pct, c.measured_busbw_Bps / 1e9, c.simulated_busbw_Bps / 1e9);
    out << line;
    sum += std::fabs(c.error_pct);
  }
  std::snprintf(line, sizeof line, "# mean absolute error: %.1f%% over %zu sizes\n",
                sizes.empty() ? 0.0 : sum / static_cast<double>(sizes.size()), sizes.size());
  out << line;
}

}  // namespace ddlsim::experiments
