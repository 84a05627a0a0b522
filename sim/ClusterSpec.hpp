// Cluster description: nodes of GPUs behind a switch (NVSwitch or PCIe), NICs, an inter-node fabric.
//
//   name: dgx-h100x2
//   nodes: 2
//   gpus_per_node: 8
//   gpu: {name: H100-SXM5-80GB, memory: 80GiB}
//   intra_node: {bandwidth: 450GBps, latency: 2us}   # per GPU and direction, to the node switch
//   nic: {count: 8, bandwidth: 400Gbps, latency: 2us} # per node: count NICs of this bandwidth each way
//   fabric: {latency: 1us}                            # non-blocking switch between the nodes
//
// One-way latency of a message: intra_node.latency inside a node, nic.latency + fabric.latency
// between nodes. GPU g lives on node g / gpus_per_node.
#pragma once

#include "common/YamlReader.hpp"

#include <filesystem>
#include <string>

namespace ddlsim::sim {

struct LinkSpec {
  double bandwidth = 0;  ///< B/s per direction
  double latency = 0;    ///< s
};

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int gpus_per_node = 1;
  std::string gpu_name;
  double gpu_memory = 0;  ///< bytes per GPU
  LinkSpec intra_node;    ///< each GPU's link to its node switch
  int nics_per_node = 1;
  LinkSpec nic;           ///< one NIC
  double fabric_latency = 0;

  int gpu_count() const { return nodes * gpus_per_node; }
  int node_of(int gpu) const { return gpu / gpus_per_node; }
  /// One-way latency between two GPUs (s).
  double latency(int src_gpu, int dst_gpu) const;
};

/// Reads a cluster description (a cluster file's root, or an inline `cluster:` mapping), recording
/// problems in the map's Diagnostics.
ClusterSpec parse_cluster(YamlMap& map);
/// Loads a shipped cluster by name (sim/clusters/NAME.yaml) or a cluster file by path; throws ConfigError.
ClusterSpec load_cluster(const std::string& name_or_path);
ClusterSpec load_cluster_file(const std::filesystem::path& path);

}  // namespace ddlsim::sim
