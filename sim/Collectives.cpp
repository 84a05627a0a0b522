// The collectives' interface (sim/Collectives.hpp): tuning, decomposition into messages, message
// counts, per-send loads and closed forms, over the families in sim/collectives/ (groups and trees,
// message builders, links and closed forms, the all-to-all, NCCL's tuner; their shared
// declarations in sim/collectives/Internal.hpp).
#include "sim/Collectives.hpp"

#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

namespace ddlsim::sim {

using namespace collectives;

int tree_chunks(double bytes)
{
  constexpr double chunk = 4.0 * 1024 * 1024;
  return static_cast<int>(std::clamp(std::ceil(bytes / chunk), 1.0, 16.0)); // clamp first: bytes may be huge
}

double bus_bandwidth_factor(CollectiveKind kind, int members)
{
  const double n = members;
  switch (kind) {
  case CollectiveKind::all_reduce:
    return n > 0 ? 2 * (n - 1) / n : 0;
  case CollectiveKind::all_gather:
  case CollectiveKind::reduce_scatter:
  case CollectiveKind::all_to_all:
    return n > 0 ? (n - 1) / n : 0;
  case CollectiveKind::broadcast:
    return 1;
  }
  return 1;
}

std::vector<int> rail_nics(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const int gpn = cluster.gpus_per_node;
  if (std::all_of(c.group.begin(), c.group.end(), [&](int d) { return d / gpn == c.group.front() / gpn; }))
    return {}; // one node (the common tensor-parallel group): no rails, and no grouping to build
  const auto nodes = by_node(c.group, gpn);
  if (nodes.size() < 2)
    return {};
  std::vector<int> nics;
  for (int d : nodes.front())
    nics.push_back(nic_of(cluster, d));
  std::sort(nics.begin(), nics.end());
  nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
  return nics;
}

int rail_channels(const CollectiveTask& c, const ClusterSpec& cluster)
{
  return std::max<int>(1, static_cast<int>(rail_nics(c, cluster).size()));
}

CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, int gpus_per_node)
{
  if (c.kind == CollectiveKind::all_to_all)
    return a2a_hierarchical(c, gpus_per_node) ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::direct;
  if (!supports(c.algorithm, c.kind))
    return CollectiveAlgorithm::ring;
  switch (c.algorithm) {
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::automatic:
    return CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::tree:
    return c.group.size() > 2 ? CollectiveAlgorithm::tree : CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, gpus_per_node);
    return nodes.size() > 1 && nodes.front().size() > 1 ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::ring;
  }
  case CollectiveAlgorithm::double_tree:
    return by_node(c.group, gpus_per_node).empty() ? CollectiveAlgorithm::ring : CollectiveAlgorithm::double_tree;
  case CollectiveAlgorithm::nvls:
    return one_node(c.group, gpus_per_node) ? CollectiveAlgorithm::nvls : CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::sharp:
    return by_node(c.group, gpus_per_node).size() > 1 ? CollectiveAlgorithm::sharp : CollectiveAlgorithm::ring;
  }
  return CollectiveAlgorithm::ring;
}

CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const CollectiveAlgorithm a = effective_algorithm(c, cluster.gpus_per_node);
  if ((a == CollectiveAlgorithm::nvls && cluster.nvls_bandwidth <= 0) ||
      (a == CollectiveAlgorithm::sharp && !cluster.sharp))
    return CollectiveAlgorithm::ring;
  return a;
}

