#include "sim/Metrics.hpp"

#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>

namespace ddlsim::sim {
namespace {
// Sorts intervals that come as a few sorted runs (a stream's tasks in program order, then the
// transfers in theirs) by merging the runs; others by sorting. Either way the same sorted list.
void sort_runs(std::vector<Interval>& v)
{
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1]) {
      starts.push_back(i);
      if (starts.size() > 8) {
        std::sort(v.begin(), v.end());
        return;
      }
    }
  starts.push_back(v.size());
  while (starts.size() > 2) {  // merge neighbouring runs pairwise until one is left
    std::vector<std::size_t> merged{0};
    for (std::size_t r = 0; r + 2 < starts.size(); r += 2) {
      const auto at = [&](std::size_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
      std::inplace_merge(at(starts[r]), at(starts[r + 1]), at(starts[r + 2]));
      merged.push_back(starts[r + 2]);
    }
    if (merged.back() != v.size())
      merged.push_back(v.size());
    starts = std::move(merged);
  }
}
// Merges sorted intervals that overlap or touch, dropping empty ones, in place.
void coalesce(std::vector<Interval>& v)
{
  std::size_t out = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Interval iv = v[i];
    if (iv.second <= iv.first)
      continue;
    if (out > 0 && iv.first <= v[out - 1].second)
      v[out - 1].second = std::max(v[out - 1].second, iv.second);
    else
      v[out++] = iv;
  }
  v.resize(out);
}
// Sorts the intervals, then coalesces them.
void merge(std::vector<Interval>& v)
{
  sort_runs(v);
  coalesce(v);
}
// Total length of merged intervals.
double merged_length(const std::vector<Interval>& m)
{
  double total = 0;
  for (const auto& [a, b] : m)
    total += b - a;
  return total;
}
// Length of merged intervals `ua` that merged intervals `ub` leave uncovered.
double merged_uncovered(const std::vector<Interval>& ua, const std::vector<Interval>& ub)
{
  double overlap = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : ua) {
    while (j < ub.size() && ub[j].second <= s)
      ++j;
    for (std::size_t k = j; k < ub.size() && ub[k].first < e; ++k)
      overlap += std::min(e, ub[k].second) - std::max(s, ub[k].first);
  }
  return merged_length(ua) - overlap;
}
// Idle time: what the iteration leaves of compute and exposed communication. A remainder below
// 1e-12 of the iteration is the rounding of those sums (a GPU busy throughout), not idle time.
double idle_time(double makespan_s, double compute_s, double exposed_s)
{
  const double idle = makespan_s - compute_s - exposed_s;
  return idle > 1e-12 * makespan_s ? idle : 0.0;
}
// A device's compute time and exposed communication time from its tasks' intervals (merged here).
void fill_times(DeviceStats& stats, std::vector<Interval>& compute, std::vector<Interval>& comm,
                std::vector<Interval>& transfers, double makespan_s)
{
  merge(compute);
  sort_runs(comm);
  sort_runs(transfers);
  const auto middle = static_cast<std::ptrdiff_t>(comm.size());
  comm.insert(comm.end(), transfers.begin(), transfers.end());
  std::inplace_merge(comm.begin(), comm.begin() + middle, comm.end());
  coalesce(comm);
  stats.compute_s = merged_length(compute);
  stats.exposed_comm_s = merged_uncovered(comm, compute);
  stats.idle_s = idle_time(makespan_s, stats.compute_s, stats.exposed_comm_s);
}
}  // namespace

double union_length(std::vector<Interval> intervals)
{
  merge(intervals);
  return merged_length(intervals);
}

double uncovered_length(std::vector<Interval> a, std::vector<Interval> b)
{
  merge(a);
  merge(b);
  return merged_uncovered(a, b);
}

void merge_intervals(std::vector<Interval>& intervals)
{
  merge(intervals);
}

