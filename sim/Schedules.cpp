#include "sim/Schedules.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

struct Pass {
  Phase phase;
  int micro_batch;
};

// The order in which stage `s` runs its micro-batches' passes.
std::vector<Pass> stream_order(ScheduleKind schedule, int k, int s, int m_count)
{
  std::vector<Pass> order;
  switch (schedule) {
  case ScheduleKind::gpipe:
    for (int m = 0; m < m_count; ++m)
      order.push_back({Phase::forward, m});
    for (int m = m_count - 1; m >= 0; --m)
      order.push_back({Phase::backward, m});
    break;
  case ScheduleKind::one_f_one_b: {
    const int warmup = std::min(k - s - 1, m_count);
    for (int m = 0; m < warmup; ++m)
      order.push_back({Phase::forward, m});
    for (int i = 0; i + warmup < m_count; ++i) {
      order.push_back({Phase::forward, warmup + i});
      order.push_back({Phase::backward, i});
    }
    for (int m = m_count - warmup; m < m_count; ++m)
      order.push_back({Phase::backward, m});
    break;
  }
  }
  return order;
}

// One pass of a stage as compute segments and synchronized-batch-norm all-reduces.
struct Step {
  bool collective = false;
  std::size_t begin = 0, end = 0;  // compute: layers [begin, end)
  double bytes = 0;                // collective
};

std::vector<Step> pass_steps(const StagePlan& stage, Phase phase, bool sync)
{
  std::vector<Step> steps;
  const auto& points = stage.sync_points;
  if (!sync || points.empty())
    return {{false, stage.layers.begin, stage.layers.end, 0}};
  if (phase == Phase::forward) {
    std::size_t start = stage.layers.begin;
    for (const SyncPoint& p : points) {
      if (p.layer > start)
        steps.push_back({false, start, p.layer, 0});
      steps.push_back({true, 0, 0, p.bytes});
      start = p.layer;
    }
    if (start < stage.layers.end)
      steps.push_back({false, start, stage.layers.end, 0});
  } else {
    std::size_t end = stage.layers.end;
    for (auto it = points.rbegin(); it != points.rend(); ++it) {
      if (it->layer < end)
        steps.push_back({false, it->layer, end, 0});
      steps.push_back({true, 0, 0, it->bytes});
      end = it->layer;
    }
    if (end > stage.layers.begin)
      steps.push_back({false, stage.layers.begin, end, 0});
  }
  return steps;
}

