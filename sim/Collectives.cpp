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

// ---- all-to-all ----------------------------------------------------------------------------------
// Members (group indices) per node, nodes in increasing order, members in group order.
std::vector<std::vector<std::size_t>> node_members(const std::vector<int>& group, int gpus_per_node)
{
  std::map<int, std::vector<std::size_t>> nodes;
  for (std::size_t i = 0; i < group.size(); ++i)
    nodes[group[i] / gpus_per_node].push_back(i);
  std::vector<std::vector<std::size_t>> out;
  for (auto& [node, members] : nodes)
    out.push_back(std::move(members));
  return out;
}

double member_load(const CollectiveTask& c, std::size_t i) { return c.member_load.empty() ? 1.0 : c.member_load[i]; }

// Bytes member i sends member j (group indices) in an all-to-all.
double a2a_bytes(const CollectiveTask& c, std::size_t i, std::size_t j)
{
  return c.bytes / static_cast<double>(c.group.size()) * member_load(c, c.load_at_source ? i : j);
}

// The hierarchical all-to-all applies to members spread evenly over two or more nodes, several per node.
bool a2a_hierarchical(const CollectiveTask& c, int gpus_per_node)
{
  if (c.algorithm != CollectiveAlgorithm::hierarchical)
    return false;
  const auto nodes = node_members(c.group, gpus_per_node);
  if (nodes.size() < 2 || nodes.front().size() < 2)
    return false;
  return std::all_of(nodes.begin(), nodes.end(), [&](const auto& m) { return m.size() == nodes.front().size(); });
}

// Direct: every member sends to every other at once, member i to i+1, i+2, ... (NCCL's p2p order).
// Hierarchical (N nodes of m members, P[a][j] the j-th member of node a): phase 1 inside each node,
// P[a][j] sends P[a][j'] every block it holds for local rank j' of any node; phase 2 across nodes,
// P[a][j'] sends P[b][j'] the blocks of node a's members for P[b][j'], once its phase-1 blocks arrived.
void decompose_all_to_all(std::vector<Message>& out, const CollectiveTask& c, int gpus_per_node)
{
  const std::size_t n = c.group.size();
  if (!a2a_hierarchical(c, gpus_per_node)) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 1; k < n; ++k) {
        const std::size_t j = (i + k) % n;
        out.push_back({.src = c.group[i], .dst = c.group[j], .bytes = a2a_bytes(c, i, j), .after = {}});
      }
    return;
  }
  const auto nodes = node_members(c.group, gpus_per_node);
  const std::size_t m = nodes.front().size();
  // arrived[a][j']: the phase-1 messages P[a][j'] receives.
  std::vector<std::vector<std::vector<Index>>> arrived(nodes.size(), std::vector<std::vector<Index>>(m));
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t k = 1; k < m; ++k) {
        const std::size_t to = (j + k) % m;
        double bytes = 0;
        for (const auto& node : nodes)
          bytes += a2a_bytes(c, nodes[a][j], node[to]);
        arrived[a][to].push_back(static_cast<Index>(out.size()));
        out.push_back({.src = c.group[nodes[a][j]], .dst = c.group[nodes[a][to]], .bytes = bytes, .after = {}});
      }
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t to = 0; to < m; ++to)
      for (std::size_t k = 1; k < nodes.size(); ++k) {
        const std::size_t b = (a + k) % nodes.size();
        double bytes = 0;
        for (std::size_t j = 0; j < m; ++j)
          bytes += a2a_bytes(c, nodes[a][j], nodes[b][to]);
        out.push_back({.src = c.group[nodes[a][to]], .dst = c.group[nodes[b][to]], .bytes = bytes,
                       .after = arrived[a][to]});
      }
}

// Bytes on every link class an all-to-all uses, in O(n): each member's NVLink up and down, and each
// NIC's up and down (GPU of local index l uses NIC l mod count), per phase. Uses the per-node sums
// of the loads instead of the n^2 messages (tests check it against decompose()).
struct A2aLoads {
  double intra = 0;  ///< the most bytes on one GPU's NVLink link, one direction
  double nic = 0;    ///< the most bytes on one NIC, one direction
};

