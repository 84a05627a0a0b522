#include "sim/Platform.hpp"

#include "sim/Collectives.hpp"
#include "sim/CommOverlap.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim::detail {

Platform build_platform(const ClusterSpec& cluster, const std::vector<std::vector<int>>& rail_sets,
                        double comm_compute_slowdown)
{
  using Dir = sg4::LinkInRoute::Direction;
  Platform platform;
  platform.gpus.reserve(static_cast<std::size_t>(cluster.gpu_count()));
  // A single switch is a star: O(nodes) routes. A fat tree needs routes that depend on both ends'
  // leaves, so its root is a full zone of node-to-node routes (O(nodes^2), fine for thousands).
  const bool fat_tree = cluster.topology == FabricTopology::fat_tree && cluster.nodes > cluster.nodes_per_leaf;
  sg4::NetZone* root = fat_tree ? sg4::create_full_zone("cluster") : sg4::create_star_zone("cluster");
  std::vector<sg4::Link*> uplinks;
  std::vector<sg4::Link*> switches;  // a full zone forbids empty routes: inside a leaf, its (non-binding) switch
  if (fat_tree)
    for (int leaf = 0; leaf * cluster.nodes_per_leaf < cluster.nodes; ++leaf) {
      const std::string name = "leaf" + std::to_string(leaf);
      uplinks.push_back(root->create_split_duplex_link(name + "_uplink", cluster.leaf_uplink_bandwidth())->set_latency(0));
      switches.push_back(root->create_link(name + "_switch", cluster.nics_per_node * cluster.nic.bandwidth)
                             ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                             ->set_latency(0));
    }
  std::vector<sg4::NetZone*> zones;
  std::vector<simgrid::kernel::routing::NetPoint*> gateways;
  for (int n = 0; n < cluster.nodes; ++n) {
    const std::string node = "node" + std::to_string(n);
    sg4::NetZone* zone = sg4::create_full_zone(node);
    zone->set_parent(root);
    std::vector<sg4::Host*> hosts;
    std::vector<sg4::Link*> links;
    for (int local = 0; local < cluster.gpus_per_node; ++local) {
      const int index = n * cluster.gpus_per_node + local;
      const std::string gpu = "gpu" + std::to_string(index);
      hosts.push_back(zone->create_host(gpu, gpu_speeds(work_per_second * cluster.speed_of(index), comm_compute_slowdown)));
      links.push_back(zone->create_split_duplex_link(gpu + "_link", cluster.intra_node.bandwidth)->set_latency(0));
    }
    for (std::size_t i = 0; i < hosts.size(); ++i)
      for (std::size_t j = i + 1; j < hosts.size(); ++j)
        zone->add_route(hosts[i]->get_netpoint(), hosts[j]->get_netpoint(), nullptr, nullptr,
                        {{links[i], Dir::UP}, {links[j], Dir::DOWN}}, true);
    if (cluster.nvls_bandwidth > 0) {  // the NVSwitch that reduces and multicasts (NVLS)
      sg4::Host* nvswitch = zone->create_host(node + "_nvswitch", work_per_second);
      sg4::Link* engine = zone->create_split_duplex_link(node + "_nvls", cluster.nvls_bandwidth)->set_latency(0);
      for (std::size_t i = 0; i < hosts.size(); ++i) {
        zone->add_route(hosts[i]->get_netpoint(), nvswitch->get_netpoint(), nullptr, nullptr,
                        {{links[i], Dir::UP}, {engine, Dir::UP}}, false);
        zone->add_route(nvswitch->get_netpoint(), hosts[i]->get_netpoint(), nullptr, nullptr,
                        {{engine, Dir::DOWN}, {links[i], Dir::DOWN}}, false);
      }
      platform.node_switches.push_back(nvswitch);
    }
    simgrid::kernel::routing::NetPoint* gateway = zone->create_router(node + "_gw");
    if (cluster.nodes > 1) {
      std::vector<sg4::Link*> nics;
      for (int k = 0; k < cluster.nics_per_node; ++k)
        nics.push_back(zone->create_split_duplex_link(node + "_nic" + std::to_string(k), cluster.nic.bandwidth)->set_latency(0));
      // All NICs together: a GPU's own traffic never fills it (its NIC does first), a collective's
      // channel group over the rails (node<n>_rails) shares it with them.
      sg4::Link* all_nics =
          zone->create_split_duplex_link(node + "_all_nics", cluster.nics_per_node * cluster.nic.bandwidth)->set_latency(0);
      for (std::size_t i = 0; i < hosts.size(); ++i)
        zone->add_route(hosts[i]->get_netpoint(), gateway, nullptr, nullptr,
                        {{nics[i % nics.size()], Dir::UP}, {all_nics, Dir::UP}}, true);
      std::vector<sg4::Host*> rails;
      for (std::size_t i = 0; i < rail_sets.size(); ++i) {
        const std::string name = node + "_rails" + std::to_string(i);
        sg4::Host* host = zone->create_host(name, work_per_second);
        sg4::Link* set = zone->create_split_duplex_link(name, static_cast<double>(rail_sets[i].size()) * cluster.nic.bandwidth)
                             ->set_latency(0);
        zone->add_route(host->get_netpoint(), gateway, nullptr, nullptr, {{set, Dir::UP}, {all_nics, Dir::UP}}, true);
        rails.push_back(host);
      }
      platform.rails.push_back(std::move(rails));
    }
    zone->seal();
    if (!fat_tree)
      root->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
    zones.push_back(zone);
    gateways.push_back(gateway);
    platform.gpus.insert(platform.gpus.end(), hosts.begin(), hosts.end());
  }
  if (cluster.sharp && cluster.nodes > 1) {  // the fabric's reducing switches (SHARP), a zone of their own
    sg4::NetZone* zone = sg4::create_full_zone("sharp_zone");
    zone->set_parent(root);
    platform.fabric_switch = zone->create_host("sharp", work_per_second);
    simgrid::kernel::routing::NetPoint* gateway = zone->create_router("sharp_gw");
    sg4::Link* inside = zone->create_link("sharp_inside", 1e18)->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->set_latency(0);
    zone->add_route(platform.fabric_switch->get_netpoint(), gateway, nullptr, nullptr, {sg4::LinkInRoute(inside)}, true);
    zone->seal();
    if (fat_tree)
      for (int a = 0; a < cluster.nodes; ++a)  // reduced in the leaf: no uplink carries more than one stream
        root->add_route(zones[static_cast<std::size_t>(a)]->get_netpoint(), zone->get_netpoint(),
                        gateways[static_cast<std::size_t>(a)], gateway,
                        {sg4::LinkInRoute(switches[static_cast<std::size_t>(a / cluster.nodes_per_leaf)])}, true);
    else
      root->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
  }
  if (fat_tree)
    for (int a = 0; a < cluster.nodes; ++a)
      for (int b = a + 1; b < cluster.nodes; ++b) {
        const auto leaf_a = static_cast<std::size_t>(a / cluster.nodes_per_leaf);
        const auto leaf_b = static_cast<std::size_t>(b / cluster.nodes_per_leaf);
        std::vector<sg4::LinkInRoute> route{sg4::LinkInRoute(switches[leaf_a])};
        if (leaf_a != leaf_b)
          route = {{uplinks[leaf_a], Dir::UP}, {uplinks[leaf_b], Dir::DOWN}};
        root->add_route(zones[static_cast<std::size_t>(a)]->get_netpoint(), zones[static_cast<std::size_t>(b)]->get_netpoint(),
                        gateways[static_cast<std::size_t>(a)], gateways[static_cast<std::size_t>(b)], route, true);
      }
  root->seal();
  return platform;
}

