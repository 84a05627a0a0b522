// PipelineBuilder (sim/PipelineBuilder.hpp): the members and groups, the programs, the stream of
// each device, and the passes connected across chunks.
#include "sim/PipelineBuilder.hpp"

#include "sim/Fold.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim::sim {

TaskGraph build_pipeline(const PipelinePlan& plan)
{
  return PipelineBuilder(plan).build();
}

PipelineBuilder::PipelineBuilder(const PipelinePlan& checked)
    : plan(checked), k(plan.pp()), m_count(plan.micro_batches), dp(plan.dp), tp(plan.tp), cp(plan.cp),
      shard(shards_optimizer(plan.zero) ? plan.shard : plan.dp), members(plan.dp * plan.tp),
      chunks(static_cast<int>(plan.stages.size())), ep(plan.ep), families(plan.ep > 1 ? 1 + plan.ep : 1),
      expert_replicas(plan.dp / plan.ep),
      expert_shard(shards_optimizer(plan.zero) ? plan.expert_shard : expert_replicas), groups(dp / shard),
      expert_groups(expert_replicas / expert_shard), max_groups(std::max(groups, expert_groups)), ranks(plan.pp()),
      g(plan.devices())
{
  const auto devices = static_cast<std::size_t>(plan.devices());
  last.assign(devices, no_task);
  bucket_tasks.resize(static_cast<std::size_t>(chunks * tp));
  expert_bucket_tasks.resize(static_cast<std::size_t>(chunks * tp));
  reduce_chain.assign(static_cast<std::size_t>(ranks * tp * families * max_groups), no_task);
  gather_chain.assign(reduce_chain.size(), no_task);
  pending_gather.resize(devices);
  at_previous_gather.assign(devices, no_task);
  at_chunk_gather.assign(devices, no_task);
  chunk_gather_wait.assign(devices, no_task);
  pending_ring.assign(devices, no_task);
  pending_wait.resize(devices);
  steps_of.resize(static_cast<std::size_t>(chunks) * 4);
  reduced_of.resize(static_cast<std::size_t>(chunks * tp));
  expert_reduced_of.resize(reduced_of.size());
  check_stages();
  index_members();
}

void PipelineBuilder::check_stages() const
{

  for (const StagePlan& stage : plan.stages) {
    for (const ExpertExchange& x : stage.exchanges)
      if (x.layer < stage.layers.begin || x.layer >= stage.layers.end)
        throw std::invalid_argument("expert exchange outside its stage");
    for (const SyncPoint& p : stage.sync_points)
      if (p.layer <= stage.layers.begin || p.layer > stage.layers.end)
        throw std::invalid_argument("sync point outside its stage");
    for (const GradientBucket& b : stage.buckets)
      if (b.layer < stage.layers.begin || b.layer >= stage.layers.end)
        throw std::invalid_argument("gradient bucket outside its stage");
    for (const TpCollective& c : stage.tp_collectives)
      if (c.layer < stage.layers.begin || c.layer >= stage.layers.end)
        throw std::invalid_argument("tensor-parallel collective outside its stage");
    for (const ShardUnit& u : stage.units)
      if (u.begin < stage.layers.begin || u.end > stage.layers.end || u.begin >= u.end)
        throw std::invalid_argument("ZeRO unit outside its stage");
    for (const RingAttention& r : stage.rings)
      if (r.layer < stage.layers.begin || r.layer >= stage.layers.end)
        throw std::invalid_argument("ring attention layer outside its stage");
  }
}

