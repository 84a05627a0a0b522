// All-to-all: NCCL's grouped send/recv (direct) and the two-phase hierarchical exchange.
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace ddlsim::sim::collectives {

// ---------------------------------------------------------------------------------------------
// All-to-all: NCCL's grouped send/recv (direct) and the two-phase hierarchical exchange

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

double member_load(const CollectiveTask& c, std::size_t i)
{
  return c.member_load.empty() ? 1.0 : c.member_load[i];
}

namespace {

// Bytes member i sends member j (group indices) in an all-to-all.
double a2a_bytes(const CollectiveTask& c, std::size_t i, std::size_t j)
{
  return c.bytes / static_cast<double>(c.group.size()) * member_load(c, c.load_at_source ? i : j);
}

} // namespace
// The hierarchical all-to-all applies to members spread evenly over two or more nodes, several per node.
bool a2a_hierarchical_fits(const std::vector<int>& group, int gpus_per_node)
{
  const auto nodes = node_members(group, gpus_per_node);
  if (nodes.size() < 2 || nodes.front().size() < 2)
    return false;
  return std::all_of(nodes.begin(), nodes.end(), [&](const auto& m) { return m.size() == nodes.front().size(); });
}

bool a2a_hierarchical(const CollectiveTask& c, int gpus_per_node)
{
  return c.algorithm == CollectiveAlgorithm::hierarchical && a2a_hierarchical_fits(c.group, gpus_per_node);
}

namespace {

// NCCL's PXN (c.channels > 1 on a direct all-to-all across nodes, set by resolve_collective): a
// message to a GPU of another node leaves through the NIC on the destination's rail, from the
// sender's node-mate of the destination's local rank (NCCL moves it there over NVLink first).
int a2a_source(const CollectiveTask& c, int src, int dst, int gpus_per_node)
{
  if (c.channels <= 1 || src / gpus_per_node == dst / gpus_per_node)
    return src;
  return src / gpus_per_node * gpus_per_node + dst % gpus_per_node;
}

} // namespace
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
        out.push_back({.src   = a2a_source(c, c.group[i], c.group[j], gpus_per_node),
                       .dst   = c.group[j],
                       .bytes = a2a_bytes(c, i, j),
                       .after = {}});
      }
    return;
  }
  const auto nodes    = node_members(c.group, gpus_per_node);
  const std::size_t m = nodes.front().size();
  // arrived[a][j']: the phase-1 messages P[a][j'] receives.
  std::vector<std::vector<std::vector<Index>>> arrived(nodes.size(), std::vector<std::vector<Index>>(m));
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t k = 1; k < m; ++k) {
        const std::size_t to = (j + k) % m;
        double bytes         = 0;
        for (const auto& node : nodes)
          bytes += a2a_bytes(c, nodes[a][j], node[to]);
        arrived[a][to].push_back(static_cast<Index>(out.size()));
        out.push_back({.src = c.group[nodes[a][j]], .dst = c.group[nodes[a][to]], .bytes = bytes, .after = {}});
      }
  for (std::size_t a = 0; a < nodes.size(); ++a)
    for (std::size_t to = 0; to < m; ++to)
      for (std::size_t k = 1; k < nodes.size(); ++k) {
        const std::size_t b = (a + k) % nodes.size();
        double bytes        = 0;
        for (std::size_t j = 0; j < m; ++j)
          bytes += a2a_bytes(c, nodes[a][j], nodes[b][to]);
        out.push_back(
            {.src = c.group[nodes[a][to]], .dst = c.group[nodes[b][to]], .bytes = bytes, .after = arrived[a][to]});
      }
}

