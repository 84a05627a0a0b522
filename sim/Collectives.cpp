#include "sim/Collectives.hpp"

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
namespace {

using Index = std::uint32_t;
constexpr double us = 1e-6;

// ---------------------------------------------------------------------------------------------
// Group layout

// Members grouped by node (nodes in increasing order, members in group order); empty when the
// nodes hold different counts.
std::vector<std::vector<int>> by_node(const std::vector<int>& group, int gpus_per_node)
{
  std::vector<std::vector<int>> out;
  auto node = [gpus_per_node](int d) { return d / gpus_per_node; };
  if (std::is_sorted(group.begin(), group.end(), [&](int a, int b) { return node(a) < node(b); })) {
    // The usual case, nodes in increasing order: runs of one node, without a map.
    for (auto run = group.begin(); run != group.end();) {
      const auto next = std::find_if(run, group.end(), [&](int d) { return node(d) != node(*run); });
      out.emplace_back(run, next);
      run = next;
    }
  } else {
    std::map<int, std::vector<int>> nodes;
    for (int d : group)
      nodes[node(d)].push_back(d);
    for (auto& [index, members] : nodes)
      out.push_back(std::move(members));
  }
  for (const auto& members : out)
    if (members.size() != out.front().size())
      return {};
  return out;
}

bool one_node(const std::vector<int>& group, int gpus_per_node)
{
  return std::all_of(group.begin(), group.end(), [&](int d) { return d / gpus_per_node == group.front() / gpus_per_node; });
}

std::vector<int> rotated(const std::vector<int>& members, std::size_t by)
{
  std::vector<int> out;
  for (std::size_t i = 0; i < members.size(); ++i)
    out.push_back(members[(i + by) % members.size()]);
  return out;
}

// NCCL's binary tree over n ranks (src/graph/trees.cc, ncclGetBtree): rank r's parent and children.
// Rank 0 is the root with one child; the others alternate leaves (odd) and interior ranks (even).
struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};

TreeLinks btree(int n, int r)
{
  TreeLinks t;
  if (r == 0) {
    int bit = 1;
    while (bit < n)
      bit <<= 1;
    if (n > 1)
      t.children.push_back(bit >> 1);
    return t;
  }
  const int bit = r & -r;
  t.parent = (r ^ bit) | (bit << 1);
  if (t.parent >= n)
    t.parent = r ^ bit;
  if (const int low = bit >> 1; low > 0) {
    t.children.push_back(r - low);
    for (int l = low; l > 0; l >>= 1)
      if (r + l < n) {
        t.children.push_back(r + l);
        break;
      }
  }
  return t;
}

// The second tree of NCCL's double binary tree (ncclGetDtree): the first mirrored (n even) or
// shifted by one rank (n odd), so that every rank is interior in at most one of the two.
TreeLinks dtree(int n, int r, int tree)
{
  if (tree == 0)
    return btree(n, r);
  auto map = [&](int x) { return n % 2 == 1 ? (x - 1 + n) % n : n - 1 - x; };
  auto back = [&](int x) { return x < 0 ? -1 : (n % 2 == 1 ? (x + 1) % n : n - 1 - x); };
  TreeLinks t = btree(n, map(r));
  t.parent = back(t.parent);
  for (int& child : t.children)
    child = back(child);
  return t;
}

int tree_depth(int n, int tree)
{
  static std::map<std::pair<int, int>, int> known;  // a pure function of (n, tree): computed once each
  if (auto it = known.find({n, tree}); it != known.end())
    return it->second;
  int depth = 0;
  for (int r = 0; r < n; ++r) {
    int d = 0;
    for (int x = r; dtree(n, x, tree).parent >= 0; x = dtree(n, x, tree).parent)
      ++d;
    depth = std::max(depth, d);
  }
  known[{n, tree}] = depth;
  return depth;
}

// ---------------------------------------------------------------------------------------------
// Building messages