void PipelineBuilder::index_members()
{
  device_of.resize(static_cast<std::size_t>(chunks * members));
  kept_of.resize(device_of.size());
  for (int s = 0; s < chunks; ++s)

    for (int q = 0; q < members; ++q) {
      const auto at = static_cast<std::size_t>(s * members + q);
      device_of[at] = plan.device(s, q / tp, q % tp);
      kept_of[at]   = plan.fold == nullptr || plan.fold->is_representative(device_of[at]) ? 1 : 0;
    }
  kept_replicas.resize(static_cast<std::size_t>(chunks));
  kept_ranks.resize(kept_replicas.size());
  kept_members.resize(kept_replicas.size());

  for (std::size_t s = 0; s < kept_replicas.size(); ++s) {
    std::vector<char> rank_kept(static_cast<std::size_t>(tp), 0);
    for (int r = 0; r < dp; ++r) {
      bool any = false;
      for (int t = 0; t < tp; ++t)
        if (keep(static_cast<int>(s), r * tp + t)) {
          any                                    = true;
          rank_kept[static_cast<std::size_t>(t)] = 1;
        }
      if (any)
        kept_replicas[s].push_back(r);
    }
    for (int q = 0; q < dp * tp; ++q)
      if (keep(static_cast<int>(s), q))
        kept_members[s].push_back(q);
    for (int t = 0; t < tp; ++t)
      if (rank_kept[static_cast<std::size_t>(t)])
        kept_ranks[s].push_back(t);
  }

  slot.assign(static_cast<std::size_t>(chunks * members), -1);

  for (std::size_t s = 0; s < kept_members.size(); ++s) {
    kept = std::max(kept, kept_members[s].size());
    for (std::size_t at = 0; at < kept_members[s].size(); ++at)
      slot[s * static_cast<std::size_t>(members) + static_cast<std::size_t>(kept_members[s][at])] =
          static_cast<int>(at);
  }
  ids.resize(static_cast<std::size_t>(chunks) * kept * static_cast<std::size_t>(m_count) * 2);
  tp_groups.resize(static_cast<std::size_t>(dp));

  for (int r = 0; r < dp; ++r)
    for (int t = 0; t < tp; ++t)
      tp_groups[static_cast<std::size_t>(r)].push_back(r * tp + t);
  tp_devices.resize(static_cast<std::size_t>(chunks * dp));
  tp_kept.resize(tp_devices.size());

  for (int s = 0; s < chunks; ++s)
    for (int r = 0; r < dp; ++r)
      for (int q : tp_group(r)) {
        tp_devices[static_cast<std::size_t>(s * dp + r)].push_back(device(s, q));
        if (keep(s, q))
          tp_kept[static_cast<std::size_t>(s * dp + r)].push_back(q);
      }
}

// Members of tensor rank t in reduction group j of family f (its replicas j * shard ... (j + 1) *
// shard - 1).
std::vector<int> PipelineBuilder::reduce_group(int t, int j, int f) const
{
  std::vector<int> group;
  for (int i = 0; i < family_shard(f); ++i)
    group.push_back(family_replica(f, j * family_shard(f) + i) * tp + t);
  return group;
}

// Hybrid sharding: shard i of every group of family f, all-reduced across the groups.
std::vector<int> PipelineBuilder::replicate_group(int t, int i, int f) const
{
  std::vector<int> group;
  for (int j = 0; j < family_groups(f); ++j)
    group.push_back(family_replica(f, j * family_shard(f) + i) * tp + t);
  return group;
}

// Tensor rank t of ep group e (replicas e * ep ... (e + 1) * ep - 1): an all-to-all's members.
std::vector<int> PipelineBuilder::expert_group(int t, int e) const
{
  std::vector<int> group;
  for (int r = e * ep; r < (e + 1) * ep; ++r)
    group.push_back(r * tp + t);
  return group;
}

std::vector<int> PipelineBuilder::dp_group(int t) const
{
  std::vector<int> group;
  for (int r = 0; r < dp; ++r)
    group.push_back(r * tp + t);
  return group;
}
// A collective over `group` (member indices) of chunk s that waits for each member's program.
// `devices` and `running` (optional): the group's devices and its members that run tasks, when known.
// `blocking` false: it waits for each member's program but the program does not wait for it.
TaskId PipelineBuilder::add_group_collective(int s, const PipelinePass& p, const PassStep& step,
                                             const std::vector<int>& group, const std::vector<int>* devices,
                                             const std::vector<int>* running, bool blocking)
{
  const bool tensor    = step.kind == PassStep::Kind::tp_sync;
  const bool expert    = step.kind == PassStep::Kind::expert;
  const bool reduction = step.kind == PassStep::Kind::bucket || step.kind == PassStep::Kind::expert_bucket;
  CollectiveTask c{.kind        = step.collective,
                   .algorithm   = tensor   ? plan.tp_algorithm
                                  : expert ? plan.ep_algorithm
                                           : plan.dp_algorithm,
                   .fidelity    = tensor   ? plan.tp_fidelity
                                  : expert ? plan.ep_fidelity
                                           : plan.dp_fidelity,
                   .group       = {},
                   .bytes       = step.bytes,
                   .stage       = s,
                   .micro_batch = reduction && !shards_gradients(plan.zero) ? -1 : p.micro_batch,
                   .phase       = p.phase,
                   .role        = tensor                                 ? CollectiveRole::tensor_parallel
                                  : expert                               ? step.role
                                  : step.kind == PassStep::Kind::dp_sync ? CollectiveRole::sync_batch_norm
                                  : step.kind == PassStep::Kind::ring    ? CollectiveRole::context
                                                                         : CollectiveRole::gradients};
  if (devices != nullptr) {
    c.group = *devices;
  } else {
    c.group.reserve(group.size());
    for (int q : group)
      c.group.push_back(device(s, q));
  }
  if (expert && !plan.expert_load.empty()) { // the members are ep ranks 0 .. ep - 1
    c.member_load    = plan.expert_load;
    c.load_at_source = step.at_source;
  }
  const TaskId id = g.add_collective(std::move(c));
  for (int q : running != nullptr ? *running : group) {
    if (running == nullptr && !keep(s, q))
      continue;
    const TaskId before = last[static_cast<std::size_t>(device(s, q))];
    if (before != no_task)
      g.add_dependency(before, id);
    if (!reduction && blocking)
      join_stream(s, q, p, id);
  }
  return id;
}

