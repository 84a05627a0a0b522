// PipelineBuilder's steps (sim/PipelineBuilder.hpp): the tasks of each kind of pass step
// (sim/PassSteps.hpp), the gradient reductions and the optimizer step.
#include "sim/PipelineBuilder.hpp"

#include <algorithm>

namespace ddlsim::sim {

// A gradient reduction of `bytes` for chunk s and tensor rank t over every reduction group (plus,
// with hybrid sharding, the all-reduce of each shard across the groups): its tasks, on each
// group's communication stream.
void PipelineBuilder::reduce_family(int s, int t, int f, const PipelinePass& p, const PassStep& step,
                                    std::vector<TaskId>& done)
{
  if (family_shard(f) * family_groups(f) < 2)
    return; // one replica holds these weights: nothing to reduce
  std::vector<TaskId> scattered;
  for (int j = 0; j < family_groups(f); ++j) {
    if (!keeps_any(s, reduce_group(t, j, f)))
      continue;
    TaskId& chain   = reduce_chain[chain_index(s, t, f, j)];
    const TaskId id = add_group_collective(s, p, step, reduce_group(t, j, f));
    if (chain != no_task)
      g.add_dependency(chain, id);
    chain = id;
    scattered.push_back(id);
  }
  done.insert(done.end(), scattered.begin(), scattered.end());
  if (shards_optimizer(plan.zero) && family_groups(f) > 1 && family_shard(f) > 0) {
    PassStep across   = step;
    across.collective = CollectiveKind::all_reduce;
    across.bytes      = step.bytes / family_shard(f);
    for (int i = 0; i < family_shard(f); ++i) {
      if (!keeps_any(s, replicate_group(t, i, f)))
        continue;
      const TaskId id = add_group_collective(s, p, across, replicate_group(t, i, f));
      for (TaskId before : scattered)
        g.add_dependency(before, id);
      done.push_back(id);
    }
  }
}

std::vector<TaskId> PipelineBuilder::reduce_gradients(int s, int t, const PipelinePass& p, const PassStep& step)
{
  std::vector<TaskId> done;
  if (step.kind == PassStep::Kind::expert_bucket) {
    for (int f = 1; f < families; ++f)
      reduce_family(s, t, f, p, step, done);
  } else {
    reduce_family(s, t, 0, p, step, done);
  }
  return done;
}

void PipelineBuilder::tp_overlap_step(int s, const PipelinePass& p, const PassStep& step)
{
  // Transformer Engine's userbuffers: (tp - 1) / tp of each collective beside the layer's
  // compute, the last chunk after it (blocking, once the chunks before it are through).
  std::vector<TaskId> beside;
  for (int r : kept_replicas[static_cast<std::size_t>(s)])
    for (const auto& [kind, bytes] : step.overlapped)
      beside.push_back(add_group_collective(
          s, p, {.kind = PassStep::Kind::tp_sync, .collective = kind, .bytes = bytes * (tp - 1) / tp}, tp_group(r),
          &tp_devices[static_cast<std::size_t>(s * dp + r)], &tp_kept[static_cast<std::size_t>(s * dp + r)], false));
  for (int q : kept_members[static_cast<std::size_t>(s)])
    add_compute(s, q, p, step.begin, step.end, 1.0);
  std::size_t next = 0;
  for (int r : kept_replicas[static_cast<std::size_t>(s)])
    for (const auto& [kind, bytes] : step.overlapped) {
      const TaskId tail = add_group_collective(
          s, p, {.kind = PassStep::Kind::tp_sync, .collective = kind, .bytes = bytes / tp}, tp_group(r),
          &tp_devices[static_cast<std::size_t>(s * dp + r)], &tp_kept[static_cast<std::size_t>(s * dp + r)]);
      g.add_dependency(beside[next++], tail);
    }
}

void PipelineBuilder::tp_async_step(int s, const PipelinePass& p, const PassStep& step)
{
  // Megatron's column-parallel backward: the input's gather issued, the input gradient's GEMM
  // (and the rest of the layer's backward, recomputation included); the stream waits for the
  // gather, then the input gradient's reduction is issued and the weight gradient's GEMM runs;
  // the stream waits for the reduction before its next task.
  std::vector<TaskId> gathers, reductions;
  for (int r : kept_replicas[static_cast<std::size_t>(s)]) {
    const auto at = static_cast<std::size_t>(s * dp + r);
    auto issue    = [&](const std::vector<std::pair<CollectiveKind, double>>& beside, std::vector<TaskId>& issued) {
      issued.clear();
      for (const auto& [kind, bytes] : beside)
        issued.push_back(add_group_collective(s, p,
                                                 {.kind = PassStep::Kind::tp_sync, .collective = kind, .bytes = bytes},
                                                 tp_group(r), &tp_devices[at], &tp_kept[at], false));
    };
    issue(step.overlapped, gathers);
    for (int q : tp_kept[at])
      add_compute(s, q, p, step.begin, step.end, 1.0, ComputePart::input_gradient);
    issue(step.after, reductions);
    for (TaskId reduction : reductions)
      for (TaskId gather : gathers)
        g.add_dependency(gather, reduction);
    for (int q : tp_kept[at]) {
      const TaskId weight_gradient = add_compute(s, q, p, step.begin, step.end, 1.0, ComputePart::weight_gradient);
      for (TaskId gather : gathers)
        g.add_dependency(gather, weight_gradient);
      auto& wait = pending_wait[static_cast<std::size_t>(device(s, q))];
      wait.insert(wait.end(), reductions.begin(), reductions.end());
    }
  }
}

void PipelineBuilder::gather_step(int s, const PipelinePass& p, const PassStep& step, bool& chunk_gathers_dispatched)
{
  // ZeRO-3: the unit's parameters (dense, then the experts' over their own groups), gathered on
  // each group's gather stream once the compute before the previous gather is done; the unit's
  // first compute task waits for them.
  // ZeRO 1-2 with overlap_param_gather (a chunk's first forward): as Megatron-Core's interleaved
  // schedule, the first two chunks' buckets are dispatched at the start and each next chunk's
  // once the chunk before it starts its first forward; every bucket waits for the dispatch.
  const bool by_chunk = !shards_parameters(plan.zero);
  if (by_chunk && !chunk_gathers_dispatched) {
    for (int q = 0; q < members; ++q) {
      const auto d         = static_cast<std::size_t>(device(s, q));
      chunk_gather_wait[d] = at_chunk_gather[d];
      at_chunk_gather[d]   = last[d];
    }
    chunk_gathers_dispatched = true;
  }
  std::vector<TaskId> waits(static_cast<std::size_t>(members), no_task);
  for (int q = 0; q < members; ++q) {
    const auto d                       = static_cast<std::size_t>(device(s, q));
    waits[static_cast<std::size_t>(q)] = by_chunk ? chunk_gather_wait[d] : at_previous_gather[d];
  }
  for (int t : kept_ranks[static_cast<std::size_t>(s)])
    for (int f = 0; f < families; ++f) {
      const double bytes = f == 0 ? step.bytes : step.expert_bytes;
      if (bytes <= 0)
        continue;
      for (int j = 0; j < family_groups(f); ++j) {
        if (!keeps_any(s, reduce_group(t, j, f)))
          continue;
        CollectiveTask c{.kind        = CollectiveKind::all_gather,
                         .algorithm   = plan.dp_algorithm,
                         .fidelity    = plan.dp_fidelity,
                         .group       = {},
                         .bytes       = bytes,
                         .stage       = s,
                         .micro_batch = p.micro_batch,
                         .phase       = p.phase,
                         .role        = CollectiveRole::parameters};
        const std::vector<int> group = reduce_group(t, j, f);
        for (int q : group)
          c.group.push_back(device(s, q));
        const TaskId id = g.add_collective(std::move(c));
        TaskId& chain   = gather_chain[chain_index(s, t, f, j)];
        if (chain != no_task)
          g.add_dependency(chain, id);
        chain = id;
        for (int q : group) {
          if (!keep(s, q))
            continue;
          if (waits[static_cast<std::size_t>(q)] != no_task)
            g.add_dependency(waits[static_cast<std::size_t>(q)], id);
          pending_gather[static_cast<std::size_t>(device(s, q))].push_back(id);
        }
      }
    }
  if (!by_chunk)
    for (int q = 0; q < members; ++q)
      at_previous_gather[static_cast<std::size_t>(device(s, q))] = last[static_cast<std::size_t>(device(s, q))];
}

void PipelineBuilder::cp_all_gather_step(int s, const PipelinePass& p, const PassStep& step)
{
  // Llama 3's all-gather (Transformer Engine's AttnFuncWithCPAndKVAllGather): the layer runs
  // whole on the GPU's queries once the K/V of every chunk are gathered over its cp group;
  // its backward gathers them again (first once more for the recomputed forward, which
  // Megatron's checkpoint reruns) and reduce-scatters dK/dV after it. Blocking collectives
  // over each cp group (tensor rank t of replicas g cp ... g cp + cp - 1): none overlaps.
  const bool backward = p.phase == Phase::backward;
  auto over_cp_groups = [&](CollectiveKind kind) {
    PassStep x   = step;
    x.collective = kind;
    for (int first = 0; first < dp; first += cp)
      for (int t = 0; t < tp; ++t) {
        std::vector<int> group;
        for (int c = 0; c < cp; ++c)
          group.push_back((first + c) * tp + t);
        if (keeps_any(s, group))
          add_group_collective(s, p, x, group);
      }
  };
  for (int gathers = !backward ? 1 : step.recomputed ? 2 : 1; gathers > 0; --gathers)
    over_cp_groups(CollectiveKind::all_gather);
  for (int q : kept_members[static_cast<std::size_t>(s)])
    add_compute(s, q, p, step.begin, step.end, 1.0);
  if (backward)
    over_cp_groups(CollectiveKind::reduce_scatter);
}

void PipelineBuilder::ring_step(int s, const PipelinePass& p, const PassStep& step)
{
  // Ring attention: chunk 0 on the GPU's own K/V; before chunk j it receives the block the
  // GPU before it in the cp ring received at step j - 1 (its own block at step 1). Forward
  // passes K/V on as they arrive; backward passes K/V with the dK/dV accumulated so far, so a
  // step also waits for the sender's chunk before it, and after the last chunk one more step
  // returns each block's dK/dV to its owner, whose next compute waits for it. A recomputed
  // layer's backward chunks also rerun its forward (OpCosts), whose ring sends each K/V block
  // once more: 3 blocks a step. A pass sends (cp - 1) K/V blocks forward, (cp - 1) x 2 + 1 in
  // backward, (cp - 1) x 3 + 1 recomputed: the forward ring's cp - 1 more.
  const bool backward          = p.phase == Phase::backward;
  const double block           = step.bytes / cp; // one K/V (or dK/dV) block
  const double blocks_per_step = !backward ? 1 : step.recomputed ? 3 : 2;
  auto ring_next               = [&](int q, int by) {
    const int r = q / tp, t = q % tp;
    const int c = r % cp;
    return ((r - c + (c + by + cp) % cp) * tp) + t;
  };
  std::vector<TaskId> incoming(static_cast<std::size_t>(members), no_task);
  std::vector<TaskId> before_ring(static_cast<std::size_t>(members), no_task);
  std::vector<TaskId> chunk(static_cast<std::size_t>(members), no_task);
  const double share = 1.0 / cp;
  for (int q : kept_members[static_cast<std::size_t>(s)]) {
    before_ring[static_cast<std::size_t>(q)] = last[static_cast<std::size_t>(device(s, q))];
    chunk[static_cast<std::size_t>(q)]       = add_compute(s, q, p, step.begin, step.end, share);
  }
  auto send = [&](int q, int j, double bytes, const std::vector<TaskId>& waits) {
    const int next = ring_next(q, 1);
    const TaskId x = g.add_transfer({.src         = device(s, q),
                                     .dst         = device(s, next),
                                     .bytes       = bytes,
                                     .phase       = p.phase,
                                     .stage       = s,
                                     .micro_batch = p.micro_batch,
                                     .kind        = TransferKind::context,
                                     .server      = j});
    for (TaskId wait : waits)
      if (wait != no_task)
        g.add_dependency(wait, x);
    return std::make_pair(next, x);
  };
  for (int j = 1; j < cp; ++j) {
    std::vector<TaskId> arrived(static_cast<std::size_t>(members), no_task);
    for (int q : kept_members[static_cast<std::size_t>(s)]) {
      const auto at = static_cast<std::size_t>(q);
      // Step 1 sends the GPU's own block, ready once the layers before the ring are (or, when
      // the pass starts with the ring, once its first chunk could start).
      const TaskId ready   = j > 1 ? incoming[at] : before_ring[at] != no_task ? before_ring[at] : chunk[at];
      const auto [next, x] = send(q, j, blocks_per_step * block, {ready, backward ? chunk[at] : no_task});
      arrived[static_cast<std::size_t>(next)] = x;
    }
    for (int q : kept_members[static_cast<std::size_t>(s)]) {
      const auto at = static_cast<std::size_t>(q);
      chunk[at]     = add_compute(s, q, p, step.begin, step.end, share);
      g.add_dependency(arrived[at], chunk[at]);
    }
    incoming = std::move(arrived);
  }
  if (backward && cp > 1)
    for (int q : kept_members[static_cast<std::size_t>(s)]) { // dK/dV home: one block
      const auto at                                            = static_cast<std::size_t>(q);
      const auto [owner, x]                                    = send(q, cp, block, {incoming[at], chunk[at]});
      pending_ring[static_cast<std::size_t>(device(s, owner))] = x;
    }
}

void PipelineBuilder::compute_step(int s, const PipelinePass& p, const PassStep& step)
{
  const StagePlan& stage = plan.stages[static_cast<std::size_t>(s)];
  // The experts layer on its own (between its all-to-alls) runs at its ep rank's load.
  const bool experts = ep > 1 && !plan.expert_compute.empty() &&
                       std::any_of(stage.exchanges.begin(), stage.exchanges.end(), [&](const ExpertExchange& x) {
                         return step.begin == x.layer && step.end == x.layer + 1;
                       });
  for (int q : kept_members[static_cast<std::size_t>(s)])
    add_compute(s, q, p, step.begin, step.end,
                experts ? plan.expert_compute[static_cast<std::size_t>((q / tp) % ep)] : 1.0);
}

void PipelineBuilder::flush_reductions()
{
  // Flush: per chunk and tensor rank, reduce the gradients across replicas (unless buckets did) and
  // the experts' over the replicas holding them; then, once every chunk's reductions are issued (as
  // Megatron-LM finishes the gradient sync before the optimizer), step the optimizer (on its shards
  // with ZeRO) and with ZeRO 1 and 2 gather the parameters on the reductions' stream.
  for (int s = 0; s < chunks; ++s) {
    const auto& stage    = plan.stages[static_cast<std::size_t>(s)];
    const double experts = ep > 1 ? stage.expert_gradient_bytes : 0.0;
    for (int t = 0; t < tp; ++t) {
      const auto at = static_cast<std::size_t>(s * tp + t);
      const PipelinePass p{Phase::backward, -1, s};
      if (dp > 1 && bucket_tasks[at].empty()) {
        // One reduction after the last backward: it waits for every member's program.
        const PassStep flush{PassStep::Kind::bucket, 0, 0, gradient_reduction(plan.zero), stage.gradient_bytes};
        for (int q : dp_group(t))
          if (keep(s, q) && last[static_cast<std::size_t>(device(s, q))] == no_task)
            throw std::invalid_argument("a stage without tasks");
        reduced_of[at] = reduce_gradients(s, t, p, flush);
      }
      expert_reduced_of[at] = expert_bucket_tasks[at];
      if (experts > 0 && !shards_gradients(plan.zero)) {
        const PassStep flush{
            .kind = PassStep::Kind::expert_bucket, .collective = gradient_reduction(plan.zero), .bytes = experts};
        for (TaskId id : reduce_gradients(s, t, p, flush))
          expert_reduced_of[at].push_back(id);
      }
    }
  }
}

void PipelineBuilder::step_optimizers()
{
  for (int s = 0; s < chunks; ++s) {
    const auto& stage  = plan.stages[static_cast<std::size_t>(s)];
    const double dense = stage.gradient_bytes, experts = ep > 1 ? stage.expert_gradient_bytes : 0.0;
    const double optimizer_share = !shards_optimizer(plan.zero) ? 1.0
                                   : dense + experts > 0 ? (dense / shard + experts / expert_shard) / (dense + experts)
                                                         : 1.0 / shard;
    for (int t = 0; t < tp; ++t) {
      const auto at                             = static_cast<std::size_t>(s * tp + t);
      const std::vector<TaskId>& buckets        = bucket_tasks[at];
      const bool bucketed                       = dp > 1 && !buckets.empty();
      const std::vector<TaskId>& reduced        = reduced_of[at];
      const std::vector<TaskId>& expert_reduced = expert_reduced_of[at];
      std::vector<TaskId> steps(static_cast<std::size_t>(dp), no_task); // per replica
      for (int q : dp_group(t)) {
        if (!keep(s, q))
          continue;
        TaskId opt = g.add_compute({.device      = device(s, q),
                                    .phase       = Phase::optimizer,
                                    .stage       = s,
                                    .micro_batch = -1,
                                    .samples     = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end   = static_cast<std::uint32_t>(stage.layers.end),
                                    .share       = optimizer_share});
        // A device steps once the reductions it takes part in are done (the stream order covers the
        // backward); those of other groups (other experts, other hybrid-shard groups) do not hold it.
        const int d           = device(s, q);
        const auto add_member = [&](TaskId before) {
          const auto& group = g.collective(before).group;
          if (std::find(group.begin(), group.end(), d) != group.end())
            g.add_dependency(before, opt);
        };
        for (TaskId before : bucketed ? buckets : reduced)
          add_member(before);
        for (TaskId before : expert_reduced)
          add_member(before);
        if (!bucketed && reduced.empty() && expert_reduced.empty() &&
            g.kind(last[static_cast<std::size_t>(device(s, q))]) == TaskKind::collective)
          g.add_dependency(last[static_cast<std::size_t>(device(s, q))], opt);
        for (TaskId wait : pending_wait[static_cast<std::size_t>(d)]) // the last pass's tp_async, blocking sends
          g.add_dependency(wait, opt);
        steps[static_cast<std::size_t>(q / tp)] = opt;
      }
      if (dp > 1 && gathers_per_step(plan.zero) && !plan.overlap_param_gather)
        for (int f = 0; f < families; ++f)
          for (int j = 0; j < family_groups(f); ++j) {
            const std::vector<int> group = reduce_group(t, j, f);
            if (group.size() < 2 || (f > 0 && experts <= 0) || !keeps_any(s, group))
              continue;
            CollectiveTask c{.kind        = CollectiveKind::all_gather,
                             .algorithm   = plan.dp_algorithm,
                             .fidelity    = plan.dp_fidelity,
                             .group       = {},
                             .bytes       = (f == 0 ? dense : experts) * plan.gather_per_gradient_byte,
                             .stage       = s,
                             .micro_batch = -1,
                             .phase       = Phase::optimizer,
                             .role        = CollectiveRole::parameters};
            for (int q : group)
              c.group.push_back(device(s, q));
            const TaskId id = g.add_collective(std::move(c));
            for (int q : group)
              if (steps[static_cast<std::size_t>(q / tp)] != no_task)
                g.add_dependency(steps[static_cast<std::size_t>(q / tp)], id);
            TaskId& chain = reduce_chain[chain_index(s, t, f, j)];
            if (chain != no_task)
              g.add_dependency(chain, id);
            chain = id;
          }
    }
  }
}

} // namespace ddlsim::sim
