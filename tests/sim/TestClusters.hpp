// The small clusters the collective tests compare with closed forms: `count` nodes of
// `gpus_per_node` GPUs, NVLink of `intra_bandwidth` B/s and latency `a` s inside a node, `nics` NICs
// per node of `nic_bandwidth` B/s and latency 3a, and a fabric of latency a (a hop between nodes
// costs 4a in all). Ample GPU memory: these tests time collectives, not memory.
#pragma once

#include "sim/ClusterSpec.hpp"

namespace ddlsim::sim::testing {

inline ClusterSpec test_nodes(int count, int gpus_per_node, double intra_bandwidth, double a, int nics,
                              double nic_bandwidth)
{
  ClusterSpec c;
  c.name           = "test";
  c.nodes          = count;
  c.gpus_per_node  = gpus_per_node;
  c.gpu_memory     = 1e12;
  c.intra_node     = {.bandwidth = intra_bandwidth, .latency = a};
  c.nics_per_node  = nics;
  c.nic            = {.bandwidth = nic_bandwidth, .latency = 3 * a};
  c.fabric_latency = a;
  return c;
}

} // namespace ddlsim::sim::testing
