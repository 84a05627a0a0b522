// Collective groups: members by node, rotations, and NCCL's binary and double binary trees.
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <map>

namespace ddlsim::sim::collectives {

// ---------------------------------------------------------------------------------------------
// Group layout

// Members grouped by node (nodes in increasing order, members in group order); empty when the
// nodes hold different counts.
std::vector<std::vector<int>> by_node(const std::vector<int>& group, int gpus_per_node)
{
  std::vector<std::vector<int>> out;
  auto node = [gpus_per_node](int d) { return d / gpus_per_node; };
  if (std::is_sorted(group.begin(), group.end(), [&](int a, int b) { return node(a) < node(b); })) {
    // The usual case, nodes in increasing order: runs of one node, without a map.
    for (auto run = group.begin(); run != group.end();) {
      const auto next = std::find_if(run, group.end(), [&](int d) { return node(d) != node(*run); });
      out.emplace_back(run, next);
      run = next;
    }
  } else {
    std::map<int, std::vector<int>> nodes;
    for (int d : group)
      nodes[node(d)].push_back(d);
    for (auto& [index, members] : nodes)
      out.push_back(std::move(members));
  }
  for (const auto& members : out)
    if (members.size() != out.front().size())
      return {};
  return out;
}

bool one_node(const std::vector<int>& group, int gpus_per_node)
{
  return std::all_of(group.begin(), group.end(),
                     [&](int d) { return d / gpus_per_node == group.front() / gpus_per_node; });
}

std::vector<int> rotated(const std::vector<int>& members, std::size_t by)
{
  std::vector<int> out;
  for (std::size_t i = 0; i < members.size(); ++i)
    out.push_back(members[(i + by) % members.size()]);
  return out;
}

TreeLinks btree(int n, int r)
{
  TreeLinks t;
  if (r == 0) {
    int bit = 1;
    while (bit < n)
      bit <<= 1;
    if (n > 1)
      t.children.push_back(bit >> 1);
    return t;
  }
  const int bit = r & -r;
  t.parent      = (r ^ bit) | (bit << 1);
  if (t.parent >= n)
    t.parent = r ^ bit;
  if (const int low = bit >> 1; low > 0) {
    t.children.push_back(r - low);
    for (int l = low; l > 0; l >>= 1)
      if (r + l < n) {
        t.children.push_back(r + l);
        break;
      }
  }
  return t;
}

// The second tree of NCCL's double binary tree (ncclGetDtree): the first mirrored (n even) or
// shifted by one rank (n odd), so that every rank is interior in at most one of the two.
TreeLinks dtree(int n, int r, int tree)
{
  if (tree == 0)
    return btree(n, r);
  auto map    = [&](int x) { return n % 2 == 1 ? (x - 1 + n) % n : n - 1 - x; };
  auto back   = [&](int x) { return x < 0 ? -1 : (n % 2 == 1 ? (x + 1) % n : n - 1 - x); };
  TreeLinks t = btree(n, map(r));
  t.parent    = back(t.parent);
  for (int& child : t.children)
    child = back(child);
  return t;
}

int tree_depth(int n, int tree)
{
  static std::map<std::pair<int, int>, int> known; // a pure function of (n, tree): computed once each
  if (auto it = known.find({n, tree}); it != known.end())
    return it->second;
  int depth = 0;
  for (int r = 0; r < n; ++r) {
    int d = 0;
    for (int x = r; dtree(n, x, tree).parent >= 0; x = dtree(n, x, tree).parent)
      ++d;
    depth = std::max(depth, d);
  }
  known[{n, tree}] = depth;
  return depth;
}

} // namespace ddlsim::sim::collectives
