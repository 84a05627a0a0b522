#include "sim/Collectives.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace ddlsim::sim {
namespace {

using Index = std::uint32_t;

// Appends a ring over `members` of `steps` steps of `chunk` bytes. Every first-step message waits
// for `start` (when given). Returns the indices of the messages each member receives last.
std::vector<Index> add_ring(std::vector<Message>& out, const std::vector<int>& members, int steps, double chunk,
                            const std::vector<Index>& start)
{
  const std::size_t n = members.size();
  std::vector<Index> previous(n);  // message member i sent at the previous step
  std::vector<Index> current(n);
  for (int k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      Message m{.src = members[i], .dst = members[(i + 1) % n], .bytes = chunk, .after = {}};
      if (k == 0) {
        m.after = start;
      } else {
        m.after.push_back(previous[i]);               // i finished sending step k-1
        m.after.push_back(previous[(i + n - 1) % n]);  // i received step k-1
      }
      current[i] = static_cast<Index>(out.size());
      out.push_back(std::move(m));
    }
    previous = current;
  }
  // Member i's last arrival is what its predecessor sent at the last step.
  std::vector<Index> last(n);
  for (std::size_t i = 0; i < n; ++i)
    last[i] = previous[(i + n - 1) % n];
  return last;
}

Index add_join(std::vector<Message>& out, std::vector<Index> after)
{
  out.push_back({.src = -1, .dst = -1, .bytes = 0, .after = std::move(after)});
  return static_cast<Index>(out.size() - 1);
}

void decompose_tree(std::vector<Message>& out, const std::vector<int>& g, double bytes)
{
  const std::size_t n = g.size();
  const int chunks = tree_chunks(bytes);
  const double chunk = bytes / chunks;
  // up[i][c]: member i sending chunk c to its parent (i >= 1).
  std::vector<std::vector<Index>> up(n, std::vector<Index>(static_cast<std::size_t>(chunks), 0));
  // Children have larger indices: build bottom-up so that a member's waits already exist.
  for (std::size_t i = n - 1; i >= 1; --i) {
    for (int c = 0; c < chunks; ++c) {
      Message m{.src = g[i], .dst = g[(i - 1) / 2], .bytes = chunk, .after = {}};
      if (c > 0)
        m.after.push_back(up[i][static_cast<std::size_t>(c - 1)]);
      for (std::size_t child : {2 * i + 1, 2 * i + 2})
        if (child < n)
          m.after.push_back(up[child][static_cast<std::size_t>(c)]);
      up[i][static_cast<std::size_t>(c)] = static_cast<Index>(out.size());
      out.push_back(std::move(m));
    }
  }
  std::vector<Index> at_root;
  for (std::size_t child : {std::size_t{1}, std::size_t{2}})
    if (child < n)
      at_root.push_back(up[child][static_cast<std::size_t>(chunks - 1)]);
  const Index reduced = add_join(out, at_root);
  // down[i][c]: member i receiving chunk c from its parent.
  std::vector<std::vector<Index>> down(n, std::vector<Index>(static_cast<std::size_t>(chunks), 0));
  for (std::size_t i = 1; i < n; ++i) {
    const std::size_t parent = (i - 1) / 2;
    for (int c = 0; c < chunks; ++c) {
      Message m{.src = g[parent], .dst = g[i], .bytes = chunk, .after = {}};
      m.after.push_back(parent == 0 ? reduced : down[parent][static_cast<std::size_t>(c)]);
      if (c > 0)
        m.after.push_back(down[i][static_cast<std::size_t>(c - 1)]);
      down[i][static_cast<std::size_t>(c)] = static_cast<Index>(out.size());
      out.push_back(std::move(m));
    }
  }
}

// Members grouped by node, in group order; empty when the nodes hold different counts.
std::vector<std::vector<int>> by_node(const std::vector<int>& group, int gpus_per_node)
{
  std::map<int, std::vector<int>> nodes;
  for (int d : group)
    nodes[d / gpus_per_node].push_back(d);
  std::vector<std::vector<int>> out;
  for (auto& [node, members] : nodes)
    out.push_back(std::move(members));
  for (const auto& members : out)
    if (members.size() != out.front().size())
      return {};
  return out;
}

}  // namespace

int tree_chunks(double bytes)
{
  constexpr double chunk = 4.0 * 1024 * 1024;
  return static_cast<int>(std::clamp(std::ceil(bytes / chunk), 1.0, 16.0));  // clamp first: bytes may be huge
}

CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, int gpus_per_node)
{
  switch (c.algorithm) {
  case CollectiveAlgorithm::ring: return CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::tree:
    return c.kind == CollectiveKind::all_reduce && c.group.size() > 2 ? CollectiveAlgorithm::tree
                                                                       : CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::hierarchical: {
    if (c.kind != CollectiveKind::all_reduce)
      return CollectiveAlgorithm::ring;
    const auto nodes = by_node(c.group, gpus_per_node);
    return nodes.size() > 1 && nodes.front().size() > 1 ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::ring;
  }
  }
  return CollectiveAlgorithm::ring;
}