LinkModel::LinkModel(const ClusterSpec& cluster, std::vector<std::vector<int>> rail_sets)
    : cluster_(cluster), rail_sets_(std::move(rail_sets)), fat_tree_(cluster.topology == FabricTopology::fat_tree && cluster.nodes > cluster.nodes_per_leaf),
      leaves_((cluster.nodes + cluster.nodes_per_leaf - 1) / cluster.nodes_per_leaf)
{
  nic_base_ = 2 * cluster.gpu_count();
  all_nics_base_ = nic_base_ + (cluster.nodes > 1 ? 2 * cluster.nodes * cluster.nics_per_node : 0);
  leaf_base_ = all_nics_base_ + (cluster.nodes > 1 ? 2 * cluster.nodes : 0);
  switch_base_ = leaf_base_ + (fat_tree_ ? 2 * leaves_ : 0);
  rails_base_ = switch_base_ + (fat_tree_ ? leaves_ : 0);
  nvls_base_ = rails_base_ + (cluster.nodes > 1 ? 2 * cluster.nodes * sets() : 0);
}

int LinkModel::nic_of(int gpu) const
{
  return nic_base_ + 2 * (cluster_.node_of(gpu) * cluster_.nics_per_node + (gpu % cluster_.gpus_per_node) % cluster_.nics_per_node);
}

double LinkModel::bandwidth(int link) const
{
  if (link < nic_base_)
    return cluster_.intra_node.bandwidth;
  if (link < all_nics_base_)
    return cluster_.nic.bandwidth;
  if (link < leaf_base_)
    return cluster_.nics_per_node * cluster_.nic.bandwidth;
  if (link < switch_base_)
    return cluster_.leaf_uplink_bandwidth();
  if (link < rails_base_)
    return cluster_.nics_per_node * cluster_.nic.bandwidth;
  if (link >= nvls_base_)
    return cluster_.nvls_bandwidth;
  const int set = (link - rails_base_) / 2 % sets();
  return static_cast<double>(rail_sets_[static_cast<std::size_t>(set)].size()) * cluster_.nic.bandwidth;
}

