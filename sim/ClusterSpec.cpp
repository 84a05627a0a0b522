#include "sim/ClusterSpec.hpp"

#include <stdexcept>

#include "common/DataPath.hpp"

namespace ddlsim::sim {

double ClusterSpec::latency(int src_gpu, int dst_gpu) const
{
  return node_of(src_gpu) == node_of(dst_gpu) ? intra_node.latency : nic.latency + fabric_latency;
}

ClusterSpec parse_cluster(YamlMap& map)
{
  ClusterSpec c;
  c.name = map.required_string("name");
  c.description = map.string("description", "");
  // 2^17 nodes of up to 64 GPUs is far beyond any machine; larger numbers are typos that would exhaust memory.
  c.nodes = static_cast<int>(map.required_integer("nodes", 1, 1 << 17));
  c.gpus_per_node = static_cast<int>(map.required_integer("gpus_per_node", 1, 64));
  if (auto gpu = map.map("gpu")) {
    c.gpu_name = gpu->string("name", "gpu");
    c.gpu_memory = gpu->required_quantity("memory", Dimension::bytes);
    gpu->check_unknown_keys();
  } else {
    map.report("gpu", "missing required key");
  }
  if (auto intra = map.map("intra_node")) {
    c.intra_node.bandwidth = intra->required_quantity("bandwidth", Dimension::bandwidth);
    c.intra_node.latency = intra->quantity("latency", Dimension::time, 0.0, Bound::non_negative);
    c.intra_link = intra->choice("link", intra_link_table, IntraLink::nvlink);
    c.nvls_bandwidth = intra->quantity("nvls", Dimension::bandwidth, 0.0, Bound::non_negative);
    intra->check_unknown_keys();
  } else {
    map.report("intra_node", "missing required key");
  }
  auto nic = map.map("nic");
  if (nic) {
    c.nics_per_node = static_cast<int>(nic->integer("count", 1, 1, 64));
    c.nic.bandwidth = nic->required_quantity("bandwidth", Dimension::bandwidth);
    c.nic.latency = nic->quantity("latency", Dimension::time, 0.0, Bound::non_negative);
    nic->check_unknown_keys();
  }
  auto fabric = map.map("fabric");
  if (fabric) {
    c.fabric_latency = fabric->quantity("latency", Dimension::time, 0.0, Bound::non_negative);
    c.topology = fabric->choice("topology", fabric_topology_table, FabricTopology::single_switch);
    c.sharp = fabric->boolean("sharp", false);
    if (c.topology == FabricTopology::fat_tree) {
      c.nodes_per_leaf = static_cast<int>(fabric->required_integer("nodes_per_leaf", 1, 1 << 17));
      c.oversubscription = fabric->quantity("oversubscription", Dimension::count, 1.0);
    }
    fabric->check_unknown_keys();
  }
  const std::size_t gpus = static_cast<std::size_t>(c.nodes) * static_cast<std::size_t>(c.gpus_per_node);
  const YAML::Node node_gpus = map.node("node_gpus");
  if (node_gpus.IsDefined()) {
    if (!node_gpus.IsSequence()) {
      map.report("node_gpus", "expected a list of {nodes: [..], name, memory, speed}");
    } else {
      c.memory.assign(gpus, c.gpu_memory);
      c.speed.assign(gpus, 1.0);
      c.gpu_names.assign(gpus, c.gpu_name);
      for (std::size_t i = 0; i < node_gpus.size(); ++i) {
        YamlMap entry(node_gpus[i], map.key_path("node_gpus") + "[" + std::to_string(i) + "]", map.diagnostics());
        const YAML::Node list = entry.node("nodes");
        const std::string name = entry.string("name", c.gpu_name);
        const double memory = entry.quantity("memory", Dimension::bytes, c.gpu_memory);
        const double speed = entry.quantity("speed", Dimension::count, 1.0);
        entry.check_unknown_keys();
        if (!list.IsSequence() || list.size() == 0) {
          entry.report("nodes", "expected a non-empty list of node indices");
          continue;
        }
        for (const auto& item : list) {
          long long n = -1;
          try {
            n = item.as<long long>();
          } catch (const YAML::Exception&) {
          }
          if (n < 0 || n >= c.nodes) {
            entry.report("nodes", "node indices go from 0 to " + std::to_string(c.nodes - 1));
            break;
          }
          for (int g = 0; g < c.gpus_per_node; ++g) {
            const auto gpu = static_cast<std::size_t>(n * c.gpus_per_node + g);
            c.memory[gpu] = memory;
            c.speed[gpu] = speed;
            c.gpu_names[gpu] = name;
          }
        }
      }
    }
  }
  const YAML::Node stragglers = map.node("stragglers");
  if (stragglers.IsDefined()) {
    if (!stragglers.IsSequence()) {
      map.report("stragglers", "expected a list of {gpu: index, speed: factor}");
    } else {
      if (c.speed.empty())
        c.speed.assign(gpus, 1.0);
      for (std::size_t i = 0; i < stragglers.size(); ++i) {
        YamlMap entry(stragglers[i], map.key_path("stragglers") + "[" + std::to_string(i) + "]", map.diagnostics());
        const long long gpu = entry.required_integer("gpu", 0, static_cast<long long>(gpus) - 1);
        const double speed = entry.required_quantity("speed", Dimension::count);
        entry.check_unknown_keys();
        if (gpu >= 0 && static_cast<std::size_t>(gpu) < gpus)
          c.speed[static_cast<std::size_t>(gpu)] = speed;
      }
    }
  }
  if (c.nodes > 1 && !nic)
    map.report("nic", "a cluster of more than one node needs a 'nic' section");
  if (c.nodes > 1 && !fabric)
    map.report("fabric", "a cluster of more than one node needs a 'fabric' section");
  map.check_unknown_keys();
  return c;
}

ClusterSpec first_gpus(const ClusterSpec& cluster, int gpus)
{
  const int total = cluster.gpu_count();
  if (gpus < 1 || gpus > total)
    throw std::invalid_argument(std::to_string(gpus) + " GPUs: cluster '" + cluster.name + "' has " +
                                std::to_string(total));
  if (gpus > cluster.gpus_per_node && gpus % cluster.gpus_per_node != 0)
    throw std::invalid_argument(std::to_string(gpus) + " GPUs are not a whole number of " +
                                std::to_string(cluster.gpus_per_node) + "-GPU nodes of cluster '" + cluster.name + "'");
  ClusterSpec c = cluster;
  if (gpus < cluster.gpus_per_node) {
    c.nodes = 1;
    c.gpus_per_node = gpus;
  } else {
    c.nodes = gpus / cluster.gpus_per_node;
  }
  auto first = [&](auto& per_gpu) {
    if (!per_gpu.empty())
      per_gpu.resize(static_cast<std::size_t>(gpus));
  };
  first(c.speed);
  first(c.memory);
  first(c.gpu_names);
  c.description = "the first " + std::to_string(gpus) + " GPUs of " + cluster.name +
                  (cluster.description.empty() ? "" : " (" + cluster.description + ")");
  return c;
}

ClusterSpec load_cluster_file(const std::filesystem::path& path)
{
  return parse_yaml_file(path.string(), [](YamlMap& map) { return parse_cluster(map); });
}

ClusterSpec load_cluster(const std::string& name_or_path)
{
  return load_cluster_file(resolve_input_or_throw(name_or_path, "sim/clusters", "cluster"));
}

}  // namespace ddlsim::sim
