#include "sim/Schedules.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

// One pass of a stage as compute segments and collectives: blocking ones (synchronized batch norm
// across the replicas, tensor-parallel ones inside the group) and gradient buckets (not blocking).
struct Step {
  enum class Kind { compute, dp_sync, tp_sync, bucket } kind = Kind::compute;
  std::size_t begin = 0, end = 0;  // compute: layers [begin, end)
  CollectiveKind collective = CollectiveKind::all_reduce;
  double bytes = 0;                // collectives: total bytes (per-sample sizes already scaled)
};

std::vector<Step> pass_steps(const StagePlan& stage, Phase phase, const PipelinePlan& plan, bool last_backward)
{
  // An event at position p happens, in forward, once the layers before p are done; in backward,
  // once the layers at and after p are done.
  struct Event {
    std::size_t position;
    Step step;
  };
  std::vector<Event> events;
  const double b = plan.micro_batch_size;
  if (plan.dp > 1) {
    for (const SyncPoint& p : stage.sync_points)
      events.push_back({p.layer, {Step::Kind::dp_sync, 0, 0, CollectiveKind::all_reduce, p.bytes}});
    if (phase == Phase::backward && last_backward)
      for (const GradientBucket& g : stage.buckets)
        events.push_back({g.layer, {Step::Kind::bucket, 0, 0, CollectiveKind::all_reduce, g.bytes}});
  }
  if (plan.tp > 1)
    for (const TpCollective& c : stage.tp_collectives)
      if (c.phase == phase)
        events.push_back({phase == Phase::forward ? c.layer + 1 : c.layer,
                          {Step::Kind::tp_sync, 0, 0, c.kind, c.bytes_per_sample * b}});
  const bool forward = phase == Phase::forward;
  // Forward: increasing position; backward: decreasing, a bucket before a blocking event at one position.
  std::stable_sort(events.begin(), events.end(), [&](const Event& x, const Event& y) {
    if (x.position != y.position)
      return forward ? x.position < y.position : x.position > y.position;
    return x.step.kind == Step::Kind::bucket && y.step.kind != Step::Kind::bucket;
  });
  std::vector<Step> steps;
  if (forward) {
    std::size_t start = stage.layers.begin;
    for (const Event& e : events) {
      if (e.position > start)
        steps.push_back({Step::Kind::compute, start, e.position, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      start = std::max(start, e.position);
    }
    if (start < stage.layers.end)
      steps.push_back({Step::Kind::compute, start, stage.layers.end, CollectiveKind::all_reduce, 0});
  } else {
    std::size_t end = stage.layers.end;
    for (const Event& e : events) {
      if (e.position < end)
        steps.push_back({Step::Kind::compute, e.position, end, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      end = std::min(end, e.position);
    }
    if (end > stage.layers.begin)
      steps.push_back({Step::Kind::compute, stage.layers.begin, end, CollectiveKind::all_reduce, 0});
  }
  return steps;
}

TaskGraph build_pipeline(const PipelinePlan& plan)
{
  const int k = plan.pp();
  const int m_count = plan.micro_batches;
  const int dp = plan.dp;
  const int tp = plan.tp;
  const int members = dp * tp;  // GPUs per stage: member q = r * tp + t
  const int chunks = static_cast<int>(plan.stages.size());
  TaskGraph g(plan.devices());
  auto device = [&](int s, int q) { return plan.device(s, q / tp, q % tp); };

  // Tasks of each pass, in order: ids[((s * members + q) * M + m) * 2 + phase].
  std::vector<std::vector<TaskId>> ids(static_cast<std::size_t>(chunks * members * m_count * 2));
  auto pass = [&](int s, int q, int m, Phase phase) -> std::vector<TaskId>& {
    return ids[static_cast<std::size_t>(((s * members + q) * m_count + m) * 2 + (phase == Phase::backward ? 1 : 0))];
  };
  // The last task of each device in program order: compute on its stream, or a blocking collective.
  std::vector<TaskId> last(static_cast<std::size_t>(plan.devices()), no_task);
  // Gradient-bucket all-reduces of each chunk and tensor rank (not blocking; the optimizer waits).
  std::vector<std::vector<TaskId>> bucket_tasks(static_cast<std::size_t>(chunks * tp));

  for (const StagePlan& stage : plan.stages) {
    for (const SyncPoint& p : stage.sync_points)
      if (p.layer <= stage.layers.begin || p.layer > stage.layers.end)
        throw std::invalid_argument("sync point outside its stage");
    for (const GradientBucket& b : stage.buckets)
      if (b.layer < stage.layers.begin || b.layer >= stage.layers.end)
        throw std::invalid_argument("gradient bucket outside its stage");
    for (const TpCollective& c : stage.tp_collectives)
      if (c.layer < stage.layers.begin || c.layer >= stage.layers.end)
        throw std::invalid_argument("tensor-parallel collective outside its stage");
  }

  // A collective over `group` (member indices) of chunk s that waits for each member's program.
  auto add_group_collective = [&](int s, const PipelinePass& p, const Step& step, const std::vector<int>& group) {
    const bool tensor = step.kind == Step::Kind::tp_sync;
    CollectiveTask c{.kind = step.collective,
                     .algorithm = tensor ? plan.tp_algorithm : plan.dp_algorithm,
                     .fidelity = tensor ? plan.tp_fidelity : plan.dp_fidelity,
                     .group = {},
                     .bytes = step.bytes,
                     .stage = s,
                     .micro_batch = step.kind == Step::Kind::bucket ? -1 : p.micro_batch,
                     .phase = p.phase,
                     .role = tensor                                ? CollectiveRole::tensor_parallel
                             : step.kind == Step::Kind::dp_sync ? CollectiveRole::sync_batch_norm
                                                                 : CollectiveRole::gradients};
    for (int q : group)
      c.group.push_back(device(s, q));
    const TaskId id = g.add_collective(std::move(c));
    for (int q : group) {
      TaskId& before = last[static_cast<std::size_t>(device(s, q))];
      if (before != no_task)
        g.add_dependency(before, id);
      if (step.kind != Step::Kind::bucket) {
        before = id;
        pass(s, q, p.micro_batch, p.phase).push_back(id);
      }
    }
    return id;
  };
  auto dp_group = [&](int t) {
    std::vector<int> group;
    for (int r = 0; r < dp; ++r)
      group.push_back(r * tp + t);
    return group;
  };
  auto tp_group = [&](int r) {
    std::vector<int> group;
    for (int t = 0; t < tp; ++t)
      group.push_back(r * tp + t);
    return group;
  };

  for (int rank = 0; rank < k; ++rank) {
    const std::vector<PipelinePass> order = stream_order(plan.schedule, k, plan.virtual_stages, rank, m_count);
    std::vector<std::size_t> last_backward(static_cast<std::size_t>(chunks), 0);  // per chunk, index in order
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i].phase == Phase::backward)
        last_backward[static_cast<std::size_t>(order[i].chunk)] = i;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const PipelinePass& p = order[i];
      const int s = p.chunk;
      const StagePlan& stage = plan.stages[static_cast<std::size_t>(s)];
      for (const Step& step : pass_steps(stage, p.phase, plan, i == last_backward[static_cast<std::size_t>(s)])) {
        switch (step.kind) {
        case Step::Kind::dp_sync:
          for (int t = 0; t < tp; ++t)
            add_group_collective(s, p, step, dp_group(t));
          break;
        case Step::Kind::tp_sync:
          for (int r = 0; r < dp; ++r)
            add_group_collective(s, p, step, tp_group(r));
          break;
        case Step::Kind::bucket:
          for (int t = 0; t < tp; ++t) {
            // One communication stream: NCCL runs the buckets' all-reduces one after another.
            auto& buckets = bucket_tasks[static_cast<std::size_t>(s * tp + t)];
            const TaskId id = add_group_collective(s, p, step, dp_group(t));
            if (!buckets.empty())
              g.add_dependency(buckets.back(), id);
            buckets.push_back(id);
          }
          break;
        case Step::Kind::compute:
          for (int q = 0; q < members; ++q) {
            const TaskId id = g.add_compute({.device = device(s, q), .phase = p.phase, .stage = s,
                                             .micro_batch = p.micro_batch, .samples = plan.micro_batch_size,
                                             .layer_begin = static_cast<std::uint32_t>(step.begin),
                                             .layer_end = static_cast<std::uint32_t>(step.end)});
            TaskId& before = last[static_cast<std::size_t>(device(s, q))];
            if (before != no_task && g.kind(before) == TaskKind::collective)
              g.add_dependency(before, id);  // the stream order covers a compute predecessor
            before = id;
            pass(s, q, p.micro_batch, p.phase).push_back(id);
          }
          break;
        }
      }
    }
  }

  // Activations flow down the pipeline, their gradients flow back up; each tensor rank sends its
  // 1/tp share to the same rank of the next stage.
  for (int s = 0; s + 1 < chunks; ++s) {
    const double bytes = plan.stages[static_cast<std::size_t>(s)].activation_bytes * plan.micro_batch_size / tp;
    for (int q = 0; q < members; ++q)
      for (int m = 0; m < m_count; ++m) {
        if (device(s, q) == device(s + 1, q)) {  // consecutive chunks on one device
          g.add_dependency(pass(s, q, m, Phase::forward).back(), pass(s + 1, q, m, Phase::forward).front());
          g.add_dependency(pass(s + 1, q, m, Phase::backward).back(), pass(s, q, m, Phase::backward).front());
          continue;
        }
        TaskId act = g.add_transfer({.src = device(s, q), .dst = device(s + 1, q), .bytes = bytes,
                                     .phase = Phase::forward, .stage = s, .micro_batch = m});
        g.add_dependency(pass(s, q, m, Phase::forward).back(), act);
        g.add_dependency(act, pass(s + 1, q, m, Phase::forward).front());
        TaskId grad = g.add_transfer({.src = device(s + 1, q), .dst = device(s, q), .bytes = bytes,
                                      .phase = Phase::backward, .stage = s + 1, .micro_batch = m});
        g.add_dependency(pass(s + 1, q, m, Phase::backward).back(), grad);
        g.add_dependency(grad, pass(s, q, m, Phase::backward).front());
      }
  }

  // Flush: per chunk and tensor rank, all-reduce the gradients across replicas, then step the optimizer.
  for (int s = 0; s < chunks; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    for (int t = 0; t < tp; ++t) {
      const std::vector<TaskId>& buckets = bucket_tasks[static_cast<std::size_t>(s * tp + t)];
      const bool bucketed = dp > 1 && !buckets.empty();
      TaskId reduced = no_task;
      if (dp > 1 && !bucketed) {
        CollectiveTask ar{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm,
                          .fidelity = plan.dp_fidelity, .group = {}, .bytes = stage.gradient_bytes, .stage = s};
        for (int q : dp_group(t))
          ar.group.push_back(device(s, q));
        reduced = g.add_collective(std::move(ar));
        for (int q : dp_group(t))
          g.add_dependency(last[static_cast<std::size_t>(device(s, q))], reduced);
      }
      if (!plan.optimizer_step)
        continue;
      for (int q : dp_group(t)) {
        TaskId opt = g.add_compute({.device = device(s, q), .phase = Phase::optimizer, .stage = s,
                                    .micro_batch = -1, .samples = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end = static_cast<std::uint32_t>(stage.layers.end)});
        if (bucketed)
          for (TaskId bucket : buckets)
            g.add_dependency(bucket, opt);  // the stream order covers the backward
        else if (reduced != no_task)
          g.add_dependency(reduced, opt);
        else if (g.kind(last[static_cast<std::size_t>(device(s, q))]) == TaskKind::collective)
          g.add_dependency(last[static_cast<std::size_t>(device(s, q))], opt);
      }
    }
  }
  return g;
}

}  // namespace

