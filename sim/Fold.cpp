#include "sim/Fold.hpp"

#include "sim/Schedules.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>
#include <stdexcept>
#include <unordered_map>

namespace ddlsim::sim {

Fold::Fold(int devices) : devices_(devices), rep_index_(static_cast<std::size_t>(devices)),
                          element_(static_cast<std::size_t>(devices), 0), members_(static_cast<std::size_t>(devices))
{
  std::iota(rep_index_.begin(), rep_index_.end(), 0);
  std::iota(members_.begin(), members_.end(), 0);
  representatives_ = members_;
}

Fold::Fold(int devices, std::vector<FoldGenerator> generators) : devices_(devices), generators_(std::move(generators))
{
  const auto n = static_cast<std::size_t>(devices);
  for (const FoldGenerator& g : generators_) {
    if (g.image.size() != n || g.order < 1)
      throw std::invalid_argument("fold generator '" + g.name + "' does not act on the " + std::to_string(devices) +
                                  " devices");
    std::vector<char> hit(n, 0);
    for (int d : g.image) {
      if (d < 0 || d >= devices || hit[static_cast<std::size_t>(d)])
        throw std::invalid_argument("fold generator '" + g.name + "' is not a permutation");
      hit[static_cast<std::size_t>(d)] = 1;
    }
    stride_.push_back(order_);
    if (order_ > devices / g.order + 1)
      throw std::invalid_argument("fold group larger than the devices");
    order_ *= g.order;
  }
  if (n % static_cast<std::size_t>(order_) != 0)
    throw std::invalid_argument("a free fold group's order divides the devices");
  for (int g = 0; g < order_; ++g)
    for (std::size_t i = 0; i < generators_.size(); ++i)
      digits_.push_back(g / stride_[i] % generators_[i].order);
  rep_index_.assign(n, -1);
  element_.assign(n, 0);
  members_.reserve(n);
  const auto order = static_cast<std::size_t>(order_);
  std::vector<int> orbit(order);
  for (int d = 0; d < devices; ++d) {
    if (rep_index_[static_cast<std::size_t>(d)] >= 0)
      continue;
    const int index = static_cast<int>(representatives_.size());
    representatives_.push_back(d);
    orbit[0] = d;
    for (std::size_t code = 1; code < order; ++code) {
      // The lowest non-zero digit: code = that generator applied to (code - its stride).
      std::size_t i = 0;
      while ((code / static_cast<std::size_t>(stride_[i])) % static_cast<std::size_t>(generators_[i].order) == 0)
        ++i;
      orbit[code] = generators_[i].image[static_cast<std::size_t>(orbit[code - static_cast<std::size_t>(stride_[i])])];
    }
    for (std::size_t code = 0; code < order; ++code) {
      auto& at = rep_index_[static_cast<std::size_t>(orbit[code])];
      if (at >= 0)
        throw std::invalid_argument("the fold group does not act freely: an element other than the identity fixes "
                                    "device " + std::to_string(orbit[code]));
      at = index;
      element_[static_cast<std::size_t>(orbit[code])] = static_cast<int>(code);
      members_.push_back(orbit[code]);
    }
  }
  // Closure: every generator maps member `code` to member `code + its digit` (this checks that the
  // generators commute and have their order).
  for (std::size_t d = 0; d < n; ++d)
    for (std::size_t i = 0; i < generators_.size(); ++i) {
      const int to = generators_[i].image[d];
      if (apply(stride_[i], static_cast<int>(d)) != to)
        throw std::invalid_argument("fold generators do not commute or are not of their order ('" +
                                    generators_[i].name + "')");
    }
}

int Fold::representative(int device) const
{
  return representatives_[static_cast<std::size_t>(rep_index_[static_cast<std::size_t>(device)])];
}

int Fold::compose(int g, int h) const
{
  const std::size_t k = generators_.size();
  const int* a = digits_.data() + static_cast<std::size_t>(g) * k;
  const int* b = digits_.data() + static_cast<std::size_t>(h) * k;
  int out = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const int digit = a[i] + b[i];
    out += (digit >= generators_[i].order ? digit - generators_[i].order : digit) * stride_[i];
  }
  return out;
}