std::uint64_t collective_hash(const CollectiveTask& c)
{
  // FNV-1a's multiplier over the fields' bits (cheap: every collective of an iteration is hashed a
  // few times); a double's bits, with -0 as 0 so that equal values hash alike. The group by its size,
  // ends and two sums (the second weighted by place, for the ring order): independent additions.
  auto bits       = [](double x) { return x == 0 ? std::uint64_t{0} : std::bit_cast<std::uint64_t>(x); };
  std::uint64_t h = bits(c.bytes) ^ (static_cast<std::uint64_t>(c.kind) << 1) ^
                    (static_cast<std::uint64_t>(c.algorithm) << 5) ^ (c.load_at_source ? 1ULL << 9 : 0);
  std::uint64_t sum = 0, weighted = 0;
  for (std::size_t i = 0; i < c.group.size(); ++i) {
    sum += static_cast<std::uint64_t>(c.group[i]);
    weighted += (i + 1) * static_cast<std::uint64_t>(c.group[i]);
  }
  for (std::uint64_t x :
       {std::uint64_t{c.group.size()}, c.group.empty() ? 0 : static_cast<std::uint64_t>(c.group.front()),
        c.group.empty() ? 0 : static_cast<std::uint64_t>(c.group.back()), sum, weighted})
    h = h * 0x100000001b3ULL ^ x;
  for (double l : c.member_load)
    h = h * 0x100000001b3ULL ^ bits(l);
  return h;
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
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::automatic: {
    const int rails = c.channels > 1 ? gpus_per_node : 0;
    if (c.kind == CollectiveKind::broadcast) { // a pipelined chain from the first member
      const int chunks = tree_chunks(c.bytes);
      add_chain(out, c.group, chunks, c.bytes / chunks, rails);
      break;
    }
    add_ring(out, c.group, ring_steps(c.kind, n), c.bytes / static_cast<double>(n), {}, rails);
    break;
  }
  case CollectiveAlgorithm::tree:
    decompose_tree(out, c.group, c.bytes);
    break;
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes             = by_node(c.group, gpus_per_node);
    const std::size_t m          = nodes.front().size();
    const std::size_t node_count = nodes.size();
    const double local_shard     = c.bytes / static_cast<double>(m);
    std::vector<Index> done;
    for (const auto& members : nodes) { // reduce-scatter inside every node
      auto last = add_ring(out, members, static_cast<int>(m - 1), local_shard, {});
      done.insert(done.end(), last.begin(), last.end());
    }
    const Index scattered = add_join(out, done);
    done.clear();
    for (std::size_t j = 0; j < m; ++j) { // one all-reduce across the nodes per local rank
      std::vector<int> ring;
      for (const auto& members : nodes)
        ring.push_back(members[j]);
      auto last = add_ring(out, ring, 2 * static_cast<int>(node_count - 1),
                           local_shard / static_cast<double>(node_count), {scattered});
      done.insert(done.end(), last.begin(), last.end());
    }
    const Index reduced = add_join(out, done);
    for (const auto& members : nodes) // all-gather inside every node
      add_ring(out, members, static_cast<int>(m - 1), local_shard, {reduced});
    break;
  }
  case CollectiveAlgorithm::double_tree: {
    const DoubleTreeShape s = double_tree_shape(c, gpus_per_node);
    for (int t = 0; t < s.trees; ++t)
      add_double_tree_channel(out, s, t, t);
    break;
  }
  case CollectiveAlgorithm::nvls: {
    const auto [up, down] = nvls_bytes(c.kind, c.bytes, static_cast<double>(n));
    const int chunks      = tree_chunks(c.bytes);
    add_switch_pipeline(out, c.group, node_switch_endpoint(c.group.front() / gpus_per_node), chunks, up / chunks,
                        down / chunks, {});
    break;
  }
  case CollectiveAlgorithm::sharp: {
    const auto nodes    = by_node(c.group, gpus_per_node);
    const std::size_t m = nodes.front().size();
    const double shard  = c.bytes / static_cast<double>(m);
    std::vector<Index> done;
    if (m > 1)
      for (const auto& members : nodes) {
        auto last = add_ring(out, members, static_cast<int>(m - 1), shard, {});
        done.insert(done.end(), last.begin(), last.end());
      }
    std::vector<Index> start;
    if (!done.empty())
      start.push_back(add_join(out, done));
    const int chunks = tree_chunks(shard);
    std::vector<int> members;
    for (const auto& node : nodes)
      members.insert(members.end(), node.begin(), node.end());
    auto last =
        add_switch_pipeline(out, members, fabric_switch_endpoint, chunks, shard / chunks, shard / chunks, start);
    if (m > 1) {
      const Index reduced = add_join(out, last);
      for (const auto& node : nodes)
        add_ring(out, node, static_cast<int>(m - 1), shard, {reduced});
    }
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
    const auto nodes      = node_members(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    return count * m * (m - 1) + m * count * (count - 1); // inside each node, then one exchange per local rank
  }
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::automatic:
    if (c.kind == CollectiveKind::broadcast)
      return (n - 1) * static_cast<std::uint64_t>(tree_chunks(c.bytes));
    return static_cast<std::uint64_t>(ring_steps(c.kind, n)) * n;
  case CollectiveAlgorithm::tree:
    return 2 * (n - 1) * static_cast<std::uint64_t>(tree_chunks(c.bytes));
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes      = by_node(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    // reduce-scatter and all-gather inside each node, m rings of 2 (N - 1) steps across them
    return 2 * count * (m - 1) * m + m * 2 * (count - 1) * count;
  }
  case CollectiveAlgorithm::double_tree: {
    const DoubleTreeShape s = double_tree_shape(c, gpus_per_node);
    return static_cast<std::uint64_t>(s.trees) * 2 * (n - 1) * static_cast<std::uint64_t>(s.chunks);
  }
  case CollectiveAlgorithm::nvls:
    return 2 * n * static_cast<std::uint64_t>(tree_chunks(c.bytes));
  case CollectiveAlgorithm::sharp: {
    const auto nodes      = by_node(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    return 2 * count * (m - 1) * m + 2 * n * static_cast<std::uint64_t>(tree_chunks(c.bytes / static_cast<double>(m)));
  }
  }
  return 0;
}

