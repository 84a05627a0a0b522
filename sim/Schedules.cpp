#include "sim/Schedules.hpp"

#include "sim/Fold.hpp"
#include "sim/PipelineBuilder.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim::sim {

int warmup_forwards(ScheduleKind schedule, int k, int v, int rank, int m_count)
{
  switch (schedule) {
  case ScheduleKind::gpipe:
    return m_count;
  case ScheduleKind::one_f_one_b:
    return std::min(k - rank - 1, m_count);
  case ScheduleKind::interleaved: {
    // Megatron-LM: every pass warms up when there are as many micro-batches as stages.
    const int total = m_count * v;
    return m_count == k ? total : std::min((k - rank - 1) * 2 + (v - 1) * k, total);
  }
  }
  return m_count;
}

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
    const int warmup = warmup_forwards(schedule, k, v, rank, m_count);
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
                                  std::to_string(m_count) + ") divisible by the pipeline stages (" + std::to_string(k) +
                                  ")");
    // Megatron-LM: virtual micro-batch j runs chunk (j mod Kv) / K of this rank (counted from the
    // last chunk in backward) on micro-batch (j / Kv) K + j mod K.
    const int total  = m_count * v;
    const int warmup = warmup_forwards(schedule, k, v, rank, m_count);
    auto pass        = [&](Phase phase, int j) {
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
  case ScheduleKind::gpipe:
    return micro_batches;
  case ScheduleKind::one_f_one_b:
    return std::min(stages - stage, micro_batches);
  case ScheduleKind::interleaved:
    return in_flight_per_chunk(schedule, stages, 1, stage, micro_batches).front();
  }
  return micro_batches;
}

TaskGraph build_schedule(const PipelinePlan& plan)
{
  if (plan.stages.empty() || plan.dp < 1 || plan.tp < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1 ||
      plan.virtual_stages < 1)
    throw std::invalid_argument("a pipeline plan needs >= 1 stage, replica, micro-batch, sample and chunk");
  if (plan.cp < 1 || plan.dp % plan.cp != 0)
    throw std::invalid_argument("cp must divide the replicas (dp x cp)");
  if (zero_level(plan.zero) > 3 || (shards_optimizer(plan.zero) && (plan.shard < 1 || plan.dp % plan.shard != 0)))
    throw std::invalid_argument("ZeRO stage must be 0-3 with a shard group dividing the replicas");
  if (plan.ep < 1 || plan.dp % plan.ep != 0 || plan.expert_shard < 1 || (plan.dp / plan.ep) % plan.expert_shard != 0)
    throw std::invalid_argument("ep must divide the replicas (dp x cp), and the expert shard group dp x cp / ep");
  for (const auto* loads : {&plan.expert_load, &plan.expert_compute})
    if (!loads->empty() && loads->size() != static_cast<std::size_t>(plan.ep))
      throw std::invalid_argument("expert loads need one value per ep rank");
  if (plan.stages.size() % static_cast<std::size_t>(plan.virtual_stages) != 0)
    throw std::invalid_argument("the number of model chunks must be a multiple of virtual_stages");
  if (plan.schedule != ScheduleKind::interleaved && plan.virtual_stages != 1)
    throw std::invalid_argument("virtual_stages > 1 needs the interleaved schedule");
  if (plan.fold != nullptr && plan.fold->devices() != plan.devices())
    throw std::invalid_argument("the fold must act on the plan's devices");
  return build_pipeline(plan);
}

} // namespace ddlsim::sim