TaskGraph build_pipeline(const PipelinePlan& plan)
{
  const int k = plan.pp();
  const int m_count = plan.micro_batches;
  const int dp = plan.dp;
  TaskGraph g(plan.devices());

  // Tasks of each pass, in order: ids[((s * dp + r) * M + m) * 2 + phase].
  std::vector<std::vector<TaskId>> ids(static_cast<std::size_t>(k * dp * m_count * 2));
  auto pass = [&](int s, int r, int m, Phase phase) -> std::vector<TaskId>& {
    return ids[static_cast<std::size_t>(((s * dp + r) * m_count + m) * 2 + (phase == Phase::backward ? 1 : 0))];
  };
  // The last task of each device in program order: compute on its stream, or a blocking all-reduce.
  std::vector<TaskId> last(static_cast<std::size_t>(plan.devices()), no_task);

  for (int s = 0; s < k; ++s) {
    const StagePlan& stage = plan.stages[static_cast<std::size_t>(s)];
    for (const SyncPoint& p : stage.sync_points)
      if (p.layer <= stage.layers.begin || p.layer > stage.layers.end)
        throw std::invalid_argument("sync point outside its stage");
    const std::vector<Step> forward = pass_steps(stage, Phase::forward, dp > 1);
    const std::vector<Step> backward = pass_steps(stage, Phase::backward, dp > 1);
    for (const Pass& p : stream_order(plan.schedule, k, s, m_count)) {
      for (const Step& step : p.phase == Phase::forward ? forward : backward) {
        if (step.collective) {
          CollectiveTask c{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm, .group = {},
                           .bytes = step.bytes, .stage = s, .micro_batch = p.micro_batch, .phase = p.phase};
          for (int r = 0; r < dp; ++r)
            c.group.push_back(plan.device(s, r));
          const TaskId id = g.add_collective(std::move(c));
          for (int r = 0; r < dp; ++r) {
            TaskId& before = last[static_cast<std::size_t>(plan.device(s, r))];
            if (before != no_task)
              g.add_dependency(before, id);
            before = id;
            pass(s, r, p.micro_batch, p.phase).push_back(id);
          }
          continue;
        }
        for (int r = 0; r < dp; ++r) {
          const TaskId id = g.add_compute({.device = plan.device(s, r), .phase = p.phase, .stage = s,
                                           .micro_batch = p.micro_batch, .samples = plan.micro_batch_size,
                                           .layer_begin = static_cast<std::uint32_t>(step.begin),
                                           .layer_end = static_cast<std::uint32_t>(step.end)});
          TaskId& before = last[static_cast<std::size_t>(plan.device(s, r))];
          if (before != no_task && g.kind(before) == TaskKind::collective)
            g.add_dependency(before, id);  // the stream order covers a compute predecessor
          before = id;
          pass(s, r, p.micro_batch, p.phase).push_back(id);
        }
      }
    }
  }

  // Activations flow down the pipeline, their gradients flow back up.
  for (int s = 0; s + 1 < k; ++s) {
    const double bytes = plan.stages[static_cast<std::size_t>(s)].activation_bytes * plan.micro_batch_size;
    for (int r = 0; r < dp; ++r)
      for (int m = 0; m < m_count; ++m) {
        TaskId act = g.add_transfer({.src = plan.device(s, r), .dst = plan.device(s + 1, r), .bytes = bytes,
                                     .phase = Phase::forward, .stage = s, .micro_batch = m});
        g.add_dependency(pass(s, r, m, Phase::forward).back(), act);
        g.add_dependency(act, pass(s + 1, r, m, Phase::forward).front());
        TaskId grad = g.add_transfer({.src = plan.device(s + 1, r), .dst = plan.device(s, r), .bytes = bytes,
                                      .phase = Phase::backward, .stage = s + 1, .micro_batch = m});
        g.add_dependency(pass(s + 1, r, m, Phase::backward).back(), grad);
        g.add_dependency(grad, pass(s, r, m, Phase::backward).front());
      }
  }

  // Flush: per stage, all-reduce the gradients across replicas, then step the optimizer.
  for (int s = 0; s < k; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    std::vector<TaskId> ready(static_cast<std::size_t>(dp));
    for (int r = 0; r < dp; ++r)
      ready[static_cast<std::size_t>(r)] = last[static_cast<std::size_t>(plan.device(s, r))];
    if (dp > 1) {
      CollectiveTask ar{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm, .group = {},
                        .bytes = stage.gradient_bytes, .stage = s};
      for (int r = 0; r < dp; ++r)
        ar.group.push_back(plan.device(s, r));
      TaskId id = g.add_collective(std::move(ar));
      for (TaskId before : ready)
        g.add_dependency(before, id);
      std::fill(ready.begin(), ready.end(), id);
    }
    if (plan.optimizer_step)
      for (int r = 0; r < dp; ++r) {
        TaskId opt = g.add_compute({.device = plan.device(s, r), .phase = Phase::optimizer, .stage = s,
                                    .micro_batch = -1, .samples = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end = static_cast<std::uint32_t>(stage.layers.end)});
        if (dp > 1)
          g.add_dependency(ready[static_cast<std::size_t>(r)], opt);  // the stream order covers dp == 1
      }
  }
  return g;
}

}  // namespace

int in_flight_micro_batches(ScheduleKind schedule, int stages, int stage, int micro_batches)
{
  switch (schedule) {
  case ScheduleKind::gpipe: return micro_batches;
  case ScheduleKind::one_f_one_b: return std::min(stages - stage, micro_batches);
  }
  return micro_batches;
}

TaskGraph build_schedule(const PipelinePlan& plan)
{
  if (plan.stages.empty() || plan.dp < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1)
    throw std::invalid_argument("a pipeline plan needs >= 1 stage, replica, micro-batch and sample");
  return build_pipeline(plan);
}

}  // namespace ddlsim::sim
