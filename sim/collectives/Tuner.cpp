// NCCL's tuner: per-step and fixed latencies by hardware, algorithm and protocol, channels, shares.
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace ddlsim::sim::collectives {

// ---------------------------------------------------------------------------------------------
// NCCL's tuner constants (src/graph/tuning.cc): per-step latencies (us) by hardware, algorithm
// column (tree, ring) and protocol (LL, LL128, Simple), the fixed latencies, and the LL ceiling.

namespace {

enum class Hw { nvlink, pci, net };
constexpr std::array<std::array<std::array<double, 3>, 2>, 3> hw_latency_us{{
    {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}}},  // NVLink: tree, ring
    {{{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}}},   // PCI
    {{{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}}}, // network
}};
constexpr std::array<std::array<double, 3>, 2> base_latency_us{{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}}};
constexpr double nvls_latency_us    = 25; // NVLink NVLS, Simple
constexpr double collnet_latency_us = 31; // network CollNet Direct, Simple

int protocol_index(CollectiveProtocol p)
{
  switch (p) {
  case CollectiveProtocol::ll:
    return 0;
  case CollectiveProtocol::ll128:
    return 1;
  case CollectiveProtocol::simple:
    return 2;
  }
  return 2;
}

// NCCL's LL bus-bandwidth ceiling (llMaxBws), B/s: inside one node by GPU generation, across nodes
// by node count (x86 hosts).
double ll_ceiling(const ClusterSpec& cl, bool one, int nodes)
{
  if (!one)
    return (nodes <= 2 ? 39.0 : 20.4) * 1e9;
  const std::string& name = cl.gpu_name;
  auto has                = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("B200") || has("B100") || has("GB200") || has("B300"))
    return 282.0e9;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200"))
    return 141.0e9;
  if (has("V100"))
    return 39.0e9;
  return 87.7e9; // Ampere and Ada
}

} // namespace

bool supports(CollectiveAlgorithm a, CollectiveKind kind)
{
  switch (a) {
  case CollectiveAlgorithm::automatic:
    return true;
  case CollectiveAlgorithm::ring:
    return kind != CollectiveKind::all_to_all;
  case CollectiveAlgorithm::hierarchical:
    return kind == CollectiveKind::all_reduce || kind == CollectiveKind::all_to_all;
  case CollectiveAlgorithm::tree:
  case CollectiveAlgorithm::double_tree:
  case CollectiveAlgorithm::sharp:
    return kind == CollectiveKind::all_reduce;
  case CollectiveAlgorithm::nvls:
    return kind != CollectiveKind::broadcast && kind != CollectiveKind::all_to_all;
  case CollectiveAlgorithm::direct:
    return kind == CollectiveKind::all_to_all;
  }
  return false;
}

