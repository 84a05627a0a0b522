// The tree family's messages: a binary tree over a group, and NCCL's double tree (a chain in every
// node, two trees over the nodes).
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <utility>

namespace ddlsim::sim::collectives {

// The binary tree in member order: parent of i is (i-1)/2. Siblings send each chunk together, so
// that a parent's link is always shared by all its children's chunks (tree_parts() relies on it).
// Messages are built chunk by chunk, so that every wait is built before its waiter.
void decompose_tree(std::vector<Message>& out, const std::vector<int>& g, double bytes)
{
  const std::size_t n = g.size();
  const int chunks    = tree_chunks(bytes);
  const double chunk  = bytes / chunks;
  const auto K        = static_cast<std::size_t>(chunks);
  auto pair           = [&](std::size_t i) { // i and its sibling, if it has one
    const std::size_t s = i % 2 == 1 ? i + 1 : i - 1;
    return s < n ? std::vector<std::size_t>{i, s} : std::vector<std::size_t>{i};
  };
  // up[i][c]: member i sending chunk c to its parent (i >= 1). Children have larger indices.
  std::vector<std::vector<Index>> up(n, std::vector<Index>(K, 0));
  for (std::size_t c = 0; c < K; ++c)
    for (std::size_t i = n - 1; i >= 1; --i) {
      std::vector<Index> after;
      for (std::size_t member : pair(i)) {
        if (c > 0)
          after.push_back(up[member][c - 1]);
        for (std::size_t child : {2 * member + 1, 2 * member + 2})
          if (child < n)
            after.push_back(up[child][c]);
      }
      up[i][c] = add_message(out, g[i], g[(i - 1) / 2], chunk, std::move(after));
    }
  std::vector<Index> at_root;
  for (std::size_t child : {std::size_t{1}, std::size_t{2}})
    if (child < n)
      at_root.push_back(up[child][K - 1]);
  const Index reduced = add_join(out, at_root);
  // down[i][c]: member i receiving chunk c from its parent; siblings receive each chunk together.
  std::vector<std::vector<Index>> down(n, std::vector<Index>(K, 0));
  for (std::size_t c = 0; c < K; ++c)
    for (std::size_t i = 1; i < n; ++i) {
      const std::size_t parent = (i - 1) / 2;
      std::vector<Index> after{parent == 0 ? reduced : down[parent][c]};
      if (c > 0)
        for (std::size_t member : pair(i))
          after.push_back(down[member][c - 1]);
      down[i][c] = add_message(out, g[parent], g[i], chunk, std::move(after));
    }
}

DoubleTreeShape double_tree_shape(const CollectiveTask& c, int gpus_per_node)
{
  DoubleTreeShape s;
  s.nodes               = by_node(c.group, gpus_per_node);
  s.trees               = s.nodes.size() > 1 ? 2 : 1;
  s.rails               = s.nodes.size() > 1 && c.channels > 1;
  const double per_tree = c.bytes / s.trees;
  s.chunks              = tree_chunks(per_tree);
  s.chunk               = per_tree / s.chunks;
  return s;
}

// One tree of NCCL's double tree: in every node a chain of its members starting at member `head`,
// whose head joins tree `tree` over the nodes. Reduce up in K chunks, then broadcast down.
void add_double_tree_channel(std::vector<Message>& out, const DoubleTreeShape& s, int tree, int head)
{
  const int N         = static_cast<int>(s.nodes.size());
  const std::size_t m = s.nodes.front().size();
  const auto K        = static_cast<std::size_t>(s.chunks);
  std::vector<std::vector<int>> chain; // per node, the chain from its head
  for (const auto& members : s.nodes)
    chain.push_back(rotated(members, static_cast<std::size_t>(head) % m));
  std::vector<TreeLinks> links;
  for (int v = 0; v < N; ++v)
    links.push_back(dtree(N, v, tree));
  // Up: chain position p sends to p-1; the head sends to its parent node's head. Nodes are visited
  // leaves first (children before parents), so every wait already exists.
  std::vector<int> order; // nodes, deepest first
  {
    std::vector<std::pair<int, int>> depth;
    for (int v = 0; v < N; ++v) {
      int d = 0;
      for (int x = v; links[static_cast<std::size_t>(x)].parent >= 0; x = links[static_cast<std::size_t>(x)].parent)
        ++d;
      depth.emplace_back(-d, v);
    }
    std::sort(depth.begin(), depth.end());
    for (const auto& [d, v] : depth)
      order.push_back(v);
  }
  // up_chain[v][p][c]: chain position p (>= 1) of node v sending chunk c to p-1; up_head[v][c].
  std::vector<std::vector<std::vector<Index>>> up_chain(static_cast<std::size_t>(N),
                                                        std::vector<std::vector<Index>>(m, std::vector<Index>(K, 0)));
  std::vector<std::vector<Index>> up_head(static_cast<std::size_t>(N), std::vector<Index>(K, 0));
  std::vector<Index> at_root;
  for (int v : order) {
    const auto V = static_cast<std::size_t>(v);
    for (std::size_t p = m - 1; p >= 1; --p)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after;
        if (p + 1 < m)
          after.push_back(up_chain[V][p + 1][c]);
        if (c > 0)
          after.push_back(up_chain[V][p][c - 1]);
        up_chain[V][p][c] = add_message(out, chain[V][p], chain[V][p - 1], s.chunk, std::move(after));
      }
    for (std::size_t c = 0; c < K; ++c) {
      std::vector<Index> after;
      if (m > 1)
        after.push_back(up_chain[V][1][c]);
      for (int child : links[V].children)
        after.push_back(up_head[static_cast<std::size_t>(child)][c]);
      if (links[V].parent < 0) {
        if (c + 1 == K)
          at_root = after;
        continue;
      }
      if (c > 0)
        after.push_back(up_head[V][c - 1]);
      up_head[V][c] = add_message(out, chain[V][0], chain[static_cast<std::size_t>(links[V].parent)][0], s.chunk,
                                  std::move(after), s.rails);
    }
  }
  // Inside one node (N = 1) the chain's head is the root: it waits for the chain's last chunk.
  const Index reduced = add_join(out, at_root);
  // Down, root first (reverse order): the head passes chunk c to its children's heads and down its chain.
  std::vector<std::vector<Index>> has(static_cast<std::size_t>(N), std::vector<Index>(K, reduced));
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto V = static_cast<std::size_t>(*it);
    for (int child : links[V].children)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after{has[V][c]};
        if (c > 0)
          after.push_back(has[static_cast<std::size_t>(child)][c - 1]);
        has[static_cast<std::size_t>(child)][c] = add_message(
            out, chain[V][0], chain[static_cast<std::size_t>(child)][0], s.chunk, std::move(after), s.rails);
      }
    std::vector<Index> previous = has[V];
    for (std::size_t p = 0; p + 1 < m; ++p)
      for (std::size_t c = 0; c < K; ++c) {
        std::vector<Index> after{previous[c]};
        if (c > 0)
          after.push_back(static_cast<Index>(out.size() - 1));
        previous[c] = add_message(out, chain[V][p], chain[V][p + 1], s.chunk, std::move(after));
      }
  }
}

} // namespace ddlsim::sim::collectives
