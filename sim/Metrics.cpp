#include "sim/Metrics.hpp"

#include "sim/Collectives.hpp"

#include <algorithm>

namespace ddlsim::sim {
namespace {
std::vector<Interval> merged(std::vector<Interval> v)
{
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first)
      continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}
}  // namespace

double union_length(std::vector<Interval> intervals)
{
  double total = 0;
  for (const auto& [a, b] : merged(std::move(intervals)))
    total += b - a;
  return total;
}

double uncovered_length(std::vector<Interval> a, std::vector<Interval> b)
{
  const auto ua = merged(std::move(a));
  const auto ub = merged(std::move(b));
  double overlap = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : ua) {
    while (j < ub.size() && ub[j].second <= s)
      ++j;
    for (std::size_t k = j; k < ub.size() && ub[k].first < e; ++k)
      overlap += std::min(e, ub[k].second) - std::max(s, ub[k].first);
  }
  double total = 0;
  for (const auto& [s, e] : ua)
    total += e - s;
  return total - overlap;
}

namespace {
template <typename Keep> std::vector<double> bytes_sent(const TaskGraph& graph, int gpus_per_node, Keep keep)
{
  std::vector<double> bytes(static_cast<std::size_t>(graph.device_count()), 0.0);
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) == TaskKind::transfer) {
      if (keep(graph.transfer(id).src, graph.transfer(id).dst))
        bytes[static_cast<std::size_t>(graph.transfer(id).src)] += graph.transfer(id).bytes;
    } else if (graph.kind(id) == TaskKind::collective) {
      for_each_send(graph.collective(id), gpus_per_node, [&](int src, int dst, double sent) {
        if (keep(src, dst))
          bytes[static_cast<std::size_t>(src)] += sent;
      });
    }
  }
  return bytes;
}
}  // namespace

std::vector<double> bytes_sent_per_device(const TaskGraph& graph, int gpus_per_node)
{
  return bytes_sent(graph, gpus_per_node, [](int, int) { return true; });
}

std::vector<double> inter_node_bytes_per_device(const TaskGraph& graph, int gpus_per_node)
{
  return bytes_sent(graph, gpus_per_node, [&](int src, int dst) { return src / gpus_per_node != dst / gpus_per_node; });
}

std::vector<DeviceStats> device_stats(const TaskGraph& graph, const std::vector<TaskTiming>& timings, double makespan_s,
                                      int gpus_per_node)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  std::vector<std::vector<Interval>> compute(n);
  std::vector<std::vector<Interval>> comm(n);
  for (TaskId id = 0; id < graph.size(); ++id) {
    const Interval iv{timings[id].start_s, timings[id].end_s};
    switch (graph.kind(id)) {
    case TaskKind::compute: compute[static_cast<std::size_t>(graph.compute(id).device)].push_back(iv); break;
    case TaskKind::transfer:
      comm[static_cast<std::size_t>(graph.transfer(id).src)].push_back(iv);
      comm[static_cast<std::size_t>(graph.transfer(id).dst)].push_back(iv);
      break;
    case TaskKind::collective:
      for (int d : graph.collective(id).group)
        comm[static_cast<std::size_t>(d)].push_back(iv);
      break;
    }
  }
  const auto bytes = bytes_sent_per_device(graph, gpus_per_node);
  const auto inter = inter_node_bytes_per_device(graph, gpus_per_node);
  std::vector<DeviceStats> stats(n);
  for (std::size_t d = 0; d < n; ++d) {
    stats[d].compute_s = union_length(compute[d]);
    stats[d].exposed_comm_s = uncovered_length(comm[d], compute[d]);
    stats[d].idle_s = std::max(0.0, makespan_s - stats[d].compute_s - stats[d].exposed_comm_s);
    stats[d].bytes_sent = bytes[d];
    stats[d].bytes_sent_inter = inter[d];
  }
  return stats;
}

}  // namespace ddlsim::sim
