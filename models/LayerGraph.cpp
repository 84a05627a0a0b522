#include "models/LayerGraph.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string>

namespace ddlsim::models {

LayerGraph::LayerGraph(std::size_t layers) : graph_(layers) {}

std::size_t LayerGraph::size() const { return boost::num_vertices(graph_); }

void LayerGraph::add_edge(std::size_t producer, std::size_t consumer)
{
  if (producer >= size() || consumer >= size())
    throw std::out_of_range("layer index out of range in LayerGraph::add_edge");
  boost::add_edge(producer, consumer, graph_);
}

std::vector<std::size_t> LayerGraph::consumers(std::size_t layer) const
{
  std::vector<std::size_t> out;
  for (auto [it, end] = boost::out_edges(layer, graph_); it != end; ++it)
    out.push_back(boost::target(*it, graph_));
  return out;
}

std::vector<std::size_t> LayerGraph::producers(std::size_t layer) const
{
  std::vector<std::size_t> out;
  for (auto [it, end] = boost::in_edges(layer, graph_); it != end; ++it)
    out.push_back(boost::source(*it, graph_));
  return out;
}

std::vector<std::size_t> LayerGraph::kahn_order() const
{
  // Kahn's algorithm with a min-heap of ready layers (boost::topological_sort orders by DFS finish
  // time, which would reshuffle a list that is already in order). Layers on or after a cycle are
  // never ready, so the order is partial when there is one.
  const std::size_t n = size();
  std::vector<std::size_t> pending(n);
  for (std::size_t v = 0; v < n; ++v)
    pending[v] = boost::in_degree(v, graph_);
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v)
    if (pending[v] == 0)
      ready.push(v);
  std::vector<std::size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::size_t v = ready.top();
    ready.pop();
    order.push_back(v);
    for (auto [it, end] = boost::out_edges(v, graph_); it != end; ++it)
      if (--pending[boost::target(*it, graph_)] == 0)
        ready.push(boost::target(*it, graph_));
  }
  return order;
}

std::vector<std::size_t> LayerGraph::topological_order() const
{
  std::vector<std::size_t> order = kahn_order();
  if (order.size() != size())
    order.clear();
  return order;
}

std::vector<std::size_t> LayerGraph::find_cycle() const
{
  // Every layer Kahn's algorithm cannot place has an unplaced producer. Walking backwards along such
  // in-edges must eventually revisit a layer: that loop is a cycle.
  const std::size_t n = size();
  std::vector<bool> placed(n, false);
  for (std::size_t v : kahn_order())
    placed[v] = true;
  auto start = std::find(placed.begin(), placed.end(), false);
  if (start == placed.end())
    return {};
  std::vector<std::size_t> seen_at(n, n);  // position in `walk`, n = not yet seen
  std::vector<std::size_t> walk;
  std::size_t v = static_cast<std::size_t>(start - placed.begin());
  while (seen_at[v] == n) {
    seen_at[v] = walk.size();
    walk.push_back(v);
    for (auto [it, end] = boost::in_edges(v, graph_); it != end; ++it)
      if (!placed[boost::source(*it, graph_)]) {
        v = boost::source(*it, graph_);
        break;
      }
  }
  // walk[seen_at[v]..] is the loop, followed backwards; reverse it into edge order.
  std::vector<std::size_t> cycle(walk.begin() + static_cast<std::ptrdiff_t>(seen_at[v]), walk.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // start at the smallest
  return cycle;
}

}  // namespace ddlsim::models