namespace {

// Bytes on every link class an all-to-all uses, from per-node and per-NIC sums of the loads instead
// of the n^2 messages (tests check them against decompose()): each member's NVLink up and down, each
// NIC's up and down, and with a fat tree each leaf's uplinks. Transfer times at the links' own
// bandwidth.
struct A2aLoads {
  double intra = 0; ///< the most bytes on one GPU's NVLink link, one direction
  double nic   = 0; ///< the most bytes on one NIC, one direction
  double leaf  = 0; ///< fat tree: the most bytes on one leaf's uplinks, one direction
  double inter_seconds(const ClusterSpec& cl) const
  {
    return std::max(nic / cl.nic.bandwidth, leaf > 0 ? leaf / cl.leaf_uplink_bandwidth() : 0.0);
  }
};

// The most bytes a leaf's uplinks carry each way: node a sends node b (another leaf's) the blocks of
// its members for b's, sum over i in a, j in b of the block sizes (the same in both algorithms).
double a2a_leaf_load(const CollectiveTask& c, const ClusterSpec& cl, const std::vector<std::vector<std::size_t>>& nodes)
{
  if (cl.topology != FabricTopology::fat_tree)
    return 0;
  const double unit = c.bytes / static_cast<double>(c.group.size());
  std::map<int, std::pair<double, double>> leaves; // leaf -> (up, down)
  for (const auto& a : nodes)
    for (const auto& b : nodes) {
      const int la = cl.leaf_of_node(cl.node_of(c.group[a.front()])),
                lb = cl.leaf_of_node(cl.node_of(c.group[b.front()]));
      if (la == lb)
        continue;
      double wa = 0, wb = 0;
      for (std::size_t i : a)
        wa += member_load(c, i);
      for (std::size_t j : b)
        wb += member_load(c, j);
      const double bytes =
          unit * (c.load_at_source ? wa * static_cast<double>(b.size()) : static_cast<double>(a.size()) * wb);
      leaves[la].first += bytes;
      leaves[lb].second += bytes;
    }
  double most = 0;
  for (const auto& [leaf, bytes] : leaves)
    most = std::max({most, bytes.first, bytes.second});
  return most;
}

A2aLoads a2a_direct_loads(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const double unit = c.bytes / static_cast<double>(c.group.size());
  const double n    = static_cast<double>(c.group.size());
  const auto nodes  = node_members(c.group, cluster.gpus_per_node);
  const bool pxn    = c.channels > 1;
  double total      = 0;
  std::map<int, double> rail_load, rail_count; // PXN: per NIC index, the members' loads and count
  for (std::size_t i = 0; i < c.group.size(); ++i) {
    total += member_load(c, i);
    rail_load[nic_of(cluster, c.group[i])] += member_load(c, i);
    rail_count[nic_of(cluster, c.group[i])] += 1;
  }
  A2aLoads loads;
  std::map<std::pair<int, int>, std::pair<double, double>> nics; // (node, nic) -> (up, down)
  for (const auto& node : nodes) {
    double local = 0;
    std::map<int, double> local_rail_load, local_rail_count;
    for (std::size_t i : node) {
      local += member_load(c, i);
      local_rail_load[nic_of(cluster, c.group[i])] += member_load(c, i);
      local_rail_count[nic_of(cluster, c.group[i])] += 1;
    }
    const double m       = static_cast<double>(node.size());
    const int node_index = cluster.node_of(c.group[node.front()]);
    for (std::size_t i : node) {
      const double w = member_load(c, i);
      // Sent within the node and out of it, received likewise.
      const double out_intra = c.load_at_source ? w * (m - 1) : local - w;
      const double out_inter = c.load_at_source ? w * (n - m) : total - local;
      const double in_intra  = c.load_at_source ? local - w : w * (m - 1);
      const double in_inter  = c.load_at_source ? total - local : w * (n - m);
      loads.intra            = std::max({loads.intra, out_intra * unit, in_intra * unit});
      auto& nic              = nics[{node_index, nic_of(cluster, c.group[i])}];
      if (!pxn)
        nic.first += out_inter * unit;
      nic.second += in_inter * unit;
    }
    if (pxn) // NIC r carries what the node's members send to the members of rail r elsewhere
      for (const auto& [rail, count] : rail_count) {
        const double others = count - local_rail_count[rail];
        const double bytes  = c.load_at_source ? local * others : m * (rail_load[rail] - local_rail_load[rail]);
        nics[{node_index, rail}].first += bytes * unit;
      }
  }
  for (const auto& [key, bytes] : nics)
    loads.nic = std::max({loads.nic, bytes.first, bytes.second});
  loads.leaf = a2a_leaf_load(c, cluster, nodes);
  return loads;
}

// Phase 1 (inside the nodes) and phase 2 (across them) of the hierarchical all-to-all.
std::pair<A2aLoads, A2aLoads> a2a_hierarchical_loads(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const double unit   = c.bytes / static_cast<double>(c.group.size());
  const auto nodes    = node_members(c.group, cluster.gpus_per_node);
  const std::size_t m = nodes.front().size();
  const double count  = static_cast<double>(nodes.size());
  std::vector<double> node_sum(nodes.size(), 0.0), rank_sum(m, 0.0); // W_a, and C_j over the nodes
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
      const double w    = member_load(c, nodes[a][j]);
      const double md   = static_cast<double>(m);
      const double out1 = c.load_at_source ? count * w * (md - 1) : total - rank_sum[j];
      const double in1  = c.load_at_source ? count * (node_sum[a] - w) : (md - 1) * rank_sum[j];
      const double out2 = c.load_at_source ? node_sum[a] * (count - 1) : md * (rank_sum[j] - w);
      const double in2  = c.load_at_source ? total - node_sum[a] : md * w * (count - 1);
      one.intra         = std::max({one.intra, out1 * unit, in1 * unit});
      const int gpu     = c.group[nodes[a][j]];
      auto& nic         = nics[{cluster.node_of(gpu), nic_of(cluster, gpu)}];
      nic.first += out2 * unit;
      nic.second += in2 * unit;
    }
  for (const auto& [key, bytes] : nics)
    two.nic = std::max({two.nic, bytes.first, bytes.second});
  two.leaf = a2a_leaf_load(c, cluster, nodes);
  return {one, two};
}