A2aLoads a2a_direct_loads(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const double unit = c.bytes / static_cast<double>(c.group.size());
  const double n = static_cast<double>(c.group.size());
  const auto nodes = node_members(c.group, cluster.gpus_per_node);
  double total = 0;
  for (std::size_t i = 0; i < c.group.size(); ++i)
    total += member_load(c, i);
  A2aLoads loads;
  std::map<std::pair<int, int>, std::pair<double, double>> nics;  // (node, nic) -> (up, down)
  for (const auto& node : nodes) {
    double local = 0;
    for (std::size_t i : node)
      local += member_load(c, i);
    const double m = static_cast<double>(node.size());
    for (std::size_t i : node) {
      const double w = member_load(c, i);
      // Sent within the node and out of it, received likewise.
      const double out_intra = c.load_at_source ? w * (m - 1) : local - w;
      const double out_inter = c.load_at_source ? w * (n - m) : total - local;
      const double in_intra = c.load_at_source ? local - w : w * (m - 1);
      const double in_inter = c.load_at_source ? total - local : w * (n - m);
      loads.intra = std::max({loads.intra, out_intra * unit, in_intra * unit});
      const int gpu = c.group[i];
      auto& nic = nics[{cluster.node_of(gpu), (gpu % cluster.gpus_per_node) % cluster.nics_per_node}];
      nic.first += out_inter * unit;
      nic.second += in_inter * unit;
    }
  }
  for (const auto& [key, bytes] : nics)
    loads.nic = std::max({loads.nic, bytes.first, bytes.second});
  return loads;
}

// Phase 1 (inside the nodes) and phase 2 (across them) of the hierarchical all-to-all.
std::pair<A2aLoads, A2aLoads> a2a_hierarchical_loads(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const double unit = c.bytes / static_cast<double>(c.group.size());
  const auto nodes = node_members(c.group, cluster.gpus_per_node);
  const std::size_t m = nodes.front().size();
  const double count = static_cast<double>(nodes.size());
  std::vector<double> node_sum(nodes.size(), 0.0), rank_sum(m, 0.0);  // W_a, and C_j over the nodes
  double total = 0;
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t j = 0; j < m; ++j) {
      const double w = member_load(c, nodes[a][j]);
      node_sum[a] += w;
      rank_sum[j] += w;
      total += w;
    }
  A2aLoads one, two;
  std::map<std::pair<int, int>, std::pair<double, double>> nics;
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t j = 0; j < m; ++j) {
      const double w = member_load(c, nodes[a][j]);
      const double md = static_cast<double>(m);
      const double out1 = c.load_at_source ? count * w * (md - 1) : total - rank_sum[j];
      const double in1 = c.load_at_source ? count * (node_sum[a] - w) : (md - 1) * rank_sum[j];
      const double out2 = c.load_at_source ? node_sum[a] * (count - 1) : md * (rank_sum[j] - w);
      const double in2 = c.load_at_source ? total - node_sum[a] : md * w * (count - 1);
      one.intra = std::max({one.intra, out1 * unit, in1 * unit});
      const int gpu = c.group[nodes[a][j]];
      auto& nic = nics[{cluster.node_of(gpu), (gpu % cluster.gpus_per_node) % cluster.nics_per_node}];
      nic.first += out2 * unit;
      nic.second += in2 * unit;
    }
  for (const auto& [key, bytes] : nics)
    two.nic = std::max({two.nic, bytes.first, bytes.second});
  return {one, two};
}

// Latency of a message inside a node and across nodes among the members (0 where there is none).
std::pair<double, double> a2a_latencies(const std::vector<int>& group, const ClusterSpec& cluster)
{
  const auto nodes = node_members(group, cluster.gpus_per_node);
  double intra = 0, inter = 0;
  for (std::size_t a = 0; a < nodes.size(); ++a) {
    if (nodes[a].size() > 1)
      intra = std::max(intra, cluster.latency(group[nodes[a][0]], group[nodes[a][1]]));
    for (std::size_t b = a + 1; b < nodes.size(); ++b)
      inter = std::max(inter, cluster.latency(group[nodes[a][0]], group[nodes[b][0]]));
  }
  return {intra, inter};
}

AnalyticParts a2a_parts(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const auto [a_intra, a_inter] = a2a_latencies(c.group, cluster);
  const double b_intra = cluster.intra_node.bandwidth, b_nic = cluster.nic.bandwidth;
  if (a2a_hierarchical(c, cluster.gpus_per_node)) {
    const auto [one, two] = a2a_hierarchical_loads(c, cluster);
    return {2, a_intra + a_inter, one.intra / b_intra + two.nic / b_nic};
  }
  // Every message at once: the link that takes longest (with its messages' latency) sets the time.
  const A2aLoads loads = a2a_direct_loads(c, cluster);
  const double intra = loads.intra > 0 ? a_intra + loads.intra / b_intra : 0.0;
  const double inter = loads.nic > 0 ? a_inter + loads.nic / b_nic : 0.0;
  return intra >= inter ? AnalyticParts{1, a_intra, loads.intra / b_intra} : AnalyticParts{1, a_inter, loads.nic / b_nic};
}

