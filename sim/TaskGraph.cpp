#include "sim/TaskGraph.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ddlsim::sim {

TaskGraph::TaskGraph(int devices) : devices_(devices), streams_(static_cast<std::size_t>(devices))
{
  if (devices < 1)
    throw std::invalid_argument("a task graph needs at least one device");
}

TaskId TaskGraph::add_node(TaskKind kind, std::size_t index)
{
  nodes_.push_back({kind, static_cast<std::uint32_t>(index), 0});
  successors_.emplace_back();
  return static_cast<TaskId>(nodes_.size() - 1);
}

TaskId TaskGraph::add_compute(const ComputeTask& task)
{
  if (task.device < 0 || task.device >= devices_)
    throw std::invalid_argument("compute task on device " + std::to_string(task.device) + " of " +
                                std::to_string(devices_));
  computes_.push_back(task);
  TaskId id = add_node(TaskKind::compute, computes_.size() - 1);
  if (!task.on_stream)
    return id;
  auto& stream = streams_[static_cast<std::size_t>(task.device)];
  if (!stream.empty())
    add_dependency(stream.back(), id);
  stream.push_back(id);
  return id;
}

TaskId TaskGraph::add_transfer(const TransferTask& task)
{
  if (task.src < 0 || task.src >= devices_ || task.dst < 0 || task.dst >= devices_ || task.src == task.dst)
    throw std::invalid_argument("transfer between devices " + std::to_string(task.src) + " and " +
                                std::to_string(task.dst));
  if (!(task.bytes >= 0))
    throw std::invalid_argument("transfer of a negative size");
  transfers_.push_back(task);
  return add_node(TaskKind::transfer, transfers_.size() - 1);
}

TaskId TaskGraph::add_collective(CollectiveTask task)
{
  if (task.group.empty())
    throw std::invalid_argument("collective with an empty group");
  for (int d : task.group)
    if (d < 0 || d >= devices_)
      throw std::invalid_argument("collective member " + std::to_string(d) + " is not a device");
  if (!task.member_load.empty() && (task.member_load.size() != task.group.size() ||
                                    std::any_of(task.member_load.begin(), task.member_load.end(),
                                                [](double w) { return !(w >= 0) || !std::isfinite(w); })))
    throw std::invalid_argument("a collective's member loads must be one finite value >= 0 per member");
  collectives_.push_back(std::move(task));
  return add_node(TaskKind::collective, collectives_.size() - 1);
}

void TaskGraph::reserve(std::size_t tasks, std::size_t computes, std::size_t transfers, std::size_t collectives)
{
  nodes_.reserve(tasks);
  successors_.reserve(tasks);
  computes_.reserve(computes);
  transfers_.reserve(transfers);
  collectives_.reserve(collectives);
}

void TaskGraph::add_dependency(TaskId before, TaskId after)
{
  if (before >= nodes_.size() || after >= nodes_.size() || before == after)
    throw std::invalid_argument("bad dependency " + std::to_string(before) + " -> " + std::to_string(after));
  successors_[before].push_back(after);
  ++nodes_[after].dependencies;
}

std::string TaskGraph::label(TaskId id) const
{
  switch (kind(id)) {
  case TaskKind::compute: {
    const auto& c = compute(id);
    if (c.phase == Phase::optimizer && c.share < 1)
      return "update shard" + std::to_string(c.stage) + " it" + std::to_string(c.micro_batch);
    if (c.phase == Phase::optimizer)
      return "optimizer s" + std::to_string(c.stage);
    return std::string(c.phase == Phase::forward ? "F" : "B") + " s" + std::to_string(c.stage) + " mb" +
           std::to_string(c.micro_batch);
  }
  case TaskKind::transfer: {
    const auto& t = transfer(id);
    if (t.kind == TransferKind::push)
      return "push w" + std::to_string(t.stage) + "->ps" + std::to_string(t.server) + " it" + std::to_string(t.micro_batch);
    if (t.kind == TransferKind::pull)
      return "pull ps" + std::to_string(t.server) + "->w" + std::to_string(t.stage) + " it" + std::to_string(t.micro_batch);
    if (t.kind == TransferKind::context)
      return std::string(t.phase == Phase::forward ? "cp kv" : "cp dkv") + " s" + std::to_string(t.stage) + " mb" +
             std::to_string(t.micro_batch) + " step" + std::to_string(t.server);
    int to = t.phase == Phase::forward ? t.stage + 1 : t.stage - 1;
    return std::string(t.phase == Phase::forward ? "act" : "grad") + " s" + std::to_string(t.stage) + "->s" +
           std::to_string(to) + " mb" + std::to_string(t.micro_batch);
  }
  case TaskKind::collective: {
    const auto& c = collective(id);
    const std::string where = std::string(c.phase == Phase::forward ? " F" : " B") + " s" + std::to_string(c.stage) +
                              " mb" + std::to_string(c.micro_batch);
    switch (c.role) {
    case CollectiveRole::sync_batch_norm: return "syncbn" + where;
    case CollectiveRole::tensor_parallel:
      return "tp " + std::string(collective_kind_table.name(c.kind)) + where;
    case CollectiveRole::barrier: return "barrier ps" + std::to_string(c.stage);
    case CollectiveRole::parameters: return "zero param all_gather" + where;
    case CollectiveRole::expert_dispatch: return "moe dispatch" + where;
    case CollectiveRole::expert_combine: return "moe combine" + where;
    case CollectiveRole::context:
      return std::string(c.kind == CollectiveKind::all_gather ? "cp kv " : "cp dkv ") +
             std::string(collective_kind_table.name(c.kind)) + where;
    case CollectiveRole::gradients: break;
    }
    if (c.kind == CollectiveKind::reduce_scatter)
      return "zero grad reduce_scatter s" + std::to_string(c.stage) +
             (c.micro_batch >= 0 ? " mb" + std::to_string(c.micro_batch) : std::string());
    return "grad allreduce s" + std::to_string(c.stage);
  }
  }
  return "?";
}

}  // namespace ddlsim::sim