namespace {

// A hop between nodes over the rails (a channel group's, Message::rails) loads all of its nodes'
// NICs together: NCCL's channels cross between nodes at every member's rail, not at one GPU. So
// its bytes are reported as leaving from each member of the source node in equal parts, each to
// the member in the same place on the destination node.
class RailSends {
public:
  RailSends(const CollectiveTask& c, int gpus_per_node) : gpn_(gpus_per_node)
  {
    if (c.channels > 1)
      nodes_ = by_node(c.group, gpus_per_node);
  }

  /// A ring between nodes over the rails, visiting each node's k members in one run: NCCL's channels
  /// each enter and leave a node at other members, so that, over the channels, every member sends
  /// its hop's bytes, 1/k of them to its peer on the next node (its own NIC) and the rest to the next
  /// member of its node. Returns false (nothing sent) for any other ring.
  bool ring(const std::vector<int>& group, double per_hop, const std::function<void(int, int, double)>& out) const
  {
    if (nodes_.size() < 2 ||
        !std::is_sorted(group.begin(), group.end(), [&](int a, int b) { return a / gpn_ < b / gpn_; }))
      return false;
    for (std::size_t v = 0; v < nodes_.size(); ++v) {
      const auto& here = nodes_[v];
      const auto& next = nodes_[(v + 1) % nodes_.size()];
      const auto k     = static_cast<double>(here.size());
      for (std::size_t j = 0; j < here.size(); ++j) {
        if (here.size() > 1)
          out(here[j], here[(j + 1) % here.size()], per_hop * (k - 1) / k);
        out(here[j], next[j], per_hop / k);
      }
    }
    return true;
  }

  /// One hop: spread over the source node's members when it goes between nodes over the rails.
  void send(int src, int dst, double bytes, bool rails, const std::function<void(int, int, double)>& out) const
  {
    const std::vector<int>* from = rails ? members_of(src) : nullptr;
    const std::vector<int>* to   = from && dst / gpn_ != src / gpn_ ? members_of(dst) : nullptr;
    if (!to) {
      out(src, dst, bytes);
      return;
    }
    for (std::size_t k = 0; k < from->size(); ++k)
      out((*from)[k], (*to)[k], bytes / static_cast<double>(from->size()));
  }

private:
  const std::vector<int>* members_of(int gpu) const
  {
    if (gpu < 0)
      return nullptr;
    const auto it = std::lower_bound(nodes_.begin(), nodes_.end(), gpu / gpn_,
                                     [&](const std::vector<int>& m, int node) { return m.front() / gpn_ < node; });
    return it != nodes_.end() && it->front() / gpn_ == gpu / gpn_ ? &*it : nullptr;
  }

  int gpn_;
  std::vector<std::vector<int>> nodes_; // by_node: nodes in increasing order, equal counts (empty: no rails)
};

} // namespace

