// Internal to sim/: builds the SimGrid platform of a ClusterSpec. Only Replay.cpp includes it, so
// SimGrid types never leak into the public headers.
//
// Layout (all links split-duplex, latency 0: message latency is added by the replay as a timer,
// because CM02 would otherwise share a bottleneck in proportion to 1/route latency):
//
//   cluster (star zone, non-blocking fabric)
//    ├── node0 (full zone of the node's GPUs and its gateway)
//    │     gpu_i -> gpu_j      : gpu_i_link up, gpu_j_link down     (intra_node.bandwidth each)
//    │     gpu_i -> gateway    : node0_nic_k up, k = i mod nic.count (nic.bandwidth each)
//    └── node1 ...
//
// A message between nodes leaves through the sender's NIC and enters through the receiver's
// (GPUDirect RDMA: it does not cross NVLink); GPUs that share a NIC share its bandwidth.
// A node's full zone has (g+1)^2 routes for g GPUs: small, unlike one full zone of the cluster.
//
// Switches that reduce (collectives' nvls and sharp algorithms, Collectives.hpp) are hosts too:
//   node<n>_nvswitch (intra_node.nvls > 0): gpu_i -> switch crosses gpu_i_link up and the switch's
//                    node<n>_nvls link up (its reduction bandwidth), switch -> gpu_j its link down
//                    and gpu_j_link down
//   node<n>_rails<i> (more than one node, one per set of NICs that collectives spread their
//                    channels over): a collective's hop between nodes that stands for a group of
//                    NCCL channels leaves through those NICs at once: the node<n>_rails<i> link (the
//                    set's NICs together) and node<n>_all_nics, which every GPU's route to the
//                    gateway also crosses, so that rails and single NICs share the node's capacity
//   sharp (fabric.sharp): in the cluster zone; gpu_i -> sharp crosses gpu_i's NIC up, sharp ->
//                    gpu_j gpu_j's NIC down (the switches reduce, so no uplink carries more)
#pragma once

#include "sim/ClusterSpec.hpp"

#include <simgrid/s4u.hpp>

#include <functional>
#include <vector>

namespace ddlsim::sim::detail {

/// Work units per second of a GPU host: Exec amounts are seconds x this, so that SimGrid's absolute
/// work precision (1e-5) stays far below a picosecond.
inline constexpr double work_per_second = 1e12;

struct Platform {
  std::vector<simgrid::s4u::Host*> gpus;            ///< by global GPU index
  std::vector<simgrid::s4u::Host*> node_switches;   ///< by node (empty without NVLS)
  std::vector<std::vector<simgrid::s4u::Host*>> rails;  ///< by node, then NIC set (empty for one node)
  simgrid::s4u::Host* fabric_switch = nullptr;      ///< with SHARP
};

/// Creates zones, hosts and links in the current Engine and seals them; `rail_sets` are the NIC sets
/// (sorted NIC indices) the rails hosts stand for. With comm_compute_slowdown > 0 each GPU host has a
/// second, slower power state (CommOverlap.hpp).
Platform build_platform(const ClusterSpec& cluster, const std::vector<std::vector<int>>& rail_sets = {},
                        double comm_compute_slowdown = 0);

/// The links of build_platform's platform, numbered, and the route between two GPUs as a list of
/// them, in the order a message crosses them: [gpu_a up, gpu_b down] inside a node; else
/// [NIC(a) up, all NICs of node a up, (fat tree, other leaf: leaf(a) uplink up, leaf(b) uplink
/// down; same leaf: its switch), all NICs of node b down, NIC(b) down], as build_platform routes
/// them. GPU i of a node uses NIC i mod count. The folded replay builds its
/// quotient of these links (Fold.hpp).
class LinkModel {
public:
  /// `rail_sets`: the NIC sets (local NIC indices) that collectives spread their channels over, as
  /// build_platform takes them: node<n>_rails<i> is a link of |set| NICs' bandwidth.
  explicit LinkModel(const ClusterSpec& cluster, std::vector<std::vector<int>> rail_sets = {});
  int size() const { return nvls_base_ + (cluster_.nvls_bandwidth > 0 ? 2 * cluster_.nodes : 0); }
  double bandwidth(int link) const;
  /// A fat tree's switch inside a leaf: every flow gets the bandwidth, none is shared.
  bool fatpipe(int link) const { return link >= switch_base_ && link < rails_base_; }
  /// Appends the links from endpoint src to endpoint dst (src != dst) to `out`: GPUs, or a switch
  /// that reduces (Collectives.hpp: node_switch_endpoint, fabric_switch_endpoint) at one end:
  /// GPU x -> its node's NVSwitch [x up, nvls up], back [nvls down, x down]; GPU x -> the fabric's
  /// switch (SHARP) [NIC(x) up, all NICs up, (fat tree: its leaf's switch)], back the reverse.
  void route(int src, int dst, std::vector<int>& out) const;
  /// Appends the links of a channel group's hop between the nodes of src and dst over NIC set
  /// `set` (Message::rails): [rails(a) up, all NICs of a up, (fat tree), all NICs of b down,
  /// rails(b) down].
  void rails_route(int src, int dst, int set, std::vector<int>& out) const;
  /// The link of node `node`'s NIC set `set` (down: + 1).
  int rails_link(int node, int set) const { return rails_base_ + 2 * (node * sets() + set); }
  const std::vector<std::vector<int>>& rail_sets() const { return rail_sets_; }
  /// The links GPU d's messages can cross on its side (its own link each way, its NIC each way, its
  /// leaf's uplink each way and switch) with those of GPU e at the same place: what a device
  /// permutation sending d to e sends these links to.
  void pair_links(int d, int e, const std::function<void(int, int)>& pair) const;

private:
  int sets() const { return static_cast<int>(rail_sets_.size()); }
  const ClusterSpec& cluster_;
  std::vector<std::vector<int>> rail_sets_;
  bool fat_tree_;
  int leaves_;
  int nic_base_, all_nics_base_, leaf_base_, switch_base_, rails_base_, nvls_base_;
  int nic_of(int gpu) const;
  void inter_node(int a, int b, std::vector<int>& out) const;  // all NICs of a up ... all NICs of b down
};

/// The quotient platform of a folded replay: a host per representative (for compute), and per
/// distinct route of quotient links (each of the given bandwidth, FATPIPE where marked) a sender
/// host whose route to the common receiver `sink` is that route. The GPU hosts have
/// build_platform's power states (a slower one with comm_compute_slowdown > 0: CommOverlap.hpp).
struct FoldedPlatform {
  std::vector<simgrid::s4u::Host*> gpus;     ///< by global GPU index; representatives only (others null)
  std::vector<simgrid::s4u::Host*> senders;  ///< per route
  simgrid::s4u::Host* sink = nullptr;
};
struct QuotientLink {
  double bandwidth = 0;
  bool fatpipe = false;
};
FoldedPlatform build_folded_platform(const ClusterSpec& cluster, const std::vector<int>& representatives,
                                     const std::vector<QuotientLink>& links, const std::vector<std::vector<int>>& routes,
                                     double comm_compute_slowdown = 0);

}  // namespace ddlsim::sim::detail
