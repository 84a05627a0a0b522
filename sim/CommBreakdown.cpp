#include "sim/CommBreakdown.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace ddlsim::sim {
namespace {

CommDimension dimension(CollectiveRole role)
{
  switch (role) {
  case CollectiveRole::tensor_parallel:
    return CommDimension::tp;
  case CollectiveRole::context:
    return CommDimension::cp;
  case CollectiveRole::expert_dispatch:
  case CollectiveRole::expert_combine:
    return CommDimension::ep;
  case CollectiveRole::gradients:
  case CollectiveRole::sync_batch_norm:
  case CollectiveRole::barrier:
  case CollectiveRole::parameters:
    break;
  }
  return CommDimension::dp;
}

CommDimension dimension(TransferKind kind)
{
  switch (kind) {
  case TransferKind::activation:
    return CommDimension::pp;
  case TransferKind::context:
    return CommDimension::cp;
  case TransferKind::push:
  case TransferKind::pull:
    break;
  }
  return CommDimension::dp;
}

}  // namespace

CommBreakdown comm_breakdown(const TaskGraph& graph, const Timings& timings, const Fold* fold)
{
  const auto n = static_cast<std::size_t>(graph.device_count());
  auto rep = [&](int d) { return static_cast<std::size_t>(fold != nullptr ? fold->representative(d) : d); };
  std::vector<std::vector<Interval>> compute(n);
  std::array<std::vector<std::vector<Interval>>, comm_dimensions> comm;
  for (auto& per_device : comm)
    per_device.resize(n);
  std::vector<std::size_t> members;  // a collective's representatives, each once
  for (TaskId id = 0; id < graph.size(); ++id) {
    const Interval iv{timings[id].start_s, timings[id].end_s};
    switch (graph.kind(id)) {
    case TaskKind::compute:
      compute[rep(graph.compute(id).device)].push_back(iv);
      break;
    case TaskKind::collective: {
      const CollectiveTask& c = graph.collective(id);
      members.clear();
      for (int d : c.group)
        members.push_back(rep(d));
      std::sort(members.begin(), members.end());
      members.erase(std::unique(members.begin(), members.end()), members.end());
      for (std::size_t r : members)
        comm[static_cast<std::size_t>(dimension(c.role))][r].push_back(iv);
      break;
    }
    case TaskKind::transfer: {
      const TransferTask& t = graph.transfer(id);
      auto& per_device = comm[static_cast<std::size_t>(dimension(t.kind))];
      per_device[rep(t.src)].push_back(iv);
      if (rep(t.dst) != rep(t.src))
        per_device[rep(t.dst)].push_back(iv);
      break;
    }
    }
  }
  CommBreakdown out;
  const auto ep = static_cast<std::size_t>(CommDimension::ep);
  // Each GPU's compute merged once, against every dimension's communication (no copy per dimension).
  for (std::size_t d = 0; d < n; ++d)
    if (rep(static_cast<int>(d)) == d)
      merge_intervals(compute[d]);
  std::vector<double> exposed(n), in_flight(n);
  for (std::size_t k = 0; k < comm_dimensions; ++k) {
    for (std::size_t d = 0; d < n; ++d)
      if (rep(static_cast<int>(d)) == d) {
        if (k == ep)
          in_flight[d] = union_length(comm[k][d]);
        exposed[d] = comm[k][d].empty() ? 0.0 : uncovered_by_merged(std::move(comm[k][d]), compute[d]);
      }
    for (std::size_t d = 0; d < n; ++d) {
      out.exposed_s[k] += exposed[rep(static_cast<int>(d))];
      if (k == ep)
        out.expert_total_s += in_flight[rep(static_cast<int>(d))];
    }
    out.exposed_s[k] /= static_cast<double>(n);
  }
  out.expert_total_s /= static_cast<double>(n);
  return out;
}

}  // namespace ddlsim::sim
