// What the collective families share (sim/Collectives.cpp and sim/collectives/*.cpp), internal to
// them: group layout and NCCL's trees (Groups.cpp), the message builders of each family (Ring.cpp,
// Tree.cpp, Nvls.cpp), the links a
// message loads and the closed forms (Analytic.cpp), the all-to-all (AllToAll.cpp), NCCL's tuner
// constants and protocols (Tuner.cpp). sim/Collectives.hpp is the interface; this is not.
#pragma once

#include "sim/Collectives.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ddlsim::sim::collectives {

using Index                = std::uint32_t; ///< a message's place in decompose()'s list
inline constexpr double us = 1e-6;

// --- Group layout (Groups.cpp)

/// Members grouped by node (nodes in increasing order, members in group order); empty when the
/// nodes hold different counts.
std::vector<std::vector<int>> by_node(const std::vector<int>& group, int gpus_per_node);
bool one_node(const std::vector<int>& group, int gpus_per_node);
std::vector<int> rotated(const std::vector<int>& members, std::size_t by);
// NCCL's binary tree over n ranks (src/graph/trees.cc, ncclGetBtree): rank r's parent and children.
// Rank 0 is the root with one child; the others alternate leaves (odd) and interior ranks (even).
struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};
TreeLinks btree(int n, int r);
/// The second tree of NCCL's double binary tree (ncclGetDtree); tree 0 is btree.
TreeLinks dtree(int n, int r, int tree);
int tree_depth(int n, int tree);

// --- Building messages: rings, joins and chains (Ring.cpp)

/// A ring over `members` of `steps` steps of `chunk` bytes; every first-step message waits for
/// `start`. Returns the indices of the messages each member receives last. With rails_gpn > 0 (GPUs
/// per node), hops between nodes go over the nodes' rails.
std::vector<Index> add_ring(std::vector<Message>& out, const std::vector<int>& members, int steps, double chunk,
                            const std::vector<Index>& start, int rails_gpn = 0);
Index add_join(std::vector<Message>& out, std::vector<Index> after);
Index add_message(std::vector<Message>& out, int src, int dst, double bytes, std::vector<Index> after,
                  bool rails = false);
/// A pipelined chain (broadcast) of `chunks` chunks.
void add_chain(std::vector<Message>& out, const std::vector<int>& chain, int chunks, double chunk, int rails_gpn);
// --- Trees and double trees (Tree.cpp)

/// The binary tree in member order (parent of i is (i-1)/2), reduce up then broadcast down.
void decompose_tree(std::vector<Message>& out, const std::vector<int>& g, double bytes);
struct DoubleTreeShape {
  std::vector<std::vector<int>> nodes; // members by node
  int trees    = 1;                    // 1 inside one node (the chain), else 2
  bool rails   = false;                // tree hops over the nodes' rails (C > 1 channels)
  int chunks   = 1;
  double chunk = 0;
};
DoubleTreeShape double_tree_shape(const CollectiveTask& c, int gpus_per_node);
/// One tree of NCCL's double tree: per node a chain from member `head`, heads joined by tree `tree`.
void add_double_tree_channel(std::vector<Message>& out, const DoubleTreeShape& s, int tree, int head);

// --- NVLink SHARP (Nvls.cpp)

/// Bytes each member sends into the switch and receives back, per whole buffer (NVLS).
std::pair<double, double> nvls_bytes(CollectiveKind kind, double bytes, double m);
/// K chunks into a switch and back; returns the last arrivals.
std::vector<Index> add_switch_pipeline(std::vector<Message>& out, const std::vector<int>& members, int endpoint,
                                       int chunks, double up_bytes, double down_bytes, const std::vector<Index>& start);

// --- Links and closed forms (Analytic.cpp)

enum class LinkKind { gpu_up, gpu_down, nic_up, nic_down, leaf_up, leaf_down, nvls_in, nvls_out, rails_up, rails_down };
using LinkKey = std::uint64_t; // kind, owner, index packed (link_key)
struct LinkUse {
  LinkKey key;
  double bandwidth;
};

inline int nic_of(const ClusterSpec& cl, int gpu)
{
  return (gpu % cl.gpus_per_node) % std::max(1, cl.nics_per_node);
}

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

/// The links a message loads (as sim/Platform.hpp routes it); over `rails` NICs (> 0) between nodes.
LinkUses links_of(const ClusterSpec& cl, int src, int dst, int rails = 0);

// Hops that run at once, each carrying `bytes`: the links they load together, and each hop's
// duration (its latency plus its bytes at its most loaded link's fair share).
struct Hop {
  int src, dst;
  double bytes;
  bool rails = false;
  LinkUses links; // links_of(src, dst), found once
};
struct HopTime {
  double latency  = 0;
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

int ring_steps(CollectiveKind kind, std::size_t n);
/// A ring phase of `steps` steps over each of `rings` at once, each step `chunk` bytes per hop.
AnalyticParts ring_phase(const CollectiveTask& c, const ClusterSpec& cl, const std::vector<std::vector<int>>& rings,
                         double steps, double chunk);
AnalyticParts operator+(AnalyticParts a, const AnalyticParts& b);
/// A linear pipeline of hops carrying K chunks: sum d_h + (K-1) max d_h.
AnalyticParts pipeline(const std::vector<HopTime>& hops, int chunks);
AnalyticParts tree_parts(const CollectiveTask& c, const ClusterSpec& cl);
AnalyticParts double_tree_parts(const CollectiveTask& c, const ClusterSpec& cl);
AnalyticParts switch_pipeline_parts(const CollectiveTask& c, const ClusterSpec& cl, const std::vector<int>& members,
                                    int endpoint, int chunks, double up_bytes, double down_bytes);

// --- All-to-all (AllToAll.cpp)

/// Members (group indices) per node, nodes in increasing order, members in group order.
std::vector<std::vector<std::size_t>> node_members(const std::vector<int>& group, int gpus_per_node);
double member_load(const CollectiveTask& c, std::size_t i);
bool a2a_hierarchical_fits(const std::vector<int>& group, int gpus_per_node);
bool a2a_hierarchical(const CollectiveTask& c, int gpus_per_node);
void decompose_all_to_all(std::vector<Message>& out, const CollectiveTask& c, int gpus_per_node);
AnalyticParts a2a_parts(const CollectiveTask& c, const ClusterSpec& cluster);
/// The bytes each member sends to each node in a direct all-to-all, to that node's first other member.
void a2a_sends_by_node(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send);

// --- NCCL's tuner (Tuner.cpp)

bool supports(CollectiveAlgorithm a, CollectiveKind kind);
/// Sets c's per-step latencies, fixed latency, channels and bandwidth share for algorithm
/// c.algorithm (already effective) and protocol p.
void apply_protocol(CollectiveTask& c, const ClusterSpec& cl, CollectiveProtocol p);

} // namespace ddlsim::sim::collectives
