#include "sim/ClusterSpec.hpp"

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
    fabric->check_unknown_keys();
  }
  if (c.nodes > 1 && !nic)
    map.report("nic", "a cluster of more than one node needs a 'nic' section");
  if (c.nodes > 1 && !fabric)
    map.report("fabric", "a cluster of more than one node needs a 'fabric' section");
  map.check_unknown_keys();
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
