#include "sim/FoldedRoutes.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <functional>

namespace ddlsim::sim::detail {
namespace {

// The orbits of the platform's links under some of a fold's generators: a union-find (path halving) over the
// links that each generator's map joins; after settle(), parent[l] is the smallest link of l's orbit and
// size[root] the orbit's links. `order`: the order of the group the generators make (the product of theirs).
struct LinkOrbits {
  std::vector<int> parent, size;
  int order = 1;
  explicit LinkOrbits(std::size_t links) : parent(links)
  {
    for (std::size_t l = 0; l < links; ++l)
      parent[l] = static_cast<int>(l);
  }
  int root(int l)
  {
    while (parent[static_cast<std::size_t>(l)] != l)
      l = parent[static_cast<std::size_t>(l)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(l)])];
    return l;
  }
  void unite(int x, int y)
  {
    x = root(x);
    y = root(y);
    if (x != y)
      parent[static_cast<std::size_t>(std::max(x, y))] = std::min(x, y);
  }
  void settle()
  {
    size.assign(parent.size(), 0);
    for (std::size_t l = 0; l < parent.size(); ++l) {
      parent[l] = root(static_cast<int>(l));
      ++size[static_cast<std::size_t>(parent[l])];
    }
  }
};

} // namespace

FoldedRoutes::FoldedRoutes(const TaskGraph& graph, const ClusterSpec& cluster, const Fold& fold,
                           const FoldedCollectives& folded, const std::vector<std::vector<int>>& rail_sets,
                           const std::unordered_map<TaskId, int>& rail_set)
    : gpus_(static_cast<std::uint64_t>(cluster.gpu_count())), nodes_(static_cast<std::uint64_t>(cluster.nodes))
{
  // Where each generator sends each node's NICs (the NICs of its GPUs): a node's NIC set S over
  // the rails goes to g(S) of the image node. The sets are closed under these maps (the images
  // of the representatives' sets are the other collectives' sets), so that every rails link has
  // its orbit.
  struct NodeMap {
    int from, to;
    std::map<int, int> nic;
  };
  std::vector<std::vector<NodeMap>> node_maps(fold.generators().size());
  std::vector<std::vector<int>> sets = rail_sets;
  if (!sets.empty() && cluster.nodes > 1) {
    for (std::size_t gi = 0; gi < fold.generators().size(); ++gi) {
      const FoldGenerator& g = fold.generators()[gi];
      for (int n = 0; n < cluster.nodes; ++n) {
        NodeMap map{n, -1, {}};
        for (int x = n * cluster.gpus_per_node; x < (n + 1) * cluster.gpus_per_node && x < fold.devices(); ++x) {
          const int y = g.image[static_cast<std::size_t>(x)];
          map.to      = cluster.node_of(y);
          map.nic[(x % cluster.gpus_per_node) % cluster.nics_per_node] =
              (y % cluster.gpus_per_node) % cluster.nics_per_node;
        }
        if (map.to >= 0)
          node_maps[gi].push_back(std::move(map));
      }
    }
    for (std::size_t i = 0; i < sets.size(); ++i)
      for (const auto& maps : node_maps)
        for (const NodeMap& map : maps) {
          std::vector<int> image;
          for (int k : sets[i]) {
            auto it = map.nic.find(k);
            if (it == map.nic.end())
              throw FoldError("a symmetry leaves the NICs of a collective over rails: not folded", {});
            image.push_back(it->second);
          }
          std::sort(image.begin(), image.end());
          image.erase(std::unique(image.begin(), image.end()), image.end());
          if (std::find(sets.begin(), sets.end(), image) == sets.end())
            sets.push_back(std::move(image));
        }
  }
  sets_ = sets.size();
  const detail::LinkModel model(cluster, sets);
  // A generator's map of each node's NIC sets, as links joined (up with up, down with down).
  auto join_rails = [&](const std::vector<NodeMap>& maps, const std::function<void(int, int)>& unite) {
    for (const NodeMap& map : maps)
      for (std::size_t i = 0; i < sets.size(); ++i) {
        std::vector<int> image;
        for (int k : sets[i])
          image.push_back(map.nic.at(k));
        std::sort(image.begin(), image.end());
        image.erase(std::unique(image.begin(), image.end()), image.end());
        const int j = static_cast<int>(std::find(sets.begin(), sets.end(), image) - sets.begin());
        unite(model.rails_link(map.from, static_cast<int>(i)), model.rails_link(map.to, j));
        unite(model.rails_link(map.from, static_cast<int>(i)) + 1, model.rails_link(map.to, j) + 1);
      }
  };
  // The orbits under the generators `gens`: the closure of their link maps over the devices they move.
  auto orbits_of = [&](const std::vector<int>& gens) {
    LinkOrbits o(static_cast<std::size_t>(model.size()));
    const std::function<void(int, int)> unite = [&o](int x, int y) { o.unite(x, y); };
    for (int gi : gens) {
      const FoldGenerator& g = fold.generators()[static_cast<std::size_t>(gi)];
      o.order *= g.order;
      for (int d = 0; d < fold.devices(); ++d)
        model.pair_links(d, g.image[static_cast<std::size_t>(d)], unite);
      join_rails(node_maps[static_cast<std::size_t>(gi)], unite);
    }
    o.settle();
    return o;
  };
  std::vector<int> all_generators(fold.generators().size());
  for (std::size_t gi = 0; gi < all_generators.size(); ++gi)
    all_generators[gi] = static_cast<int>(gi);
  const LinkOrbits g_orbits = orbits_of(all_generators);
  auto find                 = [&g_orbits](int l) { return g_orbits.parent[static_cast<std::size_t>(l)]; };
  orbit_count               = static_cast<int>(g_orbits.parent.size());
  std::unordered_map<int, int> quotient; // orbit root -> quotient link
  std::map<std::vector<int>, int> known;
  std::vector<int> route;
  auto add = [&](int src, int dst, int set) {
    const std::uint64_t k = key(src, dst, set);
    if (pair.count(k) != 0)
      return;
    route.clear();
    if (set >= 0)
      model.rails_route(src, dst, set, route);
    else
      model.route(src, dst, route);
    std::vector<int> orbits;
    for (int& l : route) {
      const int root = find(l);
      if (!model.fatpipe(l)) // a FATPIPE link bounds each flow alone: flows on it do not meet
        orbits.push_back(root);
      auto [at, fresh] = quotient.emplace(root, static_cast<int>(links.size()));
      if (fresh) {
        // A link orbit O carries |G| / |O| flows of every flow orbit crossing it per link: a
        // shared link of |O| / |G| of the bandwidth per representative flow gives the same shares.
        const double share =
            model.fatpipe(l) ? 1.0 : static_cast<double>(g_orbits.size[static_cast<std::size_t>(root)]) / fold.order();
        links.push_back({model.bandwidth(l) * share, model.fatpipe(l)});
      }
      l = at->second;
    }
    auto [it, fresh] = known.emplace(route, static_cast<int>(routes.size()));
    if (fresh) {
      routes.push_back(route);
      route_orbits.push_back(std::move(orbits));
    }
    pair.emplace(k, it->second);
  };
  // Runs apart: a link per orbit of a real link under K, the generators that do not keep the
  // collective's group (its images under K run at the same times on the images of its links, and
  // K acts freely on them: the same quotient as the fold's, for K), of B |O_K| / |K|.
  struct Apart {
    LinkOrbits orbits;
    std::map<int, int> link; // K-orbit root -> link
  };
  std::map<std::vector<int>, Apart> aparts;
  auto apart_of = [&](const std::vector<int>& gens) -> Apart& {
    auto at = aparts.find(gens);
    if (at == aparts.end())
      at = aparts.emplace(gens, Apart{orbits_of(gens), {}}).first;
    return at->second;
  };
  auto add_apart = [&](Apart& a, std::unordered_map<std::uint64_t, int>& pairs, int src, int dst, int set,
                       std::vector<int>& orbits) {
    route.clear();
    if (set >= 0)
      model.rails_route(src, dst, set, route);
    else
      model.route(src, dst, route);
    for (int& l : route) {
      if (!model.fatpipe(l))
        orbits.push_back(find(l));
      const int root   = a.orbits.parent[static_cast<std::size_t>(l)];
      auto [at, fresh] = a.link.emplace(root, static_cast<int>(links.size()));
      if (fresh) {
        const double share = model.fatpipe(l)
                                 ? 1.0
                                 : static_cast<double>(a.orbits.size[static_cast<std::size_t>(root)]) / a.orbits.order;
        links.push_back({model.bandwidth(l) * share, model.fatpipe(l)});
      }
      l = at->second;
    }
    const std::uint64_t k = key(src, dst, set);
    if (pairs.count(k) != 0)
      return;
    auto [it, fresh] = known.emplace(route, static_cast<int>(routes.size()));
    if (fresh) {
      routes.push_back(route);
      route_orbits.emplace_back();
    }
    pairs.emplace(k, it->second);
  };
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) == TaskKind::transfer && graph.transfer(id).bytes > 0) {
      add(graph.transfer(id).src, graph.transfer(id).dst, -1);
    } else if (graph.kind(id) == TaskKind::collective && graph.collective(id).fidelity == CollectiveFidelity::flow) {
      const auto set = rail_set.find(id);
      if (folded.isolated(id)) {
        auto [at, fresh] = apart_orbits.try_emplace({folded.shape(id), folded.offset(id)});
        if (!fresh)
          continue;
        Apart& a    = apart_of(folded.folded(id).apart);
        auto& pairs = apart_pair[folded.folded(id).apart];
        for (const Message& m : folded.messages(id))
          if (!is_join(m) && m.bytes > 0)
            add_apart(a, pairs, shift_endpoint(m.src, folded.offset(id), cluster.gpus_per_node),
                      shift_endpoint(m.dst, folded.offset(id), cluster.gpus_per_node),
                      m.rails && set != rail_set.end() ? set->second : -1, at->second);
        std::sort(at->second.begin(), at->second.end());
        at->second.erase(std::unique(at->second.begin(), at->second.end()), at->second.end());
        continue;
      }
      for (const Message& m : folded.messages(id))
        if (!is_join(m) && m.bytes > 0)
          add(shift_endpoint(m.src, folded.offset(id), cluster.gpus_per_node),
              shift_endpoint(m.dst, folded.offset(id), cluster.gpus_per_node),
              m.rails && set != rail_set.end() ? set->second : -1);
    }
  }
}

} // namespace ddlsim::sim::detail