namespace {

// An all-to-all is NCCL's grouped send/recv (src/enqueue.cc: addP2pToPlan): every message is one p2p
// operation with LL (up to NCCL_P2P_LL_THRESHOLD, 16 KiB per channel) or Simple, no LL128. NCCL's
// tuner has no p2p costs, so a message pays the protocol's per-step latency of the ring column on its
// hardware (NVLink or PCIe inside a node, the network plus the fabric's latency across nodes), the
// kernel pays the ring's fixed latency of the protocol (twice for hierarchical: two exchanges, as
// DeepSpeed and Tutel issue them), and LL moves 4 data bytes in 8. Across nodes over NVLink nodes
// NCCL's PXN sends each message through the NIC on the destination's rail (c.channels = the rails).
void apply_p2p_protocol(CollectiveTask& c, const ClusterSpec& cl, CollectiveProtocol p, bool one)
{
  const auto pi           = static_cast<std::size_t>(protocol_index(p));
  const Hw intra          = cl.intra_link == IntraLink::pcie ? Hw::pci : Hw::nvlink;
  const bool hierarchical = c.algorithm == CollectiveAlgorithm::hierarchical;
  c.intra_step_latency_s  = hw_latency_us[static_cast<std::size_t>(intra)][1][pi] * us;
  c.inter_step_latency_s  = hw_latency_us[2][1][pi] * us + cl.fabric_latency;
  c.base_latency_s        = base_latency_us[1][pi] * us * (hierarchical ? 2 : 1);
  c.channels              = !one && !hierarchical && cl.intra_link == IntraLink::nvlink ? rail_channels(c, cl) : 1;
  c.hop_latency_s         = -1;
  c.bandwidth_factor      = p == CollectiveProtocol::ll ? 0.5 : 1.0;
}

} // namespace
// Sets c's per-step latencies, fixed latency, channels and bandwidth share for algorithm c.algorithm
// (already effective) and protocol p.
void apply_protocol(CollectiveTask& c, const ClusterSpec& cl, CollectiveProtocol p)
{
  c.protocol     = p;
  const int pi   = protocol_index(p);
  const bool one = one_node(c.group, cl.gpus_per_node);
  if (c.kind == CollectiveKind::all_to_all) {
    apply_p2p_protocol(c, cl, p, one);
    return;
  }
  const auto nodes = by_node(c.group, cl.gpus_per_node);
  std::vector<int> node_ids;
  for (int d : c.group)
    node_ids.push_back(cl.node_of(d));
  std::sort(node_ids.begin(), node_ids.end());
  const int node_count  = static_cast<int>(std::unique(node_ids.begin(), node_ids.end()) - node_ids.begin());
  const bool ppn_one    = !one && !nodes.empty() && nodes.front().size() == 1;
  const Hw intra        = cl.intra_link == IntraLink::pcie ? Hw::pci : Hw::nvlink;
  const bool tree_like  = is_tree(c.algorithm);
  const std::size_t col = tree_like ? 0 : 1;
  double intra_us       = hw_latency_us[static_cast<std::size_t>(intra)][col][static_cast<std::size_t>(pi)];
  // With one rank per node the network latency is fully exposed: NCCL uses the tree's.
  double inter_us = hw_latency_us[2][ppn_one ? 0 : col][static_cast<std::size_t>(pi)];
  if (!one && !tree_like) // rings across nodes post a network operation per step (NCCL_NET_OVERHEAD, x86)
    intra_us = std::max(intra_us, p == CollectiveProtocol::simple ? 3.0 : 1.0);
  c.intra_step_latency_s = intra_us * us;
  c.inter_step_latency_s = inter_us * us + cl.fabric_latency;
  c.base_latency_s       = base_latency_us[col][static_cast<std::size_t>(pi)] * us;
  c.channels             = c.algorithm == CollectiveAlgorithm::ring || c.algorithm == CollectiveAlgorithm::double_tree
                               ? rail_channels(c, cl)
                               : 1;
  c.hop_latency_s        = -1;
  if (c.algorithm == CollectiveAlgorithm::ring) {
    // NCCL pipelines a ring's steps, so its latency is the sum of its steps' own latencies, 2(N-1)
    // of them between nodes for an all-reduce (N-1 otherwise): every hop takes their mean.
    const double steps = c.kind == CollectiveKind::broadcast ? static_cast<double>(c.group.size() - 1)
                                                             : ring_steps(c.kind, c.group.size());
    const double inter = one ? 0.0 : (c.kind == CollectiveKind::all_reduce ? 2.0 : 1.0) * (node_count - 1);
    c.hop_latency_s    = ((steps - inter) * c.intra_step_latency_s + inter * c.inter_step_latency_s) / steps;
  }
  double share = 1;
  switch (c.algorithm) {
  case CollectiveAlgorithm::ring:
  case CollectiveAlgorithm::hierarchical:
  case CollectiveAlgorithm::direct:
  case CollectiveAlgorithm::automatic:
    share = p == CollectiveProtocol::ll ? 0.5 : p == CollectiveProtocol::ll128 ? 0.92 : 1.0;
    break;
  case CollectiveAlgorithm::tree:
  case CollectiveAlgorithm::double_tree:
    share = 0.92 * (p == CollectiveProtocol::ll      ? 1.0 / 3.8
                    : p == CollectiveProtocol::ll128 ? (one ? 7.0 / 9.0 : 120.0 / 128.0)
                                                     : 1.0);
    break;
  case CollectiveAlgorithm::nvls:
    c.base_latency_s = nvls_latency_us * us;
    break;
  case CollectiveAlgorithm::sharp:
    c.base_latency_s =
        (collnet_latency_us + 2 * 0.4 * static_cast<double>(nodes.empty() ? 0 : nodes.front().size() - 1)) * us +
        cl.fabric_latency;
    break;
  }
  c.bandwidth_factor = share;
  if (p == CollectiveProtocol::ll) { // NCCL caps LL's bus bandwidth
    c.bandwidth_factor        = 1;
    const AnalyticParts links = analytic_parts(c, cl);
    const double busbw =
        links.transfer_s > 0
            ? c.bytes * bus_bandwidth_factor(c.kind, static_cast<int>(c.group.size())) / links.transfer_s
            : 0;
    const double ceiling = ll_ceiling(cl, one, node_count);
    c.bandwidth_factor   = busbw * share > ceiling && busbw > 0 ? ceiling / busbw : share;
  }
}

} // namespace ddlsim::sim::collectives