void for_each_send(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send)
{
  const std::size_t n = c.group.size();
  if (n < 2)
    return;
  if (c.kind == CollectiveKind::all_to_all && !a2a_hierarchical(c, gpus_per_node)) {
    a2a_sends_by_node(c, gpus_per_node, send);
    return;
  }
  const RailSends rails(c, gpus_per_node);
  if (effective_algorithm(c, gpus_per_node) == CollectiveAlgorithm::ring && c.kind != CollectiveKind::broadcast) {
    const double per_hop = ring_steps(c.kind, n) * c.bytes / static_cast<double>(n);
    if (rails.ring(c.group, per_hop, send))
      return;
    for (std::size_t i = 0; i < n; ++i) // a ring that visits nodes more than once: its hops over the rails spread
      rails.send(c.group[i], c.group[(i + 1) % n], per_hop, c.channels > 1, send);
    return;
  }
  for (const Message& m : decompose(c, gpus_per_node)) {
    if (m.src < 0)
      continue; // a join, or what a switch sends
    int dst = m.dst;
    if (dst == fabric_switch_endpoint)
      dst = (m.src / gpus_per_node + 1) * gpus_per_node; // into the network
    else if (is_switch_endpoint(dst))
      dst = node_of_switch_endpoint(dst) * gpus_per_node; // into the node's switch
    rails.send(m.src, dst, m.bytes, m.rails, send);
  }
}

double message_latency(const CollectiveTask& c, const ClusterSpec& cluster, int src, int dst)
{
  if (c.hop_latency_s >= 0)
    return c.hop_latency_s;
  const bool resolved = c.intra_step_latency_s >= 0;
  if (src == fabric_switch_endpoint || dst == fabric_switch_endpoint)
    return resolved ? 0.0 : (cluster.nic.latency + cluster.fabric_latency) / 2; // resolved: in the fixed latency
  if (is_switch_endpoint(src) || is_switch_endpoint(dst))
    return resolved ? 0.0 : cluster.intra_node.latency / 2;
  if (cluster.node_of(src) == cluster.node_of(dst))
    return resolved ? c.intra_step_latency_s : cluster.latency(src, dst);
  return c.inter_step_latency_s >= 0 ? c.inter_step_latency_s : cluster.latency(src, dst);
}

AnalyticParts analytic_parts(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const std::size_t n = c.group.size();
  if (n < 2)
    return {};
  if (c.kind == CollectiveKind::all_to_all)
    return a2a_parts(c, cluster);
  const double S = c.bytes;
  const int gpn  = cluster.gpus_per_node;
  switch (effective_algorithm(c, gpn)) {
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::automatic: {
    if (c.kind == CollectiveKind::broadcast) {
      const int chunks = tree_chunks(S);
      Lockstep step(c, cluster);
      for (std::size_t h = 0; h + 1 < n; ++h)
        step.add(c.group[h], c.group[h + 1], S / chunks, true);
      std::vector<HopTime> hops;
      for (const Hop& h : step.hops())
        hops.push_back(step.time(h));
      return pipeline(hops, chunks);
    }
    return ring_phase(c, cluster, {c.group}, ring_steps(c.kind, n), S / static_cast<double>(n));
  }
  case CollectiveAlgorithm::tree:
    return tree_parts(c, cluster);
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes   = by_node(c.group, gpn);
    const double m     = static_cast<double>(nodes.front().size());
    const double count = static_cast<double>(nodes.size());
    std::vector<std::vector<int>> across(nodes.front().size());
    for (const auto& members : nodes)
      for (std::size_t j = 0; j < members.size(); ++j)
        across[j].push_back(members[j]);
    const AnalyticParts inside = ring_phase(c, cluster, nodes, m - 1, S / m);
    return inside + ring_phase(c, cluster, across, 2 * (count - 1), S / (m * count)) + inside;
  }
  case CollectiveAlgorithm::double_tree:
    return double_tree_parts(c, cluster);
  case CollectiveAlgorithm::nvls: {
    const auto [up, down] = nvls_bytes(c.kind, S, static_cast<double>(n));
    const int chunks      = tree_chunks(S);
    return switch_pipeline_parts(c, cluster, c.group, node_switch_endpoint(cluster.node_of(c.group.front())), chunks,
                                 up / chunks, down / chunks);
  }
  case CollectiveAlgorithm::sharp: {
    const auto nodes = by_node(c.group, gpn);
    const double m   = static_cast<double>(nodes.front().size());
    const int chunks = tree_chunks(S / m);
    AnalyticParts inside;
    if (m > 1)
      inside = ring_phase(c, cluster, nodes, m - 1, S / m);
    std::vector<int> members;
    for (const auto& node : nodes)
      members.insert(members.end(), node.begin(), node.end());
    return inside +
           switch_pipeline_parts(c, cluster, members, fabric_switch_endpoint, chunks, S / m / chunks, S / m / chunks) +
           inside;
  }
  }
  return {};
}