// Appends a ring over `members` of `steps` steps of `chunk` bytes. Every first-step message waits
// for `start` (when given). Returns the indices of the messages each member receives last.
// With rails_gpn > 0 (GPUs per node), hops between nodes go over the nodes' rails.
std::vector<Index> add_ring(std::vector<Message>& out, const std::vector<int>& members, int steps, double chunk,
                            const std::vector<Index>& start, int rails_gpn = 0)
{
  const std::size_t n = members.size();
  std::vector<Index> previous(n);  // message member i sent at the previous step
  std::vector<Index> current(n);
  for (int k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      const int dst = members[(i + 1) % n];
      Message m{.src = members[i], .dst = dst, .bytes = chunk, .after = {},
                .rails = rails_gpn > 0 && members[i] / rails_gpn != dst / rails_gpn};
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

Index add_message(std::vector<Message>& out, int src, int dst, double bytes, std::vector<Index> after, bool rails = false)
{
  out.push_back({.src = src, .dst = dst, .bytes = bytes, .after = std::move(after), .rails = rails});
  return static_cast<Index>(out.size() - 1);
}

// A pipelined chain (broadcast): chunk c crosses hop h once it has crossed hop h-1 and hop h has
// carried chunk c-1.
void add_chain(std::vector<Message>& out, const std::vector<int>& chain, int chunks, double chunk, int rails_gpn)
{
  std::vector<Index> previous_hop(static_cast<std::size_t>(chunks));
  for (std::size_t h = 0; h + 1 < chain.size(); ++h)
    for (int c = 0; c < chunks; ++c) {
      std::vector<Index> after;
      if (h > 0)
        after.push_back(previous_hop[static_cast<std::size_t>(c)]);
      if (c > 0)
        after.push_back(static_cast<Index>(out.size() - 1));
      previous_hop[static_cast<std::size_t>(c)] =
          add_message(out, chain[h], chain[h + 1], chunk, std::move(after),
                      rails_gpn > 0 && chain[h] / rails_gpn != chain[h + 1] / rails_gpn);
    }
}

// The binary tree in member order: parent of i is (i-1)/2. Siblings send each chunk together, so
// that a parent's link is always shared by all its children's chunks (tree_parts() relies on it).
// Messages are built chunk by chunk, so that every wait is built before its waiter.
void decompose_tree(std::vector<Message>& out, const std::vector<int>& g, double bytes)
{
  const std::size_t n = g.size();
  const int chunks = tree_chunks(bytes);
  const double chunk = bytes / chunks;
  const auto K = static_cast<std::size_t>(chunks);
  auto pair = [&](std::size_t i) {  // i and its sibling, if it has one
    const std::size_t s = i % 2 == 1 ? i + 1 : i - 1;
    return s < n ? std::vector<std::size_t>{i, s} : std::vector<std::size_t>{i};
  };
  // up[i][c]: member i sending chunk c to its parent (i >= 1). Children have larger indices.
  std::vector<std::vector<Index>> up(n, std::vector<Index>(K, 0));
  for (std::size_t c = 0; c < K; ++c)
    for (std::size_t i = n - 1; i >= 1; --i) {
      std::vector<Index> after;
      for (std::size_t member : pair(i)) {
        if (c > 0)
          after.push_back(up[member][c - 1]);
        for (std::size_t child : {2 * member + 1, 2 * member + 2})
          if (child < n)
            after.push_back(up[child][c]);
      }
      up[i][c] = add_message(out, g[i], g[(i - 1) / 2], chunk, std::move(after));
    }
  std::vector<Index> at_root;
  for (std::size_t child : {std::size_t{1}, std::size_t{2}})
    if (child < n)
      at_root.push_back(up[child][K - 1]);
  const Index reduced = add_join(out, at_root);
  // down[i][c]: member i receiving chunk c from its parent; siblings receive each chunk together.
  std::vector<std::vector<Index>> down(n, std::vector<Index>(K, 0));
  for (std::size_t c = 0; c < K; ++c)
    for (std::size_t i = 1; i < n; ++i) {
      const std::size_t parent = (i - 1) / 2;
      std::vector<Index> after{parent == 0 ? reduced : down[parent][c]};
      if (c > 0)
        for (std::size_t member : pair(i))
          after.push_back(down[member][c - 1]);
      down[i][c] = add_message(out, g[parent], g[i], chunk, std::move(after));
    }
}

struct DoubleTreeShape {
  std::vector<std::vector<int>> nodes;  // members by node
  int trees = 1;                        // 1 inside one node (the chain), else 2
  bool rails = false;                   // tree hops over the nodes' rails (C > 1 channels)
  int chunks = 1;
  double chunk = 0;
};

DoubleTreeShape double_tree_shape(const CollectiveTask& c, int gpus_per_node)
{
  DoubleTreeShape s;
  s.nodes = by_node(c.group, gpus_per_node);
  s.trees = s.nodes.size() > 1 ? 2 : 1;
  s.rails = s.nodes.size() > 1 && c.channels > 1;
  const double per_tree = c.bytes / s.trees;
  s.chunks = tree_chunks(per_tree);
  s.chunk = per_tree / s.chunks;
  return s;
}

// One tree of NCCL's double tree: in every node a chain of its members starting at member `head`,
// whose head joins tree `tree` over the nodes. Reduce up in K chunks, then broadcast down.
void add_double_tree_channel(std::vector<Message>& out, const DoubleTreeShape& s, int tree, int head)
{
  const int N = static_cast<int>(s.nodes.size());
  const std::size_t m = s.nodes.front().size();
  const auto K = static_cast<std::size_t>(s.chunks);
  std::vector<std::vector<int>> chain;  // per node, the chain from its head
  for (const auto& members : s.nodes)
    chain.push_back(rotated(members, static_cast<std::size_t>(head) % m));
  std::vector<TreeLinks> links;
  for (int v = 0; v < N; ++v)
    links.push_back(dtree(N, v, tree));
  // Up: chain position p sends to p-1; the head sends to its parent node's head. Nodes are visited
  // leaves first (children before parents), so every wait already exists.
  std::vector<int> order;  // nodes, deepest first
  {
    std::vector<std::pair<int, int>> depth;
    for (int v = 0; v < N; ++v) {
      int d = 0;
      for (int x = v; links[static_cast<std::size_t>(x)].parent >= 0; x = links[static_cast<std::size_t>(x)].parent)
        ++d;
      depth.emplace_back(-d, v);
    }
    std::sort(depth.begin(), depth.end());
    for (const auto& [d, v] : depth)
      order.push_back(v);
  }
  // up_chain[v][p][c]: chain position p (>= 1) of node v sending chunk c to p-1; up_head[v][c].
  std::vector<std::vector<std::vector<Index>>> up_chain(static_cast<std::size_t>(N),
                                                        std::vector<std::vector<Index>>(m, std::vector<Index>(K, 0)));
  std::vector<std::vector<Index>> up_head(static_cast<std::size_t>(N), std::vector<Index>(K, 0));
  std::vector<Index> at_root;
  for (int v : order) {
    const auto V = static_cast<std::size_t>(v);
    for (std::size_t p = m - 1; p >= 1; --p)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after;
        if (p + 1 < m)
          after.push_back(up_chain[V][p + 1][c]);
        if (c > 0)
          after.push_back(up_chain[V][p][c - 1]);
        up_chain[V][p][c] = add_message(out, chain[V][p], chain[V][p - 1], s.chunk, std::move(after));
      }
    for (std::size_t c = 0; c < K; ++c) {
      std::vector<Index> after;
      if (m > 1)
        after.push_back(up_chain[V][1][c]);
      for (int child : links[V].children)
        after.push_back(up_head[static_cast<std::size_t>(child)][c]);
      if (links[V].parent < 0) {
        if (c + 1 == K)
          at_root = after;
        continue;
      }
      if (c > 0)
        after.push_back(up_head[V][c - 1]);
      up_head[V][c] = add_message(out, chain[V][0], chain[static_cast<std::size_t>(links[V].parent)][0], s.chunk,
                                  std::move(after), s.rails);
    }
  }
  // Inside one node (N = 1) the chain's head is the root: it waits for the chain's last chunk.
  const Index reduced = add_join(out, at_root);
  // Down, root first (reverse order): the head passes chunk c to its children's heads and down its chain.
  std::vector<std::vector<Index>> has(static_cast<std::size_t>(N), std::vector<Index>(K, reduced));
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto V = static_cast<std::size_t>(*it);
    for (int child : links[V].children)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after{has[V][c]};
        if (c > 0)
          after.push_back(has[static_cast<std::size_t>(child)][c - 1]);
        has[static_cast<std::size_t>(child)][c] = add_message(
            out, chain[V][0], chain[static_cast<std::size_t>(child)][0], s.chunk, std::move(after), s.rails);
      }
    std::vector<Index> previous = has[V];
    for (std::size_t p = 0; p + 1 < m; ++p)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after{previous[c]};
        if (c > 0)
          after.push_back(static_cast<Index>(out.size() - 1));
        previous[c] = add_message(out, chain[V][p], chain[V][p + 1], s.chunk, std::move(after));
      }
  }
}

// Bytes each member sends into the switch and receives back, per whole buffer: NVLS reads every
// member's data for the reduction and multicasts the result to every member.
std::pair<double, double> nvls_bytes(CollectiveKind kind, double bytes, double m)
{
  switch (kind) {
  case CollectiveKind::all_reduce: return {bytes * (m + 1) / m, bytes * (m + 1) / m};
  case CollectiveKind::all_gather: return {bytes / m, bytes};
  case CollectiveKind::reduce_scatter: return {bytes, bytes / m};
  case CollectiveKind::broadcast:
  case CollectiveKind::all_to_all: break;
  }
  return {bytes, bytes};
}