int Fold::inverse(int g) const
{
  int out = 0;
  for (std::size_t i = 0; i < generators_.size(); ++i) {
    const int n = generators_[i].order;
    out += ((n - g / stride_[i] % n) % n) * stride_[i];
  }
  return out;
}

int Fold::apply(int g, int device) const
{
  const auto d = static_cast<std::size_t>(device);
  return members_[static_cast<std::size_t>(rep_index_[d]) * static_cast<std::size_t>(order_) +
                  static_cast<std::size_t>(compose(element_[d], g))];
}

FoldGenerator tensor_rotation(const PipelinePlan& plan)
{
  FoldGenerator g{.name = "tp", .image = {}, .order = plan.tp};
  g.image.resize(static_cast<std::size_t>(plan.devices()));
  for (int d = 0; d < plan.devices(); ++d)
    g.image[static_cast<std::size_t>(d)] = d - d % plan.tp + (d % plan.tp + 1) % plan.tp;
  return g;
}

FoldGenerator replica_shift(const PipelinePlan& plan, int shift)
{
  const int replicas = plan.dp;  // dp x cp replicas per stage (PipelinePlan::dp)
  FoldGenerator g{.name = "dp", .image = {}, .order = replicas / std::gcd(replicas, shift)};
  g.image.resize(static_cast<std::size_t>(plan.devices()));
  for (int d = 0; d < plan.devices(); ++d) {
    const int t = d % plan.tp;
    const int r = d / plan.tp % replicas;
    const int s = d / plan.tp / replicas;
    g.image[static_cast<std::size_t>(d)] = (s * replicas + (r + shift) % replicas) * plan.tp + t;
  }
  return g;
}

int replica_shift_step(const PipelinePlan& plan)
{
  int step = plan.cp;
  if (shards_optimizer(plan.zero) && plan.shard < plan.dp)
    step = std::lcm(step, plan.shard);
  return step;
}

std::string platform_asymmetry(const ClusterSpec& cluster, const FoldGenerator& g)
{
  const int gpn = cluster.gpus_per_node;
  const bool fat_tree = cluster.topology == FabricTopology::fat_tree && cluster.nodes > cluster.nodes_per_leaf;
  // A map between parts (nodes, NICs, leaves) that the permutation must induce one to one.
  struct PartMap {
    std::vector<int> to, from;
    explicit PartMap(std::size_t parts) : to(parts, -1), from(parts, -1) {}
    bool add(int a, int b)
    {
      int& x = to[static_cast<std::size_t>(a)];
      int& y = from[static_cast<std::size_t>(b)];
      if (x < 0 && y < 0) {
        x = b;
        y = a;
      }
      return x == b && y == a;
    }
  };
  const auto node_count = static_cast<std::size_t>(cluster.nodes);
  PartMap nodes(node_count), nics(node_count * static_cast<std::size_t>(cluster.nics_per_node)),
      leaves(node_count / static_cast<std::size_t>(cluster.nodes_per_leaf) + 1);
  for (std::size_t d = 0; d < g.image.size(); ++d) {
    const int a = static_cast<int>(d), b = g.image[d];
    if (cluster.speed_of(a) != cluster.speed_of(b)) {
      char text[160];
      std::snprintf(text, sizeof text, "GPU %d runs at speed %g, GPU %d at %g", a, cluster.speed_of(a), b,
                    cluster.speed_of(b));
      return text;
    }
    const int na = cluster.node_of(a), nb = cluster.node_of(b);
    if (!nodes.add(na, nb))
      return "moving the " + g.name + " ranks splits node " + std::to_string(na);
    if (cluster.nodes > 1 && !nics.add(na * cluster.nics_per_node + (a % gpn) % cluster.nics_per_node,
                                       nb * cluster.nics_per_node + (b % gpn) % cluster.nics_per_node))
      return "moving the " + g.name + " ranks does not map the NICs of node " + std::to_string(na) + " one to one";
    if (fat_tree && !leaves.add(na / cluster.nodes_per_leaf, nb / cluster.nodes_per_leaf))
      return "moving the " + g.name + " ranks does not map the fat tree's leaves one to one (node " +
             std::to_string(na) + " of leaf " + std::to_string(na / cluster.nodes_per_leaf) + ")";
  }
  return {};
}