void PipelineBuilder::join_stream(int s, int q, const PipelinePass& p, TaskId id)
{
  const auto dev = static_cast<std::size_t>(device(s, q));
  for (TaskId wait : pending_wait[dev])
    g.add_dependency(wait, id);
  pending_wait[dev].clear();
  last[dev] = id;
  pass(s, q, p.micro_batch, p.phase).push_back(id);
}

// A compute task of member q (its stream order, and any collective or gather it must wait for).
TaskId PipelineBuilder::add_compute(int s, int q, const PipelinePass& p, std::size_t begin, std::size_t end,
                                    double share, ComputePart part)
{
  const TaskId id     = g.add_compute({.device      = device(s, q),
                                       .phase       = p.phase,
                                       .stage       = s,
                                       .micro_batch = p.micro_batch,
                                       .samples     = plan.micro_batch_size,
                                       .layer_begin = static_cast<std::uint32_t>(begin),
                                       .layer_end   = static_cast<std::uint32_t>(end),
                                       .share       = share,
                                       .part        = part});
  const auto dev      = static_cast<std::size_t>(device(s, q));
  const TaskId before = last[dev];
  if (before != no_task && g.kind(before) == TaskKind::collective)
    g.add_dependency(before, id); // the stream order covers a compute predecessor
  for (TaskId gather : pending_gather[dev])
    g.add_dependency(gather, id);
  pending_gather[dev].clear();
  if (pending_ring[dev] != no_task) {
    g.add_dependency(pending_ring[dev], id);
    pending_ring[dev] = no_task;
  }
  join_stream(s, q, p, id);
  return id;
}

const std::vector<PassStep>& PipelineBuilder::steps_for(int s, Phase phase, bool edge)
{
  const std::size_t at = static_cast<std::size_t>(s) * 4 + (phase == Phase::forward ? 0 : 2) + (edge ? 1 : 0);
  if (steps_of[at].empty())
    steps_of[at] = pass_steps(plan.stages[static_cast<std::size_t>(s)], phase, plan, edge);
  return steps_of[at];
}