double analytic_seconds(const CollectiveTask& c, const ClusterSpec& cluster)
{
  if (c.group.size() < 2)
    return 0;
  const AnalyticParts p = analytic_parts(c, cluster);
  return c.base_latency_s + p.latency_s + p.transfer_s / c.bandwidth_factor;
}

void calibrate_collective(CollectiveTask& c, const ClusterSpec& cluster, double alpha_s, double transfer_s)
{
  c.hop_latency_s    = -1;
  c.bandwidth_factor = 1;
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
  c.base_latency_s = 0;
  c.hop_latency_s  = std::max(alpha_s, 0.0) / p.hops;
  // A regime whose time does not grow with size (transfer_s 0) makes the messages free.
  c.bandwidth_factor = transfer_s > 0 ? p.transfer_s / transfer_s : std::numeric_limits<double>::infinity();
}

void resolve_collective(CollectiveTask& c, const ClusterSpec& cluster, std::optional<CollectiveProtocol> protocol)
{
  if (c.group.size() < 2)
    return;
  if (cluster.intra_link == IntraLink::host) { // CPU threads: no NCCL, the links as they are
    c.algorithm = effective_algorithm(c, cluster);
    return;
  }
  if (c.group.size() > max_tuned_group) { // no simulation this large would pass the resource guard
    c.algorithm = effective_algorithm(c, cluster);
    apply_protocol(c, cluster, CollectiveProtocol::simple);
    return;
  }
  std::vector<CollectiveAlgorithm> candidates;
  if (c.kind == CollectiveKind::all_to_all) { // direct, or hierarchical where it fits and is faster
    if (c.algorithm == CollectiveAlgorithm::automatic) {
      candidates.push_back(CollectiveAlgorithm::direct);
      if (a2a_hierarchical_fits(c.group, cluster.gpus_per_node))
        candidates.push_back(CollectiveAlgorithm::hierarchical);
    } else {
      candidates.push_back(effective_algorithm(c, cluster)); // direct; hierarchical where it fits
    }
  } else if (c.algorithm == CollectiveAlgorithm::automatic) {
    for (CollectiveAlgorithm a : {CollectiveAlgorithm::ring, CollectiveAlgorithm::double_tree,
                                  CollectiveAlgorithm::nvls, CollectiveAlgorithm::sharp}) {
      CollectiveTask t = c;
      t.algorithm      = a;
      if (effective_algorithm(t, cluster) == a)
        candidates.push_back(a);
    }
  } else {
    candidates.push_back(effective_algorithm(c, cluster));
  }
  const bool ll128    = cluster.intra_link == IntraLink::nvlink; // NCCL enables LL128 over NVLink paths only
  CollectiveTask best = c;
  double best_s       = std::numeric_limits<double>::infinity();
  auto allowed        = [&](CollectiveAlgorithm a, CollectiveProtocol p, bool forced) {
    if ((a == CollectiveAlgorithm::nvls || a == CollectiveAlgorithm::sharp) && p != CollectiveProtocol::simple)
      return false;
    if (p == CollectiveProtocol::ll128 && (!ll128 || c.kind == CollectiveKind::all_to_all)) // p2p: LL or Simple
      return false;
    return !forced || !protocol || p == *protocol;
  };
  // A forced protocol no candidate runs (LL on NVLS) leaves each candidate its own.
  bool any = false;
  for (CollectiveAlgorithm a : candidates)
    for (CollectiveProtocol p : {CollectiveProtocol::ll, CollectiveProtocol::ll128, CollectiveProtocol::simple})
      any = any || allowed(a, p, true);
  for (CollectiveAlgorithm a : candidates)
    for (CollectiveProtocol p : {CollectiveProtocol::ll, CollectiveProtocol::ll128, CollectiveProtocol::simple}) {
      if (!allowed(a, p, any))
        continue;
      CollectiveTask t = c;
      t.algorithm      = a;
      t.hop_latency_s  = -1;
      apply_protocol(t, cluster, p);
      const double s = analytic_seconds(t, cluster);
      if (s < best_s) {
        best_s = s;
        best   = std::move(t);
      }
    }
  c = std::move(best);
}

} // namespace ddlsim::sim