namespace {

// The members of a collective as a sorted list, for membership tests.
std::vector<int> sorted_group(const CollectiveTask& c)
{
  std::vector<int> s = c.group;
  std::sort(s.begin(), s.end());
  return s;
}

bool contains(const std::vector<int>& sorted, int d) { return std::binary_search(sorted.begin(), sorted.end(), d); }

// H: the elements that map the group onto itself. Each maps the first member into its own orbit,
// so the candidates are the elements taking it to the members of that orbit.
std::vector<int> stabilizer(const CollectiveTask& c, const Fold& fold)
{
  const std::vector<int> members = sorted_group(c);
  std::vector<int> out;
  if (members.empty())
    return {0};
  // Membership by device (a data-parallel group of 1,024 replicas has as many candidates, each
  // checked on every member: a lookup each, not a search).
  std::vector<char> member(static_cast<std::size_t>(fold.devices()), 0);
  for (int d : members)
    member[static_cast<std::size_t>(d)] = 1;
  const int first = members.front();
  const int back = fold.inverse(fold.element(first));
  for (int m : members) {
    if (fold.representative(m) != fold.representative(first))
      continue;
    const int g = fold.compose(fold.element(m), back);
    bool keeps = true;
    for (int d : members)
      if (member[static_cast<std::size_t>(fold.apply(g, d))] == 0) {
        keeps = false;
        break;
      }
    if (keeps)
      out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// |H| for c given its stabilizer h, or 0 (with why) when some member is not the image of a
// representative member.
int stabilizer_order(const CollectiveTask& c, const Fold& fold, const std::vector<int>& h, std::string& why)
{
  std::size_t reps = 0;
  for (int d : c.group)
    reps += fold.is_representative(d) ? 1 : 0;
  if (reps * h.size() != c.group.size()) {
    why = "a " + std::string(collective_kind_table.name(c.kind)) + " over " + std::to_string(c.group.size()) +
          " GPUs has members that are not images of its representative members";
    return 0;
  }
  return static_cast<int>(h.size());
}
// The generators (indices into fold.generators()) that map the collective's group onto itself.
std::vector<int> keeping_generators(const CollectiveTask& c, const Fold& fold)
{
  const std::vector<int> members = sorted_group(c);
  std::vector<int> out;
  for (std::size_t i = 0; i < fold.generators().size(); ++i) {
    bool keeps = true;
    for (int d : members)
      keeps = keeps && contains(members, fold.apply(fold.generator_element(i), d));
    if (keeps)
      out.push_back(static_cast<int>(i));
  }
  return out;
}

// A collective that does not fold but whose group the stabilizing generators span H for: all its
// messages, to run apart (FoldedMessages::isolated); nullopt when H is not spanned by generators.
std::optional<FoldedMessages> isolate_collective(const CollectiveTask& c, int gpus_per_node, const Fold& fold,
                                                 std::string& why)
{
  if (c.group.size() < 2)
    return std::nullopt;
  const std::vector<int> h = stabilizer(c, fold);
  std::string order_why;
  const int order = stabilizer_order(c, fold, h, order_why);
  if (order == 0)
    return std::nullopt;
  const std::vector<int> keeping = keeping_generators(c, fold);
  int spanned = 1;
  FoldedMessages out;
  for (std::size_t i = 0; i < fold.generators().size(); ++i) {
    if (std::find(keeping.begin(), keeping.end(), static_cast<int>(i)) != keeping.end())
      spanned *= fold.generators()[i].order;
    else
      out.apart.push_back(static_cast<int>(i));
  }
  if (spanned != order)
    return std::nullopt;  // H is not the product of whole generators: K would not act freely
  out.messages = decompose(c, gpus_per_node);
  out.stabilizer = order;
  out.isolated = true;
  out.why = why;
  return out;
}

}  // namespace

int collective_stabilizer(const CollectiveTask& c, const Fold& fold, std::string& why)
{
  return stabilizer_order(c, fold, stabilizer(c, fold), why);
}

std::vector<std::string> stabilizing_generators(const CollectiveTask& c, const Fold& fold)
{
  std::vector<std::string> out;
  for (int i : keeping_generators(c, fold))
    out.push_back(fold.generators()[static_cast<std::size_t>(i)].name);
  return out;
}

int shift_endpoint(int endpoint, int offset, int gpus_per_node)
{
  if (endpoint >= 0)
    return endpoint + offset;
  if (endpoint == -1 || endpoint == fabric_switch_endpoint)
    return endpoint;
  return node_switch_endpoint(node_of_switch_endpoint(endpoint) + offset / gpus_per_node);
}

std::optional<FoldedMessages> fold_collective(const CollectiveTask& c, int gpus_per_node, const Fold& fold,
                                              std::string& why)
{
  FoldedMessages out;
  const std::vector<int> h = stabilizer(c, fold);
  out.stabilizer = stabilizer_order(c, fold, h, why);
  if (out.stabilizer == 0)
    return std::nullopt;
  const std::vector<Message> all = decompose(c, gpus_per_node);
  constexpr std::uint32_t none = ~std::uint32_t{0};
  // Endpoints by place: members in group order, then the switches that reduce (nvls: the node's
  // NVSwitch, sharp: the fabric's), which the fold moves with their node (the fabric's stays).
  // Messages by sender and receiver in list order: message i is the rank[i]-th from its sender to
  // its receiver.
  const int top = *std::max_element(c.group.begin(), c.group.end());
  std::vector<int> local(static_cast<std::size_t>(top) + 1, -1);
  for (std::size_t k = 0; k < c.group.size(); ++k)
    local[static_cast<std::size_t>(c.group[k])] = static_cast<int>(k);
  std::map<int, int> switches;
  for (const Message& m : all)
    if (is_switch_endpoint(m.src))
      switches.emplace(m.src, static_cast<int>(c.group.size() + switches.size()));
  auto place = [&](int e) {
    if (e >= 0)
      return e > top ? -1 : local[static_cast<std::size_t>(e)];
    const auto it = switches.find(e);
    return it == switches.end() ? -1 : it->second;
  };
  auto endpoint_image = [&](int g, int e) {
    if (e >= 0)
      return fold.apply(g, e);
    if (e == fabric_switch_endpoint)
      return e;
    return node_switch_endpoint(fold.apply(g, node_of_switch_endpoint(e) * gpus_per_node) / gpus_per_node);
  };
  std::vector<std::vector<std::pair<int, std::vector<std::uint32_t>>>> by_src(c.group.size() + switches.size());
  std::vector<std::uint32_t> rank(all.size(), 0);
  for (std::uint32_t i = 0; i < all.size(); ++i) {
    if (is_join(all[i]))
      continue;
    auto& list = by_src[static_cast<std::size_t>(place(all[i].src))];
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == all[i].dst; });
    if (it == list.end())
      it = list.insert(list.end(), {all[i].dst, {}});
    rank[i] = static_cast<std::uint32_t>(it->second.size());
    it->second.push_back(i);
  }
  auto lookup = [&](int src, int dst, std::uint32_t k) -> std::uint32_t {
    const int at = place(src);
    if (at < 0)
      return none;
    const auto& list = by_src[static_cast<std::size_t>(at)];
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == dst; });
    return it == list.end() || k >= it->second.size() ? none : it->second[k];
  };
  // The image of message i under g (a join: itself, when g keeps its waits).
  auto image = [&](int g, std::uint32_t i) -> std::uint32_t {
    const Message& m = all[i];
    return is_join(m) ? i : lookup(endpoint_image(g, m.src), endpoint_image(g, m.dst), rank[i]);
  };
  // Whether g maps m's waits onto exactly target's (as sets; waits are few).
  std::vector<std::uint32_t> mapped, wanted;
  auto waits_map = [&](int g, const Message& m, const Message& target) {
    if (m.after.size() != target.after.size())
      return false;
    mapped.clear();
    for (std::uint32_t x : m.after)
      mapped.push_back(image(g, x));
    wanted.assign(target.after.begin(), target.after.end());
    std::sort(mapped.begin(), mapped.end());
    std::sort(wanted.begin(), wanted.end());
    return mapped == wanted;
  };
  auto fail = [&](const std::string& text) {
    why = std::string(collective_algorithm_table.name(effective_algorithm(c, gpus_per_node))) + " " +
          std::string(collective_kind_table.name(c.kind)) + " over " + std::to_string(c.group.size()) + " GPUs: " + text;
    return std::nullopt;
  };
  // Each message's representative: its image from its sender's representative. A message and its
  // representative must agree in bytes and waits (mapped), and every representative message must
  // have |H| messages mapping onto it: its whole orbit under H exists.
  std::vector<std::uint32_t> rep(all.size(), none), fiber(all.size(), 0);
  for (std::uint32_t i = 0; i < all.size(); ++i) {
    const Message& m = all[i];
    if (is_join(m)) {
      for (int g : h)
        if (!waits_map(g, m, m))
          return fail("a join is not mapped onto itself");
      rep[i] = i;
      continue;
    }
    // (A switch's message: from its receiver's representative.)
    const int g = fold.inverse(fold.element(m.src >= 0 ? m.src : m.dst));
    const std::uint32_t r = image(g, i);
    if (r == none || all[r].bytes != m.bytes || all[r].rails != m.rails || !waits_map(g, m, all[r]))
      return fail("message " + std::to_string(i) + " (" + std::to_string(m.src) + " -> " + std::to_string(m.dst) +
                  ") has no image from its sender's representative");
    rep[i] = r;
    ++fiber[r];
  }
  for (std::uint32_t i = 0; i < all.size(); ++i)
    if (!is_join(all[i]) && rep[i] == i && fiber[i] != h.size())
      return fail("message " + std::to_string(i) + " has " + std::to_string(fiber[i]) + " images, not " +
                  std::to_string(h.size()));
  // The representatives' messages and the joins, renumbered, waiting for representatives.
  std::vector<std::uint32_t> index(all.size(), none);
  for (std::uint32_t i = 0; i < all.size(); ++i)
    if (rep[i] == i) {
      index[i] = static_cast<std::uint32_t>(out.messages.size());
      out.messages.push_back({.src = all[i].src, .dst = all[i].dst, .bytes = all[i].bytes, .after = {}, .rails = all[i].rails});
    }
  for (std::uint32_t i = 0; i < all.size(); ++i) {
    if (rep[i] != i)
      continue;
    std::vector<std::uint32_t>& after = out.messages[index[i]].after;
    for (std::uint32_t x : all[i].after)
      after.push_back(index[rep[x]]);
    std::sort(after.begin(), after.end());
    after.erase(std::unique(after.begin(), after.end()), after.end());
  }
  return out;
}