// K chunks into a switch and back: every member sends chunk c up after chunk c-1; the switch sends
// chunk c down to every member once all of chunk c is in and chunk c-1 went down. Returns the last
// arrivals.
std::vector<Index> add_switch_pipeline(std::vector<Message>& out, const std::vector<int>& members, int endpoint,
                                       int chunks, double up_bytes, double down_bytes, const std::vector<Index>& start)
{
  const std::size_t m = members.size();
  std::vector<Index> up(m), down(m);
  for (int c = 0; c < chunks; ++c) {
    std::vector<Index> in;
    for (std::size_t i = 0; i < m; ++i) {
      up[i] = add_message(out, members[i], endpoint, up_bytes, c == 0 ? start : std::vector<Index>{up[i]});
      in.push_back(up[i]);
    }
    const Index all_in = add_join(out, std::move(in));
    for (std::size_t i = 0; i < m; ++i)
      down[i] = add_message(out, endpoint, members[i], down_bytes,
                            c == 0 ? std::vector<Index>{all_in} : std::vector<Index>{all_in, down[i]});
  }
  return down;
}

// ---------------------------------------------------------------------------------------------
// Links each message loads, for the closed forms

enum class LinkKind { gpu_up, gpu_down, nic_up, nic_down, leaf_up, leaf_down, nvls_in, nvls_out, rails_up, rails_down };
using LinkKey = std::uint64_t;  // kind, owner, index packed (link_key)
struct LinkUse {
  LinkKey key;
  double bandwidth;
};

int nic_of(const ClusterSpec& cl, int gpu) { return (gpu % cl.gpus_per_node) % std::max(1, cl.nics_per_node); }

// At most six links per message (up and down at each of three levels): kept in place, no allocation.
struct LinkUses {
  std::array<LinkUse, 6> use{};
  std::size_t n = 0;
  void push_back(const LinkUse& l)
  {
    assert(n < use.size());
    use[n++] = l;
  }
  const LinkUse* begin() const { return use.data(); }
  const LinkUse* end() const { return use.data() + n; }
};

// The links a message loads (as sim/Platform.hpp routes it). A message over `rails` NICs (> 0: a
// channel group between nodes) leaves through those NICs of its node together instead of one.
LinkUses links_of(const ClusterSpec& cl, int src, int dst, int rails = 0)
{
  auto key = [](LinkKind k, int owner, int index) {
    return (static_cast<LinkKey>(k) << 56) | (static_cast<LinkKey>(static_cast<std::uint32_t>(owner)) << 16) |
           static_cast<LinkKey>(static_cast<std::uint16_t>(index));
  };
  LinkUses out;
  const double all_nics = cl.nics_per_node * cl.nic.bandwidth;
  if (src == fabric_switch_endpoint) {
    out.push_back({key(LinkKind::nic_down, cl.node_of(dst), nic_of(cl, dst)), cl.nic.bandwidth});
    return out;
  }
  if (dst == fabric_switch_endpoint) {
    out.push_back({key(LinkKind::nic_up, cl.node_of(src), nic_of(cl, src)), cl.nic.bandwidth});
    return out;
  }
  if (is_switch_endpoint(src)) {
    out.push_back({key(LinkKind::nvls_out, node_of_switch_endpoint(src), 0), cl.nvls_bandwidth});
    out.push_back({key(LinkKind::gpu_down, dst, 0), cl.intra_node.bandwidth});
    return out;
  }
  if (is_switch_endpoint(dst)) {
    out.push_back({key(LinkKind::gpu_up, src, 0), cl.intra_node.bandwidth});
    out.push_back({key(LinkKind::nvls_in, node_of_switch_endpoint(dst), 0), cl.nvls_bandwidth});
    return out;
  }
  if (cl.node_of(src) == cl.node_of(dst)) {
    out.push_back({key(LinkKind::gpu_up, src, 0), cl.intra_node.bandwidth});
    out.push_back({key(LinkKind::gpu_down, dst, 0), cl.intra_node.bandwidth});
    return out;
  }
  if (rails > 0) {  // the collective's rails: its C NICs together
    out.push_back({key(LinkKind::rails_up, cl.node_of(src), 1), rails * cl.nic.bandwidth});
    out.push_back({key(LinkKind::rails_down, cl.node_of(dst), 1), rails * cl.nic.bandwidth});
  } else {
    out.push_back({key(LinkKind::nic_up, cl.node_of(src), nic_of(cl, src)), cl.nic.bandwidth});
    out.push_back({key(LinkKind::nic_down, cl.node_of(dst), nic_of(cl, dst)), cl.nic.bandwidth});
  }
  out.push_back({key(LinkKind::rails_up, cl.node_of(src), 0), all_nics});
  out.push_back({key(LinkKind::rails_down, cl.node_of(dst), 0), all_nics});
  const int la = cl.leaf_of_node(cl.node_of(src)), lb = cl.leaf_of_node(cl.node_of(dst));
  if (la != lb) {
    out.push_back({key(LinkKind::leaf_up, la, 0), cl.leaf_uplink_bandwidth()});
    out.push_back({key(LinkKind::leaf_down, lb, 0), cl.leaf_uplink_bandwidth()});
  }
  return out;
}

// Hops that run at once, each carrying `bytes`: the links they load together, and each hop's
// duration (its latency plus its bytes at its most loaded link's fair share).
struct Hop {
  int src, dst;
  double bytes;
  bool rails = false;
  LinkUses links;  // links_of(src, dst), found once
};
struct HopTime {
  double latency = 0;
  double transfer = 0;
  double total() const { return latency + transfer; }
};

class Lockstep {
public:
  Lockstep(const CollectiveTask& c, const ClusterSpec& cl) : c_(c), cl_(cl) {}
  /// A hop; `rails` for a hop between nodes over the rails (c's channels).
  void add(int src, int dst, double bytes, bool rails = false)
  {
    rails = rails && c_.channels > 1 && !is_switch_endpoint(src) && !is_switch_endpoint(dst) &&
            cl_.node_of(src) != cl_.node_of(dst);
    hops_.push_back({src, dst, bytes, rails, links_of(cl_, src, dst, rails ? c_.channels : 0)});
    for (const LinkUse& l : hops_.back().links)
      load_[l.key] += bytes;
  }
  HopTime time(const Hop& h) const
  {
    HopTime t{message_latency(c_, cl_, h.src, h.dst), 0};
    for (const LinkUse& l : h.links)
      t.transfer = std::max(t.transfer, load_.at(l.key) / l.bandwidth);
    return t;
  }
  /// The slowest hop.
  HopTime slowest() const
  {
    HopTime worst;
    for (const Hop& h : hops_)
      if (const HopTime t = time(h); t.total() > worst.total())
        worst = t;
    return worst;
  }
  const std::vector<Hop>& hops() const { return hops_; }

private:
  const CollectiveTask& c_;
  const ClusterSpec& cl_;
  std::vector<Hop> hops_;
  std::unordered_map<LinkKey, double> load_;
};

