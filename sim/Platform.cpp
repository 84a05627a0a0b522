#include "sim/Platform.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim::detail {

Platform build_platform(const ClusterSpec& cluster)
{
  using Dir = sg4::LinkInRoute::Direction;
  Platform platform;
  platform.gpus.reserve(static_cast<std::size_t>(cluster.gpu_count()));
  sg4::NetZone* root = sg4::create_star_zone("cluster");
  for (int n = 0; n < cluster.nodes; ++n) {
    const std::string node = "node" + std::to_string(n);
    sg4::NetZone* zone = sg4::create_full_zone(node);
    zone->set_parent(root);
    std::vector<sg4::Host*> hosts;
    std::vector<sg4::Link*> links;
    for (int local = 0; local < cluster.gpus_per_node; ++local) {
      const std::string gpu = "gpu" + std::to_string(n * cluster.gpus_per_node + local);
      hosts.push_back(zone->create_host(gpu, work_per_second));
      links.push_back(zone->create_split_duplex_link(gpu + "_link", cluster.intra_node.bandwidth)->set_latency(0));
    }
    for (std::size_t i = 0; i < hosts.size(); ++i)
      for (std::size_t j = i + 1; j < hosts.size(); ++j)
        zone->add_route(hosts[i]->get_netpoint(), hosts[j]->get_netpoint(), nullptr, nullptr,
                        {{links[i], Dir::UP}, {links[j], Dir::DOWN}}, true);
    simgrid::kernel::routing::NetPoint* gateway = zone->create_router(node + "_gw");
    if (cluster.nodes > 1) {
      std::vector<sg4::Link*> nics;
      for (int k = 0; k < cluster.nics_per_node; ++k)
        nics.push_back(zone->create_split_duplex_link(node + "_nic" + std::to_string(k), cluster.nic.bandwidth)->set_latency(0));
      for (std::size_t i = 0; i < hosts.size(); ++i)
        zone->add_route(hosts[i]->get_netpoint(), gateway, nullptr, nullptr,
                        {{nics[i % nics.size()], Dir::UP}}, true);
    }
    zone->seal();
    root->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {}, true);
    platform.gpus.insert(platform.gpus.end(), hosts.begin(), hosts.end());
  }
  root->seal();
  return platform;
}

}  // namespace ddlsim::sim::detail