std::pair<TaskGraph, Timings> unfold(const TaskGraph& folded, const Timings& timings,
                                                     const Fold& fold)
{
  TaskGraph whole(fold.devices());
  Timings out;
  for (TaskId id = 0; id < folded.size(); ++id) {
    std::vector<std::vector<int>> seen;
    for (int g = 0; g < fold.order(); ++g) {
      switch (folded.kind(id)) {
      case TaskKind::compute: {
        ComputeTask c = folded.compute(id);
        c.device = fold.apply(g, c.device);
        whole.add_compute(c);
        break;
      }
      case TaskKind::transfer: {
        TransferTask x = folded.transfer(id);
        x.src = fold.apply(g, x.src);
        x.dst = fold.apply(g, x.dst);
        whole.add_transfer(x);
        break;
      }
      case TaskKind::collective: {
        CollectiveTask c = folded.collective(id);
        for (int& d : c.group)
          d = fold.apply(g, d);
        std::vector<int> members = c.group;
        std::sort(members.begin(), members.end());
        if (std::find(seen.begin(), seen.end(), members) != seen.end())
          continue;
        seen.push_back(std::move(members));
        whole.add_collective(std::move(c));
        break;
      }
      }
      out.push_back(timings[id]);
    }
  }
  return {std::move(whole), std::move(out)};
}


