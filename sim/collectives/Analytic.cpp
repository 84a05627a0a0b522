// Closed forms: the links a message loads, hops in lockstep, rings, trees, switch pipelines.
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace ddlsim::sim::collectives {

// ---------------------------------------------------------------------------------------------
// Links each message loads, for the closed forms

// The links a message loads (as sim/Platform.hpp routes it). A message over `rails` NICs (> 0: a
// channel group between nodes) leaves through those NICs of its node together instead of one.
LinkUses links_of(const ClusterSpec& cl, int src, int dst, int rails)
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
  if (rails > 0) { // the collective's rails: its C NICs together
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
  const auto& g       = c.group;
  const std::size_t n = g.size();
  const int chunks    = tree_chunks(c.bytes);
  const double chunk  = c.bytes / chunks;
  const auto K        = static_cast<std::size_t>(chunks);
  auto sibling        = [&](std::size_t i) -> std::size_t {
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
    up_time[i]   = upward.time(upward.hops().front()); // member i's own hop, added first
    down_time[i] = downward.time(downward.hops().front());
  }
  std::vector<std::vector<Event>> up(n, std::vector<Event>(K));
  for (std::size_t c_ = 0; c_ < K; ++c_)
    for (std::size_t i = n - 1; i >= 1; --i) {
      if (sibling(i) < i && sibling(i) != i)
        continue; // computed with its larger sibling
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
      continue; // computed with its smaller sibling
    const std::size_t parent = (i - 1) / 2;
    for (std::size_t c_ = 0; c_ < K; ++c_) {
      Event start = parent == 0 ? reduced : down[parent][c_];
      if (c_ > 0) {
        start = later(start, down[i][c_ - 1]);
        start = later(start, down[sibling(i)][c_ - 1]);
      }
      down[i][c_]          = after(start, down_time[i]);
      down[sibling(i)][c_] = after(start, down_time[sibling(i)]);
      done                 = later(done, later(down[i][c_], down[sibling(i)][c_]));
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
  const int N             = static_cast<int>(s.nodes.size());
  const std::size_t m     = s.nodes.front().size();
  // first[d]: chain position 1 -> 0 of every channel (one chain step) and every tree hop; all[d]:
  // every hop of every channel at once. d = 0 up, 1 down.
  std::array<Lockstep, 2> first{Lockstep(c, cl), Lockstep(c, cl)}, all{Lockstep(c, cl), Lockstep(c, cl)};
  for (int t = 0; t < s.trees; ++t)
    for (int k = t; k == t; ++k) // tree t's chains start at member t
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

} // namespace ddlsim::sim::collectives
