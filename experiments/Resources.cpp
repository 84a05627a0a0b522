#include "experiments/Resources.hpp"

#include "common/Units.hpp"
#include "experiments/Plan.hpp"
#include "experiments/Experiment.hpp"
#include "sim/Collectives.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace ddlsim::experiments {
namespace {

// Memory model: the process with the model, profile and SimGrid loaded, then per task (graph node,
// its timing and replay state), per dependency, per simulated host (SimGrid host, links, routes) and
// per message of the flow-level collectives in flight (at most one per host's stream and group).
// Chosen to stay above the peak RSS that `ddlsim bench` measures for its scenarios (by 1.1-2x:
// docs/performance.md prints both): a guard should refuse late rather than early.
constexpr double base_bytes        = 24.0 * (1 << 20);
constexpr double bytes_per_task    = 150;
constexpr double bytes_per_edge    = 8;
constexpr double bytes_per_host    = 64.0 * 1024;
constexpr double bytes_per_message = 120;
constexpr double bytes_per_gpu     = 256;  // per GPU of the point, folded or not: the fold's orbits, statistics

// Messages of a collective of `kind` over `group` of `bytes` (flow fidelity) as NCCL's tuner resolves
// it on `cluster` (the algorithm and its chunks depend on the size; an all-to-all's also on its
// members' loads), 0 for analytic ones (a timer).
double messages(sim::CollectiveKind kind, sim::CollectiveAlgorithm algorithm, sim::CollectiveFidelity fidelity,
                std::vector<int> group, const sim::ClusterSpec& cluster, double bytes,
                std::vector<double> member_load = {}, bool load_at_source = false)
{
  if (fidelity == sim::CollectiveFidelity::analytic || group.size() < 2)
    return 0;
  sim::CollectiveTask c{.kind = kind, .algorithm = algorithm, .group = std::move(group), .bytes = bytes,
                        .member_load = std::move(member_load), .load_at_source = load_at_source};
  sim::resolve_collective(c, cluster);
  return static_cast<double>(sim::message_count(c, cluster.gpus_per_node));
}

ResourceEstimate parameter_server(const PointConfig& point)
{
  const auto& ps = *point.parallelism.ps;
  const double W = point.parallelism.dp, S = ps.servers, K = ps.iterations, M = point.micro_batches();
  ResourceEstimate e;
  e.devices = ps.gpus(point.parallelism.dp);
  // Per iteration: 2M passes per worker, a push, an update and a pull per worker and server, and
  // with BSP one barrier per server.
  e.tasks      = K * (W * 2 * M + 3 * W * S + S);
  e.activities = K * (W * 2 * M + 3 * W * S);
  // Each pull waits for W updates under SSP (and the staleness analysis reads as many).
  const double waits = ps.consistency == sim::Consistency::ssp ? W : ps.consistency == sim::Consistency::bsp ? 2 : 1;
  e.edges            = K * (W * 2 * M + W * S * (3 + waits));
  return e;
}

} // namespace

