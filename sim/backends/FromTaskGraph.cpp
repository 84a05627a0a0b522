#include "sim/backends/FromTaskGraph.hpp"

#include "common/Error.hpp"

#include <cmath>
#include <map>
#include <tuple>

namespace ddlsim::backends {

Workload make_workload(const sim::TaskGraph& graph, const models::Model& model, const sim::ComputeOptions& options,
                       std::string label)
{
  if (options.tp > 1)
    throw ExecutionError("tensor parallelism is not executed by the backends yet (tp = " + std::to_string(options.tp) + ")");
  if (options.ep > 1)
    throw ExecutionError("expert parallelism (its all-to-alls) is not executed by the backends yet (ep = " +
                         std::to_string(options.ep) + ")");
  const std::size_t n = graph.size();
  // Kahn's algorithm, smallest id first: a deterministic topological order.
  std::vector<int> waiting(n, 0);
  for (sim::TaskId id = 0; id < n; ++id)
    for (sim::TaskId s : graph.successors(id))
      ++waiting[s];
  std::vector<std::vector<sim::TaskId>> before(n);
  for (sim::TaskId id = 0; id < n; ++id)
    for (sim::TaskId s : graph.successors(id))
      before[s].push_back(id);
  std::map<sim::TaskId, int> ready;  // ordered: smallest id first
  for (sim::TaskId id = 0; id < n; ++id)
    if (waiting[id] == 0)
      ready.emplace(id, 0);
  std::vector<int> index(n, -1);
  Workload w;
  w.label = std::move(label);
  w.devices = graph.device_count();
  w.dtype = std::string(dtype_table.name(options.dtype));
  std::map<std::tuple<sim::Phase, std::uint32_t, std::uint32_t, int>, std::vector<calibration::BenchPoint>> memo;
  while (!ready.empty()) {
    const sim::TaskId id = ready.begin()->first;
    ready.erase(ready.begin());
    index[id] = static_cast<int>(w.tasks.size());
    WorkTask t;
    for (sim::TaskId b : before[id])
      t.after.push_back(index[b]);
    switch (graph.kind(id)) {
    case sim::TaskKind::compute: {
      const sim::ComputeTask& c = graph.compute(id);
      if (!c.on_stream || c.share != 1.0)
        throw ExecutionError("parameter-server updates are not executed by the backends yet");
      if (c.part != sim::ComputePart::whole)
        throw ExecutionError("a layer's backward split for tp_backward_overlap is not executed by the backends yet");
      t.kind = WorkTask::Kind::compute;
      t.device = c.device;
      t.phase = c.phase == sim::Phase::optimizer ? "optimizer" : c.phase == sim::Phase::forward ? "forward" : "backward";
      auto key = std::make_tuple(c.phase, c.layer_begin, c.layer_end, c.samples);
      auto it = memo.find(key);
      if (it == memo.end()) {
        std::vector<calibration::BenchPoint> points;
        for (const auto& launch : sim::range_launches(model, c.layer_begin, c.layer_end, c.phase, c.samples, options))
          points.push_back(sim::launch_point(launch));
        it = memo.emplace(key, std::move(points)).first;
      }
      t.launches = it->second;
      break;
    }
    case sim::TaskKind::transfer: {
      const sim::TransferTask& x = graph.transfer(id);
      t.kind = WorkTask::Kind::transfer;
      t.src = x.src;
      t.dst = x.dst;
      t.bytes = x.bytes;
      break;
    }
    case sim::TaskKind::collective: {
      const sim::CollectiveTask& x = graph.collective(id);
      t.kind = WorkTask::Kind::collective;
      t.collective = std::string(sim::collective_kind_table.name(x.kind));
      t.group = x.group;
      t.bytes = x.bytes;
      break;
    }
    }
    w.tasks.push_back(std::move(t));
    for (sim::TaskId s : graph.successors(id))
      if (--waiting[s] == 0)
        ready.emplace(s, 0);
  }
  if (w.tasks.size() != n)
    throw ExecutionError("the task graph has a dependency cycle");
  return w;
}

}  // namespace ddlsim::backends