// Every rank's program in order, with each pass's steps; and room in the graph for about every task
// at once, counted as the steps below add them (most steps exactly; reductions and gathers at most),
// so that the graph's vectors seldom grow: each pass's steps on the members, replicas or ranks that
// run them, the activations and gradients between chunks, and the flush.
void PipelineBuilder::plan_programs()
{
  programs.resize(static_cast<std::size_t>(k));
  std::size_t computes = 0, collectives = 0, transfers = 0;
  // A reduction: each group's, and with hybrid sharding the all-reduce of each shard across groups.
  const auto per_reduction = static_cast<std::size_t>(
      families * (max_groups + (shards_optimizer(plan.zero) && max_groups > 1 ? std::max(shard, expert_shard) : 0)));
  for (int rank = 0; rank < k; ++rank) {
    Program& program = programs[static_cast<std::size_t>(rank)];
    program.order    = stream_order(plan.schedule, k, plan.virtual_stages, rank, m_count);
    program.warmup   = static_cast<std::size_t>(warmup_forwards(plan.schedule, k, plan.virtual_stages, rank, m_count));
    // Per chunk, the index in order of its first forward and its last backward.
    std::vector<std::size_t> first_forward(static_cast<std::size_t>(chunks), program.order.size());
    std::vector<std::size_t> last_backward(static_cast<std::size_t>(chunks), 0);
    for (std::size_t i = 0; i < program.order.size(); ++i) {
      const auto s = static_cast<std::size_t>(program.order[i].chunk);
      if (program.order[i].phase == Phase::backward)
        last_backward[s] = i;
      else
        first_forward[s] = std::min(first_forward[s], i);
    }
    for (std::size_t i = 0; i < program.order.size(); ++i) {
      const PipelinePass& p = program.order[i];
      const auto s          = static_cast<std::size_t>(p.chunk);
      const bool edge       = p.phase == Phase::backward ? i == last_backward[s] : i == first_forward[s];
      program.steps.push_back(&steps_for(p.chunk, p.phase, edge));
      const std::size_t members_here = kept_members[s].size(), ranks_here = kept_ranks[s].size();
      for (const PassStep& step : *program.steps.back())
        switch (step.kind) {
        case PassStep::Kind::compute:
          computes += members_here;
          break;
        case PassStep::Kind::tp_sync:
          collectives += kept_replicas[s].size();
          break;
        case PassStep::Kind::tp_overlap:
          computes += members_here;
          collectives += kept_replicas[s].size() * 2 * step.overlapped.size();
          break;
        case PassStep::Kind::tp_async:
          computes += members_here * 2;
          collectives += kept_replicas[s].size() * (step.overlapped.size() + step.after.size());
          break;
        case PassStep::Kind::dp_sync:
          collectives += ranks_here;
          break;
        case PassStep::Kind::expert:
          collectives += ranks_here * static_cast<std::size_t>(dp / ep);
          break;
        case PassStep::Kind::bucket:
        case PassStep::Kind::expert_bucket:
          collectives += ranks_here * per_reduction;
          break;
        case PassStep::Kind::gather:
          collectives += ranks_here * static_cast<std::size_t>(families * max_groups);
          break;
        case PassStep::Kind::ring:
          if (plan.cp_algorithm == CpAlgorithm::all_gather) {
            computes += members_here;
            collectives += members_here * 3; // at most: two gathers and a reduce-scatter per cp group
            break;
          }
          computes += members_here * static_cast<std::size_t>(cp);
          transfers += members_here * static_cast<std::size_t>(cp);
          break;
        }
      transfers += members_here; // the pass's activations (forward) or their gradients (backward)
    }
  }
  collectives += static_cast<std::size_t>(chunks * tp) *
                 (per_reduction + static_cast<std::size_t>(families * max_groups)); // the flush
  g.reserve(computes + collectives + transfers, computes, transfers, collectives);
}

void PipelineBuilder::after_pass(const Ends& from, TaskId to)
{
  g.add_dependency(from.back(), to);
  for (TaskId wait : from.waits)
    g.add_dependency(wait, to);
}

// The transfer a pass of chunk s sends to the next chunk's device (forward) or the previous one's
// (backward), made once, after the pass; no_task when there is none (an end of the pipeline, or
// consecutive chunks on one device).
TaskId PipelineBuilder::send_of(int s, int q, int m, Phase phase)
{
  const int to = phase == Phase::forward ? s + 1 : s - 1;
  if (to < 0 || to >= chunks || device(to, q) == device(s, q))
    return no_task;
  Ends& from = pass(s, q, m, phase);
  if (from.sent == no_task) {
    const int boundary = std::min(s, to); // the activations of the earlier chunk cross it
    const double bytes = plan.stages[static_cast<std::size_t>(boundary)].activation_bytes * plan.micro_batch_size / tp;
    from.sent          = g.add_transfer(
                 {.src = device(s, q), .dst = device(to, q), .bytes = bytes, .phase = phase, .stage = s, .micro_batch = m});
    after_pass(from, from.sent);
  }
  return from.sent;
}

TaskGraph PipelineBuilder::build()
{
  plan_programs();
  for (const Program& program : programs)
    for (std::size_t i = 0; i < program.order.size(); ++i) {
      run_pass(program.order[i], *program.steps[i]);
      wait_for_sends(program, i);
    }
  connect_passes();
  flush_reductions();
  if (plan.optimizer_step)
    step_optimizers();
  return std::move(g);
}