ResourceEstimate estimate_resources(const PointConfig& point, const FoldPlan* planned)
{
  const auto& par = point.parallelism;
  ResourceEstimate e;
  if (par.ps) {
    e = parameter_server(point);
  } else {
    // As evaluate_point() simulates it: under its fold (Fold.hpp), only representatives run tasks
    // (tp_sim of the tp ranks, R_sim of the R replicas of each stage) and a collective sends its
    // messages over |H|, the fold's elements that keep its group.
    const FoldPlan fold = planned != nullptr ? *planned : plan_fold(point);
    const int tp       = par.tp;
    const sim::ClusterSpec& cluster = point.cluster;
    // Bytes of an activation, a gradient and a weight, as plan_point sizes them (Megatron: bf16, fp32, bf16).
    const sim::StepDtypes dt = point_dtypes(point);
    const double d = dtype_bytes(dt.activations), grad_d = dtype_bytes(dt.gradients), weight_d = dtype_bytes(dt.weights);
    const double M = point.micro_batches(), C = static_cast<double>(par.pp) * par.virtual_stages;
    const int R = par.replicas();  // replicas of a stage: dp x cp
    const double tp_sim = static_cast<double>(tp) / fold.tp;
    const double R_sim  = static_cast<double>(R) / fold.replicas;
    const double members       = R_sim * tp_sim;
    const models::Model& model = point.model;
    const double B             = static_cast<double>(model.blocks().size());

    // Per micro-batch and replica over the whole model: the tensor-parallel collectives and the
    // synchronised-norm points (as plan_point() places them), each splitting a pass.
    const models::StageRange all{0, model.size()};
    const auto tensor = tp < 2 ? std::vector<sim::TpCollective>{}
                               : tensor_collectives(model, all, 1.0, par.sequence_parallel, par.ep,
                                                    point.training.recompute == models::Recompute::full);
    // Overlapped (parallelism.tp_comm_overlap): each is two tasks, beside its layer and after it.
    const auto overlapped = [&](const sim::TpCollective& c) {
      return c.overlap(par.tp_comm_overlap, par.tp_backward_overlap) == sim::TpOverlap::userbuffers;
    };
    const double tp_collectives = static_cast<double>(tensor.size() + std::count_if(tensor.begin(), tensor.end(), overlapped));
    // Each splits its pass where it sits, unless another sits there too (sequence parallelism: a
    // row layer's reduce-scatter and the next column layer's all-gather): distinct places count.
    std::set<std::pair<int, std::size_t>> places;
    for (const sim::TpCollective& c : tensor) {
      const std::size_t at = c.position();
      if (at > 0 && at < model.size())
        places.emplace(c.phase == sim::Phase::forward ? 0 : 1, at);
    }
    // Where a pass is split (a blocking collective between two compute segments): the tensor-parallel
    // collectives' positions and, with expert parallelism, both sides of every experts layer; two at
    // one place split it once (pass_steps in sim/PassSteps.cpp).
    // Megatron's asynchronous backward (parallelism.tp_backward_overlap): a column layer's backward
    // is two compute tasks of its own, its collectives beside them.
    const auto async = [&](const sim::TpCollective& c) {
      return c.overlap(par.tp_comm_overlap, par.tp_backward_overlap) == sim::TpOverlap::backward_async;
    };
    std::set<std::tuple<bool, std::size_t>> splits;
    std::set<std::size_t> async_layers;
    for (const sim::TpCollective& c : tensor) {
      splits.emplace(c.phase == sim::Phase::forward, c.position());
      if (overlapped(c) || async(c)) { // its layer is a compute task of its own
        splits.emplace(c.phase == sim::Phase::forward, c.layer);
        splits.emplace(c.phase == sim::Phase::forward, c.layer + 1);
      }
      if (async(c))
        async_layers.insert(c.layer);
    }
    double sync_points          = 0;
    double attention_layers     = 0;
    double expert_layers        = 0;  // with expert parallelism: the experts layers, and the blocks holding them
    double expert_blocks        = 0;
    for (const models::Layer& l : model.layers()) {
      sync_points += R > 1 && l.norm_channels > 0 ? 1 : 0;
      attention_layers += l.kind == models::LayerKind::attention ? 1 : 0;
      expert_layers += par.ep > 1 && l.kind == models::LayerKind::moe ? 1 : 0;
    }
    if (expert_layers > 0)
      for (const models::Block& b : model.blocks())
        for (std::size_t i = b.layers.begin; i < b.layers.end; ++i)
          if (model.layers()[i].kind == models::LayerKind::moe) {
            expert_blocks += 1;
            break;
          }
    // Gradient buckets: each chunk's last bucket, plus the cuts gradient_buckets() makes in the whole
    // model's gradients (plan_point's own rule; exact with one chunk, where no cut at a chunk's first
    // layer is unknown here).
    double buckets = C;
    double shared_places = 0;  // bucket boundaries where a tensor-parallel collective splits the backward already
    double shared_forward = 0;  // likewise in the forward (overlap_param_gather splits the first forward there)
    if (R > 1 && par.dp_bucket > 0)
      for (const sim::GradientBucket& b : gradient_buckets(model, all, par.dp_bucket, grad_d, par.tp, par.ep > 1))
        if (b.layer > all.begin) {  // a cut (the last bucket, from the first layer, is the chunk's)
          buckets += 1;
          shared_places += places.count({1, b.layer}) != 0 ? 1 : 0;
          shared_forward += splits.count({true, b.layer}) != 0 ? 1 : 0;
        }
    // Gradient reductions per chunk set: ZeRO-3 one per unit (block), else the buckets (or one per
    // chunk); ZeRO 2 and 3 after every micro-batch, else once.
    const bool bucketed       = R > 1 && (shards_gradients(par.zero) || par.dp_bucket > 0);
    const bool per_unit       = reduces_per_block(par.zero, par.dp_bucket > 0); // FSDP: per block
    const double per_backward = per_unit ? B : par.dp_bucket > 0 ? buckets : C;
    const double reductions   = R < 2 ? 0 : per_backward * (shards_gradients(par.zero) ? M : 1);
    const int shard           = shards_optimizer(par.zero) ? par.shard_group() : R;
    const int groups          = R / shard;
    // Folded: the shard groups holding a representative (the first R_sim replicas), each kept by no
    // shift unless it is every replica; across the groups, every shard's all-reduce, kept by all.
    const double groups_sim = groups > 1 ? std::max(1.0, R_sim / shard) : 1.0;
    const double shard_h    = groups > 1 ? 1.0 : fold.replicas;

    std::vector<int> shard_group, across_group, tp_group, dp_group;
    for (int r = 0; r < shard; ++r)
      shard_group.push_back(r * tp);
    for (int j = 0; j < groups; ++j)
      across_group.push_back(j * shard * tp);
    for (int r = 0; r < R; ++r)
      dp_group.push_back(r * tp);
    for (int t = 0; t < tp; ++t)
      tp_group.push_back(t);
    const auto reduce_kind = sim::gradient_reduction(par.zero);
    // Bytes of one reduction: a block (ZeRO units), a bucket, or a chunk's gradients.
    double held = 0;
    for (std::size_t i = 0; i < model.size(); ++i)
      held += model.held_parameters(i, all, par.tp);
    const double reduced_bytes = grad_d *
                                 (per_unit ? held / std::max(1.0, B) : par.dp_bucket > 0 ? par.dp_bucket : held / C);
    // One reduction: a collective per shard group, and with hybrid sharding an all-reduce per shard.
    const double hybrid = shards_optimizer(par.zero) && groups > 1 ? shard : 0;
    const double reduction_messages =
        groups_sim * messages(reduce_kind, par.dp_collective, par.dp_fidelity, shard_group, cluster, reduced_bytes) / shard_h +
        hybrid * messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, across_group, cluster,
                          reduced_bytes / shard) / fold.replicas;
    // All-reduces over folded replicas that NCCL's tuner runs as trees run apart (sim/Fold.hpp): all
    // their messages are sent, not those over |H|. Counted at their own sizes: each stage's buckets
    // (of a uniform partition) and each synchronised norm's sums.
    // The tuner's choice costs O(members) and a stage's buckets repeat a few sizes: each (group,
    // size) is asked once.
    const bool trees_apart = fold.replicas > 1 && par.dp_fidelity == sim::CollectiveFidelity::flow &&
                             par.dp_collective != sim::CollectiveAlgorithm::ring &&
                             par.dp_collective != sim::CollectiveAlgorithm::hierarchical;
    std::map<std::pair<std::size_t, double>, double> asked;
    auto apart = [&](const std::vector<int>& group, double bytes) -> double {
      if (!trees_apart || group.size() < 3)
        return 0;
      auto [at, fresh] = asked.try_emplace({group.size(), bytes}, 0.0);
      if (!fresh)
        return at->second;
      sim::CollectiveTask c{.kind = sim::CollectiveKind::all_reduce, .algorithm = par.dp_collective, .group = group,
                            .bytes = bytes};
      sim::resolve_collective(c, cluster);
      return at->second = sim::is_tree(c.algorithm) ? static_cast<double>(sim::message_count(c, cluster.gpus_per_node)) : 0;
    };
    double tree_messages = 0;  // per simulated tensor rank and iteration
    if (trees_apart && R > 1 && !shards_optimizer(par.zero) && groups == 1 && !per_unit && !model.blocks().empty())
      for (const models::StageRange& blocks : models::partition_uniform(model.blocks().size(), par.pp * par.virtual_stages))
        for (const sim::GradientBucket& b : gradient_buckets(model, model.layer_range(blocks),
                                                             par.dp_bucket > 0 ? par.dp_bucket : 1e300, grad_d, par.tp,
                                                             par.ep > 1))
          tree_messages += apart(shard_group, b.bytes);
    double sync_messages = 0;  // every synchronised norm's all-reduce of its per-channel sums (fp32)
    for (const models::Layer& l : model.layers())
      if (l.norm_channels > 0)
        sync_messages += messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, dp_group, cluster,
                                  2 * l.norm_channels * 4) / fold.replicas +
                         apart(dp_group, 2 * l.norm_channels * 4);
    // ZeRO 1-2 gather once per chunk after the step, or with overlap_param_gather once per gradient
    // bucket in the forward (about the held gradients over dp_bucket, at least one per chunk).
    const double param_gathers =
        par.overlap_param_gather && par.dp_bucket > 0 ? std::max(C, std::ceil(grad_d * held / par.dp_bucket)) : C;
    const double gather_messages =
        groups_sim *
        messages(sim::CollectiveKind::all_gather, par.dp_collective, par.dp_fidelity, shard_group, cluster,
                 weight_d * (shards_parameters(par.zero) ? held / std::max(1.0, B) : held / param_gathers)) /
        shard_h;
    double tp_messages = 0;  // over one micro-batch of one replica, every tensor-parallel collective
    const double cp_share = model.has(models::LayerKind::attention) ? 1.0 / par.cp : 1.0;  // its s/cp tokens
    for (const sim::TpCollective& c : tensor) {
      const double bytes = c.bytes_per_sample * d * cp_share * point.training.micro_batch;
      // Userbuffers run each as two collectives: (tp - 1) / tp beside the layer, the last chunk after it.
      tp_messages +=
          (overlapped(c)
               ? messages(c.kind, par.tp_collective, par.tp_fidelity, tp_group, cluster, bytes * (tp - 1) / tp) +
                     messages(c.kind, par.tp_collective, par.tp_fidelity, tp_group, cluster, bytes / tp)
               : messages(c.kind, par.tp_collective, par.tp_fidelity, tp_group, cluster, bytes)) /
          fold.tp;
    }
    // ZeRO-3 gathers each unit before its forward and its backward; ZeRO 1 and 2 as above.
    const double gathers = R < 2 || !shards_optimizer(par.zero) ? 0
                           : shards_parameters(par.zero)        ? (shard > 1 ? 2 * M * B : 0)
                                                                : param_gathers;
    // Ring attention: per attention layer and pass, cp chunks (the layer's segment becomes cp + 2)
    // and cp - 1 transfers per GPU. Llama 3's all-gather: the layer's segment becomes 3 (before, the
    // layer, after), and per micro-batch each cp group (of each tensor rank) all-gathers K/V before the
    // forward and the backward (twice there when the layer reruns its forward) and reduce-scatters dK/dV.
    const bool all_gather = par.cp_algorithm == sim::CpAlgorithm::all_gather;
    const double ring_layers = par.cp > 1 && !all_gather ? attention_layers : 0;
    double cp_collectives = 0, cp_messages = 0;  // per micro-batch and cp group
    if (par.cp > 1 && all_gather) {
      std::vector<int> cp_group;
      for (int c = 0; c < par.cp; ++c)
        cp_group.push_back(c * tp);
      for (const models::Layer& l : model.layers())
        if (l.kind == models::LayerKind::attention) {
          const double kv = kv_elements_per_rank(l, tp) * d * point.training.micro_batch;
          const double kv_gathers = models::reruns_forward(point.training.recompute, l) ? 3 : 2;
          cp_collectives += kv_gathers + 1;
          cp_messages +=
              kv_gathers * messages(sim::CollectiveKind::all_gather, par.dp_collective, par.dp_fidelity, cp_group, cluster, kv) +
              messages(sim::CollectiveKind::reduce_scatter, par.dp_collective, par.dp_fidelity, cp_group, cluster, kv);
        }
    }
    const double cp_groups_sim = std::max(1.0, R_sim / par.cp) * tp_sim;

    // Expert parallelism: per experts layer and micro-batch, four all-to-alls (dispatch and combine,
    // forward and backward; six with full recomputation) in each of the R / ep groups, per tensor rank; each splits the pass unless
    // a tensor-parallel collective already splits it there (sequence parallelism). The experts'
    // gradients are reduced over the R / ep replicas holding them, once per chunk (ZeRO 2 and 3: per
    // micro-batch), in groups of the expert shard group; ZeRO 1 and 2 gather them after the step.
    const int ep = par.ep;
    const int expert_replicas = R / ep;
    const int expert_shard    = shards_optimizer(par.zero) ? par.expert_shard_group() : expert_replicas;
    const int expert_groups = expert_replicas / std::max(1, expert_shard);
    std::vector<int> ep_group, expert_group, expert_across;
    for (int r = 0; r < ep; ++r)
      ep_group.push_back(r * tp);
    for (int i = 0; i < expert_shard; ++i)
      expert_group.push_back(i * ep * tp);
    for (int j = 0; j < expert_groups; ++j)
      expert_across.push_back(j * expert_shard * ep * tp);
    const double per_layer = point.training.recompute == models::Recompute::full ? 6 : 4;  // + the recomputed forward's
    const double exchanges = expert_layers > 0 ? per_layer * expert_layers * M * (R / ep) * tp_sim : 0;
    if (expert_layers > 0)
      for (std::size_t i = 0; i < model.size(); ++i)
        if (model.layers()[i].kind == models::LayerKind::moe)
          for (bool forward : {true, false})
            for (std::size_t position : {i, i + 1})
              splits.emplace(forward, position);
    // Per micro-batch and ep group: each experts layer's dispatch and combine, forward and backward
    // (and the recomputed forward's), at its size and with the ranks' loads (which NCCL's tuner, for
    // `auto`, may send hierarchically).
    double a2a_messages = 0, a2a_most = 0, held_experts = 0;
    if (expert_layers > 0) {
      const auto load = point_expert_load(point);
      const double token_share = model.has(models::LayerKind::attention) ? 1.0 / par.cp : 1.0;
      for (std::size_t i = 0; i < model.size(); ++i)
        if (const models::Layer& l = model.layers()[i]; l.kind == models::LayerKind::moe) {
          held_experts += model.held_parameters(i, all, par.tp) / ep;
          const double bytes = l.output_elements() * d * token_share /
                               (par.sequence_parallel ? par.tp : 1) * load->shards * point.training.micro_batch;
          for (bool at_source : {false, true}) {
            const double n = messages(sim::CollectiveKind::all_to_all, par.ep_collective, par.ep_fidelity, ep_group,
                                      cluster, bytes, load->rank_load, at_source);
            a2a_messages += per_layer / 2 * n;  // half of them in the dispatch's direction
            a2a_most = std::max(a2a_most, n);
          }
        }
    }
    const double expert_hybrid        = shards_optimizer(par.zero) && expert_groups > 1 ? expert_shard : 0;
    const double expert_reductions    = expert_layers > 0 && expert_replicas > 1
                                            ? C * (shards_gradients(par.zero) ? M : 1) * ep * tp_sim
                                            : 0; // per family and rank
    const double expert_reduced_bytes = grad_d * held_experts / C;
    const double expert_reduction_messages =
        expert_groups * messages(reduce_kind, par.dp_collective, par.dp_fidelity, expert_group, cluster,
                                 expert_reduced_bytes) +
        expert_hybrid * messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, expert_across,
                                 cluster, expert_reduced_bytes / std::max(1, expert_shard));
    const double expert_gathers = expert_layers == 0 || expert_shard < 2 ? 0
                                  : shards_parameters(par.zero)          ? 2 * M * expert_blocks * ep * tp_sim
                                  : shards_optimizer(par.zero)           ? C * ep * tp_sim
                                                                         : 0;
    const double expert_gather_messages =
        expert_groups *
        messages(sim::CollectiveKind::all_gather, par.dp_collective, par.dp_fidelity, expert_group, cluster,
                 weight_d * held_experts / (shards_parameters(par.zero) ? std::max(1.0, expert_blocks) : C));

    // Ring attention cuts its layer off on both sides already: an overlapped tensor-parallel layer's
    // own cut there (the QKV layer ends where the core begins, the projection begins where it ends)
    // is the same cut.
    std::set<std::tuple<bool, std::size_t>> ring_cuts;
    if (ring_layers > 0)
      for (const sim::TpCollective& c : tensor)
        if (overlapped(c) || async(c))
          for (std::size_t at : {c.layer, c.layer + 1})
            for (std::size_t l : {at, at - 1})  // `at` begins or ends attention layer l
              if (at > 0 && l < model.size() && model.layers()[l].kind == models::LayerKind::attention)
                ring_cuts.emplace(c.phase == sim::Phase::forward, at);
    const double passes =
        members * M *
        (2 * C + 2 * sync_points + static_cast<double>(splits.size() - ring_cuts.size()) +
         static_cast<double>(async_layers.size()) + 2 * ring_layers * (par.cp + 1) +
         (all_gather ? 4 * attention_layers : 0) + (gathers > 0 && shards_parameters(par.zero) ? 2 * (B - C) : 0));
    const double bucket_splits =
        bucketed && !shards_parameters(par.zero)
            ? members * (per_backward - C - (per_unit ? 0 : shared_places)) * (shards_gradients(par.zero) ? M : 1)
            : 0;
    // overlap_param_gather: each chunk's first forward is cut at its buckets' first layers.
    const bool forward_gathers = par.overlap_param_gather && gathers_per_step(par.zero) && R > 1 && par.dp_bucket > 0;
    const double gather_splits = forward_gathers ? members * (buckets - C - shared_forward) : 0;
    const double optimizer = members * C;
    // Ring steps: cp - 1 forward, cp - 1 backward and the dK/dV's return.
    const double transfers = (par.pp > 1 ? 2 * M * (C - 1) * members : 0) +
                             (par.cp > 1 ? members * M * ring_layers * (2.0 * (par.cp - 1) + 1) : 0);
    const double reduction_tasks = tp_sim * reductions * (groups_sim + hybrid);
    const double gather_tasks    = tp_sim * gathers * groups_sim;
    const double expert_tasks = exchanges + expert_reductions * (expert_groups + expert_hybrid) +
                                expert_gathers * expert_groups;
    const double collectives     = (R > 1 ? tp_sim * M * 2 * sync_points : 0) + reduction_tasks + gather_tasks +
                               R_sim * M * tp_collectives + expert_tasks + cp_groups_sim * M * cp_collectives;
    e.devices    = static_cast<double>(par.pp) * members;
    e.tasks      = passes + bucket_splits + gather_splits + optimizer + transfers + collectives;
    e.activities = passes + bucket_splits + gather_splits + optimizer + transfers +
                   (R > 1 ? tp_sim * M * 2 * sync_messages : 0) + tp_sim * reductions * reduction_messages +
                   tp_sim * tree_messages +
                   tp_sim * gathers * gather_messages + R_sim * M * tp_messages + M * (R / ep) * tp_sim * a2a_messages +
                   expert_reductions * expert_reduction_messages + expert_gathers * expert_gather_messages +
                   cp_groups_sim * M * cp_messages;
    // Every task waits for about two others (stream order and one transfer or collective); a
    // collective waits for each of its representative members.
    e.edges = 2 * e.tasks + (R > 1 ? tp_sim * M * 2 * sync_points * R_sim : 0) + R_sim * M * tp_collectives * tp_sim +
              (reduction_tasks + gather_tasks) * std::min<double>(shard, R_sim) + exchanges * ep +
              (expert_tasks - exchanges) * std::max(1, expert_shard) + cp_groups_sim * M * cp_collectives * par.cp;
    const double in_flight =
        e.devices * std::max({1.0, sync_messages / std::max(1.0, sync_points) / std::max(1.0, R_sim),
                              reduction_messages / std::max(1.0, R_sim),
                              tp_messages / std::max(1.0, tp_sim * std::max(1.0, tp_collectives)), a2a_most / ep});
    e.memory_bytes = bytes_per_message * in_flight;
    // A folded collective is decomposed whole once per shape to check its symmetry.
    if (fold.factor() > 1)
      e.memory_bytes += bytes_per_message * std::max(
          {messages(reduce_kind, par.dp_collective, par.dp_fidelity, shard_group, cluster, reduced_bytes),
           messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, dp_group, cluster, reduced_bytes),
           messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, across_group, cluster,
                    reduced_bytes)});
  }
  e.memory_bytes += base_bytes + bytes_per_task * e.tasks + bytes_per_edge * e.edges + bytes_per_host * e.devices +
                    bytes_per_gpu * par.gpus();
  return e;
}