std::vector<PipelinePass> stream_order(ScheduleKind schedule, int k, int v, int rank, int m_count)
{
  std::vector<PipelinePass> order;
  switch (schedule) {
  case ScheduleKind::gpipe:
    for (int m = 0; m < m_count; ++m)
      order.push_back({Phase::forward, m, rank});
    for (int m = m_count - 1; m >= 0; --m)
      order.push_back({Phase::backward, m, rank});
    break;
  case ScheduleKind::one_f_one_b: {
    const int warmup = std::min(k - rank - 1, m_count);
    for (int m = 0; m < warmup; ++m)
      order.push_back({Phase::forward, m, rank});
    for (int i = 0; i + warmup < m_count; ++i) {
      order.push_back({Phase::forward, warmup + i, rank});
      order.push_back({Phase::backward, i, rank});
    }
    for (int m = m_count - warmup; m < m_count; ++m)
      order.push_back({Phase::backward, m, rank});
    break;
  }
  case ScheduleKind::interleaved: {
    if (m_count % k != 0)
      throw std::invalid_argument("the interleaved schedule needs the number of micro-batches (" +
                                  std::to_string(m_count) + ") divisible by the pipeline stages (" +
                                  std::to_string(k) + ")");
    // Megatron-LM: virtual micro-batch j runs chunk (j mod Kv) / K of this rank (counted from the
    // last chunk in backward) on micro-batch (j / Kv) K + j mod K.
    const int total = m_count * v;
    const int warmup = m_count == k ? total : std::min((k - rank - 1) * 2 + (v - 1) * k, total);
    auto pass = [&](Phase phase, int j) {
      int local = (j % (k * v)) / k;
      if (phase == Phase::backward)
        local = v - 1 - local;
      return PipelinePass{phase, (j / (k * v)) * k + j % k, local * k + rank};
    };
    for (int j = 0; j < warmup; ++j)
      order.push_back(pass(Phase::forward, j));
    for (int i = 0; i + warmup < total; ++i) {
      order.push_back(pass(Phase::forward, warmup + i));
      order.push_back(pass(Phase::backward, i));
    }
    for (int j = total - warmup; j < total; ++j)
      order.push_back(pass(Phase::backward, j));
    break;
  }
  }
  return order;
}

