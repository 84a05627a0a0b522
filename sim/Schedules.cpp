#include "sim/Schedules.hpp"

#include "sim/Fold.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

int chunks_of(const PipelinePlan& plan) { return static_cast<int>(plan.stages.size()); }

// One pass of a stage as compute segments and collectives: blocking ones (synchronized batch norm
// across the replicas, tensor-parallel ones inside the group), gradient buckets (not blocking),
// ZeRO-3 parameter gathers (not blocking; the next compute segment waits for them) and ring
// attention (a compute segment of one layer run in cp chunks with K/V transfers between them).
struct Step {
  enum class Kind { compute, dp_sync, tp_sync, bucket, gather, ring } kind = Kind::compute;
  std::size_t begin = 0, end = 0;  // compute and ring: layers [begin, end)
  CollectiveKind collective = CollectiveKind::all_reduce;
  double bytes = 0;                // collectives: total bytes (per-sample sizes already scaled); ring: K/V bytes
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
  const bool forward = phase == Phase::forward;
  if (plan.dp > 1) {
    for (const SyncPoint& p : stage.sync_points)
      events.push_back({p.layer, {Step::Kind::dp_sync, 0, 0, CollectiveKind::all_reduce, p.bytes}});
    // ZeRO 2 and 3 reduce-scatter every micro-batch's gradients; otherwise the last backward's only.
    const CollectiveKind reduce = plan.zero > 0 ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
    if (!forward && (last_backward || plan.zero >= 2)) {
      if (plan.zero >= 2 && !stage.units.empty() && (plan.zero >= 3 || stage.buckets.empty()))
        for (const ShardUnit& u : stage.units)  // per unit, as FSDP reduces each wrapped module
          events.push_back({u.begin, {Step::Kind::bucket, 0, 0, reduce, u.bytes}});
      else if (!stage.buckets.empty())
        for (const GradientBucket& g : stage.buckets)
          events.push_back({g.layer, {Step::Kind::bucket, 0, 0, reduce, g.bytes}});
      else if (plan.zero == 2)
        events.push_back({stage.layers.begin, {Step::Kind::bucket, 0, 0, reduce, stage.gradient_bytes}});
    }
    if (plan.zero >= 3 && plan.shard > 1)
      for (const ShardUnit& u : stage.units)
        events.push_back({forward ? u.begin : u.end,
                          {Step::Kind::gather, u.begin, u.end, CollectiveKind::all_gather, u.bytes}});
  }
  if (plan.tp > 1)
    for (const TpCollective& c : stage.tp_collectives)
      if (c.phase == phase) {
        const std::size_t position = forward ? (c.before ? c.layer : c.layer + 1) : (c.before ? c.layer + 1 : c.layer);
        events.push_back({position, {Step::Kind::tp_sync, 0, 0, c.kind, c.bytes_per_sample * b}});
      }
  if (plan.cp > 1)
    for (const RingAttention& r : stage.rings)
      events.push_back({forward ? r.layer : r.layer + 1,
                        {Step::Kind::ring, r.layer, r.layer + 1, CollectiveKind::all_gather,
                         r.kv_bytes_per_sample * b * (forward ? 1 : 2)}});
  // Forward: increasing position; backward: decreasing. At one position: a bucket first (it closes
  // the work before it), then a gather (it opens the work after it), a ring last (it is that work).
  auto rank = [](const Step& s) {
    return s.kind == Step::Kind::bucket ? 0 : s.kind == Step::Kind::gather ? 2 : s.kind == Step::Kind::ring ? 3 : 1;
  };
  std::stable_sort(events.begin(), events.end(), [&](const Event& x, const Event& y) {
    if (x.position != y.position)
      return forward ? x.position < y.position : x.position > y.position;
    return rank(x.step) < rank(y.step);
  });
  std::vector<Step> steps;
  if (forward) {
    std::size_t start = stage.layers.begin;
    for (const Event& e : events) {
      if (e.position > start)
        steps.push_back({Step::Kind::compute, start, e.position, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      start = std::max(start, e.step.kind == Step::Kind::ring ? e.step.end : e.position);
    }
    if (start < stage.layers.end)
      steps.push_back({Step::Kind::compute, start, stage.layers.end, CollectiveKind::all_reduce, 0});
  } else {
    std::size_t end = stage.layers.end;
    for (const Event& e : events) {
      if (e.position < end)
        steps.push_back({Step::Kind::compute, e.position, end, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      end = std::min(end, e.step.kind == Step::Kind::ring ? e.step.begin : e.position);
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
  const int cp = plan.cp;
  const int shard = plan.zero > 0 ? plan.shard : dp;  // replicas per reduction group
  const int members = dp * tp;  // GPUs per stage: member q = r * tp + t
  const int chunks = static_cast<int>(plan.stages.size());
  TaskGraph g(plan.devices());
  auto device = [&](int s, int q) { return plan.device(s, q / tp, q % tp); };
  // Under a fold, only representatives run tasks, and only collectives with one of them exist.
  auto keep = [&](int s, int q) { return plan.fold == nullptr || plan.fold->is_representative(device(s, q)); };
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

  // Tasks of each pass of the members that run tasks, in order: ids[((s * kept + at) * M + m) * 2 +
  // phase], `at` the member's place among its chunk's kept members (slot).
  std::size_t kept = 0;
  std::vector<int> slot(static_cast<std::size_t>(chunks * members), -1);
  for (std::size_t s = 0; s < kept_members.size(); ++s) {
    kept = std::max(kept, kept_members[s].size());
    for (std::size_t at = 0; at < kept_members[s].size(); ++at)
      slot[s * static_cast<std::size_t>(members) + static_cast<std::size_t>(kept_members[s][at])] = static_cast<int>(at);
  }
  std::vector<std::vector<TaskId>> ids(static_cast<std::size_t>(chunks) * kept * static_cast<std::size_t>(m_count) * 2);
  auto pass = [&](int s, int q, int m, Phase phase) -> std::vector<TaskId>& {
    const auto at = static_cast<std::size_t>(slot[static_cast<std::size_t>(s * members + q)]);
    return ids[((static_cast<std::size_t>(s) * kept + at) * static_cast<std::size_t>(m_count) + static_cast<std::size_t>(m)) * 2 +
               (phase == Phase::backward ? 1 : 0)];
  };
  // The last task of each device in program order: compute on its stream, or a blocking collective.
  std::vector<TaskId> last(static_cast<std::size_t>(plan.devices()), no_task);
  // Gradient reductions of each chunk and tensor rank (not blocking; the optimizer waits for them).
  std::vector<std::vector<TaskId>> bucket_tasks(static_cast<std::size_t>(chunks * tp));
  // One communication stream per reduction group: its reductions run one after another, and so do
  // its ZeRO-3 gathers (on their own stream). Keyed by (chunk, tensor rank, group).
  const int groups = dp / shard;
  std::vector<TaskId> reduce_chain(static_cast<std::size_t>(chunks * tp * groups), no_task);
  std::vector<TaskId> gather_chain(static_cast<std::size_t>(chunks * tp * groups), no_task);
  // ZeRO-3: per device, the gather the next compute task waits for, and the program position when
  // the previous gather was issued (a gather waits for the compute two units back: one prefetch).
  std::vector<TaskId> pending_gather(static_cast<std::size_t>(plan.devices()), no_task);
  std::vector<TaskId> at_previous_gather(static_cast<std::size_t>(plan.devices()), no_task);
  // Ring attention's backward: the dK/dV returning to a device, which its next compute waits for.
  std::vector<TaskId> pending_ring(static_cast<std::size_t>(plan.devices()), no_task);

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
    for (const ShardUnit& u : stage.units)
      if (u.begin < stage.layers.begin || u.end > stage.layers.end || u.begin >= u.end)
        throw std::invalid_argument("ZeRO unit outside its stage");
    for (const RingAttention& r : stage.rings)
      if (r.layer < stage.layers.begin || r.layer >= stage.layers.end)
        throw std::invalid_argument("ring attention layer outside its stage");
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
                     .micro_batch = step.kind == Step::Kind::bucket && plan.zero < 2 ? -1 : p.micro_batch,
                     .phase = p.phase,
                     .role = tensor                                ? CollectiveRole::tensor_parallel
                             : step.kind == Step::Kind::dp_sync ? CollectiveRole::sync_batch_norm
                                                                 : CollectiveRole::gradients};
    for (int q : group)
      c.group.push_back(device(s, q));
    const TaskId id = g.add_collective(std::move(c));
    for (int q : group) {
      if (!keep(s, q))
        continue;
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
  // Members of tensor rank t in reduction group j (replicas j * shard ... (j + 1) * shard - 1).
  auto reduce_group = [&](int t, int j) {
    std::vector<int> group;
    for (int r = j * shard; r < (j + 1) * shard; ++r)
      group.push_back(r * tp + t);
    return group;
  };
  // Hybrid sharding: shard i of every group, all-reduced across the groups.
  auto replicate_group = [&](int t, int i) {
    std::vector<int> group;
    for (int j = 0; j < groups; ++j)
      group.push_back((j * shard + i) * tp + t);
    return group;
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
  // A gradient reduction of `bytes` for chunk s and tensor rank t over every reduction group (plus,
  // with hybrid sharding, the all-reduce of each shard across the groups): its tasks, on each
  // group's communication stream. `wait` (if any) must finish first.
  auto reduce_gradients = [&](int s, int t, const PipelinePass& p, const Step& step) {
    std::vector<TaskId> done;
    for (int j = 0; j < groups; ++j) {
      if (!keeps_any(s, reduce_group(t, j)))
        continue;
      TaskId& chain = reduce_chain[static_cast<std::size_t>((s * tp + t) * groups + j)];
      const TaskId id = add_group_collective(s, p, step, reduce_group(t, j));
      if (chain != no_task)
        g.add_dependency(chain, id);
      chain = id;
      done.push_back(id);
    }
    if (plan.zero > 0 && groups > 1 && shard > 0) {
      std::vector<TaskId> scattered = done;
      Step across = step;
      across.collective = CollectiveKind::all_reduce;
      across.bytes = step.bytes / shard;
      for (int i = 0; i < shard; ++i) {
        if (!keeps_any(s, replicate_group(t, i)))
          continue;
        const TaskId id = add_group_collective(s, p, across, replicate_group(t, i));
        for (TaskId before : scattered)
          g.add_dependency(before, id);
        done.push_back(id);
      }
    }
    return done;
  };
  // A compute task of member q (its stream order, and any collective or gather it must wait for).
  auto add_compute = [&](int s, int q, const PipelinePass& p, std::size_t begin, std::size_t end, double share) {
    const TaskId id = g.add_compute({.device = device(s, q), .phase = p.phase, .stage = s,
                                     .micro_batch = p.micro_batch, .samples = plan.micro_batch_size,
                                     .layer_begin = static_cast<std::uint32_t>(begin),
                                     .layer_end = static_cast<std::uint32_t>(end), .share = share});
    const auto dev = static_cast<std::size_t>(device(s, q));
    TaskId& before = last[dev];
    if (before != no_task && g.kind(before) == TaskKind::collective)
      g.add_dependency(before, id);  // the stream order covers a compute predecessor
    for (TaskId* pending : {&pending_gather[dev], &pending_ring[dev]})
      if (*pending != no_task) {
        g.add_dependency(*pending, id);
        *pending = no_task;
      }
    before = id;
    pass(s, q, p.micro_batch, p.phase).push_back(id);
    return id;
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
          for (int t : kept_ranks[static_cast<std::size_t>(s)])
            add_group_collective(s, p, step, dp_group(t));
          break;
        case Step::Kind::tp_sync:
          for (int r : kept_replicas[static_cast<std::size_t>(s)])
            add_group_collective(s, p, step, tp_group(r));
          break;
        case Step::Kind::bucket:
          for (int t : kept_ranks[static_cast<std::size_t>(s)]) {
            auto& buckets = bucket_tasks[static_cast<std::size_t>(s * tp + t)];
            for (TaskId id : reduce_gradients(s, t, p, step))
              buckets.push_back(id);
          }
          break;
        case Step::Kind::gather:
          // ZeRO-3: the unit's parameters, gathered on each group's gather stream once the compute
          // before the previous gather is done; the unit's first compute task waits for it.
          for (int t : kept_ranks[static_cast<std::size_t>(s)])
            for (int j = 0; j < groups; ++j) {
              if (!keeps_any(s, reduce_group(t, j)))
                continue;
              CollectiveTask c{.kind = CollectiveKind::all_gather, .algorithm = plan.dp_algorithm,
                               .fidelity = plan.dp_fidelity, .group = {}, .bytes = step.bytes, .stage = s,
                               .micro_batch = p.micro_batch, .phase = p.phase, .role = CollectiveRole::parameters};
              const std::vector<int> group = reduce_group(t, j);
              for (int q : group)
                c.group.push_back(device(s, q));
              const TaskId id = g.add_collective(std::move(c));
              TaskId& chain = gather_chain[static_cast<std::size_t>((s * tp + t) * groups + j)];
              if (chain != no_task)
                g.add_dependency(chain, id);
              chain = id;
              for (int q : group) {
                if (!keep(s, q))
                  continue;
                const auto dev = static_cast<std::size_t>(device(s, q));
                if (at_previous_gather[dev] != no_task)
                  g.add_dependency(at_previous_gather[dev], id);
                at_previous_gather[dev] = last[dev];
                pending_gather[dev] = id;
              }
            }
          break;
        case Step::Kind::ring: {
          // Ring attention: chunk 0 on the GPU's own K/V; before chunk j it receives the block the
          // GPU before it in the cp ring received at step j - 1 (its own block at step 1). Forward
          // passes K/V on as they arrive; backward passes K/V with the dK/dV accumulated so far, so a
          // step also waits for the sender's chunk before it, and after the last chunk one more step
          // returns each block's dK/dV to its owner, whose next compute waits for it.
          const bool backward = p.phase == Phase::backward;
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
              const auto [next, x] = send(q, j, step.bytes / cp, {ready, backward ? chunk[at] : no_task});
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
            for (int q : kept_members[static_cast<std::size_t>(s)]) {  // dK/dV home: half of a backward step's bytes
              const auto at = static_cast<std::size_t>(q);
              const auto [owner, x] = send(q, cp, step.bytes / cp / 2, {incoming[at], chunk[at]});
              pending_ring[static_cast<std::size_t>(device(s, owner))] = x;
            }
          break;
        }
        case Step::Kind::compute:
          for (int q : kept_members[static_cast<std::size_t>(s)])
            add_compute(s, q, p, step.begin, step.end, 1.0);
          break;
        }
      }
    }
  }

  // Activations flow down the pipeline, their gradients flow back up; each tensor rank sends its
  // 1/tp share to the same rank of the next stage.
  for (int s = 0; s + 1 < chunks; ++s) {
    const double bytes = plan.stages[static_cast<std::size_t>(s)].activation_bytes * plan.micro_batch_size / tp;
    for (int q : kept_members[static_cast<std::size_t>(s)])
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

  // Flush: per chunk and tensor rank, reduce the gradients across replicas (unless buckets did),
  // step the optimizer (on its shard with ZeRO), then with ZeRO 1 and 2 gather the parameters.
  const double optimizer_share = plan.zero > 0 ? 1.0 / shard : 1.0;
  for (int s = 0; s < chunks; ++s) {
    const auto& stage = plan.stages[static_cast<std::size_t>(s)];
    for (int t = 0; t < tp; ++t) {
      const std::vector<TaskId>& buckets = bucket_tasks[static_cast<std::size_t>(s * tp + t)];
      const bool bucketed = dp > 1 && !buckets.empty();
      std::vector<TaskId> reduced;
      if (dp > 1 && !bucketed) {
        // One reduction after the last backward: it waits for every member's program.
        const Step flush{Step::Kind::bucket, 0, 0,
                         plan.zero > 0 ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                         stage.gradient_bytes};
        const PipelinePass p{Phase::backward, -1, s};
        for (int q : dp_group(t))
          if (keep(s, q) && last[static_cast<std::size_t>(device(s, q))] == no_task)
            throw std::invalid_argument("a stage without tasks");
        reduced = reduce_gradients(s, t, p, flush);
      }
      if (!plan.optimizer_step)
        continue;
      std::vector<TaskId> steps(static_cast<std::size_t>(dp), no_task);  // per replica
      for (int q : dp_group(t)) {
        if (!keep(s, q))
          continue;
        TaskId opt = g.add_compute({.device = device(s, q), .phase = Phase::optimizer, .stage = s,
                                    .micro_batch = -1, .samples = 0,
                                    .layer_begin = static_cast<std::uint32_t>(stage.layers.begin),
                                    .layer_end = static_cast<std::uint32_t>(stage.layers.end),
                                    .share = optimizer_share});
        for (TaskId before : bucketed ? buckets : reduced)
          g.add_dependency(before, opt);  // the stream order covers the backward
        if (!bucketed && reduced.empty() && g.kind(last[static_cast<std::size_t>(device(s, q))]) == TaskKind::collective)
          g.add_dependency(last[static_cast<std::size_t>(device(s, q))], opt);
        steps[static_cast<std::size_t>(q / tp)] = opt;
      }
      if (dp > 1 && (plan.zero == 1 || plan.zero == 2))
        for (int j = 0; j < groups; ++j) {
          if (!keeps_any(s, reduce_group(t, j)))
            continue;
          CollectiveTask c{.kind = CollectiveKind::all_gather, .algorithm = plan.dp_algorithm,
                           .fidelity = plan.dp_fidelity, .group = {}, .bytes = stage.gradient_bytes, .stage = s,
                           .micro_batch = -1, .phase = Phase::optimizer, .role = CollectiveRole::parameters};
          for (int q : reduce_group(t, j))
            c.group.push_back(device(s, q));
          const TaskId id = g.add_collective(std::move(c));
          for (int r = j * shard; r < (j + 1) * shard; ++r)
            if (steps[static_cast<std::size_t>(r)] != no_task)
              g.add_dependency(steps[static_cast<std::size_t>(r)], id);
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
  if (plan.zero < 0 || plan.zero > 3 || (plan.zero > 0 && (plan.shard < 1 || plan.dp % plan.shard != 0)))
    throw std::invalid_argument("ZeRO stage must be 0-3 with a shard group dividing the replicas");
  if (plan.stages.size() % static_cast<std::size_t>(plan.virtual_stages) != 0)
    throw std::invalid_argument("the number of model chunks must be a multiple of virtual_stages");
  if (plan.schedule != ScheduleKind::interleaved && plan.virtual_stages != 1)
    throw std::invalid_argument("virtual_stages > 1 needs the interleaved schedule");
  if (plan.fold != nullptr && plan.fold->devices() != plan.devices())
    throw std::invalid_argument("the fold must act on the plan's devices");
  return build_pipeline(plan);
}

}  // namespace ddlsim::sim