FoldedCollectives::FoldedCollectives(const TaskGraph& graph, int gpus_per_node, const Fold& fold)
    : shape_(graph.size(), -1), offset_(graph.size(), 0)
{
  // A shape: kind, algorithm, fidelity, bytes and the group less its first node's first GPU; and
  // the fold's action on it (each member's element and its representative, less the offset).
  using Key = std::tuple<int, int, int, int, int, double, bool, std::vector<double>, std::vector<int>>;
  std::map<Key, int> known;
  std::vector<std::vector<int>> action;  // per shape: element and representative of each member
  // An iteration repeats the same collectives (a layer's tensor-parallel ones, every micro-batch):
  // one equal in every field that decides its shape, group included, has the same shape and offset.
  auto same = [](const CollectiveTask& a, const CollectiveTask& b) {
    return a.kind == b.kind && a.algorithm == b.algorithm && a.fidelity == b.fidelity && a.protocol == b.protocol &&
           a.channels == b.channels && a.bytes == b.bytes && a.load_at_source == b.load_at_source &&
           a.member_load == b.member_load && a.group == b.group;
  };
  RepeatedCollectives seen;  // the first of each such collective (slot: the task)
  auto collective = [&](std::size_t task) -> const CollectiveTask& { return graph.collective(static_cast<TaskId>(task)); };
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::collective)
      continue;
    const CollectiveTask& c = graph.collective(id);
    if (c.group.empty())
      continue;
    if (const std::optional<std::size_t> earlier = seen.find(c, collective, same)) {
      shape_[id] = shape_[*earlier];
      offset_[id] = offset_[*earlier];
      continue;
    }
    seen.add(id);
    const int offset = *std::min_element(c.group.begin(), c.group.end()) / gpus_per_node * gpus_per_node;
    std::vector<int> relative;
    std::vector<int> acts;
    for (int d : c.group) {
      relative.push_back(d - offset);
      acts.push_back(fold.element(d));
      acts.push_back(fold.representative(d) - offset);
    }
    Key key{static_cast<int>(c.kind), static_cast<int>(c.algorithm), static_cast<int>(c.fidelity),
            static_cast<int>(c.protocol), c.channels, c.bytes, c.load_at_source, c.member_load, std::move(relative)};
    auto it = known.find(key);
    if (it != known.end() && action[static_cast<std::size_t>(it->second)] == acts) {
      shape_[id] = it->second;
      offset_[id] = offset;
      continue;
    }
    std::string why;
    FoldedMessages folded;
    if (c.fidelity == CollectiveFidelity::analytic) {
      folded.stabilizer = collective_stabilizer(c, fold, why);
      if (folded.stabilizer == 0)
        throw FoldError(why, stabilizing_generators(c, fold));
    } else {
      auto made = fold_collective(c, gpus_per_node, fold, why);
      if (!made) {
        made = isolate_collective(c, gpus_per_node, fold, why);
        if (!made)
          throw FoldError(why, stabilizing_generators(c, fold));
        any_isolated_ = true;
      }
      folded = std::move(*made);
      for (Message& m : folded.messages) {
        m.src = shift_endpoint(m.src, -offset, gpus_per_node);
        m.dst = shift_endpoint(m.dst, -offset, gpus_per_node);
      }
    }
    const int shape = static_cast<int>(shapes_.size());
    shapes_.push_back(std::move(folded));
    action.push_back(std::move(acts));
    if (it == known.end())
      known.emplace(std::move(key), shape);
    shape_[id] = shape;
    offset_[id] = offset;
  }
}

}  // namespace ddlsim::sim