void LinkModel::route(int src, int dst, std::vector<int>& out) const
{
  if (dst == fabric_switch_endpoint) {
    const int a = cluster_.node_of(src);
    out.push_back(nic_of(src));
    out.push_back(all_nics_base_ + 2 * a);
    if (fat_tree_)
      out.push_back(switch_base_ + a / cluster_.nodes_per_leaf);
    return;
  }
  if (src == fabric_switch_endpoint) {
    const int b = cluster_.node_of(dst);
    if (fat_tree_)
      out.push_back(switch_base_ + b / cluster_.nodes_per_leaf);
    out.push_back(all_nics_base_ + 2 * b + 1);
    out.push_back(nic_of(dst) + 1);
    return;
  }
  if (is_switch_endpoint(dst)) {
    out.push_back(2 * src);
    out.push_back(nvls_base_ + 2 * node_of_switch_endpoint(dst));
    return;
  }
  if (is_switch_endpoint(src)) {
    out.push_back(nvls_base_ + 2 * node_of_switch_endpoint(src) + 1);
    out.push_back(2 * dst + 1);
    return;
  }
  const int a = cluster_.node_of(src), b = cluster_.node_of(dst);
  if (a == b) {
    out.push_back(2 * src);
    out.push_back(2 * dst + 1);
    return;
  }
  out.push_back(nic_of(src));
  inter_node(a, b, out);
  out.push_back(nic_of(dst) + 1);
}

void LinkModel::rails_route(int src, int dst, int set, std::vector<int>& out) const
{
  const int a = cluster_.node_of(src), b = cluster_.node_of(dst);
  out.push_back(rails_link(a, set));
  inter_node(a, b, out);
  out.push_back(rails_link(b, set) + 1);
}

void LinkModel::inter_node(int a, int b, std::vector<int>& out) const
{
  out.push_back(all_nics_base_ + 2 * a);
  if (fat_tree_) {
    const int la = a / cluster_.nodes_per_leaf, lb = b / cluster_.nodes_per_leaf;
    if (la == lb) {
      out.push_back(switch_base_ + la);
    } else {
      out.push_back(leaf_base_ + 2 * la);
      out.push_back(leaf_base_ + 2 * lb + 1);
    }
  }
  out.push_back(all_nics_base_ + 2 * b + 1);
}

void LinkModel::pair_links(int d, int e, const std::function<void(int, int)>& pair) const
{
  pair(2 * d, 2 * e);
  pair(2 * d + 1, 2 * e + 1);
  if (cluster_.nvls_bandwidth > 0) {
    pair(nvls_base_ + 2 * cluster_.node_of(d), nvls_base_ + 2 * cluster_.node_of(e));
    pair(nvls_base_ + 2 * cluster_.node_of(d) + 1, nvls_base_ + 2 * cluster_.node_of(e) + 1);
  }
  if (cluster_.nodes > 1) {
    pair(nic_of(d), nic_of(e));
    pair(nic_of(d) + 1, nic_of(e) + 1);
    pair(all_nics_base_ + 2 * cluster_.node_of(d), all_nics_base_ + 2 * cluster_.node_of(e));
    pair(all_nics_base_ + 2 * cluster_.node_of(d) + 1, all_nics_base_ + 2 * cluster_.node_of(e) + 1);
  }
  if (fat_tree_) {
    const int la = cluster_.node_of(d) / cluster_.nodes_per_leaf, lb = cluster_.node_of(e) / cluster_.nodes_per_leaf;
    pair(leaf_base_ + 2 * la, leaf_base_ + 2 * lb);
    pair(leaf_base_ + 2 * la + 1, leaf_base_ + 2 * lb + 1);
    pair(switch_base_ + la, switch_base_ + lb);
  }
}

FoldedPlatform build_folded_platform(const ClusterSpec& cluster, const std::vector<int>& representatives,
                                     const std::vector<QuotientLink>& links, const std::vector<std::vector<int>>& routes,
                                     double comm_compute_slowdown)
{
  FoldedPlatform platform;
  platform.gpus.assign(static_cast<std::size_t>(cluster.gpu_count()), nullptr);
  sg4::NetZone* zone = sg4::create_star_zone("folded");
  for (int d : representatives)
    platform.gpus[static_cast<std::size_t>(d)] =
        zone->create_host("gpu" + std::to_string(d), gpu_speeds(work_per_second * cluster.speed_of(d), comm_compute_slowdown));
  std::vector<sg4::Link*> made(links.size(), nullptr);
  for (std::size_t r = 0; r < routes.size(); ++r) {
    std::vector<sg4::LinkInRoute> route;
    for (int l : routes[r]) {
      sg4::Link*& link = made[static_cast<std::size_t>(l)];
      if (link == nullptr) {
        link = zone->create_link("orbit" + std::to_string(l), links[static_cast<std::size_t>(l)].bandwidth)->set_latency(0);
        if (links[static_cast<std::size_t>(l)].fatpipe)
          link->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE);
      }
      route.emplace_back(link);
    }
    sg4::Host* sender = zone->create_host("route" + std::to_string(r), work_per_second);
    zone->add_route(sender->get_netpoint(), nullptr, nullptr, nullptr, route, false);
    platform.senders.push_back(sender);
  }
  platform.sink = zone->create_host("sink", work_per_second);
  zone->seal();
  return platform;
}

}  // namespace ddlsim::sim::detail
