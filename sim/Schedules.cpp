#include "sim/Schedules.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

TaskGraph build_gpipe(const PipelinePlan& plan)
{
  const int k = plan.pp();
  const int m_count = plan.micro_batches;
  TaskGraph g(plan.devices());
  // ids[s][r][m] of each micro-batch's forward and backward.
  auto table = [&] {
    return std::vector<std::vector<std::vector<TaskId>>>(
        static_cast<std::size_t>(k), std::vector<std::vector<TaskId>>(static_cast<std::size_t>(plan.dp),
                                                                      std::vector<TaskId>(static_cast<std::size_t>(m_count))));
  };
  auto fwd = table();
  auto bwd = table();
  auto at = [](auto& t, int s, int r, int m) -> TaskId& {
    return t[static_cast<std::size_t>(s)][static_cast<std::size_t>(r)][static_cast<std::size_t>(m)];
  };

  // Each device's stream in GPipe order: F0..F(M-1), then B(M-1)..B0.
  for (int s = 0; s < k; ++s) {
    const auto& layers = plan.stages[static_cast<std::size_t>(s)].layers;
    for (int r = 0; r < plan.dp; ++r) {
      ComputeTask c{.device = plan.device(s, r),
                    .phase = Phase::forward,
                    .stage = s,
                    .micro_batch = 0,
                    .samples = plan.micro_batch_size,
                    .layer_begin = static_cast<std::uint32_t>(layers.begin),
                    .layer_end = static_cast<std::uint32_t>(layers.end)};
      for (int m = 0; m < m_count; ++m) {
        c.micro_batch = m;
        at(fwd, s, r, m) = g.add_compute(c);
      }
      c.phase = Phase::backward;
      for (int m = m_count - 1; m >= 0; --m) {
        c.micro_batch = m;
        at(bwd, s, r, m) = g.add_compute(c);
      }
    }
  }

  // Activations flow down the pipeline, their gradients flow back up.
  for (int s = 0; s + 1 < k; ++s) {
    const double bytes = plan.stages[static_cast<std::size_t>(s)].activation_bytes * plan.micro_batch_size;
    for (int r = 0; r < plan.dp; ++r)
      for (int m = 0; m < m_count; ++m) {
        TaskId act = g.add_transfer({.src = plan.device(s, r), .dst = plan.device(s + 1, r), .bytes = bytes,
                                     .phase = Phase::forward, .stage = s, .micro_batch = m});
        g.add_dependency(at(fwd, s, r, m), act);
        g.add_dependency(act, at(fwd, s + 1, r, m));
        TaskId grad = g.add_transfer({.src = plan.device(s + 1, r), .dst = plan.device(s, r), .bytes = bytes,
                                      .phase = Phase::backward, .stage = s + 1, .micro_batch = m});
        g.add_dependency(at(bwd, s + 1, r, m), grad);
        g.add_dependency(grad, at(bwd, s, r, m));
      }
  }

  // Flush: per stage, all-reduce the gradients across replicas, then step the optimizer.
  for (int s = 0; s < k; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    std::vector<TaskId> ready(static_cast<std::size_t>(plan.dp));
    for (int r = 0; r < plan.dp; ++r)
      ready[static_cast<std::size_t>(r)] = at(bwd, s, r, 0);  // the last backward of the stream
    if (plan.dp > 1) {
      CollectiveTask ar{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm, .group = {},
                        .bytes = stage.gradient_bytes, .stage = s};
      for (int r = 0; r < plan.dp; ++r)
        ar.group.push_back(plan.device(s, r));
      TaskId id = g.add_collective(std::move(ar));
      for (TaskId before : ready)
        g.add_dependency(before, id);
      std::fill(ready.begin(), ready.end(), id);
    }
    if (plan.optimizer_step)
      for (int r = 0; r < plan.dp; ++r) {
        TaskId opt = g.add_compute({.device = plan.device(s, r), .phase = Phase::optimizer, .stage = s,
                                    .micro_batch = -1, .samples = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end = static_cast<std::uint32_t>(stage.layers.end)});
        if (plan.dp > 1)
          g.add_dependency(ready[static_cast<std::size_t>(r)], opt);  // the stream order covers dp == 1
      }
  }
  return g;
}

}  // namespace

TaskGraph build_schedule(const PipelinePlan& plan)
{
  if (plan.stages.empty() || plan.dp < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1)
    throw std::invalid_argument("a pipeline plan needs >= 1 stage, replica, micro-batch and sample");
  switch (plan.schedule) {
  case ScheduleKind::gpipe: return build_gpipe(plan);
  }
  throw std::invalid_argument("unknown schedule");
}

}  // namespace ddlsim::sim