std::vector<int> in_flight_per_chunk(ScheduleKind schedule, int k, int v, int rank, int m_count)
{
  std::vector<int> current(static_cast<std::size_t>(v), 0), peak(static_cast<std::size_t>(v), 0);
  for (const PipelinePass& p : stream_order(schedule, k, v, rank, m_count)) {
    const auto local = static_cast<std::size_t>(p.chunk / k);
    current[local] += p.phase == Phase::forward ? 1 : -1;
    peak[local] = std::max(peak[local], current[local]);
  }
  return peak;
}

int in_flight_micro_batches(ScheduleKind schedule, int stages, int stage, int micro_batches)
{
  switch (schedule) {
  case ScheduleKind::gpipe: return micro_batches;
  case ScheduleKind::one_f_one_b: return std::min(stages - stage, micro_batches);
  case ScheduleKind::interleaved: return in_flight_per_chunk(schedule, stages, 1, stage, micro_batches).front();
  }
  return micro_batches;
}

TaskGraph build_schedule(const PipelinePlan& plan)
{
  if (plan.stages.empty() || plan.dp < 1 || plan.tp < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1 ||
      plan.virtual_stages < 1)
    throw std::invalid_argument("a pipeline plan needs >= 1 stage, replica, micro-batch, sample and chunk");
  if (plan.stages.size() % static_cast<std::size_t>(plan.virtual_stages) != 0)
    throw std::invalid_argument("the number of model chunks must be a multiple of virtual_stages");
  if (plan.schedule != ScheduleKind::interleaved && plan.virtual_stages != 1)
    throw std::invalid_argument("virtual_stages > 1 needs the interleaved schedule");
  return build_pipeline(plan);
}

}  // namespace ddlsim::sim
