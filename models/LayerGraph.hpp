// The dependency DAG between layers, on Boost.Graph: which layer's output feeds which layer.
//
// A model file may list layers in any order (a cell's branches, a skip connection named before its
// source); the graph puts them into a topological order for shape inference and pipeline
// partitioning, and names a cycle when there is one.
//
//   LayerGraph g(3);
//   g.add_edge(2, 0);                 // layer 2 feeds layer 0
//   g.add_edge(0, 1);
//   g.topological_order();            // {2, 0, 1}
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <cstddef>
#include <vector>

namespace ddlsim::models {

class LayerGraph {
public:
  explicit LayerGraph(std::size_t layers);

  /// `producer`'s output is an input of `consumer`. Throws std::out_of_range for an unknown index.
  void add_edge(std::size_t producer, std::size_t consumer);
  std::size_t size() const;
  std::vector<std::size_t> consumers(std::size_t layer) const;
  std::vector<std::size_t> producers(std::size_t layer) const;

  /// All layers, every producer before its consumers. Among layers ready at the same time the one
  /// with the smallest index comes first, so the order is deterministic and a list that is already
  /// in order stays as it is. Empty when the graph has a cycle (see find_cycle).
  std::vector<std::size_t> topological_order() const;
  /// The layers of one cycle in edge order (each feeds the next, the last feeds the first),
  /// starting at its smallest index; empty
  /// when the graph is acyclic.
  std::vector<std::size_t> find_cycle() const;

private:
  std::vector<std::size_t> kahn_order() const;
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  Graph graph_;
};

}  // namespace ddlsim::models