double uncovered_by_merged(std::vector<Interval> a, const std::vector<Interval>& merged_b)
{
  merge(a);
  return merged_uncovered(a, merged_b);
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

std::vector<DeviceStats> device_stats(const TaskGraph& graph, const Timings& timings, double makespan_s,
                                      int gpus_per_node)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  // Per device: compute, collectives (in program order, mostly sorted) and transfers (sorted apart: they come
  // after every pass's tasks).
  enum List : std::size_t { compute, comm, transfers };
  std::array<std::vector<std::vector<Interval>>, 3> lists;
  lists.fill(std::vector<std::vector<Interval>>(n));
  // Calls to(list, device) for each list a task's interval goes on.
  auto places = [&graph](TaskId id, auto&& to) {
    switch (graph.kind(id)) {
    case TaskKind::compute: to(compute, graph.compute(id).device); break;
    case TaskKind::transfer:
      to(transfers, graph.transfer(id).src);
      to(transfers, graph.transfer(id).dst);
      break;
    case TaskKind::collective:
      for (int d : graph.collective(id).group)
        to(comm, d);
      break;
    }
  };
  {
    // Each list's length first: grown by doubling, the lists of a large graph (a GPT-3 175B iteration on 1,024
    // GPUs: 900,000 collective intervals) would touch and copy twice the memory.
    std::array<std::vector<std::size_t>, 3> counts;
    counts.fill(std::vector<std::size_t>(n, 0));
    for (TaskId id = 0; id < graph.size(); ++id)
      places(id, [&](List l, int d) { ++counts[l][static_cast<std::size_t>(d)]; });
    for (std::size_t d = 0; d < n; ++d) {
      lists[compute][d].reserve(counts[compute][d]);
      lists[comm][d].reserve(counts[comm][d] + counts[transfers][d]);  // fill_times appends the transfers to them
      lists[transfers][d].reserve(counts[transfers][d]);
    }
  }
  for (TaskId id = 0; id < graph.size(); ++id) {
    const Interval iv{timings[id].start_s, timings[id].end_s};
    places(id, [&](List l, int d) { lists[l][static_cast<std::size_t>(d)].push_back(iv); });
  }
  const SentBytes sent = sent_bytes_per_device(graph, gpus_per_node);
  std::vector<DeviceStats> stats(n);
  for (std::size_t d = 0; d < n; ++d) {
    fill_times(stats[d], lists[compute][d], lists[comm][d], lists[transfers][d], makespan_s);
    stats[d].bytes_sent = sent.total[d];
    stats[d].bytes_sent_inter = sent.inter[d];
  }
  return stats;
}

namespace {

// Collectives run apart (FoldedMessages::isolated) charge each member the mean of the sends of its
// H-orbit; a tree's inner nodes send more than its leaves. Each member's own sends replace that mean
// on the member and on its images under K (the generators that move the collective: the members of
// the collective's images), so that every GPU's bytes are the unfolded replay's.
void add_sends_apart(const TaskGraph& graph, int gpus_per_node, const Fold& fold, const FoldedCollectives& folded,
                     std::vector<DeviceStats>& stats)
{
  struct Correction {
    int member;
    double bytes, inter;
  };
  std::map<std::pair<int, int>, std::vector<Correction>> known;  // (shape, offset) -> per member
  std::map<std::vector<int>, std::vector<int>> k_elements;        // generators of K -> K's elements
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::collective || !folded.isolated(id))
      continue;
    auto [at, fresh] = known.try_emplace({folded.shape(id), folded.offset(id)});
    if (fresh) {
      const CollectiveTask& c = graph.collective(id);
      std::map<int, std::pair<double, double>> own;  // member -> bytes, between nodes
      std::map<int, std::pair<double, double>> mean;  // representative -> the sends charged to it
      const double images = folded.stabilizer(id);
      for_each_send(c, gpus_per_node, [&](int src, int dst, double bytes) {
        const bool crosses = src / gpus_per_node != dst / gpus_per_node;
        own[src].first += bytes;
        own[src].second += crosses ? bytes : 0.0;
        auto& m = mean[fold.representative(src)];
        m.first += bytes / images;
        m.second += crosses ? bytes / images : 0.0;
      });
      for (int d : c.group) {
        const auto& o = own[d];
        const auto& m = mean[fold.representative(d)];
        at->second.push_back({d, o.first - m.first, o.second - m.second});
      }
    }
    const std::vector<int>& apart = folded.folded(id).apart;
    auto [ks, k_fresh] = k_elements.try_emplace(apart);
    if (k_fresh) {
      ks->second = {0};
      for (int i : apart) {
        const std::size_t before = ks->second.size();
        int power = fold.generator_element(static_cast<std::size_t>(i));
        for (int e = 1; e < fold.generators()[static_cast<std::size_t>(i)].order; ++e) {
          for (std::size_t j = 0; j < before; ++j)
            ks->second.push_back(fold.compose(ks->second[j], power));
          power = fold.compose(power, fold.generator_element(static_cast<std::size_t>(i)));
        }
      }
    }
    for (const Correction& x : at->second)
      for (int k : ks->second) {
        DeviceStats& s = stats[static_cast<std::size_t>(fold.apply(k, x.member))];
        s.bytes_sent += x.bytes;
        s.bytes_sent_inter += x.inter;
      }
  }
}

}  // namespace