std::string over_limits(const PointConfig& point, const ResourceEstimate& cost)
{
  const bool activities = cost.activities > point.limits.max_activities;
  if (!activities && !(cost.memory_bytes > point.limits.max_memory_bytes))
    return {};
  const auto& par         = point.parallelism;
  const std::string shape = std::to_string(point.micro_batches()) + " micro-batches x pp " + std::to_string(par.pp) +
                            (par.virtual_stages > 1 ? " x v " + std::to_string(par.virtual_stages) : "") + " x dp " +
                            std::to_string(par.dp) + " x tp " + std::to_string(par.tp) +
                            (par.cp > 1 ? " x cp " + std::to_string(par.cp) : "");
  if (activities)
    return fmt::format("this point would need about {:.3g} SimGrid activities ({}), over limits.max_activities = {:.3g}: "
                       "make it smaller, or raise the limit (limits: {{max_activities: N}} or --set "
                       "limits.max_activities=N)",
                       cost.activities, shape, point.limits.max_activities);
  return fmt::format("simulating this point would take about {} of memory ({:.3g} tasks, {}), over limits.max_memory = "
                     "{}: make it smaller, or raise the limit (limits: {{max_memory: 64GiB}} or --set "
                     "limits.max_memory=64GiB)",
                     format_quantity(cost.memory_bytes, Dimension::bytes), cost.tasks, shape,
                     format_quantity(point.limits.max_memory_bytes, Dimension::bytes));
}

} // namespace ddlsim::experiments