// The bytes each member sends to each node in an all-to-all, addressed to that node's first other
// member: O(n x nodes) instead of O(n^2).
void a2a_sends_by_node(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send)
{
  const double unit = c.bytes / static_cast<double>(c.group.size());
  const auto nodes = node_members(c.group, gpus_per_node);
  std::vector<double> node_sum;
  for (const auto& node : nodes) {
    double w = 0;
    for (std::size_t i : node)
      w += member_load(c, i);
    node_sum.push_back(w);
  }
  std::vector<std::size_t> node_of(c.group.size());
  for (std::size_t b = 0; b < nodes.size(); ++b)
    for (std::size_t i : nodes[b])
      node_of[i] = b;
  for (std::size_t i = 0; i < c.group.size(); ++i)
    for (std::size_t b = 0; b < nodes.size(); ++b) {
      const auto& node = nodes[b];
      const bool here = node_of[i] == b;
      const std::size_t to = node.front() != i ? node.front() : node.size() > 1 ? node[1] : i;
      if (to == i)
        continue;
      const double others = static_cast<double>(node.size()) - (here ? 1.0 : 0.0);
      const double bytes = c.load_at_source ? member_load(c, i) * others : node_sum[b] - (here ? member_load(c, i) : 0.0);
      send(c.group[i], c.group[to], bytes * unit);
    }
}

}  // namespace

int tree_chunks(double bytes)
{
  constexpr double chunk = 4.0 * 1024 * 1024;
  return static_cast<int>(std::clamp(std::ceil(bytes / chunk), 1.0, 16.0));  // clamp first: bytes may be huge
}

CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, int gpus_per_node)
{
  if (c.kind == CollectiveKind::all_to_all)
    return a2a_hierarchical(c, gpus_per_node) ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::direct;
  switch (c.algorithm) {
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::direct: return CollectiveAlgorithm::ring;
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
  if (c.kind == CollectiveKind::all_to_all) {
    decompose_all_to_all(out, c, gpus_per_node);
    return out;
  }
  const double shard = c.bytes / static_cast<double>(n);
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::direct:
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
  if (c.kind == CollectiveKind::all_to_all) {
    if (!a2a_hierarchical(c, gpus_per_node))
      return n * (n - 1);
    const auto nodes = node_members(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    return count * m * (m - 1) + m * count * (count - 1);  // inside each node, then one exchange per local rank
  }
  const std::uint64_t ring_steps = (n - 1) * (c.kind == CollectiveKind::all_reduce ? 2 : 1);
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::direct:
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
  if (c.kind == CollectiveKind::all_to_all && !a2a_hierarchical(c, gpus_per_node)) {
    a2a_sends_by_node(c, gpus_per_node, send);
    return;
  }
  if (c.kind != CollectiveKind::all_to_all && effective_algorithm(c, gpus_per_node) == CollectiveAlgorithm::ring) {
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
  if (c.kind == CollectiveKind::all_to_all)
    return a2a_parts(c, cluster);
  const double S = c.bytes;
  switch (effective_algorithm(c, cluster.gpus_per_node)) {
  case CollectiveAlgorithm::direct:
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
  // A fitted curve is of the collective with every member at the mean load (nccl-tests, a trace's
  // collectives): member loads scale the messages on top of it, so the factor comes from the uniform
  // collective's closed form.
  AnalyticParts p;
  if (c.member_load.empty()) {
    p = analytic_parts(c, cluster);
  } else {
    CollectiveTask uniform = c;
    uniform.member_load.clear();
    p = analytic_parts(uniform, cluster);
  }
  if (p.hops <= 0)
    return;
  c.hop_latency_s = std::max(alpha_s, 0.0) / p.hops;
  // A regime whose time does not grow with size (transfer_s 0) makes the messages free.
  c.bandwidth_factor = transfer_s > 0 ? p.transfer_s / transfer_s : std::numeric_limits<double>::infinity();
}

}  // namespace ddlsim::sim