// Latency of a message inside a node and across nodes among the members (0 where there is none).
std::pair<double, double> a2a_latencies(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const auto nodes = node_members(c.group, cluster.gpus_per_node);
  double intra = 0, inter = 0;
  for (std::size_t a = 0; a < nodes.size(); ++a) {
    if (nodes[a].size() > 1)
      intra = std::max(intra, message_latency(c, cluster, c.group[nodes[a][0]], c.group[nodes[a][1]]));
    for (std::size_t b = a + 1; b < nodes.size(); ++b)
      inter = std::max(inter, message_latency(c, cluster, c.group[nodes[a][0]], c.group[nodes[b][0]]));
  }
  return {intra, inter};
}

} // namespace

// Hierarchical: the two phases one after the other. Direct: every message at once, so the link class
// that takes longest (its messages' latency, then its busiest link at c's bandwidth share) sets the time.
AnalyticParts a2a_parts(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const auto [a_intra, a_inter] = a2a_latencies(c, cluster);
  const double b_intra          = cluster.intra_node.bandwidth;
  if (a2a_hierarchical(c, cluster.gpus_per_node)) {
    const auto [one, two] = a2a_hierarchical_loads(c, cluster);
    return {2, a_intra + a_inter, one.intra / b_intra + two.inter_seconds(cluster)};
  }
  const A2aLoads loads = a2a_direct_loads(c, cluster);
  const double share   = c.bandwidth_factor > 0 ? c.bandwidth_factor : 1.0;
  const double intra = loads.intra / b_intra, inter = loads.inter_seconds(cluster);
  const double t_intra = loads.intra > 0 ? a_intra + intra / share : 0.0;
  const double t_inter = inter > 0 ? a_inter + inter / share : 0.0;
  return t_intra >= t_inter ? AnalyticParts{1, a_intra, intra} : AnalyticParts{1, a_inter, inter};
}

// The bytes each member sends to each node in a direct all-to-all, addressed to that node's first
// other member: O(n x nodes) instead of O(n^2).
void a2a_sends_by_node(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send)
{
  const double unit = c.bytes / static_cast<double>(c.group.size());
  const auto nodes  = node_members(c.group, gpus_per_node);
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
      const auto& node     = nodes[b];
      const bool here      = node_of[i] == b;
      const std::size_t to = node.front() != i ? node.front() : node.size() > 1 ? node[1] : i;
      if (to == i)
        continue;
      const double others = static_cast<double>(node.size()) - (here ? 1.0 : 0.0);
      const double bytes =
          c.load_at_source ? member_load(c, i) * others : node_sum[b] - (here ? member_load(c, i) : 0.0);
      send(c.group[i], c.group[to], bytes * unit);
    }
}

} // namespace ddlsim::sim::collectives