std::vector<Message> decompose(const CollectiveTask& c, int gpus_per_node)
{
  std::vector<Message> out;
  const std::size_t n = c.group.size();
  if (n < 2)
    return out;
  const double shard = c.bytes / static_cast<double>(n);
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::ring: {
    const int steps = static_cast<int>(n - 1) * (c.kind == CollectiveKind::all_reduce ? 2 : 1);
    add_ring(out, c.group, steps, shard, {});
    break;
  }
  case CollectiveAlgorithm::tree: decompose_tree(out, c.group, c.bytes); break;
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, gpus_per_node);
    const std::size_t m = nodes.front().size();
    const std::size_t node_count = nodes.size();
    const double local_shard = c.bytes / static_cast<double>(m);
    std::vector<Index> done;
    for (const auto& members : nodes) {  // reduce-scatter inside every node
      auto last = add_ring(out, members, static_cast<int>(m - 1), local_shard, {});
      done.insert(done.end(), last.begin(), last.end());
    }
    const Index scattered = add_join(out, done);
    done.clear();
    for (std::size_t j = 0; j < m; ++j) {  // one all-reduce across the nodes per local rank
      std::vector<int> ring;
      for (const auto& members : nodes)
        ring.push_back(members[j]);
      auto last = add_ring(out, ring, 2 * static_cast<int>(node_count - 1),
                           local_shard / static_cast<double>(node_count), {scattered});
      done.insert(done.end(), last.begin(), last.end());
    }
    const Index reduced = add_join(out, done);
    for (const auto& members : nodes)  // all-gather inside every node
      add_ring(out, members, static_cast<int>(m - 1), local_shard, {reduced});
    break;
  }
  }
  return out;
}

std::uint64_t message_count(const CollectiveTask& c, int gpus_per_node)
{
  const std::uint64_t n = c.group.size();
  if (n < 2)
    return 0;
  const std::uint64_t ring_steps = (n - 1) * (c.kind == CollectiveKind::all_reduce ? 2 : 1);
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::ring: return ring_steps * n;
  case CollectiveAlgorithm::tree: return 2 * (n - 1) * static_cast<std::uint64_t>(tree_chunks(c.bytes));
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    // reduce-scatter and all-gather inside each node, m rings of 2 (N - 1) steps across them
    return 2 * count * (m - 1) * m + m * 2 * (count - 1) * count;
  }
  }
  return ring_steps * n;
}

void for_each_send(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send)
{
  const std::size_t n = c.group.size();
  if (n < 2)
    return;
  if (effective_algorithm(c, gpus_per_node) == CollectiveAlgorithm::ring) {
    const double steps = static_cast<double>(n - 1) * (c.kind == CollectiveKind::all_reduce ? 2 : 1);
    for (std::size_t i = 0; i < n; ++i)
      send(c.group[i], c.group[(i + 1) % n], steps * c.bytes / static_cast<double>(n));
    return;
  }
  for (const Message& m : decompose(c, gpus_per_node))
    if (m.src >= 0)
      send(m.src, m.dst, m.bytes);
}

AnalyticParts analytic_parts(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const std::size_t n = c.group.size();
  if (n < 2)
    return {};
  auto bandwidth = [&](int a, int b) {
    return cluster.node_of(a) == cluster.node_of(b) ? cluster.intra_node.bandwidth : cluster.nic.bandwidth;
  };
  // Slowest hop of a ring over `members`: its latency and bandwidth.
  auto ring_hop = [&](const std::vector<int>& members) {
    double a = 0, b = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < members.size(); ++i) {
      const int src = members[i], dst = members[(i + 1) % members.size()];
      a = std::max(a, cluster.latency(src, dst));
      b = std::min(b, bandwidth(src, dst));
    }
    return std::pair{a, b};
  };
  const double S = c.bytes;
  switch (effective_algorithm(c, cluster.gpus_per_node)) {
  case CollectiveAlgorithm::ring: {
    const auto [a, b] = ring_hop(c.group);
    const double steps = static_cast<double>(n - 1) * (c.kind == CollectiveKind::all_reduce ? 2 : 1);
    return {steps, steps * a, steps * S / static_cast<double>(n) / b};
  }
  case CollectiveAlgorithm::tree: {
    double a = 0, b = std::numeric_limits<double>::infinity();
    for (std::size_t i = 1; i < n; ++i) {
      a = std::max(a, cluster.latency(c.group[i], c.group[(i - 1) / 2]));
      b = std::min(b, bandwidth(c.group[i], c.group[(i - 1) / 2]));
    }
    const double depth = std::floor(std::log2(static_cast<double>(n)));
    const double chunks = tree_chunks(S);
    const double steps = 2 * (depth + chunks - 1);
    return {steps, steps * a, steps * 2 * S / (chunks * b)};
  }
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, cluster.gpus_per_node);
    const double m = static_cast<double>(nodes.front().size());
    const double count = static_cast<double>(nodes.size());
    const auto [ai, bi] = ring_hop(nodes.front());
    std::vector<int> across;
    for (const auto& members : nodes)
      across.push_back(members.front());
    const auto [an, bn] = ring_hop(across);
    return {2 * (m - 1) + 2 * (count - 1), 2 * (m - 1) * ai + 2 * (count - 1) * an,
            2 * (m - 1) * S / (m * bi) + 2 * (count - 1) * S / (m * count * bn)};
  }
  }
  return {};
}

double analytic_seconds(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const AnalyticParts p = analytic_parts(c, cluster);
  const double latency = c.hop_latency_s >= 0 ? p.hops * c.hop_latency_s : p.latency_s;
  return latency + p.transfer_s / c.bandwidth_factor;
}

void calibrate_collective(CollectiveTask& c, const ClusterSpec& cluster, double alpha_s, double transfer_s)
{
  const AnalyticParts p = analytic_parts(c, cluster);
  if (p.hops <= 0)
    return;
  c.hop_latency_s = std::max(alpha_s, 0.0) / p.hops;
  // A regime whose time does not grow with size (transfer_s 0) makes the messages free.
  c.bandwidth_factor = transfer_s > 0 ? p.transfer_s / transfer_s : std::numeric_limits<double>::infinity();
}

}  // namespace ddlsim::sim
