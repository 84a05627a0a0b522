// Internal to sim/ (Replay.cpp only): under a fold (sim/Fold.hpp), the quotient routes every message
// needs, found before the platform is built: a link per orbit of the platform's links under the fold's
// generators (or, for collectives that run apart, under their own), each at its share of the bandwidth,
// and each (source, destination, NIC set) pair's route over them.
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"
#include "sim/Platform.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace ddlsim::sim::detail {

struct FoldedRoutes {
  std::vector<detail::QuotientLink> links;     // per link orbit used
  std::vector<std::vector<int>> routes;        // distinct routes, as orbits
  std::unordered_map<std::uint64_t, int> pair; // key(src, dst, set) -> route (set -1: no rails)

  // Endpoints as numbers: GPUs, then the nodes' switches (nvls), then the fabric's (sharp).
  std::uint64_t code(int endpoint) const
  {
    if (endpoint >= 0)
      return static_cast<std::uint64_t>(endpoint);
    if (endpoint == fabric_switch_endpoint)
      return gpus_ + nodes_;
    return gpus_ + static_cast<std::uint64_t>(node_of_switch_endpoint(endpoint));
  }
  std::uint64_t key(int src, int dst, int set) const
  {
    const std::uint64_t endpoints = gpus_ + nodes_ + 1;
    return ((code(src) * endpoints + code(dst)) * (sets_ + 1)) + static_cast<std::uint64_t>(set + 1);
  }
  int route_of(int src, int dst, int set) const { return pair.at(key(src, dst, set)); }

  // Collectives that run apart (FoldedMessages::isolated): their routes over links of their own,
  // the link orbits (under G) of the real links each (shape, offset) crosses, and those of every
  // other route, to check that nothing else crosses them while such a collective runs.
  // Per K (FoldedMessages::apart): key(src, dst, set) -> route over K's links.
  std::map<std::vector<int>, std::unordered_map<std::uint64_t, int>> apart_pair;
  // Per route: the orbits of its links where flows share bandwidth (not FATPIPE; apart routes: none).
  std::vector<std::vector<int>> route_orbits;
  std::map<std::pair<int, int>, std::vector<int>> apart_orbits; // (shape, offset) -> orbits, sorted
  int apart_route_of(const std::vector<int>& k, int src, int dst, int set) const
  {
    return apart_pair.at(k).at(key(src, dst, set));
  }
  int orbit_count = 0;

  // `rail_set`: the NIC set (index into rail_sets) of each collective with channels across nodes.
  FoldedRoutes(const TaskGraph& graph, const ClusterSpec& cluster, const Fold& fold, const FoldedCollectives& folded,
               const std::vector<std::vector<int>>& rail_sets, const std::unordered_map<TaskId, int>& rail_set);

private:
  std::uint64_t gpus_;
  std::uint64_t nodes_;
  std::uint64_t sets_ = 0;
};

} // namespace ddlsim::sim::detail
