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
  std::vector<simgrid::s4u::Host*> gpus;  ///< by global GPU index
};

/// Creates zones, hosts and links in the current Engine and seals them.
Platform build_platform(const ClusterSpec& cluster);

/// The links of build_platform's platform, numbered, and the route between two GPUs as a list of
/// them, in the order a message crosses them: [gpu_a up, gpu_b down] inside a node; else
/// [NIC(a) up, (fat tree, other leaf: leaf(a) uplink up, leaf(b) uplink down; same leaf: its
/// switch), NIC(b) down]. GPU i of a node uses NIC i mod count. The folded replay builds its
/// quotient of these links (Fold.hpp).
class LinkModel {
public:
  explicit LinkModel(const ClusterSpec& cluster);
  int size() const { return switch_base_ + (fat_tree_ ? leaves_ : 0); }
  double bandwidth(int link) const;
  /// A fat tree's switch inside a leaf: every flow gets the bandwidth, none is shared.
  bool fatpipe(int link) const { return link >= switch_base_; }
  /// Appends the links from GPU src to GPU dst (src != dst) to `out`.
  void route(int src, int dst, std::vector<int>& out) const;
  /// The links GPU d's messages can cross on its side (its own link each way, its NIC each way, its
  /// leaf's uplink each way and switch) with those of GPU e at the same place: what a device
  /// permutation sending d to e sends these links to.
  void pair_links(int d, int e, const std::function<void(int, int)>& pair) const;

private:
  const ClusterSpec& cluster_;
  bool fat_tree_;
  int leaves_;
  int nic_base_, leaf_base_, switch_base_;
  int nic_of(int gpu) const;
};

/// The quotient platform of a folded replay: a host per representative (for compute), and per
/// distinct route of quotient links (each of the given bandwidth, FATPIPE where marked) a sender
/// host whose route to the common receiver `sink` is that route.
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
                                     const std::vector<QuotientLink>& links, const std::vector<std::vector<int>>& routes);

}  // namespace ddlsim::sim::detail
