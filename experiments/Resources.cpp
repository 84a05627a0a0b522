#include "experiments/Resources.hpp"

#include "common/Units.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Plan.hpp"
#include "sim/Collectives.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/core.h>
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
constexpr double bytes_per_gpu     = 256; // per GPU of the point, folded or not: the fold's orbits, statistics

// Messages of a collective of `kind` over `group` of `bytes` (flow fidelity) as NCCL's tuner resolves
// it on `cluster` (the algorithm and its chunks depend on the size; an all-to-all's also on its
// members' loads), 0 for analytic ones (a timer).
double messages(sim::CollectiveKind kind, sim::CollectiveAlgorithm algorithm, sim::CollectiveFidelity fidelity,
                std::vector<int> group, const sim::ClusterSpec& cluster, double bytes,
                std::vector<double> member_load = {}, bool load_at_source = false)
{
  if (fidelity == sim::CollectiveFidelity::analytic || group.size() < 2)
    return 0;
  sim::CollectiveTask c{.kind           = kind,
                        .algorithm      = algorithm,
                        .group          = std::move(group),
                        .bytes          = bytes,
                        .member_load    = std::move(member_load),
                        .load_at_source = load_at_source};
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

// What the estimate reads of a pipeline point, as evaluate_point() simulates it: under its fold
// (Fold.hpp), only representatives run tasks (tp_sim of the tp ranks, R_sim of the R replicas of each
// stage) and a collective sends its messages over |H|, the fold's elements that keep its group.
struct Pipeline {
  Pipeline(const PointConfig& p, const FoldPlan& f)
      : point(p), par(p.parallelism), model(p.model), cluster(p.cluster), fold(f), dt(point_dtypes(p))
  {
  }
  const PointConfig& point;
  const ParallelismSpec& par;
  const models::Model& model;
  const sim::ClusterSpec& cluster;
  const FoldPlan fold;
  // Bytes of an activation, a gradient and a weight, as plan_point sizes them (Megatron: bf16, fp32, bf16).
  const sim::StepDtypes dt;
  const double d = dtype_bytes(dt.activations), grad_d = dtype_bytes(dt.gradients), weight_d = dtype_bytes(dt.weights);
  const int tp   = par.tp;
  const double M = point.micro_batches(), C = static_cast<double>(par.pp) * par.virtual_stages;
  const int R          = par.replicas(); // replicas of a stage: dp x cp
  const double tp_sim  = static_cast<double>(tp) / fold.tp;
  const double R_sim   = static_cast<double>(R) / fold.replicas;
  const double members = R_sim * tp_sim;
  const double B       = static_cast<double>(model.blocks().size());
  const models::StageRange all{0, model.size()};
  // Per micro-batch and replica over the whole model: the tensor-parallel collectives (as plan_point()
  // places them), each splitting a pass.
  const std::vector<sim::TpCollective> tensor =
      tp < 2 ? std::vector<sim::TpCollective>{}
             : tensor_collectives(model, all, 1.0, par.sequence_parallel, par.ep, point.training.recompute);
  // Overlapped (parallelism.tp_comm_overlap): each is two tasks, beside its layer and after it.
  bool overlapped(const sim::TpCollective& c) const
  {
    return c.overlap(par.tp_comm_overlap, par.tp_backward_overlap) == sim::TpOverlap::userbuffers;
  }
  // Megatron's asynchronous backward (parallelism.tp_backward_overlap): a column layer's backward
  // is two compute tasks of its own, its collectives beside them.
  bool async(const sim::TpCollective& c) const
  {
    return c.overlap(par.tp_comm_overlap, par.tp_backward_overlap) == sim::TpOverlap::backward_async;
  }
  double collective_messages(sim::CollectiveKind kind, const std::vector<int>& group, double bytes) const
  {
    return messages(kind, par.dp_collective, par.dp_fidelity, group, cluster, bytes);
  }
};

// Members 0, stride, 2 stride, ... (n of them): a group of devices in rank order.
std::vector<int> strided_group(int n, int stride)
{
  std::vector<int> group;
  for (int i = 0; i < n; ++i)
    group.push_back(i * stride);
  return group;
}

struct TensorParallel {
  double collectives = 0; // per micro-batch and replica, overlapped ones twice
  // Each splits its pass where it sits, unless another sits there too (sequence parallelism: a
  // row layer's reduce-scatter and the next column layer's all-gather): distinct places count.
  std::set<std::pair<int, std::size_t>> places;
  // Where a pass is split (a blocking collective between two compute segments): the tensor-parallel
  // collectives' positions and, with expert parallelism (expert_parallel), both sides of every experts
  // layer; two at one place split it once (pass_steps in sim/PassSteps.cpp).
  std::set<std::tuple<bool, std::size_t>> splits;
  std::set<std::size_t> async_layers;
  double messages = 0; // over one micro-batch of one replica, every tensor-parallel collective
};

TensorParallel tensor_parallel(const Pipeline& p)
{
  TensorParallel t;
  t.collectives = static_cast<double>(p.tensor.size() + std::count_if(p.tensor.begin(), p.tensor.end(),
                                                                      [&](const auto& c) { return p.overlapped(c); }));
  for (const sim::TpCollective& c : p.tensor) {
    const std::size_t at = c.position();
    if (at > 0 && at < p.model.size())
      t.places.emplace(c.phase == sim::Phase::forward ? 0 : 1, at);
  }
  for (const sim::TpCollective& c : p.tensor) {
    t.splits.emplace(c.phase == sim::Phase::forward, c.position());
    if (p.overlapped(c) || p.async(c)) { // its layer is a compute task of its own
      t.splits.emplace(c.phase == sim::Phase::forward, c.layer);
      t.splits.emplace(c.phase == sim::Phase::forward, c.layer + 1);
    }
    if (p.async(c))
      t.async_layers.insert(c.layer);
  }
  const std::vector<int> group = strided_group(p.tp, 1);
  const double cp_share        = p.model.has(models::LayerKind::attention) ? 1.0 / p.par.cp : 1.0; // its s/cp tokens
  for (const sim::TpCollective& c : p.tensor) {
    const double bytes = c.bytes_per_sample * p.d * cp_share * p.point.training.micro_batch;
    const auto n       = [&](double b) {
      return messages(c.kind, p.par.tp_collective, p.par.tp_fidelity, group, p.cluster, b);
    };
    // Userbuffers run each as two collectives: (tp - 1) / tp beside the layer, the last chunk after it.
    t.messages += (p.overlapped(c) ? n(bytes * (p.tp - 1) / p.tp) + n(bytes / p.tp) : n(bytes)) / p.fold.tp;
  }
  return t;
}

struct LayerCounts {
  double sync_points      = 0; // synchronised norms (with replicas)
  double attention_layers = 0;
  double expert_layers    = 0; // with expert parallelism: the experts layers, and the blocks holding them
  double expert_blocks    = 0;
};

LayerCounts layer_counts(const Pipeline& p)
{
  LayerCounts n;
  for (const models::Layer& l : p.model.layers()) {
    n.sync_points += p.R > 1 && l.norm_channels > 0 ? 1 : 0;
    n.attention_layers += l.kind == models::LayerKind::attention ? 1 : 0;
    n.expert_layers += p.par.ep > 1 && l.kind == models::LayerKind::moe ? 1 : 0;
  }
  if (n.expert_layers > 0)
    for (const models::Block& b : p.model.blocks())
      for (std::size_t i = b.layers.begin; i < b.layers.end; ++i)
        if (p.model.layers()[i].kind == models::LayerKind::moe) {
          n.expert_blocks += 1;
          break;
        }
  return n;
}

// The data-parallel side: gradient reductions (buckets, ZeRO units or chunks), the parameter gathers
// of ZeRO, synchronised norms' sums, and the messages of each.
struct DataParallel {
  double buckets = 0, shared_places = 0, shared_forward = 0;
  bool bucketed = false, per_unit = false;
  double per_backward = 0, reductions = 0;
  int shard = 1, groups = 1;
  double groups_sim = 1, shard_h = 1, hybrid = 0;
  std::vector<int> shard_group, across_group, dp_group;
  sim::CollectiveKind reduce_kind = sim::CollectiveKind::all_reduce;
  double held = 0, reduced_bytes = 0, reduction_messages = 0, tree_messages = 0, sync_messages = 0;
  double gathers = 0, gather_messages = 0;
};

// All-reduces over folded replicas that NCCL's tuner runs as trees run apart (sim/Fold.hpp): all
// their messages are sent, not those over |H|. Counted at their own sizes: each stage's buckets
// (of a uniform partition) and each synchronised norm's sums. The tuner's choice costs O(members)
// and a stage's buckets repeat a few sizes: each (group, size) is asked once.
class TreesApart {
public:
  explicit TreesApart(const Pipeline& p)
      : p_(p), on_(p.fold.replicas > 1 && p.par.dp_fidelity == sim::CollectiveFidelity::flow &&
                   p.par.dp_collective != sim::CollectiveAlgorithm::ring &&
                   p.par.dp_collective != sim::CollectiveAlgorithm::hierarchical)
  {
  }
  bool on() const { return on_; }
  double operator()(const std::vector<int>& group, double bytes)
  {
    if (!on_ || group.size() < 3)
      return 0;
    auto [at, fresh] = asked_.try_emplace({group.size(), bytes}, 0.0);
    if (!fresh)
      return at->second;
    sim::CollectiveTask c{
        .kind = sim::CollectiveKind::all_reduce, .algorithm = p_.par.dp_collective, .group = group, .bytes = bytes};
    sim::resolve_collective(c, p_.cluster);
    return at->second =
               sim::is_tree(c.algorithm) ? static_cast<double>(sim::message_count(c, p_.cluster.gpus_per_node)) : 0;
  }

private:
  const Pipeline& p_;
  bool on_;
  std::map<std::pair<std::size_t, double>, double> asked_;
};

// Gradient buckets: each chunk's last bucket, plus the cuts gradient_buckets() makes in the whole
// model's gradients (plan_point's own rule; exact with one chunk, where no cut at a chunk's first
// layer is unknown here).
void count_buckets(const Pipeline& p, const TensorParallel& t, DataParallel& dp)
{
  const auto& par = p.par;
  dp.buckets      = p.C;
  if (p.R > 1 && par.dp_bucket > 0)
    for (const sim::GradientBucket& b : gradient_buckets(p.model, p.all, par.dp_bucket, p.grad_d, par.tp, par.ep > 1))
      if (b.layer > p.all.begin) { // a cut (the last bucket, from the first layer, is the chunk's)
        dp.buckets += 1;
        // bucket boundaries where a tensor-parallel collective splits the backward already, and
        // likewise in the forward (overlap_param_gather splits the first forward there)
        dp.shared_places += t.places.count({1, b.layer}) != 0 ? 1 : 0;
        dp.shared_forward += t.splits.count({true, b.layer}) != 0 ? 1 : 0;
      }
}

DataParallel data_parallel(const Pipeline& p, const TensorParallel& t)
{
  const auto& par = p.par;
  DataParallel dp;
  count_buckets(p, t, dp);
  // Gradient reductions per chunk set: ZeRO-3 one per unit (block), else the buckets (or one per
  // chunk); ZeRO 2 and 3 after every micro-batch, else once.
  dp.bucketed     = p.R > 1 && (shards_gradients(par.zero) || par.dp_bucket > 0);
  dp.per_unit     = reduces_per_block(par.zero, par.dp_bucket > 0); // FSDP: per block
  dp.per_backward = dp.per_unit ? p.B : par.dp_bucket > 0 ? dp.buckets : p.C;
  dp.reductions   = p.R < 2 ? 0 : dp.per_backward * (shards_gradients(par.zero) ? p.M : 1);
  dp.shard        = shards_optimizer(par.zero) ? par.shard_group() : p.R;
  dp.groups       = p.R / dp.shard;
  // Folded: the shard groups holding a representative (the first R_sim replicas), each kept by no
  // shift unless it is every replica; across the groups, every shard's all-reduce, kept by all.
  dp.groups_sim   = dp.groups > 1 ? std::max(1.0, p.R_sim / dp.shard) : 1.0;
  dp.shard_h      = dp.groups > 1 ? 1.0 : p.fold.replicas;
  dp.shard_group  = strided_group(dp.shard, p.tp);
  dp.across_group = strided_group(dp.groups, dp.shard * p.tp);
  dp.dp_group     = strided_group(p.R, p.tp);
  dp.reduce_kind  = sim::gradient_reduction(par.zero);
  // Bytes of one reduction: a block (ZeRO units), a bucket, or a chunk's gradients.
  for (std::size_t i = 0; i < p.model.size(); ++i)
    dp.held += p.model.held_parameters(i, p.all, par.tp);
  dp.reduced_bytes = p.grad_d * (dp.per_unit         ? dp.held / std::max(1.0, p.B)
                                 : par.dp_bucket > 0 ? par.dp_bucket
                                                     : dp.held / p.C);
  // One reduction: a collective per shard group, and with hybrid sharding an all-reduce per shard.
  dp.hybrid = shards_optimizer(par.zero) && dp.groups > 1 ? dp.shard : 0;
  dp.reduction_messages =
      dp.groups_sim * p.collective_messages(dp.reduce_kind, dp.shard_group, dp.reduced_bytes) / dp.shard_h +
      dp.hybrid * p.collective_messages(sim::CollectiveKind::all_reduce, dp.across_group, dp.reduced_bytes / dp.shard) /
          p.fold.replicas;
  TreesApart apart(p);
  if (apart.on() && p.R > 1 && !shards_optimizer(par.zero) && dp.groups == 1 && !dp.per_unit &&
      !p.model.blocks().empty())
    for (const models::StageRange& blocks :
         models::partition_uniform(p.model.blocks().size(), par.pp * par.virtual_stages))
      for (const sim::GradientBucket& b :
           gradient_buckets(p.model, p.model.layer_range(blocks), par.dp_bucket > 0 ? par.dp_bucket : 1e300, p.grad_d,
                            par.tp, par.ep > 1))
        dp.tree_messages += apart(dp.shard_group, b.bytes); // per simulated tensor rank and iteration
  for (const models::Layer& l : p.model.layers()) // every synchronised norm's all-reduce of its per-channel sums (fp32)
    if (l.norm_channels > 0)
      dp.sync_messages += p.collective_messages(sim::CollectiveKind::all_reduce, dp.dp_group, 2 * l.norm_channels * 4) /
                              p.fold.replicas +
                          apart(dp.dp_group, 2 * l.norm_channels * 4);
  // ZeRO 1-2 gather once per chunk after the step, or with overlap_param_gather once per gradient
  // bucket in the forward (about the held gradients over dp_bucket, at least one per chunk).
  const double param_gathers = par.overlap_param_gather && par.dp_bucket > 0
                                   ? std::max(p.C, std::ceil(p.grad_d * dp.held / par.dp_bucket))
                                   : p.C;
  dp.gather_messages         = dp.groups_sim *
                       p.collective_messages(sim::CollectiveKind::all_gather, dp.shard_group,
                                             p.weight_d * (shards_parameters(par.zero) ? dp.held / std::max(1.0, p.B)
                                                                                       : dp.held / param_gathers)) /
                       dp.shard_h;
  // ZeRO-3 gathers each unit before its forward and its backward; ZeRO 1 and 2 as above.
  dp.gathers = p.R < 2 || !shards_optimizer(par.zero) ? 0
               : shards_parameters(par.zero)          ? (dp.shard > 1 ? 2 * p.M * p.B : 0)
                                                      : param_gathers;
  return dp;
}

// Ring attention: per attention layer and pass, cp chunks (the layer's segment becomes cp + 2)
// and cp - 1 transfers per GPU. Llama 3's all-gather: the layer's segment becomes 3 (before, the
// layer, after), and per micro-batch each cp group (of each tensor rank) all-gathers K/V before the
// forward and the backward (twice there when the layer reruns its forward) and reduce-scatters dK/dV.
struct ContextParallel {
  bool all_gather    = false;
  double ring_layers = 0;
  double collectives = 0, messages = 0; // per micro-batch and cp group
  double groups_sim = 1;
};

ContextParallel context_parallel(const Pipeline& p, const LayerCounts& n)
{
  const auto& par = p.par;
  ContextParallel cp;
  cp.all_gather  = par.cp_algorithm == sim::CpAlgorithm::all_gather;
  cp.ring_layers = par.cp > 1 && !cp.all_gather ? n.attention_layers : 0;
  if (par.cp > 1 && cp.all_gather) {
    const std::vector<int> group = strided_group(par.cp, p.tp);
    for (const models::Layer& l : p.model.layers())
      if (l.kind == models::LayerKind::attention) {
        const double kv         = kv_elements_per_rank(l, p.tp) * p.d * p.point.training.micro_batch;
        const double kv_gathers = models::reruns_forward(p.point.training.recompute, l) ? 3 : 2;
        cp.collectives += kv_gathers + 1;
        cp.messages += kv_gathers * p.collective_messages(sim::CollectiveKind::all_gather, group, kv) +
                       p.collective_messages(sim::CollectiveKind::reduce_scatter, group, kv);
      }
  }
  cp.groups_sim = std::max(1.0, p.R_sim / par.cp) * p.tp_sim;
  return cp;
}

// Expert parallelism: per experts layer and micro-batch, four all-to-alls (dispatch and combine,
// forward and backward; six with full recomputation) in each of the R / ep groups, per tensor rank;
// each splits the pass unless a tensor-parallel collective already splits it there (sequence
// parallelism). The experts' gradients are reduced over the R / ep replicas holding them, once per
// chunk (ZeRO 2 and 3: per micro-batch), in groups of the expert shard group; ZeRO 1 and 2 gather them
// after the step.
struct ExpertParallel {
  int shard = 1, groups = 1;
  double exchanges = 0, a2a_messages = 0, a2a_most = 0;
  double hybrid = 0, reductions = 0, reduction_messages = 0, gathers = 0, gather_messages = 0, tasks = 0;
};

// Per micro-batch and ep group: each experts layer's dispatch and combine, forward and backward
// (and the recomputed forward's), at its size and with the ranks' loads (which NCCL's tuner, for
// `auto`, may send hierarchically); the experts' parameters a GPU holds.
double count_all_to_alls(const Pipeline& p, double per_layer, ExpertParallel& x)
{
  const auto& par              = p.par;
  const auto load              = point_expert_load(p.point);
  const double share           = p.model.has(models::LayerKind::attention) ? 1.0 / par.cp : 1.0;
  const std::vector<int> group = strided_group(par.ep, p.tp);
  double held                  = 0;
  for (std::size_t i = 0; i < p.model.size(); ++i)
    if (const models::Layer& l = p.model.layers()[i]; l.kind == models::LayerKind::moe) {
      held += p.model.held_parameters(i, p.all, par.tp) / par.ep;
      const double bytes = l.output_elements() * p.d * share / (par.sequence_parallel ? par.tp : 1) * load->shards *
                           p.point.training.micro_batch;
      for (bool at_source : {false, true}) {
        const double n = messages(sim::CollectiveKind::all_to_all, par.ep_collective, par.ep_fidelity, group, p.cluster,
                                  bytes, load->rank_load, at_source);
        x.a2a_messages += per_layer / 2 * n; // half of them in the dispatch's direction
        x.a2a_most = std::max(x.a2a_most, n);
      }
    }
  return held;
}

ExpertParallel expert_parallel(const Pipeline& p, const LayerCounts& n, TensorParallel& t)
{
  const auto& par = p.par;
  ExpertParallel x;
  const int ep                  = par.ep;
  const int expert_replicas     = p.R / ep;
  x.shard                       = shards_optimizer(par.zero) ? par.expert_shard_group() : expert_replicas;
  x.groups                      = expert_replicas / std::max(1, x.shard);
  const std::vector<int> group  = strided_group(x.shard, ep * p.tp),
                         across = strided_group(x.groups, x.shard * ep * p.tp);
  const double per_layer = p.point.training.recompute == models::Recompute::full ? 6 : 4; // + the recomputed forward's
  x.exchanges            = n.expert_layers > 0 ? per_layer * n.expert_layers * p.M * (p.R / ep) * p.tp_sim : 0;
  if (n.expert_layers > 0)
    for (std::size_t i = 0; i < p.model.size(); ++i)
      if (p.model.layers()[i].kind == models::LayerKind::moe)
        for (bool forward : {true, false})
          for (std::size_t position : {i, i + 1})
            t.splits.emplace(forward, position);
  const double held      = n.expert_layers > 0 ? count_all_to_alls(p, per_layer, x) : 0.0;
  x.hybrid               = shards_optimizer(par.zero) && x.groups > 1 ? x.shard : 0;
  x.reductions           = n.expert_layers > 0 && expert_replicas > 1
                               ? p.C * (shards_gradients(par.zero) ? p.M : 1) * ep * p.tp_sim
                               : 0; // per family and rank
  const double reduced   = p.grad_d * held / p.C;
  const auto reduce_kind = sim::gradient_reduction(par.zero);
  x.reduction_messages =
      x.groups * p.collective_messages(reduce_kind, group, reduced) +
      x.hybrid * p.collective_messages(sim::CollectiveKind::all_reduce, across, reduced / std::max(1, x.shard));
  x.gathers = n.expert_layers == 0 || x.shard < 2 ? 0
              : shards_parameters(par.zero)       ? 2 * p.M * n.expert_blocks * ep * p.tp_sim
              : shards_optimizer(par.zero)        ? p.C * ep * p.tp_sim
                                                  : 0;
  x.gather_messages =
      x.groups *
      p.collective_messages(sim::CollectiveKind::all_gather, group,
                            p.weight_d * held / (shards_parameters(par.zero) ? std::max(1.0, n.expert_blocks) : p.C));
  x.tasks = x.exchanges + x.reductions * (x.groups + x.hybrid) + x.gathers * x.groups;
  return x;
}

// Ring attention cuts its layer off on both sides already: an overlapped tensor-parallel layer's
// own cut there (the QKV layer ends where the core begins, the projection begins where it ends)
// is the same cut.
std::size_t ring_cuts(const Pipeline& p, const ContextParallel& cp)
{
  std::set<std::tuple<bool, std::size_t>> cuts;
  if (cp.ring_layers > 0)
    for (const sim::TpCollective& c : p.tensor)
      if (p.overlapped(c) || p.async(c))
        for (std::size_t at : {c.layer, c.layer + 1})
          for (std::size_t l : {at, at - 1}) // `at` begins or ends attention layer l
            if (at > 0 && l < p.model.size() && p.model.layers()[l].kind == models::LayerKind::attention)
              cuts.emplace(c.phase == sim::Phase::forward, at);
  return cuts.size();
}

ResourceEstimate estimate_pipeline(const Pipeline& p)
{
  const auto& par = p.par;
  const double M = p.M, C = p.C, B = p.B, members = p.members, tp_sim = p.tp_sim, R_sim = p.R_sim;
  const int R = p.R, ep = par.ep;
  TensorParallel tensor    = tensor_parallel(p);
  const LayerCounts layers = layer_counts(p);
  const DataParallel dp    = data_parallel(p, tensor);
  const ContextParallel cp = context_parallel(p, layers);
  const ExpertParallel x   = expert_parallel(p, layers, tensor);
  ResourceEstimate e;
  const double passes = members * M *
                        (2 * C + 2 * layers.sync_points + static_cast<double>(tensor.splits.size() - ring_cuts(p, cp)) +
                         static_cast<double>(tensor.async_layers.size()) + 2 * cp.ring_layers * (par.cp + 1) +
                         (cp.all_gather ? 4 * layers.attention_layers : 0) +
                         (dp.gathers > 0 && shards_parameters(par.zero) ? 2 * (B - C) : 0));
  const double bucket_splits = dp.bucketed && !shards_parameters(par.zero)
                                   ? members * (dp.per_backward - C - (dp.per_unit ? 0 : dp.shared_places)) *
                                         (shards_gradients(par.zero) ? M : 1)
                                   : 0;
  // overlap_param_gather: each chunk's first forward is cut at its buckets' first layers.
  const bool forward_gathers = par.overlap_param_gather && gathers_per_step(par.zero) && R > 1 && par.dp_bucket > 0;
  const double gather_splits = forward_gathers ? members * (dp.buckets - C - dp.shared_forward) : 0;
  const double optimizer     = members * C;
  // Ring steps: cp - 1 forward, cp - 1 backward and the dK/dV's return.
  const double transfers = (par.pp > 1 ? 2 * M * (C - 1) * members : 0) +
                           (par.cp > 1 ? members * M * cp.ring_layers * (2.0 * (par.cp - 1) + 1) : 0);
  const double reduction_tasks = tp_sim * dp.reductions * (dp.groups_sim + dp.hybrid);
  const double gather_tasks    = tp_sim * dp.gathers * dp.groups_sim;
  const double collectives     = (R > 1 ? tp_sim * M * 2 * layers.sync_points : 0) + reduction_tasks + gather_tasks +
                             R_sim * M * tensor.collectives + x.tasks + cp.groups_sim * M * cp.collectives;
  e.devices    = static_cast<double>(par.pp) * members;
  e.tasks      = passes + bucket_splits + gather_splits + optimizer + transfers + collectives;
  e.activities = passes + bucket_splits + gather_splits + optimizer + transfers +
                 (R > 1 ? tp_sim * M * 2 * dp.sync_messages : 0) + tp_sim * dp.reductions * dp.reduction_messages +
                 tp_sim * dp.tree_messages + tp_sim * dp.gathers * dp.gather_messages + R_sim * M * tensor.messages +
                 M * (R / ep) * tp_sim * x.a2a_messages + x.reductions * x.reduction_messages +
                 x.gathers * x.gather_messages + cp.groups_sim * M * cp.messages;
  // Every task waits for about two others (stream order and one transfer or collective); a
  // collective waits for each of its representative members.
  e.edges = 2 * e.tasks + (R > 1 ? tp_sim * M * 2 * layers.sync_points * R_sim : 0) +
            R_sim * M * tensor.collectives * tp_sim +
            (reduction_tasks + gather_tasks) * std::min<double>(dp.shard, R_sim) + x.exchanges * ep +
            (x.tasks - x.exchanges) * std::max(1, x.shard) + cp.groups_sim * M * cp.collectives * par.cp;
  const double in_flight =
      e.devices *
      std::max({1.0, dp.sync_messages / std::max(1.0, layers.sync_points) / std::max(1.0, R_sim),
                dp.reduction_messages / std::max(1.0, R_sim),
                tensor.messages / std::max(1.0, tp_sim * std::max(1.0, tensor.collectives)), x.a2a_most / ep});
  e.memory_bytes = bytes_per_message * in_flight;
  // A folded collective is decomposed whole once per shape to check its symmetry.
  if (p.fold.factor() > 1)
    e.memory_bytes +=
        bytes_per_message *
        std::max({p.collective_messages(dp.reduce_kind, dp.shard_group, dp.reduced_bytes),
                  p.collective_messages(sim::CollectiveKind::all_reduce, dp.dp_group, dp.reduced_bytes),
                  p.collective_messages(sim::CollectiveKind::all_reduce, dp.across_group, dp.reduced_bytes)});
  return e;
}

} // namespace

ResourceEstimate estimate_resources(const PointConfig& point, const FoldPlan* planned)
{
  const auto& par    = point.parallelism;
  ResourceEstimate e = par.ps ? parameter_server(point)
                              : estimate_pipeline(Pipeline(point, planned != nullptr ? *planned : plan_fold(point)));
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
    return fmt::format(
        "this point would need about {:.3g} SimGrid activities ({}), over limits.max_activities = {:.3g}: "
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