int ring_steps(CollectiveKind kind, std::size_t n)
{
  return static_cast<int>(n - 1) * (kind == CollectiveKind::all_reduce ? 2 : 1);
}

// A ring phase of `steps` steps over each of `rings` at once, each step `chunk` bytes per hop (hops
// between nodes over the rails when c has several channels).
AnalyticParts ring_phase(const CollectiveTask& c, const ClusterSpec& cl, const std::vector<std::vector<int>>& rings,
                         double steps, double chunk)
{
  Lockstep step(c, cl);
  for (const auto& order : rings)
    for (std::size_t i = 0; i < order.size(); ++i)
      step.add(order[i], order[(i + 1) % order.size()], chunk, true);
  const HopTime d = step.slowest();
  return {steps, steps * d.latency, steps * d.transfer};
}

AnalyticParts operator+(AnalyticParts a, const AnalyticParts& b)
{
  return {a.hops + b.hops, a.latency_s + b.latency_s, a.transfer_s + b.transfer_s};
}

// A linear pipeline of hops with durations d_h carrying K chunks: sum d_h + (K-1) max d_h.
AnalyticParts pipeline(const std::vector<HopTime>& hops, int chunks)
{
  AnalyticParts p;
  HopTime worst;
  for (const HopTime& h : hops) {
    p.hops += 1;
    p.latency_s += h.latency;
    p.transfer_s += h.transfer;
    if (h.total() > worst.total())
      worst = h;
  }
  p.hops += chunks - 1;
  p.latency_s += (chunks - 1) * worst.latency;
  p.transfer_s += (chunks - 1) * worst.transfer;
  return p;
}

// The binary tree's exact time: the pipelined recursion of decompose_tree's waits, each hop lasting
// its latency plus its chunk at its links' share among the siblings that send with it. Carries the
// critical path's hops, latency and transfer.
AnalyticParts tree_parts(const CollectiveTask& c, const ClusterSpec& cl)
{
  const auto& g = c.group;
  const std::size_t n = g.size();
  const int chunks = tree_chunks(c.bytes);
  const double chunk = c.bytes / chunks;
  const auto K = static_cast<std::size_t>(chunks);
  auto sibling = [&](std::size_t i) -> std::size_t {
    const std::size_t s = i % 2 == 1 ? i + 1 : i - 1;
    return s < n ? s : i;
  };
  struct Event {
    double t = 0;
    AnalyticParts path;
  };
  auto later = [](const Event& a, const Event& b) { return b.t > a.t ? b : a; };
  auto after = [](Event e, const HopTime& h) {
    e.t += h.total();
    e.path = e.path + AnalyticParts{1, h.latency, h.transfer};
    return e;
  };
  // Hop durations: child i to its parent (up) and back (down), sharing with its sibling.
  std::vector<HopTime> up_time(n), down_time(n);
  for (std::size_t i = 1; i < n; ++i) {
    Lockstep upward(c, cl), downward(c, cl);
    for (std::size_t j : sibling(i) == i ? std::vector<std::size_t>{i} : std::vector<std::size_t>{i, sibling(i)}) {
      upward.add(g[j], g[(j - 1) / 2], chunk);
      downward.add(g[(j - 1) / 2], g[j], chunk);
    }
    up_time[i] = upward.time(upward.hops().front());  // member i's own hop, added first
    down_time[i] = downward.time(downward.hops().front());
  }
  std::vector<std::vector<Event>> up(n, std::vector<Event>(K));
  for (std::size_t c_ = 0; c_ < K; ++c_)
    for (std::size_t i = n - 1; i >= 1; --i) {
      if (sibling(i) < i && sibling(i) != i)
        continue;  // computed with its larger sibling
      Event start;
      for (std::size_t member : {i, sibling(i)}) {
        for (std::size_t child : {2 * member + 1, 2 * member + 2})
          if (child < n)
            start = later(start, up[child][c_]);
        if (c_ > 0)
          start = later(start, up[member][c_ - 1]);
      }
      up[i][c_] = after(start, up_time[i]);
      if (const std::size_t s = sibling(i); s != i)
        up[s][c_] = after(start, up_time[s]);
    }
  Event reduced;
  for (std::size_t child : {std::size_t{1}, std::size_t{2}})
    if (child < n)
      reduced = later(reduced, up[child][K - 1]);
  std::vector<std::vector<Event>> down(n, std::vector<Event>(K));
  Event done;
  for (std::size_t i = 1; i < n; ++i) {
    if (sibling(i) < i)
      continue;  // computed with its smaller sibling
    const std::size_t parent = (i - 1) / 2;
    for (std::size_t c_ = 0; c_ < K; ++c_) {
      Event start = parent == 0 ? reduced : down[parent][c_];
      if (c_ > 0) {
        start = later(start, down[i][c_ - 1]);
        start = later(start, down[sibling(i)][c_ - 1]);
      }
      down[i][c_] = after(start, down_time[i]);
      down[sibling(i)][c_] = after(start, down_time[sibling(i)]);
      done = later(done, later(down[i][c_], down[sibling(i)][c_]));
    }
  }
  return done.path;
}

// NCCL's tree, closed form: up the chain and the deeper tree, then down again. Chunk c's first pass
// takes each hop at the load of the hops that run with it (the same chain position, or the same
// tree level, of every channel); the other K-1 chunks follow at the slowest hop's steady-state
// cycle, with every channel's hops at once. Exact for one chunk when every tree level loads the
// NICs alike; the flows are a little faster than the steady state while the pipeline fills.
AnalyticParts double_tree_parts(const CollectiveTask& c, const ClusterSpec& cl)
{
  const DoubleTreeShape s = double_tree_shape(c, cl.gpus_per_node);
  const int N = static_cast<int>(s.nodes.size());
  const std::size_t m = s.nodes.front().size();
  // first[d]: chain position 1 -> 0 of every channel (one chain step) and every tree hop; all[d]:
  // every hop of every channel at once. d = 0 up, 1 down.
  std::array<Lockstep, 2> first{Lockstep(c, cl), Lockstep(c, cl)}, all{Lockstep(c, cl), Lockstep(c, cl)};
  for (int t = 0; t < s.trees; ++t)
    for (int k = t; k == t; ++k)  // tree t's chains start at member t
      for (int v = 0; v < N; ++v) {
        const auto chain = rotated(s.nodes[static_cast<std::size_t>(v)], static_cast<std::size_t>(k) % m);
        for (std::size_t p = 1; p < m; ++p) {
          all[0].add(chain[p], chain[p - 1], s.chunk);
          all[1].add(chain[p - 1], chain[p], s.chunk);
          if (p == 1) {
            first[0].add(chain[1], chain[0], s.chunk);
            first[1].add(chain[0], chain[1], s.chunk);
          }
        }
        const TreeLinks links = dtree(N, v, t);
        if (links.parent >= 0) {
          const int parent_head =
              rotated(s.nodes[static_cast<std::size_t>(links.parent)], static_cast<std::size_t>(k) % m)[0];
          for (auto* l : {&first[0], &all[0]})
            l->add(chain[0], parent_head, s.chunk, s.rails);
          for (auto* l : {&first[1], &all[1]})
            l->add(parent_head, chain[0], s.chunk, s.rails);
        }
      }
  // The slowest chain hop (inter = false) or tree hop (inter = true) of a set of hops.
  auto slowest = [&](const Lockstep& l, bool inter) {
    HopTime worst;
    for (const Hop& h : l.hops())
      if ((cl.node_of(h.src) != cl.node_of(h.dst)) == inter)
        if (const HopTime t = l.time(h); t.total() > worst.total())
          worst = t;
    return worst;
  };
  const int depth = N > 1 ? std::max(tree_depth(N, 0), tree_depth(N, 1)) : 0;
  AnalyticParts total;
  for (std::size_t d = 0; d < 2; ++d) {
    const HopTime chain = slowest(first[d], false), tree = slowest(first[d], true);
    HopTime cycle = slowest(all[d], false);
    if (const HopTime t = slowest(all[d], true); t.total() > cycle.total())
      cycle = t;
    const double mm = static_cast<double>(m - 1), D = depth, K1 = s.chunks - 1;
    total = total + AnalyticParts{mm + D + K1, mm * chain.latency + D * tree.latency + K1 * cycle.latency,
                                  mm * chain.transfer + D * tree.transfer + K1 * cycle.transfer};
  }
  return total;
}

