#include "sim/PassSteps.hpp"

#include <algorithm>

namespace ddlsim::sim {

std::vector<PassStep> pass_steps(const StagePlan& stage, Phase phase, const PipelinePlan& plan, bool edge)
{
  const bool last_backward = edge && phase == Phase::backward;
  // An event at position p happens, in forward, once the layers before p are done; in backward,
  // once the layers at and after p are done.
  struct Event {
    std::size_t position;
    PassStep step;
  };
  std::vector<Event> events;
  const double b = plan.micro_batch_size;
  const bool forward = phase == Phase::forward;
  if (plan.dp > 1) {
    for (const SyncPoint& p : stage.sync_points)
      events.push_back({p.layer, {PassStep::Kind::dp_sync, 0, 0, CollectiveKind::all_reduce, p.bytes}});
    // ZeRO 2 and 3 reduce-scatter every micro-batch's gradients; otherwise the last backward's only.
    const CollectiveKind reduce = gradient_reduction(plan.zero);
    if (!forward && (last_backward || shards_gradients(plan.zero))) {
      if (reduces_per_block(plan.zero, !stage.buckets.empty()) && !stage.units.empty())
        for (const ShardUnit& u : stage.units)  // per unit, as FSDP reduces each wrapped module
          events.push_back(
              {u.begin, {PassStep::Kind::bucket, 0, 0, reduce, u.gradient_bytes > 0 ? u.gradient_bytes : u.bytes}});
      else if (!stage.buckets.empty())
        for (const GradientBucket& g : stage.buckets)
          events.push_back({g.layer, {PassStep::Kind::bucket, 0, 0, reduce, g.bytes}});
      else if (plan.zero == ZeroStage::gradients)
        events.push_back({stage.layers.begin, {PassStep::Kind::bucket, 0, 0, reduce, stage.gradient_bytes}});
      // ZeRO 2 and 3 reduce-scatter the experts' gradients after every backward, over their own groups.
      if (shards_gradients(plan.zero) && stage.expert_gradient_bytes > 0)
        events.push_back({stage.layers.begin, {.kind = PassStep::Kind::expert_bucket, .collective = reduce,
                                               .bytes = stage.expert_gradient_bytes}});
    }
    if (shards_parameters(plan.zero))
      for (const ShardUnit& u : stage.units)
        if ((plan.shard > 1 && u.bytes > 0) || (plan.expert_shard > 1 && u.expert_bytes > 0))
          events.push_back({forward ? u.begin : u.end,
                            {.kind = PassStep::Kind::gather, .begin = u.begin, .end = u.end,
                             .collective = CollectiveKind::all_gather, .bytes = plan.shard > 1 ? u.bytes : 0.0,
                             .expert_bytes = plan.expert_shard > 1 ? u.expert_bytes : 0.0}});
    // Overlapped ZeRO 1-2 gathers: per gradient bucket (listed from the stage's end), before its
    // first layer; the experts' parameters with the first bucket the forward reaches.
    if (forward && edge && plan.overlap_param_gather && gathers_per_step(plan.zero))
      for (std::size_t i = 0; i < stage.buckets.size(); ++i) {
        const GradientBucket& g = stage.buckets[i];
        const std::size_t end = i == 0 ? stage.layers.end : stage.buckets[i - 1].layer;
        const bool first = i + 1 == stage.buckets.size();
        const double bytes = plan.shard > 1 ? g.bytes * plan.gather_per_gradient_byte : 0.0;
        const double experts = first && plan.expert_shard > 1 ? stage.expert_gradient_bytes * plan.gather_per_gradient_byte : 0.0;
        if (bytes > 0 || experts > 0)
          events.push_back({g.layer, {.kind = PassStep::Kind::gather, .begin = g.layer, .end = end,
                                      .collective = CollectiveKind::all_gather, .bytes = bytes,
                                      .expert_bytes = experts}});
      }
  }
  if (plan.ep > 1)
    for (const ExpertExchange& x : stage.exchanges) {
      // Forward: dispatch before the experts, combine after. Backward: the combine's backward (the
      // output gradients to the experts, in the dispatch's direction) before their backward, the
      // dispatch's backward (the input gradients home) after it.
      const double bytes = x.bytes_per_sample * b;
      events.push_back({forward ? x.layer : x.layer + 1,
                        {.kind = PassStep::Kind::expert, .begin = x.layer, .end = x.layer + 1,
                         .collective = CollectiveKind::all_to_all, .bytes = bytes,
                         .role = forward ? CollectiveRole::expert_dispatch : CollectiveRole::expert_combine}});
      events.push_back({forward ? x.layer + 1 : x.layer,
                        {.kind = PassStep::Kind::expert, .begin = x.layer, .end = x.layer + 1,
                         .collective = CollectiveKind::all_to_all, .bytes = bytes,
                         .role = forward ? CollectiveRole::expert_combine : CollectiveRole::expert_dispatch,
                         .at_source = true}});
      // Full recomputation: the forward's dispatch and combine again, before the combine's backward
      // (the experts' recomputed forward is part of their backward compute task, as in OpCosts).
      if (!forward && plan.expert_recompute)
        for (const bool combine : {false, true})
          events.push_back({x.layer + 1,
                            {.kind = PassStep::Kind::expert, .begin = x.layer, .end = x.layer + 1,
                             .collective = CollectiveKind::all_to_all, .bytes = bytes,
                             .role = combine ? CollectiveRole::expert_combine : CollectiveRole::expert_dispatch,
                             .at_source = combine, .recomputed = true}});
    }
  if (plan.tp > 1)
    for (const TpCollective& c : stage.tp_collectives) {
      if (c.phase != phase)
        continue;
      const TpOverlap how = c.overlap(plan.tp_comm_overlap, plan.tp_backward_overlap);
      if (how == TpOverlap::backward_async) {
        // Megatron's asynchronous backward: one step per column layer, at the start of its backward.
        auto same = std::find_if(events.begin(), events.end(), [&](const Event& e) {
          return e.step.kind == PassStep::Kind::tp_async && e.step.begin == c.layer;
        });
        if (same == events.end()) {
          events.push_back({c.layer + 1, {.kind = PassStep::Kind::tp_async, .begin = c.layer, .end = c.layer + 1}});
          same = events.end() - 1;
        }
        (c.beside == TpBeside::input_gradient ? same->step.overlapped : same->step.after)
            .emplace_back(c.kind, c.bytes_per_sample * b);
        continue;
      }
      if (how == TpOverlap::blocking) {
        events.push_back({c.position(), {PassStep::Kind::tp_sync, 0, 0, c.kind, c.bytes_per_sample * b}});
        continue;
      }
      // Overlapped: one step per layer and pass (a column layer's backward gathers its input and
      // reduce-scatters its input gradient), at the layer's start in the pass's direction.
      const std::size_t at = forward ? c.layer : c.layer + 1;
      auto same = std::find_if(events.begin(), events.end(), [&](const Event& e) {
        return e.step.kind == PassStep::Kind::tp_overlap && e.step.begin == c.layer;
      });
      if (same == events.end()) {
        events.push_back({at, {.kind = PassStep::Kind::tp_overlap, .begin = c.layer, .end = c.layer + 1}});
        same = events.end() - 1;
      }
      same->step.overlapped.emplace_back(c.kind, c.bytes_per_sample * b);
    }
  if (plan.cp > 1)
    for (const RingAttention& r : stage.rings)
      events.push_back({forward ? r.layer : r.layer + 1,
                        {.kind = PassStep::Kind::ring, .begin = r.layer, .end = r.layer + 1,
                         .collective = CollectiveKind::all_gather, .bytes = r.kv_bytes_per_sample * b,
                         .recomputed = !forward && r.recomputed}});
  // Forward: increasing position; backward: decreasing. At one position: a bucket first (it closes
  // the work before it), then a gather (it opens the work after it), a ring or an overlapped layer
  // last (it is that work).
  // An all-to-all towards the experts precedes the tensor-parallel gather of what it brought (Megatron-
  // Core's order); one away from them follows the tensor-parallel reduce-scatter before it. The
  // recomputed dispatch and combine come first, the dispatch before the combine.
  auto rank = [](const PassStep& s) {
    switch (s.kind) {
    case PassStep::Kind::bucket:
    case PassStep::Kind::expert_bucket: return 0.0;
    case PassStep::Kind::gather: return 2.0;
    case PassStep::Kind::ring:
    case PassStep::Kind::tp_overlap:
    case PassStep::Kind::tp_async:
      return 3.0;
    case PassStep::Kind::expert: return s.recomputed ? (s.at_source ? 0.3 : 0.2) : s.at_source ? 1.5 : 0.5;
    default: return 1.0;
    }
  };
  std::stable_sort(events.begin(), events.end(), [&](const Event& x, const Event& y) {
    if (x.position != y.position)
      return forward ? x.position < y.position : x.position > y.position;
    return rank(x.step) < rank(y.step);
  });
  std::vector<PassStep> steps;
  if (forward) {
    std::size_t start = stage.layers.begin;
    for (const Event& e : events) {
      if (e.position > start)
        steps.push_back({PassStep::Kind::compute, start, e.position, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      const bool is_work = e.step.kind == PassStep::Kind::ring || e.step.kind == PassStep::Kind::tp_overlap ||
                           e.step.kind == PassStep::Kind::tp_async;
      start = std::max(start, is_work ? e.step.end : e.position);
    }
    if (start < stage.layers.end)
      steps.push_back({PassStep::Kind::compute, start, stage.layers.end, CollectiveKind::all_reduce, 0});
  } else {
    std::size_t end = stage.layers.end;
    for (const Event& e : events) {
      if (e.position < end)
        steps.push_back({PassStep::Kind::compute, e.position, end, CollectiveKind::all_reduce, 0});
      steps.push_back(e.step);
      const bool is_work = e.step.kind == PassStep::Kind::ring || e.step.kind == PassStep::Kind::tp_overlap ||
                           e.step.kind == PassStep::Kind::tp_async;
      end = std::min(end, is_work ? e.step.begin : e.position);
    }
    if (end > stage.layers.begin)
      steps.push_back({PassStep::Kind::compute, stage.layers.begin, end, CollectiveKind::all_reduce, 0});
  }
  return steps;
}

}  // namespace ddlsim::sim