// One pass of one chunk on every member that runs it, step by step; then, where it ends with tp_async's
// reductions or sends blocking, what the device's next task waits for.
void PipelineBuilder::run_pass(const PipelinePass& p, const std::vector<PassStep>& steps)
{
  const int s                   = p.chunk;
  const StagePlan& stage        = plan.stages[static_cast<std::size_t>(s)];
  bool chunk_gathers_dispatched = false; // overlap_param_gather: this pass's gathers have their wait
  for (const PassStep& step : steps) {
    switch (step.kind) {
    case PassStep::Kind::dp_sync:
      for (int t : kept_ranks[static_cast<std::size_t>(s)])
        add_group_collective(s, p, step, dp_group(t));
      break;
    case PassStep::Kind::tp_sync:
      for (int r : kept_replicas[static_cast<std::size_t>(s)])
        add_group_collective(s, p, step, tp_group(r), &tp_devices[static_cast<std::size_t>(s * dp + r)],
                             &tp_kept[static_cast<std::size_t>(s * dp + r)]);
      break;
    case PassStep::Kind::tp_overlap:
      tp_overlap_step(s, p, step);
      break;
    case PassStep::Kind::tp_async:
      tp_async_step(s, p, step);
      break;
    case PassStep::Kind::bucket:
    case PassStep::Kind::expert_bucket:
      for (int t : kept_ranks[static_cast<std::size_t>(s)]) {
        auto& buckets =
            (step.kind == PassStep::Kind::bucket ? bucket_tasks
                                                 : expert_bucket_tasks)[static_cast<std::size_t>(s * tp + t)];
        for (TaskId id : reduce_gradients(s, t, p, step))
          buckets.push_back(id);
      }
      break;
    case PassStep::Kind::expert:
      for (int t : kept_ranks[static_cast<std::size_t>(s)])
        for (int e = 0; e < dp / ep; ++e)
          if (keeps_any(s, expert_group(t, e)))
            add_group_collective(s, p, step, expert_group(t, e));
      break;
    case PassStep::Kind::gather:
      gather_step(s, p, step, chunk_gathers_dispatched);
      break;
    case PassStep::Kind::ring:
      if (plan.cp_algorithm == CpAlgorithm::all_gather)
        cp_all_gather_step(s, p, step);
      else
        ring_step(s, p, step);
      break;
    case PassStep::Kind::compute:
      compute_step(s, p, step);
      break;
    }
  }
  // A pass that ends with tp_async's reductions sends once they are through.
  if (!stage.tp_collectives.empty() && plan.tp_backward_overlap)
    for (int q : kept_members[static_cast<std::size_t>(s)]) {
      const auto& wait = pending_wait[static_cast<std::size_t>(device(s, q))];
      if (!wait.empty())
        pass(s, q, p.micro_batch, p.phase).waits = wait;
    }
}

void PipelineBuilder::wait_for_sends(const Program& program, std::size_t i)
{
  const PipelinePass& p = program.order[i];
  const int s           = p.chunk;
  if (plan.p2p == P2pSends::overlapped)
    return;
  // Paired: the steady state's pairs (a forward, then a backward) follow the warm-up; a pair's
  // forward sends with its backward, after it.
  const std::size_t forwards = program.order.size() / 2;
  const bool in_pairs =
      plan.p2p == P2pSends::paired && i >= program.warmup && i < program.warmup + 2 * (forwards - program.warmup);
  if (in_pairs && p.phase == Phase::forward)
    return;
  const PipelinePass* paired = in_pairs ? &program.order[i - 1] : nullptr; // the pair's forward
  for (int q : kept_members[static_cast<std::size_t>(s)]) {
    auto& wait = pending_wait[static_cast<std::size_t>(device(s, q))];
    if (const TaskId x = send_of(s, q, p.micro_batch, p.phase); x != no_task)
      wait.push_back(x);
    if (paired != nullptr)
      if (const TaskId x = send_of(paired->chunk, q, paired->micro_batch, paired->phase); x != no_task) {
        g.add_dependency(pass(s, q, p.micro_batch, p.phase).back(), x);
        wait.push_back(x);
      }
  }
}

void PipelineBuilder::connect_passes()
{
  // Activations flow down the pipeline, their gradients flow back up; each tensor rank sends its
  // 1/tp share to the same rank of the next stage.
  for (int s = 0; s + 1 < chunks; ++s)
    for (int q : kept_members[static_cast<std::size_t>(s)])
      for (int m = 0; m < m_count; ++m) {
        if (device(s, q) == device(s + 1, q)) { // consecutive chunks on one device
          after_pass(pass(s, q, m, Phase::forward), pass(s + 1, q, m, Phase::forward).front());
          after_pass(pass(s + 1, q, m, Phase::backward), pass(s, q, m, Phase::backward).front());
          continue;
        }
        g.add_dependency(send_of(s, q, m, Phase::forward), pass(s + 1, q, m, Phase::forward).front());
        g.add_dependency(send_of(s + 1, q, m, Phase::backward), pass(s, q, m, Phase::backward).front());
      }
}

} // namespace ddlsim::sim