AnalyticParts switch_pipeline_parts(const CollectiveTask& c, const ClusterSpec& cl, const std::vector<int>& members,
                                    int endpoint, int chunks, double up_bytes, double down_bytes)
{
  Lockstep up(c, cl), down(c, cl);
  for (int d : members) {
    up.add(d, endpoint, up_bytes);
    down.add(endpoint, d, down_bytes);
  }
  return pipeline({up.slowest(), down.slowest()}, chunks);
}

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

double member_load(const CollectiveTask& c, std::size_t i) { return c.member_load.empty() ? 1.0 : c.member_load[i]; }

// Bytes member i sends member j (group indices) in an all-to-all.
double a2a_bytes(const CollectiveTask& c, std::size_t i, std::size_t j)
{
  return c.bytes / static_cast<double>(c.group.size()) * member_load(c, c.load_at_source ? i : j);
}

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

// NCCL's PXN (c.channels > 1 on a direct all-to-all across nodes, set by resolve_collective): a
// message to a GPU of another node leaves through the NIC on the destination's rail, from the
// sender's node-mate of the destination's local rank (NCCL moves it there over NVLink first).
int a2a_source(const CollectiveTask& c, int src, int dst, int gpus_per_node)
{
  if (c.channels <= 1 || src / gpus_per_node == dst / gpus_per_node)
    return src;
  return src / gpus_per_node * gpus_per_node + dst % gpus_per_node;
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
        out.push_back({.src = a2a_source(c, c.group[i], c.group[j], gpus_per_node), .dst = c.group[j],
                       .bytes = a2a_bytes(c, i, j), .after = {}});
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

// Bytes on every link class an all-to-all uses, from per-node and per-NIC sums of the loads instead
// of the n^2 messages (tests check them against decompose()): each member's NVLink up and down, each
// NIC's up and down, and with a fat tree each leaf's uplinks. Transfer times at the links' own
// bandwidth.
struct A2aLoads {
  double intra = 0;  ///< the most bytes on one GPU's NVLink link, one direction
  double nic = 0;    ///< the most bytes on one NIC, one direction
  double leaf = 0;   ///< fat tree: the most bytes on one leaf's uplinks, one direction
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
  std::map<int, std::pair<double, double>> leaves;  // leaf -> (up, down)
  for (const auto& a : nodes)
    for (const auto& b : nodes) {
      const int la = cl.leaf_of_node(cl.node_of(c.group[a.front()])), lb = cl.leaf_of_node(cl.node_of(c.group[b.front()]));
      if (la == lb)
        continue;
      double wa = 0, wb = 0;
      for (std::size_t i : a)
        wa += member_load(c, i);
      for (std::size_t j : b)
        wb += member_load(c, j);
      const double bytes = unit * (c.load_at_source ? wa * static_cast<double>(b.size()) : static_cast<double>(a.size()) * wb);
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
  const double n = static_cast<double>(c.group.size());
  const auto nodes = node_members(c.group, cluster.gpus_per_node);
  const bool pxn = c.channels > 1;
  double total = 0;
  std::map<int, double> rail_load, rail_count;  // PXN: per NIC index, the members' loads and count
  for (std::size_t i = 0; i < c.group.size(); ++i) {
    total += member_load(c, i);
    rail_load[nic_of(cluster, c.group[i])] += member_load(c, i);
    rail_count[nic_of(cluster, c.group[i])] += 1;
  }
  A2aLoads loads;
  std::map<std::pair<int, int>, std::pair<double, double>> nics;  // (node, nic) -> (up, down)
  for (const auto& node : nodes) {
    double local = 0;
    std::map<int, double> local_rail_load, local_rail_count;
    for (std::size_t i : node) {
      local += member_load(c, i);
      local_rail_load[nic_of(cluster, c.group[i])] += member_load(c, i);
      local_rail_count[nic_of(cluster, c.group[i])] += 1;
    }
    const double m = static_cast<double>(node.size());
    const int node_index = cluster.node_of(c.group[node.front()]);
    for (std::size_t i : node) {
      const double w = member_load(c, i);
      // Sent within the node and out of it, received likewise.
      const double out_intra = c.load_at_source ? w * (m - 1) : local - w;
      const double out_inter = c.load_at_source ? w * (n - m) : total - local;
      const double in_intra = c.load_at_source ? local - w : w * (m - 1);
      const double in_inter = c.load_at_source ? total - local : w * (n - m);
      loads.intra = std::max({loads.intra, out_intra * unit, in_intra * unit});
      auto& nic = nics[{node_index, nic_of(cluster, c.group[i])}];
      if (!pxn)
        nic.first += out_inter * unit;
      nic.second += in_inter * unit;
    }
    if (pxn)  // NIC r carries what the node's members send to the members of rail r elsewhere
      for (const auto& [rail, count] : rail_count) {
        const double others = count - local_rail_count[rail];
        const double bytes = c.load_at_source ? local * others : m * (rail_load[rail] - local_rail_load[rail]);
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
      auto& nic = nics[{cluster.node_of(gpu), nic_of(cluster, gpu)}];
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

// Hierarchical: the two phases one after the other. Direct: every message at once, so the link class
// that takes longest (its messages' latency, then its busiest link at c's bandwidth share) sets the time.
AnalyticParts a2a_parts(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const auto [a_intra, a_inter] = a2a_latencies(c, cluster);
  const double b_intra = cluster.intra_node.bandwidth;
  if (a2a_hierarchical(c, cluster.gpus_per_node)) {
    const auto [one, two] = a2a_hierarchical_loads(c, cluster);
    return {2, a_intra + a_inter, one.intra / b_intra + two.inter_seconds(cluster)};
  }
  const A2aLoads loads = a2a_direct_loads(c, cluster);
  const double share = c.bandwidth_factor > 0 ? c.bandwidth_factor : 1.0;
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

// ---------------------------------------------------------------------------------------------
// NCCL's tuner constants (src/graph/tuning.cc): per-step latencies (us) by hardware, algorithm
// column (tree, ring) and protocol (LL, LL128, Simple), the fixed latencies, and the LL ceiling.

enum class Hw { nvlink, pci, net };
constexpr std::array<std::array<std::array<double, 3>, 2>, 3> hw_latency_us{{
    {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}}},  // NVLink: tree, ring
    {{{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}}},   // PCI
    {{{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}}}, // network
}};
constexpr std::array<std::array<double, 3>, 2> base_latency_us{{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}}};
constexpr double nvls_latency_us = 25;       // NVLink NVLS, Simple
constexpr double collnet_latency_us = 31;    // network CollNet Direct, Simple

int protocol_index(CollectiveProtocol p)
{
  switch (p) {
  case CollectiveProtocol::ll: return 0;
  case CollectiveProtocol::ll128: return 1;
  case CollectiveProtocol::simple: return 2;
  }
  return 2;
}

// NCCL's LL bus-bandwidth ceiling (llMaxBws), B/s: inside one node by GPU generation, across nodes
// by node count (x86 hosts).
double ll_ceiling(const ClusterSpec& cl, bool one, int nodes)
{
  if (!one)
    return (nodes <= 2 ? 39.0 : 20.4) * 1e9;
  const std::string& name = cl.gpu_name;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("B200") || has("B100") || has("GB200") || has("B300"))
    return 282.0e9;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200"))
    return 141.0e9;
  if (has("V100"))
    return 39.0e9;
  return 87.7e9;  // Ampere and Ada
}

bool supports(CollectiveAlgorithm a, CollectiveKind kind)
{
  switch (a) {
  case CollectiveAlgorithm::automatic: return true;
  case CollectiveAlgorithm::ring: return kind != CollectiveKind::all_to_all;
  case CollectiveAlgorithm::hierarchical: return kind == CollectiveKind::all_reduce || kind == CollectiveKind::all_to_all;
  case CollectiveAlgorithm::tree:
  case CollectiveAlgorithm::double_tree:
  case CollectiveAlgorithm::sharp: return kind == CollectiveKind::all_reduce;
  case CollectiveAlgorithm::nvls: return kind != CollectiveKind::broadcast && kind != CollectiveKind::all_to_all;
  case CollectiveAlgorithm::direct: return kind == CollectiveKind::all_to_all;
  }
  return false;
}

// An all-to-all is NCCL's grouped send/recv (src/enqueue.cc: addP2pToPlan): every message is one p2p
// operation with LL (up to NCCL_P2P_LL_THRESHOLD, 16 KiB per channel) or Simple, no LL128. NCCL's
// tuner has no p2p costs, so a message pays the protocol's per-step latency of the ring column on its
// hardware (NVLink or PCIe inside a node, the network plus the fabric's latency across nodes), the
// kernel pays the ring's fixed latency of the protocol (twice for hierarchical: two exchanges, as
// DeepSpeed and Tutel issue them), and LL moves 4 data bytes in 8. Across nodes over NVLink nodes
// NCCL's PXN sends each message through the NIC on the destination's rail (c.channels = the rails).
void apply_p2p_protocol(CollectiveTask& c, const ClusterSpec& cl, CollectiveProtocol p, bool one)
{
  const auto pi = static_cast<std::size_t>(protocol_index(p));
  const Hw intra = cl.intra_link == IntraLink::pcie ? Hw::pci : Hw::nvlink;
  const bool hierarchical = c.algorithm == CollectiveAlgorithm::hierarchical;
  c.intra_step_latency_s = hw_latency_us[static_cast<std::size_t>(intra)][1][pi] * us;
  c.inter_step_latency_s = hw_latency_us[2][1][pi] * us + cl.fabric_latency;
  c.base_latency_s = base_latency_us[1][pi] * us * (hierarchical ? 2 : 1);
  c.channels = !one && !hierarchical && cl.intra_link == IntraLink::nvlink ? rail_channels(c, cl) : 1;
  c.hop_latency_s = -1;
  c.bandwidth_factor = p == CollectiveProtocol::ll ? 0.5 : 1.0;
}

// Sets c's per-step latencies, fixed latency, channels and bandwidth share for algorithm c.algorithm
// (already effective) and protocol p.
void apply_protocol(CollectiveTask& c, const ClusterSpec& cl, CollectiveProtocol p)
{
  c.protocol = p;
  const int pi = protocol_index(p);
  const bool one = one_node(c.group, cl.gpus_per_node);
  if (c.kind == CollectiveKind::all_to_all) {
    apply_p2p_protocol(c, cl, p, one);
    return;
  }
  const auto nodes = by_node(c.group, cl.gpus_per_node);
  std::vector<int> node_ids;
  for (int d : c.group)
    node_ids.push_back(cl.node_of(d));
  std::sort(node_ids.begin(), node_ids.end());
  const int node_count = static_cast<int>(std::unique(node_ids.begin(), node_ids.end()) - node_ids.begin());
  const bool ppn_one = !one && !nodes.empty() && nodes.front().size() == 1;
  const Hw intra = cl.intra_link == IntraLink::pcie ? Hw::pci : Hw::nvlink;
  const bool tree_like = is_tree(c.algorithm);
  const std::size_t col = tree_like ? 0 : 1;
  double intra_us = hw_latency_us[static_cast<std::size_t>(intra)][col][static_cast<std::size_t>(pi)];
  // With one rank per node the network latency is fully exposed: NCCL uses the tree's.
  double inter_us = hw_latency_us[2][ppn_one ? 0 : col][static_cast<std::size_t>(pi)];
  if (!one && !tree_like)  // rings across nodes post a network operation per step (NCCL_NET_OVERHEAD, x86)
    intra_us = std::max(intra_us, p == CollectiveProtocol::simple ? 3.0 : 1.0);
  c.intra_step_latency_s = intra_us * us;
  c.inter_step_latency_s = inter_us * us + cl.fabric_latency;
  c.base_latency_s = base_latency_us[col][static_cast<std::size_t>(pi)] * us;
  c.channels = c.algorithm == CollectiveAlgorithm::ring || c.algorithm == CollectiveAlgorithm::double_tree
                   ? rail_channels(c, cl)
                   : 1;
  c.hop_latency_s = -1;
  if (c.algorithm == CollectiveAlgorithm::ring) {
    // NCCL pipelines a ring's steps, so its latency is the sum of its steps' own latencies, 2(N-1)
    // of them between nodes for an all-reduce (N-1 otherwise): every hop takes their mean.
    const double steps = c.kind == CollectiveKind::broadcast ? static_cast<double>(c.group.size() - 1)
                                                              : ring_steps(c.kind, c.group.size());
    const double inter = one ? 0.0 : (c.kind == CollectiveKind::all_reduce ? 2.0 : 1.0) * (node_count - 1);
    c.hop_latency_s = ((steps - inter) * c.intra_step_latency_s + inter * c.inter_step_latency_s) / steps;
  }
  double share = 1;
  switch (c.algorithm) {
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::hierarchical:
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::automatic:
    share = p == CollectiveProtocol::ll ? 0.5 : p == CollectiveProtocol::ll128 ? 0.92 : 1.0;
    break;
  case CollectiveAlgorithm::tree:
  case CollectiveAlgorithm::double_tree:
    share = 0.92 * (p == CollectiveProtocol::ll ? 1.0 / 3.8 : p == CollectiveProtocol::ll128 ? (one ? 7.0 / 9.0 : 120.0 / 128.0) : 1.0);
    break;
  case CollectiveAlgorithm::nvls:
    c.base_latency_s = nvls_latency_us * us;
    break;
  case CollectiveAlgorithm::sharp:
    c.base_latency_s = (collnet_latency_us + 2 * 0.4 * static_cast<double>(nodes.empty() ? 0 : nodes.front().size() - 1)) * us +
                       cl.fabric_latency;
    break;
  }
  c.bandwidth_factor = share;
  if (p == CollectiveProtocol::ll) {  // NCCL caps LL's bus bandwidth
    c.bandwidth_factor = 1;
    const AnalyticParts links = analytic_parts(c, cl);
    const double busbw = links.transfer_s > 0
                             ? c.bytes * bus_bandwidth_factor(c.kind, static_cast<int>(c.group.size())) / links.transfer_s
                             : 0;
    const double ceiling = ll_ceiling(cl, one, node_count);
    c.bandwidth_factor = busbw * share > ceiling && busbw > 0 ? ceiling / busbw : share;
  }
}

}  // namespace

int tree_chunks(double bytes)
{
  constexpr double chunk = 4.0 * 1024 * 1024;
  return static_cast<int>(std::clamp(std::ceil(bytes / chunk), 1.0, 16.0));  // clamp first: bytes may be huge
}

double bus_bandwidth_factor(CollectiveKind kind, int members)
{
  const double n = members;
  switch (kind) {
  case CollectiveKind::all_reduce: return n > 0 ? 2 * (n - 1) / n : 0;
  case CollectiveKind::all_gather:
  case CollectiveKind::reduce_scatter:
  case CollectiveKind::all_to_all: return n > 0 ? (n - 1) / n : 0;
  case CollectiveKind::broadcast: return 1;
  }
  return 1;
}

std::vector<int> rail_nics(const CollectiveTask& c, const ClusterSpec& cluster)
{
  const int gpn = cluster.gpus_per_node;
  if (std::all_of(c.group.begin(), c.group.end(), [&](int d) { return d / gpn == c.group.front() / gpn; }))
    return {};  // one node (the common tensor-parallel group): no rails, and no grouping to build
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
  case CollectiveAlgorithm::automatic: return CollectiveAlgorithm::ring;
  case CollectiveAlgorithm::tree: return c.group.size() > 2 ? CollectiveAlgorithm::tree : CollectiveAlgorithm::ring;
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
  if ((a == CollectiveAlgorithm::nvls && cluster.nvls_bandwidth <= 0) || (a == CollectiveAlgorithm::sharp && !cluster.sharp))
    return CollectiveAlgorithm::ring;
  return a;
}

std::uint64_t collective_hash(const CollectiveTask& c)
{
  // FNV-1a's multiplier over the fields' bits (cheap: every collective of an iteration is hashed a
  // few times); a double's bits, with -0 as 0 so that equal values hash alike. The group by its size,
  // ends and two sums (the second weighted by place, for the ring order): independent additions.
  auto bits = [](double x) { return x == 0 ? std::uint64_t{0} : std::bit_cast<std::uint64_t>(x); };
  std::uint64_t h = bits(c.bytes) ^ (static_cast<std::uint64_t>(c.kind) << 1) ^
                    (static_cast<std::uint64_t>(c.algorithm) << 5) ^ (c.load_at_source ? 1ULL << 9 : 0);
  std::uint64_t sum = 0, weighted = 0;
  for (std::size_t i = 0; i < c.group.size(); ++i) {
    sum += static_cast<std::uint64_t>(c.group[i]);
    weighted += (i + 1) * static_cast<std::uint64_t>(c.group[i]);
  }
  for (std::uint64_t x : {std::uint64_t{c.group.size()}, c.group.empty() ? 0 : static_cast<std::uint64_t>(c.group.front()),
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
    if (c.kind == CollectiveKind::broadcast) {  // a pipelined chain from the first member
      const int chunks = tree_chunks(c.bytes);
      add_chain(out, c.group, chunks, c.bytes / chunks, rails);
      break;
    }
    add_ring(out, c.group, ring_steps(c.kind, n), c.bytes / static_cast<double>(n), {}, rails);
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
  case CollectiveAlgorithm::double_tree: {
    const DoubleTreeShape s = double_tree_shape(c, gpus_per_node);
    for (int t = 0; t < s.trees; ++t)
      add_double_tree_channel(out, s, t, t);
    break;
  }
  case CollectiveAlgorithm::nvls: {
    const auto [up, down] = nvls_bytes(c.kind, c.bytes, static_cast<double>(n));
    const int chunks = tree_chunks(c.bytes);
    add_switch_pipeline(out, c.group, node_switch_endpoint(c.group.front() / gpus_per_node), chunks, up / chunks,
                        down / chunks, {});
    break;
  }
  case CollectiveAlgorithm::sharp: {
    const auto nodes = by_node(c.group, gpus_per_node);
    const std::size_t m = nodes.front().size();
    const double shard = c.bytes / static_cast<double>(m);
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
    auto last = add_switch_pipeline(out, members, fabric_switch_endpoint, chunks, shard / chunks, shard / chunks, start);
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
    const auto nodes = node_members(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    return count * m * (m - 1) + m * count * (count - 1);  // inside each node, then one exchange per local rank
  }
  switch (effective_algorithm(c, gpus_per_node)) {
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::automatic:
    if (c.kind == CollectiveKind::broadcast)
      return (n - 1) * static_cast<std::uint64_t>(tree_chunks(c.bytes));
    return static_cast<std::uint64_t>(ring_steps(c.kind, n)) * n;
  case CollectiveAlgorithm::tree: return 2 * (n - 1) * static_cast<std::uint64_t>(tree_chunks(c.bytes));
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, gpus_per_node);
    const std::uint64_t m = nodes.front().size(), count = nodes.size();
    // reduce-scatter and all-gather inside each node, m rings of 2 (N - 1) steps across them
    return 2 * count * (m - 1) * m + m * 2 * (count - 1) * count;
  }
  case CollectiveAlgorithm::double_tree: {
    const DoubleTreeShape s = double_tree_shape(c, gpus_per_node);
    return static_cast<std::uint64_t>(s.trees) * 2 * (n - 1) * static_cast<std::uint64_t>(s.chunks);
  }
  case CollectiveAlgorithm::nvls: return 2 * n * static_cast<std::uint64_t>(tree_chunks(c.bytes));
  case CollectiveAlgorithm::sharp: {
    const auto nodes = by_node(c.group, gpus_per_node);
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
  std::vector<std::vector<int>> nodes_;  // by_node: nodes in increasing order, equal counts (empty: no rails)
};

}  // namespace

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
    for (std::size_t i = 0; i < n; ++i)  // a ring that visits nodes more than once: its hops over the rails spread
      rails.send(c.group[i], c.group[(i + 1) % n], per_hop, c.channels > 1, send);
    return;
  }
  for (const Message& m : decompose(c, gpus_per_node)) {
    if (m.src < 0)
      continue;  // a join, or what a switch sends
    int dst = m.dst;
    if (dst == fabric_switch_endpoint)
      dst = (m.src / gpus_per_node + 1) * gpus_per_node;  // into the network
    else if (is_switch_endpoint(dst))
      dst = node_of_switch_endpoint(dst) * gpus_per_node;  // into the node's switch
    rails.send(m.src, dst, m.bytes, m.rails, send);
  }
}

double message_latency(const CollectiveTask& c, const ClusterSpec& cluster, int src, int dst)
{
  if (c.hop_latency_s >= 0)
    return c.hop_latency_s;
  const bool resolved = c.intra_step_latency_s >= 0;
  if (src == fabric_switch_endpoint || dst == fabric_switch_endpoint)
    return resolved ? 0.0 : (cluster.nic.latency + cluster.fabric_latency) / 2;  // resolved: in the fixed latency
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
  const int gpn = cluster.gpus_per_node;
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
  case CollectiveAlgorithm::tree: return tree_parts(c, cluster);
  case CollectiveAlgorithm::hierarchical: {
    const auto nodes = by_node(c.group, gpn);
    const double m = static_cast<double>(nodes.front().size());
    const double count = static_cast<double>(nodes.size());
    std::vector<std::vector<int>> across(nodes.front().size());
    for (const auto& members : nodes)
      for (std::size_t j = 0; j < members.size(); ++j)
        across[j].push_back(members[j]);
    const AnalyticParts inside = ring_phase(c, cluster, nodes, m - 1, S / m);
    return inside + ring_phase(c, cluster, across, 2 * (count - 1), S / (m * count)) + inside;
  }
  case CollectiveAlgorithm::double_tree: return double_tree_parts(c, cluster);
  case CollectiveAlgorithm::nvls: {
    const auto [up, down] = nvls_bytes(c.kind, S, static_cast<double>(n));
    const int chunks = tree_chunks(S);
    return switch_pipeline_parts(c, cluster, c.group, node_switch_endpoint(cluster.node_of(c.group.front())), chunks,
                                 up / chunks, down / chunks);
  }
  case CollectiveAlgorithm::sharp: {
    const auto nodes = by_node(c.group, gpn);
    const double m = static_cast<double>(nodes.front().size());
    const int chunks = tree_chunks(S / m);
    AnalyticParts inside;
    if (m > 1)
      inside = ring_phase(c, cluster, nodes, m - 1, S / m);
    std::vector<int> members;
    for (const auto& node : nodes)
      members.insert(members.end(), node.begin(), node.end());
    return inside + switch_pipeline_parts(c, cluster, members, fabric_switch_endpoint, chunks, S / m / chunks,
                                          S / m / chunks) +
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
  c.hop_latency_s = -1;
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
  c.hop_latency_s = std::max(alpha_s, 0.0) / p.hops;
  // A regime whose time does not grow with size (transfer_s 0) makes the messages free.
  c.bandwidth_factor = transfer_s > 0 ? p.transfer_s / transfer_s : std::numeric_limits<double>::infinity();
}

void resolve_collective(CollectiveTask& c, const ClusterSpec& cluster, std::optional<CollectiveProtocol> protocol)
{
  if (c.group.size() < 2)
    return;
  if (cluster.intra_link == IntraLink::host) {  // CPU threads: no NCCL, the links as they are
    c.algorithm = effective_algorithm(c, cluster);
    return;
  }
  if (c.group.size() > max_tuned_group) {  // no simulation this large would pass the resource guard
    c.algorithm = effective_algorithm(c, cluster);
    apply_protocol(c, cluster, CollectiveProtocol::simple);
    return;
  }
  std::vector<CollectiveAlgorithm> candidates;
  if (c.kind == CollectiveKind::all_to_all) {  // direct, or hierarchical where it fits and is faster
    if (c.algorithm == CollectiveAlgorithm::automatic) {
      candidates.push_back(CollectiveAlgorithm::direct);
      if (a2a_hierarchical_fits(c.group, cluster.gpus_per_node))
        candidates.push_back(CollectiveAlgorithm::hierarchical);
    } else {
      candidates.push_back(effective_algorithm(c, cluster));  // direct; hierarchical where it fits
    }
  } else if (c.algorithm == CollectiveAlgorithm::automatic) {
    for (CollectiveAlgorithm a : {CollectiveAlgorithm::ring, CollectiveAlgorithm::double_tree, CollectiveAlgorithm::nvls,
                                  CollectiveAlgorithm::sharp}) {
      CollectiveTask t = c;
      t.algorithm = a;
      if (effective_algorithm(t, cluster) == a)
        candidates.push_back(a);
    }
  } else {
    candidates.push_back(effective_algorithm(c, cluster));
  }
  const bool ll128 = cluster.intra_link == IntraLink::nvlink;  // NCCL enables LL128 over NVLink paths only
  CollectiveTask best = c;
  double best_s = std::numeric_limits<double>::infinity();
  auto allowed = [&](CollectiveAlgorithm a, CollectiveProtocol p, bool forced) {
    if ((a == CollectiveAlgorithm::nvls || a == CollectiveAlgorithm::sharp) && p != CollectiveProtocol::simple)
      return false;
    if (p == CollectiveProtocol::ll128 && (!ll128 || c.kind == CollectiveKind::all_to_all))  // p2p: LL or Simple
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
      t.algorithm = a;
      t.hop_latency_s = -1;
      apply_protocol(t, cluster, p);
      const double s = analytic_seconds(t, cluster);
      if (s < best_s) {
        best_s = s;
        best = std::move(t);
      }
    }
  c = std::move(best);
}

}  // namespace ddlsim::sim
