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

}  // namespace ddlsim::sim::detail
