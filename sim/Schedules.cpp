#include "sim/Schedules.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

// One pass of a stage as compute segments, synchronized-batch-norm all-reduces (blocking: the
// device's stream waits for them) and gradient-bucket all-reduces (not blocking).
struct Step {
  enum class Kind { compute, sync, bucket } kind = Kind::compute;
  std::size_t begin = 0, end = 0;  // compute: layers [begin, end)
  double bytes = 0;                // collectives
};

std::vector<Step> pass_steps(const StagePlan& stage, Phase phase, bool replicated, bool last_backward)
{
  std::vector<Step> steps;
  const std::size_t first = stage.layers.begin, last = stage.layers.end;
  if (phase == Phase::forward) {
    std::size_t start = first;
    if (replicated)
      for (const SyncPoint& p : stage.sync_points) {
        if (p.layer > start)
          steps.push_back({Step::Kind::compute, start, p.layer, 0});
        steps.push_back({Step::Kind::sync, 0, 0, p.bytes});
        start = p.layer;
      }
    if (start < last)
      steps.push_back({Step::Kind::compute, start, last, 0});
    return steps;
  }
  // Backward runs from the last layer down. Events at a layer position p happen once the layers
  // at and after p are done: a bucket's all-reduce starts, and a sync point's all-reduce blocks.
  struct Event {
    std::size_t layer;
    Step::Kind kind;
    double bytes;
  };
  std::vector<Event> events;
  if (replicated) {
    for (const SyncPoint& p : stage.sync_points)
      events.push_back({p.layer, Step::Kind::sync, p.bytes});
    if (last_backward)
      for (const GradientBucket& b : stage.buckets)
        events.push_back({b.layer, Step::Kind::bucket, b.bytes});
  }
  // Descending layer; at one position the bucket (ready first) before the sync point.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.layer != b.layer ? a.layer > b.layer : (a.kind == Step::Kind::bucket && b.kind != Step::Kind::bucket);
  });
  std::size_t end = last;
  for (const Event& e : events) {
    if (e.layer < end)
      steps.push_back({Step::Kind::compute, e.layer, end, 0});
    steps.push_back({e.kind, 0, 0, e.bytes});
    end = std::min(end, e.layer);
  }
  if (end > first)
    steps.push_back({Step::Kind::compute, first, end, 0});
  return steps;
}

TaskGraph build_pipeline(const PipelinePlan& plan)
{
  const int k = plan.pp();
  const int m_count = plan.micro_batches;
  const int dp = plan.dp;
  TaskGraph g(plan.devices());

  // Tasks of each pass, in order: ids[((s * dp + r) * M + m) * 2 + phase].
  const int chunks = static_cast<int>(plan.stages.size());
  std::vector<std::vector<TaskId>> ids(static_cast<std::size_t>(chunks * dp * m_count * 2));
  auto pass = [&](int s, int r, int m, Phase phase) -> std::vector<TaskId>& {
    return ids[static_cast<std::size_t>(((s * dp + r) * m_count + m) * 2 + (phase == Phase::backward ? 1 : 0))];
  };
  // The last task of each device in program order: compute on its stream, or a blocking all-reduce.
  std::vector<TaskId> last(static_cast<std::size_t>(plan.devices()), no_task);

  // Gradient-bucket all-reduces of each stage (they do not block the stream; the optimizer waits).
  std::vector<std::vector<TaskId>> bucket_tasks(static_cast<std::size_t>(chunks));

  for (const StagePlan& stage : plan.stages) {
    for (const SyncPoint& p : stage.sync_points)
      if (p.layer <= stage.layers.begin || p.layer > stage.layers.end)
        throw std::invalid_argument("sync point outside its stage");
    for (const GradientBucket& b : stage.buckets)
      if (b.layer < stage.layers.begin || b.layer >= stage.layers.end)
        throw std::invalid_argument("gradient bucket outside its stage");
  }
  const bool replicated = dp > 1;
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
      for (const Step& step :
           pass_steps(stage, p.phase, replicated, i == last_backward[static_cast<std::size_t>(s)])) {
        if (step.kind != Step::Kind::compute) {
          const bool blocking = step.kind == Step::Kind::sync;
          CollectiveTask c{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm,
                           .fidelity = plan.dp_fidelity, .group = {}, .bytes = step.bytes, .stage = s,
                           .micro_batch = blocking ? p.micro_batch : -1, .phase = p.phase};
          for (int r = 0; r < dp; ++r)
            c.group.push_back(plan.device(s, r));
          const TaskId id = g.add_collective(std::move(c));
          for (int r = 0; r < dp; ++r) {
            TaskId& before = last[static_cast<std::size_t>(plan.device(s, r))];
            if (before != no_task)
              g.add_dependency(before, id);
            if (blocking) {
              before = id;
              pass(s, r, p.micro_batch, p.phase).push_back(id);
            }
          }
          if (!blocking) {
            // One communication stream: NCCL runs the buckets' all-reduces one after another.
            auto& buckets = bucket_tasks[static_cast<std::size_t>(s)];
            if (!buckets.empty())
              g.add_dependency(buckets.back(), id);
            buckets.push_back(id);
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
  for (int s = 0; s + 1 < chunks; ++s) {
    const double bytes = plan.stages[static_cast<std::size_t>(s)].activation_bytes * plan.micro_batch_size;
    for (int r = 0; r < dp; ++r)
      for (int m = 0; m < m_count; ++m) {
        if (plan.device(s, r) == plan.device(s + 1, r)) {  // consecutive chunks on one device
          g.add_dependency(pass(s, r, m, Phase::forward).back(), pass(s + 1, r, m, Phase::forward).front());
          g.add_dependency(pass(s + 1, r, m, Phase::backward).back(), pass(s, r, m, Phase::backward).front());
          continue;
        }
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

  // Flush: per chunk, all-reduce the gradients across replicas, then step the optimizer.
  for (int s = 0; s < chunks; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    std::vector<TaskId> ready(static_cast<std::size_t>(dp));
    for (int r = 0; r < dp; ++r)
      ready[static_cast<std::size_t>(r)] = last[static_cast<std::size_t>(plan.device(s, r))];
    const std::vector<TaskId>& buckets = bucket_tasks[static_cast<std::size_t>(s)];
    const bool bucketed = dp > 1 && !buckets.empty();
    if (dp > 1 && !bucketed) {
      CollectiveTask ar{.kind = CollectiveKind::all_reduce, .algorithm = plan.dp_algorithm,
                        .fidelity = plan.dp_fidelity, .group = {}, .bytes = stage.gradient_bytes, .stage = s};
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
        if (bucketed)
          for (TaskId bucket : buckets)
            g.add_dependency(bucket, opt);  // the stream order covers the backward
        else if (dp > 1)
          g.add_dependency(ready[static_cast<std::size_t>(r)], opt);  // the stream order covers dp == 1
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
  if (plan.stages.empty() || plan.dp < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1 ||
      plan.virtual_stages < 1)
    throw std::invalid_argument("a pipeline plan needs >= 1 stage, replica, micro-batch, sample and chunk");
  if (plan.stages.size() % static_cast<std::size_t>(plan.virtual_stages) != 0)
    throw std::invalid_argument("the number of model chunks must be a multiple of virtual_stages");
  if (plan.schedule != ScheduleKind::interleaved && plan.virtual_stages != 1)
    throw std::invalid_argument("virtual_stages > 1 needs the interleaved schedule");
  return build_pipeline(plan);
}

}  // namespace ddlsim::sim