std::vector<DeviceStats> device_stats(const TaskGraph& graph, const Timings& timings, double makespan_s,
                                      int gpus_per_node, const Fold& fold, const FoldedCollectives& folded)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  std::vector<std::vector<Interval>> compute(n);
  std::vector<std::vector<Interval>> comm(n);       // collectives, in program order (mostly sorted)
  std::vector<std::vector<Interval>> transfers(n);  // sorted apart: they come after every pass's tasks
  std::vector<double> sent(n, 0.0), inter(n, 0.0);
  std::vector<std::size_t> rep_of(n);
  for (std::size_t d = 0; d < n; ++d)
    rep_of[d] = static_cast<std::size_t>(fold.representative(static_cast<int>(d)));
  auto rep = [&](int d) { return rep_of[static_cast<std::size_t>(d)]; };
  // Collectives of one shape send alike up to their offset (a whole number of nodes, so a send's
  // crossing between nodes does not depend on it): each (shape, offset)'s sends are found once and
  // summed per sender's representative (bytes / |H|, and those between nodes), in their order; and
  // so are the representatives its interval goes to (one shape and offset: one group).
  struct Send {
    std::size_t rep;
    double bytes, inter;
  };
  struct OffsetSends {
    std::vector<Send> sends;
    std::vector<std::size_t> reps;  // members' representatives, those of one orbit in a row once
  };
  struct ShapeSends {
    std::vector<std::tuple<int, double, bool>> relative;  // sender less its offset, bytes / |H|, between nodes
    std::map<int, OffsetSends> by_offset;
  };
  std::vector<std::optional<ShapeSends>> shape_sends;
  int last_shape = -1, last_offset = 0;  // an iteration repeats a collective many times in a row
  const OffsetSends* last = nullptr;
  for (TaskId id = 0; id < graph.size(); ++id) {
    const Interval iv{timings[id].start_s, timings[id].end_s};
    switch (graph.kind(id)) {
    case TaskKind::compute: compute[rep(graph.compute(id).device)].push_back(iv); break;
    case TaskKind::transfer: {
      const TransferTask& x = graph.transfer(id);
      transfers[rep(x.src)].push_back(iv);
      transfers[rep(x.dst)].push_back(iv);  // an image of it goes to the receiver's representative
      sent[rep(x.src)] += x.bytes;
      if (x.src / gpus_per_node != x.dst / gpus_per_node)
        inter[rep(x.src)] += x.bytes;
      break;
    }
    case TaskKind::collective: {
      // Each member's bytes reach its representative once per image of the collective holding
      // it: the |H| members of an H-orbit stand for one image.
      const int shape = folded.shape(id);
      if (shape < 0)
        break;  // an empty group
      const int offset = folded.offset(id);
      if (shape != last_shape || offset != last_offset || last == nullptr) {
        if (static_cast<std::size_t>(shape) >= shape_sends.size())
          shape_sends.resize(static_cast<std::size_t>(shape) + 1);
        auto& of_shape = shape_sends[static_cast<std::size_t>(shape)];
        const CollectiveTask& c = graph.collective(id);
        if (!of_shape) {  // decomposed once per shape
          of_shape.emplace();
          const double images = folded.stabilizer(id);
          for_each_send(c, gpus_per_node, [&](int src, int dst, double bytes) {
            of_shape->relative.emplace_back(src - offset, bytes / images, src / gpus_per_node != dst / gpus_per_node);
          });
        }
        auto [at, fresh] = of_shape->by_offset.try_emplace(offset);
        if (fresh) {
          for (int d : c.group)
            if (at->second.reps.empty() || rep(d) != at->second.reps.back())
              at->second.reps.push_back(rep(d));
          for (const auto& [src_at, bytes, crosses] : of_shape->relative) {
            const std::size_t r = rep(src_at + offset);
            auto& sends = at->second.sends;
            auto it = std::find_if(sends.begin(), sends.end(), [&](const Send& x) { return x.rep == r; });
            if (it == sends.end())
              it = sends.insert(it, {r, 0.0, 0.0});
            it->bytes += bytes;
            if (crosses)
              it->inter += bytes;
          }
        }
        last_shape = shape;
        last_offset = offset;
        last = &at->second;
      }
      for (std::size_t r : last->reps)
        comm[r].push_back(iv);
      for (const Send& x : last->sends) {
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
    fill_times(stats[d], compute[d], comm[d], transfers[d], makespan_s);
    stats[d].bytes_sent = sent[d];
    stats[d].bytes_sent_inter = inter[d];
  }
  for (std::size_t d = 0; d < n; ++d)
    stats[d] = stats[rep(static_cast<int>(d))];
  if (folded.any_isolated())
    add_sends_apart(graph, gpus_per_node, fold, folded, stats);
  return stats;
}

}  // namespace ddlsim::sim
