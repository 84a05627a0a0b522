#include "sim/Schedules.hpp"

#include "sim/Fold.hpp"
#include "sim/PassSteps.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

int chunks_of(const PipelinePlan& plan) { return static_cast<int>(plan.stages.size()); }

TaskGraph build_pipeline(const PipelinePlan& plan)
{
  const int k = plan.pp();
  const int m_count = plan.micro_batches;
  const int dp = plan.dp;
  const int tp = plan.tp;
  const int cp = plan.cp;
  const int shard   = shards_optimizer(plan.zero) ? plan.shard : dp; // replicas per reduction group
  const int members = dp * tp;  // GPUs per stage: member q = r * tp + t
  const int chunks = static_cast<int>(plan.stages.size());
  TaskGraph g(plan.devices());
  // Member q of chunk s: its device, and whether it runs tasks (under a fold, only representatives
  // run tasks, and only collectives with one of them exist). Looked up, not recomputed: the graph
  // asks for them a few times per task.
  std::vector<int> device_of(static_cast<std::size_t>(chunks_of(plan) * members));
  std::vector<char> kept_of(device_of.size());
  for (int s = 0; s < chunks_of(plan); ++s)
    for (int q = 0; q < members; ++q) {
      const auto at = static_cast<std::size_t>(s * members + q);
      device_of[at] = plan.device(s, q / tp, q % tp);
      kept_of[at] = plan.fold == nullptr || plan.fold->is_representative(device_of[at]) ? 1 : 0;
    }
  auto device = [&](int s, int q) { return device_of[static_cast<std::size_t>(s * members + q)]; };
  auto keep = [&](int s, int q) { return kept_of[static_cast<std::size_t>(s * members + q)] != 0; };
  auto keeps_any = [&](int s, const std::vector<int>& group) {
    return std::any_of(group.begin(), group.end(), [&](int q) { return keep(s, q); });
  };
  // Per chunk: the replicas with a representative among their tensor ranks, and the tensor ranks
  // with one among their replicas (the tensor-parallel and data-parallel groups that exist).
  std::vector<std::vector<int>> kept_replicas(static_cast<std::size_t>(chunks_of(plan)));
  std::vector<std::vector<int>> kept_ranks(kept_replicas.size());
  std::vector<std::vector<int>> kept_members(kept_replicas.size());  // members q that run tasks
  for (std::size_t s = 0; s < kept_replicas.size(); ++s) {
    std::vector<char> rank_kept(static_cast<std::size_t>(tp), 0);
    for (int r = 0; r < dp; ++r) {
      bool any = false;
      for (int t = 0; t < tp; ++t)
        if (keep(static_cast<int>(s), r * tp + t)) {
          any = true;
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

  // The tasks of each pass of the members that run tasks: ids[((s * kept + at) * M + m) * 2 +
  // phase], `at` the member's place among its chunk's kept members (slot).
  std::size_t kept = 0;
  std::vector<int> slot(static_cast<std::size_t>(chunks * members), -1);
  for (std::size_t s = 0; s < kept_members.size(); ++s) {
    kept = std::max(kept, kept_members[s].size());
    for (std::size_t at = 0; at < kept_members[s].size(); ++at)
      slot[s * static_cast<std::size_t>(members) + static_cast<std::size_t>(kept_members[s][at])] = static_cast<int>(at);
  }
  // A pass's first and last task (what the activations and their gradients connect), what its
  // stream still waits for after the last (tp_async's reductions when they end the pass), and its
  // send once made (without overlap_p2p_comm, as the pass ends: the device's next task waits for it).
  struct Ends {
    TaskId first = no_task, last = no_task;
    std::vector<TaskId> waits{};
    TaskId sent = no_task;
    void push_back(TaskId id)
    {
      if (first == no_task)
        first = id;
      last = id;
    }
    TaskId front() const { return first; }
    TaskId back() const { return last; }
  };
  std::vector<Ends> ids(static_cast<std::size_t>(chunks) * kept * static_cast<std::size_t>(m_count) * 2);
  auto pass = [&](int s, int q, int m, Phase phase) -> Ends& {
    const auto at = static_cast<std::size_t>(slot[static_cast<std::size_t>(s * members + q)]);
    return ids[((static_cast<std::size_t>(s) * kept + at) * static_cast<std::size_t>(m_count) + static_cast<std::size_t>(m)) * 2 +
               (phase == Phase::backward ? 1 : 0)];
  };
  // The last task of each device in program order: compute on its stream, or a blocking collective.
  std::vector<TaskId> last(static_cast<std::size_t>(plan.devices()), no_task);
  // Gradient reductions of each chunk and tensor rank (not blocking; the optimizer waits for them).
  std::vector<std::vector<TaskId>> bucket_tasks(static_cast<std::size_t>(chunks * tp));
  // The experts' gradients of each chunk and tensor rank, reduced after every backward (ZeRO 2, 3).
  std::vector<std::vector<TaskId>> expert_bucket_tasks(static_cast<std::size_t>(chunks * tp));
  // Families of replicas that hold the same weights: 0 the dense ones (every replica); 1 + e, with
  // expert parallelism, the experts of ep rank e (replicas e, e + ep, ...). A family's reductions run
  // in groups of `shard` (expert_shard) of its replicas, hybrid sharding across the groups.
  const int ep = plan.ep;
  const int families = ep > 1 ? 1 + ep : 1;
  const int expert_replicas = dp / ep;
  const int expert_shard    = shards_optimizer(plan.zero) ? plan.expert_shard : expert_replicas;
  const int groups = dp / shard;
  const int expert_groups = expert_replicas / expert_shard;
  const int max_groups = std::max(groups, expert_groups);
  auto family_replica = [&](int f, int index) { return f == 0 ? index : (f - 1) + index * ep; };
  auto family_shard = [&](int f) { return f == 0 ? shard : expert_shard; };
  auto family_groups = [&](int f) { return f == 0 ? groups : expert_groups; };
  // One communication stream per reduction group: its reductions and the ZeRO 1-2 parameter gathers
  // after the step run one after another, and so do the gathers in the forward (ZeRO 3,
  // overlap_param_gather) on a stream of their own. The model chunks of one
  // pipeline rank share their devices' groups (one communicator per data-parallel group, as in
  // Megatron-LM), so their collectives queue on one stream rather than share the links unpriced.
  // Keyed by (pipeline rank, tensor rank, family, group).
  const int ranks = plan.pp();
  auto chain_index = [&](int s, int t, int f, int j) {
    return static_cast<std::size_t>((((s % ranks) * tp + t) * families + f) * max_groups + j);
  };
  std::vector<TaskId> reduce_chain(static_cast<std::size_t>(ranks * tp * families * max_groups), no_task);
  std::vector<TaskId> gather_chain(reduce_chain.size(), no_task);
  // ZeRO-3: per device, the gathers the next compute task waits for, and the program position when
  // the previous gather was issued (a gather waits for the compute two units back: one prefetch).
  std::vector<std::vector<TaskId>> pending_gather(static_cast<std::size_t>(plan.devices()));
  std::vector<TaskId> at_previous_gather(static_cast<std::size_t>(plan.devices()), no_task);
  // ZeRO 1-2 with overlap_param_gather: per device, the program position when the previous chunk's
  // gathers were dispatched, and what the current chunk's wait for.
  std::vector<TaskId> at_chunk_gather(static_cast<std::size_t>(plan.devices()), no_task);
  std::vector<TaskId> chunk_gather_wait(at_chunk_gather.size(), no_task);
  // Ring attention's backward: the dK/dV returning to a device, which its next compute waits for.
  std::vector<TaskId> pending_ring(static_cast<std::size_t>(plan.devices()), no_task);
  // tp_async: per device, the reductions issued beside the weight gradient's GEMM, which its stream
  // waits for before its next task (compute, blocking collective, or the pass's send).
  std::vector<std::vector<TaskId>> pending_wait(static_cast<std::size_t>(plan.devices()));

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

  // A collective over `group` (member indices) of chunk s that waits for each member's program.
  // `devices` and `running` (optional): the group's devices and its members that run tasks, when known.
  // `blocking` false: it waits for each member's program but the program does not wait for it.
  auto add_group_collective = [&](int s, const PipelinePass& p, const PassStep& step, const std::vector<int>& group,
                                  const std::vector<int>* devices = nullptr, const std::vector<int>* running = nullptr,
                                  bool blocking = true) {
    const bool tensor = step.kind == PassStep::Kind::tp_sync;
    const bool expert = step.kind == PassStep::Kind::expert;
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
    if (expert && !plan.expert_load.empty()) {  // the members are ep ranks 0 .. ep - 1
      c.member_load = plan.expert_load;
      c.load_at_source = step.at_source;
    }
    const TaskId id = g.add_collective(std::move(c));
    for (int q : running != nullptr ? *running : group) {
      if (running == nullptr && !keep(s, q))
        continue;
      const auto dev = static_cast<std::size_t>(device(s, q));
      TaskId& before = last[dev];
      if (before != no_task)
        g.add_dependency(before, id);
      if (!reduction && blocking) {
        for (TaskId wait : pending_wait[dev])
          g.add_dependency(wait, id);
        pending_wait[dev].clear();
        before = id;
        pass(s, q, p.micro_batch, p.phase).push_back(id);
      }
    }
    return id;
  };
  // Members of tensor rank t in reduction group j of family f (its replicas j * shard ... (j + 1) *
  // shard - 1).
  auto reduce_group = [&](int t, int j, int f = 0) {
    std::vector<int> group;
    for (int i = 0; i < family_shard(f); ++i)
      group.push_back(family_replica(f, j * family_shard(f) + i) * tp + t);
    return group;
  };
  // Hybrid sharding: shard i of every group of family f, all-reduced across the groups.
  auto replicate_group = [&](int t, int i, int f = 0) {
    std::vector<int> group;
    for (int j = 0; j < family_groups(f); ++j)
      group.push_back(family_replica(f, j * family_shard(f) + i) * tp + t);
    return group;
  };
  // Tensor rank t of ep group e (replicas e * ep ... (e + 1) * ep - 1): an all-to-all's members.
  auto expert_group = [&](int t, int e) {
    std::vector<int> group;
    for (int r = e * ep; r < (e + 1) * ep; ++r)
      group.push_back(r * tp + t);
    return group;
  };
  auto dp_group = [&](int t) {
    std::vector<int> group;
    for (int r = 0; r < dp; ++r)
      group.push_back(r * tp + t);
    return group;
  };
  std::vector<std::vector<int>> tp_groups(static_cast<std::size_t>(dp));  // built once: one per collective is many
  for (int r = 0; r < dp; ++r)
    for (int t = 0; t < tp; ++t)
      tp_groups[static_cast<std::size_t>(r)].push_back(r * tp + t);
  auto tp_group = [&](int r) -> const std::vector<int>& { return tp_groups[static_cast<std::size_t>(r)]; };
  // Per chunk and replica: the tensor-parallel group's devices and its members that run tasks.
  std::vector<std::vector<int>> tp_devices(static_cast<std::size_t>(chunks * dp)), tp_kept(tp_devices.size());
  for (int s = 0; s < chunks; ++s)
    for (int r = 0; r < dp; ++r)
      for (int q : tp_group(r)) {
        tp_devices[static_cast<std::size_t>(s * dp + r)].push_back(device(s, q));
        if (keep(s, q))
          tp_kept[static_cast<std::size_t>(s * dp + r)].push_back(q);
      }
  // A gradient reduction of `bytes` for chunk s and tensor rank t over every reduction group (plus,
  // with hybrid sharding, the all-reduce of each shard across the groups): its tasks, on each
  // group's communication stream. `wait` (if any) must finish first.
  auto reduce_family = [&](int s, int t, int f, const PipelinePass& p, const PassStep& step, std::vector<TaskId>& done) {
    if (family_shard(f) * family_groups(f) < 2)
      return;  // one replica holds these weights: nothing to reduce
    std::vector<TaskId> scattered;
    for (int j = 0; j < family_groups(f); ++j) {
      if (!keeps_any(s, reduce_group(t, j, f)))
        continue;
      TaskId& chain = reduce_chain[chain_index(s, t, f, j)];
      const TaskId id = add_group_collective(s, p, step, reduce_group(t, j, f));
      if (chain != no_task)
        g.add_dependency(chain, id);
      chain = id;
      scattered.push_back(id);
    }
    done.insert(done.end(), scattered.begin(), scattered.end());
    if (shards_optimizer(plan.zero) && family_groups(f) > 1 && family_shard(f) > 0) {
      PassStep across = step;
      across.collective = CollectiveKind::all_reduce;
      across.bytes = step.bytes / family_shard(f);
      for (int i = 0; i < family_shard(f); ++i) {
        if (!keeps_any(s, replicate_group(t, i, f)))
          continue;
        const TaskId id = add_group_collective(s, p, across, replicate_group(t, i, f));
        for (TaskId before : scattered)
          g.add_dependency(before, id);
        done.push_back(id);
      }
    }
  };
  auto reduce_gradients = [&](int s, int t, const PipelinePass& p, const PassStep& step) {
    std::vector<TaskId> done;
    if (step.kind == PassStep::Kind::expert_bucket) {
      for (int f = 1; f < families; ++f)
        reduce_family(s, t, f, p, step, done);
    } else {
      reduce_family(s, t, 0, p, step, done);
    }
    return done;
  };
  // A compute task of member q (its stream order, and any collective or gather it must wait for).
  auto add_compute = [&](int s, int q, const PipelinePass& p, std::size_t begin, std::size_t end, double share,
                         ComputePart part = ComputePart::whole) {
    const TaskId id = g.add_compute({.device      = device(s, q),
                                     .phase       = p.phase,
                                     .stage       = s,
                                     .micro_batch = p.micro_batch,
                                     .samples     = plan.micro_batch_size,
                                     .layer_begin = static_cast<std::uint32_t>(begin),
                                     .layer_end   = static_cast<std::uint32_t>(end),
                                     .share       = share,
                                     .part        = part});
    const auto dev = static_cast<std::size_t>(device(s, q));
    TaskId& before = last[dev];
    if (before != no_task && g.kind(before) == TaskKind::collective)
      g.add_dependency(before, id);  // the stream order covers a compute predecessor
    for (TaskId gather : pending_gather[dev])
      g.add_dependency(gather, id);
    pending_gather[dev].clear();
    if (pending_ring[dev] != no_task) {
      g.add_dependency(pending_ring[dev], id);
      pending_ring[dev] = no_task;
    }
    for (TaskId wait : pending_wait[dev])
      g.add_dependency(wait, id);
    pending_wait[dev].clear();
    before = id;
    pass(s, q, p.micro_batch, p.phase).push_back(id);
    return id;
  };

  // A pass's steps depend only on its chunk, its phase and whether it is the chunk's first forward or
  // last backward (its edge): computed once each. Every rank's program in order, with each pass's steps.
  std::vector<std::vector<PassStep>> steps_of(static_cast<std::size_t>(chunks) * 4);
  auto steps_for = [&](int s, Phase phase, bool edge) -> const std::vector<PassStep>& {
    const std::size_t at = static_cast<std::size_t>(s) * 4 + (phase == Phase::forward ? 0 : 2) + (edge ? 1 : 0);
    if (steps_of[at].empty())
      steps_of[at] = pass_steps(plan.stages[static_cast<std::size_t>(s)], phase, plan, edge);
    return steps_of[at];
  };
  struct Program {
    std::vector<PipelinePass> order;
    std::vector<const std::vector<PassStep>*> steps;  // per pass
  };
  std::vector<Program> programs(static_cast<std::size_t>(k));
  // Room for about every task at once, counted as the steps below add them (most steps exactly;
  // reductions and gathers at most), so that the graph's vectors seldom grow: each pass's steps on
  // the members, replicas or ranks that run them, the activations and gradients between chunks,
  // and the flush.
  std::size_t computes = 0, collectives = 0, transfers = 0;
  // A reduction: each group's, and with hybrid sharding the all-reduce of each shard across groups.
  const auto per_reduction = static_cast<std::size_t>(
      families * (max_groups + (shards_optimizer(plan.zero) && max_groups > 1 ? std::max(shard, expert_shard) : 0)));
  for (int rank = 0; rank < k; ++rank) {
    Program& program = programs[static_cast<std::size_t>(rank)];
    program.order = stream_order(plan.schedule, k, plan.virtual_stages, rank, m_count);
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
      const auto s = static_cast<std::size_t>(p.chunk);
      const bool edge = p.phase == Phase::backward ? i == last_backward[s] : i == first_forward[s];
      program.steps.push_back(&steps_for(p.chunk, p.phase, edge));
      const std::size_t members_here = kept_members[s].size(), ranks_here = kept_ranks[s].size();
      for (const PassStep& step : *program.steps.back())
        switch (step.kind) {
        case PassStep::Kind::compute: computes += members_here; break;
        case PassStep::Kind::tp_sync: collectives += kept_replicas[s].size(); break;
        case PassStep::Kind::tp_overlap:
          computes += members_here;
          collectives += kept_replicas[s].size() * 2 * step.overlapped.size();
          break;
        case PassStep::Kind::tp_async:
          computes += members_here * 2;
          collectives += kept_replicas[s].size() * (step.overlapped.size() + step.after.size());
          break;
        case PassStep::Kind::dp_sync: collectives += ranks_here; break;
        case PassStep::Kind::expert: collectives += ranks_here * static_cast<std::size_t>(dp / ep); break;
        case PassStep::Kind::bucket:
        case PassStep::Kind::expert_bucket: collectives += ranks_here * per_reduction; break;
        case PassStep::Kind::gather: collectives += ranks_here * static_cast<std::size_t>(families * max_groups); break;
        case PassStep::Kind::ring:
          if (plan.cp_algorithm == CpAlgorithm::all_gather) {
            computes += members_here;
            collectives += members_here * 3;  // at most: two gathers and a reduce-scatter per cp group
            break;
          }
          computes += members_here * static_cast<std::size_t>(cp);
          transfers += members_here * static_cast<std::size_t>(cp);
          break;
        }
      transfers += members_here;  // the pass's activations (forward) or their gradients (backward)
    }
  }
  collectives += static_cast<std::size_t>(chunks * tp) * (per_reduction + static_cast<std::size_t>(families * max_groups));  // the flush
  g.reserve(computes + collectives + transfers, computes, transfers, collectives);

  auto after_pass = [&](const Ends& from, TaskId to) {
    g.add_dependency(from.back(), to);
    for (TaskId wait : from.waits)
      g.add_dependency(wait, to);
  };
  // The transfer a pass of chunk s sends to the next chunk's device (forward) or the previous one's
  // (backward), made once, after the pass; no_task when there is none (an end of the pipeline, or
  // consecutive chunks on one device).
  auto send_of = [&](int s, int q, int m, Phase phase) {
    const int to = phase == Phase::forward ? s + 1 : s - 1;
    if (to < 0 || to >= chunks || device(to, q) == device(s, q))
      return no_task;
    Ends& from = pass(s, q, m, phase);
    if (from.sent == no_task) {
      const int boundary = std::min(s, to); // the activations of the earlier chunk cross it
      const double bytes =
          plan.stages[static_cast<std::size_t>(boundary)].activation_bytes * plan.micro_batch_size / tp;
      from.sent = g.add_transfer(
          {.src = device(s, q), .dst = device(to, q), .bytes = bytes, .phase = phase, .stage = s, .micro_batch = m});
      after_pass(from, from.sent);
    }
    return from.sent;
  };

  for (int rank = 0; rank < k; ++rank) {
    const Program& program = programs[static_cast<std::size_t>(rank)];
    for (std::size_t i = 0; i < program.order.size(); ++i) {
      const PipelinePass& p = program.order[i];
      const int s = p.chunk;
      const StagePlan& stage = plan.stages[static_cast<std::size_t>(s)];
      bool chunk_gathers_dispatched = false;  // overlap_param_gather: this pass's gathers have their wait
      for (const PassStep& step : *program.steps[i]) {
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
        case PassStep::Kind::tp_overlap: {
          // Transformer Engine's userbuffers: (tp - 1) / tp of each collective beside the layer's
          // compute, the last chunk after it (blocking, once the chunks before it are through).
          std::vector<TaskId> beside;
          for (int r : kept_replicas[static_cast<std::size_t>(s)])
            for (const auto& [kind, bytes] : step.overlapped)
              beside.push_back(add_group_collective(
                  s, p, {.kind = PassStep::Kind::tp_sync, .collective = kind, .bytes = bytes * (tp - 1) / tp}, tp_group(r),
                  &tp_devices[static_cast<std::size_t>(s * dp + r)], &tp_kept[static_cast<std::size_t>(s * dp + r)],
                  false));
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
          break;
        }
        case PassStep::Kind::tp_async: {
          // Megatron's column-parallel backward: the input's gather issued, the input gradient's GEMM
          // (and the rest of the layer's backward, recomputation included); the stream waits for the
          // gather, then the input gradient's reduction is issued and the weight gradient's GEMM runs;
          // the stream waits for the reduction before its next task.
          std::vector<TaskId> gathers, reductions;
          for (int r : kept_replicas[static_cast<std::size_t>(s)]) {
            const auto at = static_cast<std::size_t>(s * dp + r);
            auto issue    = [&](const std::vector<std::pair<CollectiveKind, double>>& beside,
                             std::vector<TaskId>& issued) {
              issued.clear();
              for (const auto& [kind, bytes] : beside)
                issued.push_back(
                       add_group_collective(s, p, {.kind = PassStep::Kind::tp_sync, .collective = kind, .bytes = bytes},
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
              const TaskId weight_gradient =
                  add_compute(s, q, p, step.begin, step.end, 1.0, ComputePart::weight_gradient);
              for (TaskId gather : gathers)
                g.add_dependency(gather, weight_gradient);
              auto& wait = pending_wait[static_cast<std::size_t>(device(s, q))];
              wait.insert(wait.end(), reductions.begin(), reductions.end());
            }
          }
          break;
        }
        case PassStep::Kind::bucket:
        case PassStep::Kind::expert_bucket:
          for (int t : kept_ranks[static_cast<std::size_t>(s)]) {
            auto& buckets = (step.kind == PassStep::Kind::bucket ? bucket_tasks : expert_bucket_tasks)[static_cast<std::size_t>(s * tp + t)];
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
        case PassStep::Kind::gather: {
          // ZeRO-3: the unit's parameters (dense, then the experts' over their own groups), gathered on
          // each group's gather stream once the compute before the previous gather is done; the unit's
          // first compute task waits for them.
          // ZeRO 1-2 with overlap_param_gather (a chunk's first forward): as Megatron-Core's interleaved
          // schedule, the first two chunks' buckets are dispatched at the start and each next chunk's
          // once the chunk before it starts its first forward; every bucket waits for the dispatch.
          const bool by_chunk = !shards_parameters(plan.zero);
          if (by_chunk && !chunk_gathers_dispatched) {
            for (int q = 0; q < members; ++q) {
              const auto d = static_cast<std::size_t>(device(s, q));
              chunk_gather_wait[d] = at_chunk_gather[d];
              at_chunk_gather[d] = last[d];
            }
            chunk_gathers_dispatched = true;
          }
          std::vector<TaskId> waits(static_cast<std::size_t>(members), no_task);
          for (int q = 0; q < members; ++q) {
            const auto d = static_cast<std::size_t>(device(s, q));
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
                CollectiveTask c{.kind = CollectiveKind::all_gather, .algorithm = plan.dp_algorithm,
                                 .fidelity = plan.dp_fidelity, .group = {}, .bytes = bytes, .stage = s,
                                 .micro_batch = p.micro_batch, .phase = p.phase, .role = CollectiveRole::parameters};
                const std::vector<int> group = reduce_group(t, j, f);
                for (int q : group)
                  c.group.push_back(device(s, q));
                const TaskId id = g.add_collective(std::move(c));
                TaskId& chain = gather_chain[chain_index(s, t, f, j)];
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
          break;
        }
        case PassStep::Kind::ring: {
          // Ring attention: chunk 0 on the GPU's own K/V; before chunk j it receives the block the
          // GPU before it in the cp ring received at step j - 1 (its own block at step 1). Forward
          // passes K/V on as they arrive; backward passes K/V with the dK/dV accumulated so far, so a
          // step also waits for the sender's chunk before it, and after the last chunk one more step
          // returns each block's dK/dV to its owner, whose next compute waits for it. A recomputed
          // layer's backward chunks also rerun its forward (OpCosts), whose ring sends each K/V block
          // once more: 3 blocks a step. A pass sends (cp - 1) K/V blocks forward, (cp - 1) x 2 + 1 in
          // backward, (cp - 1) x 3 + 1 recomputed: the forward ring's cp - 1 more.
          const bool backward = p.phase == Phase::backward;
          if (plan.cp_algorithm == CpAlgorithm::all_gather) {
            // Llama 3's all-gather (Transformer Engine's AttnFuncWithCPAndKVAllGather): the layer runs
            // whole on the GPU's queries once the K/V of every chunk are gathered over its cp group;
            // its backward gathers them again (first once more for the recomputed forward, which
            // Megatron's checkpoint reruns) and reduce-scatters dK/dV after it. Blocking collectives
            // over each cp group (tensor rank t of replicas g cp ... g cp + cp - 1): none overlaps.
            auto over_cp_groups = [&](CollectiveKind kind) {
              PassStep x = step;
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
            break;
          }
          const double block = step.bytes / cp;  // one K/V (or dK/dV) block
          const double blocks_per_step = !backward ? 1 : step.recomputed ? 3 : 2;
          auto ring_next = [&](int q, int by) {
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
            chunk[static_cast<std::size_t>(q)] = add_compute(s, q, p, step.begin, step.end, share);
          }
          auto send = [&](int q, int j, double bytes, const std::vector<TaskId>& waits) {
            const int next = ring_next(q, 1);
            const TaskId x = g.add_transfer({.src = device(s, q), .dst = device(s, next), .bytes = bytes,
                                             .phase = p.phase, .stage = s, .micro_batch = p.micro_batch,
                                             .kind = TransferKind::context, .server = j});
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
              const TaskId ready = j > 1 ? incoming[at] : before_ring[at] != no_task ? before_ring[at] : chunk[at];
              const auto [next, x] = send(q, j, blocks_per_step * block, {ready, backward ? chunk[at] : no_task});
              arrived[static_cast<std::size_t>(next)] = x;
            }
            for (int q : kept_members[static_cast<std::size_t>(s)]) {
              const auto at = static_cast<std::size_t>(q);
              chunk[at] = add_compute(s, q, p, step.begin, step.end, share);
              g.add_dependency(arrived[at], chunk[at]);
            }
            incoming = std::move(arrived);
          }
          if (backward && cp > 1)
            for (int q : kept_members[static_cast<std::size_t>(s)]) {  // dK/dV home: one block
              const auto at = static_cast<std::size_t>(q);
              const auto [owner, x] = send(q, cp, block, {incoming[at], chunk[at]});
              pending_ring[static_cast<std::size_t>(device(s, owner))] = x;
            }
          break;
        }
        case PassStep::Kind::compute: {
          // The experts layer on its own (between its all-to-alls) runs at its ep rank's load.
          const bool experts =
              ep > 1 && !plan.expert_compute.empty() &&
              std::any_of(stage.exchanges.begin(), stage.exchanges.end(),
                          [&](const ExpertExchange& x) { return step.begin == x.layer && step.end == x.layer + 1; });
          for (int q : kept_members[static_cast<std::size_t>(s)])
            add_compute(s, q, p, step.begin, step.end,
                        experts ? plan.expert_compute[static_cast<std::size_t>((q / tp) % ep)] : 1.0);
          break;
        }
        }
      }
      // A pass that ends with tp_async's reductions sends once they are through.
      if (!stage.tp_collectives.empty() && plan.tp_backward_overlap)
        for (int q : kept_members[static_cast<std::size_t>(s)]) {
          const auto& wait = pending_wait[static_cast<std::size_t>(device(s, q))];
          if (!wait.empty())
            pass(s, q, p.micro_batch, p.phase).waits = wait;
        }
      // Blocking p2p: the pass sends now, and the device's next task waits for the send.
      if (!plan.overlap_p2p_comm)
        for (int q : kept_members[static_cast<std::size_t>(s)])
          if (const TaskId x = send_of(s, q, p.micro_batch, p.phase); x != no_task)
            pending_wait[static_cast<std::size_t>(device(s, q))].push_back(x);
    }
  }

  // Activations flow down the pipeline, their gradients flow back up; each tensor rank sends its
  // 1/tp share to the same rank of the next stage.
  for (int s = 0; s + 1 < chunks; ++s)
    for (int q : kept_members[static_cast<std::size_t>(s)])
      for (int m = 0; m < m_count; ++m) {
        if (device(s, q) == device(s + 1, q)) {  // consecutive chunks on one device
          after_pass(pass(s, q, m, Phase::forward), pass(s + 1, q, m, Phase::forward).front());
          after_pass(pass(s + 1, q, m, Phase::backward), pass(s, q, m, Phase::backward).front());
          continue;
        }
        g.add_dependency(send_of(s, q, m, Phase::forward), pass(s + 1, q, m, Phase::forward).front());
        g.add_dependency(send_of(s + 1, q, m, Phase::backward), pass(s, q, m, Phase::backward).front());
      }

  // Flush: per chunk and tensor rank, reduce the gradients across replicas (unless buckets did) and
  // the experts' over the replicas holding them; then, once every chunk's reductions are issued (as
  // Megatron-LM finishes the gradient sync before the optimizer), step the optimizer (on its shards
  // with ZeRO) and with ZeRO 1 and 2 gather the parameters on the reductions' stream.
  std::vector<std::vector<TaskId>> reduced_of(static_cast<std::size_t>(chunks * tp));
  std::vector<std::vector<TaskId>> expert_reduced_of(reduced_of.size());
  for (int s = 0; s < chunks; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
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
  if (!plan.optimizer_step)
    return g;
  for (int s = 0; s < chunks; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    const double dense = stage.gradient_bytes, experts = ep > 1 ? stage.expert_gradient_bytes : 0.0;
    const double optimizer_share = !shards_optimizer(plan.zero) ? 1.0
                                   : dense + experts > 0 ? (dense / shard + experts / expert_shard) / (dense + experts)
                                                         : 1.0 / shard;
    for (int t = 0; t < tp; ++t) {
      const auto at = static_cast<std::size_t>(s * tp + t);
      const std::vector<TaskId>& buckets = bucket_tasks[at];
      const bool bucketed = dp > 1 && !buckets.empty();
      const std::vector<TaskId>& reduced = reduced_of[at];
      const std::vector<TaskId>& expert_reduced = expert_reduced_of[at];
      std::vector<TaskId> steps(static_cast<std::size_t>(dp), no_task);  // per replica
      for (int q : dp_group(t)) {
        if (!keep(s, q))
          continue;
        TaskId opt = g.add_compute({.device = device(s, q), .phase = Phase::optimizer, .stage = s,
                                    .micro_batch = -1, .samples = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end = static_cast<std::uint32_t>(stage.layers.end),
                                    .share = optimizer_share});
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
        for (TaskId wait : pending_wait[static_cast<std::size_t>(d)]) // the last backward's tp_async
          g.add_dependency(wait, opt);
        steps[static_cast<std::size_t>(q / tp)] = opt;
      }
      if (dp > 1 && gathers_per_step(plan.zero) && !plan.overlap_param_gather)
        for (int f = 0; f < families; ++f)
          for (int j = 0; j < family_groups(f); ++j) {
            const std::vector<int> group = reduce_group(t, j, f);
            if (group.size() < 2 || (f > 0 && experts <= 0) || !keeps_any(s, group))
              continue;
            CollectiveTask c{.kind = CollectiveKind::all_gather, .algorithm = plan.dp_algorithm,
                             .fidelity = plan.dp_fidelity, .group = {},
                             .bytes = (f == 0 ? dense : experts) * plan.gather_per_gradient_byte, .stage = s,
                             .micro_batch = -1, .phase = Phase::optimizer, .role = CollectiveRole::parameters};
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

}  // namespace ddlsim::sim
