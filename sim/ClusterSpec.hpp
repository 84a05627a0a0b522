// Cluster description: nodes of GPUs behind a switch (NVSwitch or PCIe), NICs, an inter-node fabric.
//
//   name: dgx-h100x2
//   nodes: 2
//   gpus_per_node: 8
//   gpu: {name: H100-SXM5-80GB, memory: 80GiB}
//   intra_node: {bandwidth: 450GBps, latency: 2us}   # per GPU and direction, to the node switch
//   intra_node: {bandwidth: 450GBps, latency: 2us, link: nvlink, nvls: 2.48TBps}  # NVLink SHARP switch
//   nic: {count: 8, bandwidth: 400Gbps, latency: 2us} # per node: count NICs of this bandwidth each way
//   fabric: {latency: 1us}                            # non-blocking switch between the nodes
//   fabric: {latency: 2us, topology: fat_tree, nodes_per_leaf: 16, oversubscription: 2}
//   fabric: {latency: 1us, sharp: true}               # switches reduce in the network (SHARP, NCCL CollNet)
//   node_gpus:                                        # heterogeneous nodes: other GPUs on some nodes
//     - {nodes: [2, 3], name: A100-SXM4-40GB, memory: 40GiB, speed: 0.45}
//   stragglers:                                       # single slow GPUs (speed relative to the profile)
//     - {gpu: 5, speed: 0.8}
//
// One-way latency of a message: intra_node.latency inside a node, nic.latency + fabric.latency
// between nodes. GPU g lives on node g / gpus_per_node. A fat-tree fabric groups the nodes into
// leaves of nodes_per_leaf; traffic between leaves also crosses the two leaves' uplinks, each of
// nodes_per_leaf x nic.count x nic.bandwidth / oversubscription (1: full bisection). A GPU's speed
// scales its compute times (2: twice as fast as the calibration profile's GPU).
//
// Collective options (docs/collectives.md): intra_node.link says which of NCCL's latency tables a
// node's steps follow (nvlink or pcie); intra_node.nvls, when given, is the NVSwitch's reduction and
// multicast bandwidth per direction (NVLink SHARP, H100/H200 NVSwitch systems): the `nvls` algorithm
// sends each GPU's data into the switch, which reduces it and multicasts the result back. fabric.sharp
// says the inter-node switches reduce in the network (the `sharp` algorithm, NCCL's CollNet).
#pragma once

#include "common/EnumTable.hpp"
#include "common/YamlReader.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace ddlsim::sim {

struct LinkSpec {
  double bandwidth = 0;  ///< B/s per direction
  double latency = 0;    ///< s
};

enum class FabricTopology { single_switch, fat_tree };
/// The kind of link inside a node: which of NCCL's per-step latency tables applies.
enum class IntraLink { nvlink, pcie, host };

inline constexpr EnumTable<IntraLink, 3> intra_link_table{{{
    {"nvlink", IntraLink::nvlink, "NVLink (through NVSwitch): NCCL's NVLink step latencies"},
    {"pcie", IntraLink::pcie, "PCIe: NCCL's PCI step latencies"},
    {"host", IntraLink::host,
     "CPU threads (the host backend): no NCCL; collectives are rings at the links' own latency and bandwidth"},
}}};

inline constexpr EnumTable<FabricTopology, 2> fabric_topology_table{{{
    {"single_switch", FabricTopology::single_switch,
     "one non-blocking switch: only the NICs limit inter-node traffic (also a rail-optimised fabric "
     "within one scalable unit, with NCCL's PXN keeping traffic on its rail)"},
    {"fat_tree", FabricTopology::fat_tree, "leaves of nodes_per_leaf nodes under a spine, uplinks oversubscribed"},
}}};

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int gpus_per_node = 1;
  std::string gpu_name;
  double gpu_memory = 0;  ///< bytes per GPU
  LinkSpec intra_node;    ///< each GPU's link to its node switch
  IntraLink intra_link = IntraLink::nvlink;
  double nvls_bandwidth = 0;  ///< NVLink SHARP: the node switch's reduction bandwidth per direction, B/s (0: none)
  int nics_per_node = 1;
  LinkSpec nic;           ///< one NIC
  double fabric_latency = 0;
  FabricTopology topology = FabricTopology::single_switch;
  int nodes_per_leaf = 1;        ///< fat tree
  double oversubscription = 1;   ///< fat tree: leaf downlink over uplink bandwidth
  bool sharp = false;            ///< the fabric's switches reduce in the network (SHARP)
  std::vector<double> speed;     ///< per GPU, relative to the calibration profile (empty: all 1)
  std::vector<double> memory;    ///< per GPU, bytes (empty: all gpu_memory)
  std::vector<std::string> gpu_names;  ///< per GPU (empty: all gpu_name)

  int gpu_count() const { return nodes * gpus_per_node; }
  double speed_of(int gpu) const { return speed.empty() ? 1.0 : speed[static_cast<std::size_t>(gpu)]; }
  double memory_of(int gpu) const { return memory.empty() ? gpu_memory : memory[static_cast<std::size_t>(gpu)]; }
  /// Memory of the smallest GPU, bytes.
  double smallest_memory() const
  {
    double m = gpu_memory;
    for (double g : memory)
      m = g < m ? g : m;
    return m;
  }
  /// Bandwidth of one leaf's uplink to the spine (fat tree), B/s per direction.
  double leaf_uplink_bandwidth() const
  {
    return nodes_per_leaf * nics_per_node * nic.bandwidth / oversubscription;
  }
  int node_of(int gpu) const { return gpu / gpus_per_node; }
  /// Fat tree: the leaf of a node (0 on a single switch).
  int leaf_of_node(int node) const
  {
    return topology == FabricTopology::fat_tree && nodes > nodes_per_leaf ? node / nodes_per_leaf : 0;
  }
  /// One-way latency between two GPUs (s).
  double latency(int src_gpu, int dst_gpu) const;
};

/// The first `gpus` GPUs of `cluster` (whole nodes, or part of the first node when fewer than a node's
/// GPUs), with their per-GPU memory, speed and names: one cluster file serves every size of a sweep
/// (`cluster: {use: dgx-h100x128, gpus: 512}`). Throws std::invalid_argument when `gpus` is not
/// in [1, the cluster's GPUs] or not a whole number of nodes above one node.
ClusterSpec first_gpus(const ClusterSpec& cluster, int gpus);

/// Reads a cluster description (a cluster file's root, or an inline `cluster:` mapping), recording
/// problems in the map's Diagnostics.
ClusterSpec parse_cluster(YamlMap& map);
/// Loads a shipped cluster by name (sim/clusters/NAME.yaml) or a cluster file by path; throws ConfigError.
ClusterSpec load_cluster(const std::string& name_or_path);
ClusterSpec load_cluster_file(const std::filesystem::path& path);

}  // namespace ddlsim::sim
