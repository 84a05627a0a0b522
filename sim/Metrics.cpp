#include "sim/Metrics.hpp"

#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

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
// Idle time: what the iteration leaves of compute and exposed communication. A remainder below
// 1e-12 of the iteration is the rounding of those sums (a GPU busy throughout), not idle time.
double idle_time(double makespan_s, double compute_s, double exposed_s)
{
  const double idle = makespan_s - compute_s - exposed_s;
  return idle > 1e-12 * makespan_s ? idle : 0.0;
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

SentBytes sent_bytes_per_device(const TaskGraph& graph, int gpus_per_node)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  SentBytes out{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  auto add = [&](int src, int dst, double bytes) {
    out.total[static_cast<std::size_t>(src)] += bytes;
    if (src / gpus_per_node != dst / gpus_per_node)
      out.inter[static_cast<std::size_t>(src)] += bytes;
  };
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) == TaskKind::transfer)
      add(graph.transfer(id).src, graph.transfer(id).dst, graph.transfer(id).bytes);
    else if (graph.kind(id) == TaskKind::collective)
      for_each_send(graph.collective(id), gpus_per_node, add);
  }
  return out;
}

std::vector<double> bytes_sent_per_device(const TaskGraph& graph, int gpus_per_node)
{
  return sent_bytes_per_device(graph, gpus_per_node).total;
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
  const SentBytes sent = sent_bytes_per_device(graph, gpus_per_node);
  std::vector<DeviceStats> stats(n);
  for (std::size_t d = 0; d < n; ++d) {
    stats[d].compute_s = union_length(compute[d]);
    stats[d].exposed_comm_s = uncovered_length(comm[d], compute[d]);
    stats[d].idle_s = idle_time(makespan_s, stats[d].compute_s, stats[d].exposed_comm_s);
    stats[d].bytes_sent = sent.total[d];
    stats[d].bytes_sent_inter = sent.inter[d];
  }
  return stats;
}

std::vector<DeviceStats> device_stats(const TaskGraph& graph, const std::vector<TaskTiming>& timings, double makespan_s,
                                      int gpus_per_node, const Fold& fold, const FoldedCollectives& folded)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  std::vector<std::vector<Interval>> compute(n);
  std::vector<std::vector<Interval>> comm(n);
  std::vector<double> sent(n, 0.0), inter(n, 0.0);
  auto rep = [&](int d) { return static_cast<std::size_t>(fold.representative(d)); };
  // Collectives of one shape send alike up to their offset (a whole number of nodes, so a send's
  // crossing between nodes does not depend on it): each (shape, offset)'s sends are found once and
  // summed per sender's representative (bytes / |H|, and those between nodes), in their order.
  struct Send {
    std::size_t rep;
    double bytes, inter;
  };
  struct ShapeSends {
    std::vector<std::tuple<int, double, bool>> relative;  // sender less its offset, bytes / |H|, between nodes
    std::map<int, std::vector<Send>> by_offset;
  };
  std::vector<std::optional<ShapeSends>> shape_sends;
  for (TaskId id = 0; id < graph.size(); ++id) {
    const Interval iv{timings[id].start_s, timings[id].end_s};
    switch (graph.kind(id)) {
    case TaskKind::compute: compute[rep(graph.compute(id).device)].push_back(iv); break;
    case TaskKind::transfer: {
      const TransferTask& x = graph.transfer(id);
      comm[rep(x.src)].push_back(iv);
      comm[rep(x.dst)].push_back(iv);  // an image of it goes to the receiver's representative
      sent[rep(x.src)] += x.bytes;
      if (x.src / gpus_per_node != x.dst / gpus_per_node)
        inter[rep(x.src)] += x.bytes;
      break;
    }
    case TaskKind::collective: {
      const CollectiveTask& c = graph.collective(id);
      std::size_t last = n;  // members of one orbit in a row (a tensor group) share one interval
      for (int d : c.group)
        if (rep(d) != last)
          comm[last = rep(d)].push_back(iv);
      // Each member's bytes reach its representative once per image of the collective holding
      // it: the |H| members of an H-orbit stand for one image.
      const int shape = folded.shape(id);
      if (shape < 0)
        break;
      if (static_cast<std::size_t>(shape) >= shape_sends.size())
        shape_sends.resize(static_cast<std::size_t>(shape) + 1);
      auto& of_shape = shape_sends[static_cast<std::size_t>(shape)];
      const int offset = folded.offset(id);
      if (!of_shape) {  // decomposed once per shape
        of_shape.emplace();
        const double images = folded.stabilizer(id);
        for_each_send(c, gpus_per_node, [&](int src, int dst, double bytes) {
          of_shape->relative.emplace_back(src - offset, bytes / images, src / gpus_per_node != dst / gpus_per_node);
        });
      }
      auto [at, fresh] = of_shape->by_offset.try_emplace(offset);
      if (fresh)
        for (const auto& [src_at, bytes, crosses] : of_shape->relative) {
          const std::size_t r = rep(src_at + offset);
          auto it = std::find_if(at->second.begin(), at->second.end(), [&](const Send& x) { return x.rep == r; });
          if (it == at->second.end())
            it = at->second.insert(it, {r, 0.0, 0.0});
          it->bytes += bytes;
          if (crosses)
            it->inter += bytes;
        }
      for (const Send& x : at->second) {
        sent[x.rep] += x.bytes;
        inter[x.rep] += x.inter;
      }
      break;
    }
    }
  }
  std::vector<DeviceStats> stats(n);
  for (int r : fold.representatives()) {
    const auto d = static_cast<std::size_t>(r);
    stats[d].compute_s = union_length(compute[d]);
    stats[d].exposed_comm_s = uncovered_length(comm[d], compute[d]);
    stats[d].idle_s = idle_time(makespan_s, stats[d].compute_s, stats[d].exposed_comm_s);
    stats[d].bytes_sent = sent[d];
    stats[d].bytes_sent_inter = inter[d];
  }
  for (std::size_t d = 0; d < n; ++d)
    stats[d] = stats[rep(static_cast<int>(d))];
  return stats;
}

}  // namespace ddlsim::sim
