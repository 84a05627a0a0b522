#include "experiments/Search.hpp"

#include "experiments/ChakraWorkload.hpp"
#include "models/ChunkSplit.hpp"
#include "models/ExpertLoad.hpp"

#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "sim/Collectives.hpp"
#include "sim/OpCosts.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

namespace ddlsim::experiments {
namespace {

class MicrobatchSearcher {
public:
  MicrobatchSearcher(const PointConfig& base, const std::function<PointConfig(long long, int)>& make_point,
                     const MicrobatchSearchOptions& options)
      : make_point_(make_point), options_(options), dp_(base.parallelism.dp),
        baseline_m_(static_cast<long long>(options.baseline_factor) * base.parallelism.pp)
  {
  }

  // Simulates mini-batch `batch` with every candidate micro-batch size (or the baseline's alone).
  BatchResult run(long long batch, bool baseline_only)
  {
    BatchResult result{batch, std::nullopt, std::nullopt};
    if (batch % dp_ != 0)
      return result;
    const long long per_replica = batch / dp_;
    // Every size that divides B / dp into whole micro-batches (up to the M cap: not only powers of
    // two, so that 6 is tried where 8 does not fit), and the baseline's.
    std::set<long long> sizes;
    if (!baseline_only)
      for (long long b = 1; b <= per_replica; ++b)
        if (per_replica % b == 0 && per_replica / b <= options_.max_micro_batches)
          sizes.insert(b);
    const bool has_baseline = per_replica % baseline_m_ == 0;
    if (has_baseline)
      sizes.insert(per_replica / baseline_m_);
    std::vector<PointConfig> points;
    for (long long b : sizes) {
      PointConfig p = make_point_(batch, static_cast<int>(b)); // every rule checked again
      p.index       = next_index_++;
      points.push_back(std::move(p));
    }
    const std::size_t first = search_.rows.size();
    for (auto& row : run_sweep(points, {.jobs = options_.jobs, .evaluate = {}, .on_progress = {}, .on_row = {}}))
      search_.rows.push_back(std::move(row));
    double best = 0;
    for (std::size_t r = first; r < search_.rows.size(); ++r) {
      const ResultRow& row = search_.rows[r];
      // The rows come in the points' order: row r is points[r - first], whose micro-batch is known.
      if (has_baseline && points[r - first].training.micro_batch == per_replica / baseline_m_)
        result.baseline = r;
      const std::optional<double> throughput = row.number("throughput_samples_per_s");
      if (!row.is_ok() || !throughput)
        continue;
      if (*throughput > best) {
        best        = *throughput;
        result.best = r;
      }
    }
    return result;
  }

  bool baseline_ok(const BatchResult& r) const { return r.baseline && search_.rows[*r.baseline].is_ok(); }

  // Largest mini-batch in (ok, fail) that still trains, by bisection in steps of dp x baseline M
  // (so that the baseline's micro-batch size stays whole).
  long long refine(long long ok, long long fail, bool baseline_only)
  {
    const long long step = dp_ * baseline_m_;
    long long lo = ok / step, hi = (fail + step - 1) / step;
    while (hi - lo > 1) {
      const long long mid = (lo + hi) / 2;
      const BatchResult r = run(mid * step, baseline_only);
      if (baseline_only ? baseline_ok(r) : r.best.has_value())
        lo = mid;
      else
        hi = mid;
    }
    return std::max(ok, lo * step);
  }

  MicrobatchSearch search_;

private:
  const std::function<PointConfig(long long, int)>& make_point_;
  const MicrobatchSearchOptions& options_;
  int dp_;
  long long baseline_m_;
  std::size_t next_index_ = 0;
};

}  // namespace

MicrobatchSearch search_microbatch(const PointConfig& base,
                                   const std::function<PointConfig(long long, int)>& make_point,
                                   const MicrobatchSearchOptions& options)
{
  if (base.chakra)
    throw Error(chakra_refusal("search microbatch"));
  if (!base.is_valid())
    throw Error("the experiment's point is not valid: " + base.problems.front().to_string());
  MicrobatchSearcher s(base, make_point, options);
  MicrobatchSearch& search = s.search_;
  const long long max_batch = options.max_batch > 0 ? options.max_batch : 16 * base.training.global_batch;
  long long search_fail = 0, baseline_fail = 0;
  for (long long batch = base.training.global_batch; batch <= max_batch; batch *= 2) {
    const BatchResult result = s.run(batch, false);
    search.batches.push_back(result);
    if (s.baseline_ok(result))
      search.largest_baseline_batch = batch;
    else if (result.baseline && baseline_fail == 0 && search.largest_baseline_batch > 0)
      baseline_fail = batch;
    if (!result.best) {
      search_fail = batch;  // nothing fits at this mini-batch: larger ones fit even less
      break;
    }
    search.largest_batch = batch;
  }
  // The doubling brackets each largest trainable mini-batch; bisection narrows it.
  if (search_fail > 0 && search.largest_batch > 0)
    search.largest_batch = s.refine(search.largest_batch, search_fail, false);
  if (baseline_fail == 0 && search_fail > 0)
    baseline_fail = search_fail;
  if (baseline_fail > 0 && search.largest_baseline_batch > 0)
    search.largest_baseline_batch = s.refine(search.largest_baseline_batch, baseline_fail, true);
  search.stopped_at_max = search_fail == 0;
  return std::move(search);
}

GridSearch search_grid(int gpus, const std::function<PointConfig(int pp, int tp, int dp)>& make_point,
                       const GridSearchOptions& options)
{
  std::vector<PointConfig> points;
  GridSearch search;
  for (int pp = 1; pp <= gpus; ++pp) {
    if (gpus % pp != 0 || (!options.pipeline && pp > 1))
      continue;
    for (int tp = 1; tp <= gpus / pp; ++tp) {
      if ((gpus / pp) % tp != 0)
        continue;
      PointConfig p = make_point(pp, tp, gpus / (pp * tp));
      p.index = points.size();
      points.push_back(std::move(p));
      search.shapes.push_back({.pp = pp, .tp = tp, .dp = gpus / (pp * tp)});
    }
  }
  search.rows = run_sweep(points, {.jobs = options.jobs, .evaluate = {}, .on_progress = {}, .on_row = {}});
  search.ranking = rank_by_throughput(search.rows);
  return search;
}

namespace {

// The schedules and virtual stages tried at pp stages (ParallelSearchOptions::schedules and
// virtual_stages): at pp 1 one schedule, the experiment's (1F1B where it interleaves); with an
// explicit balance (one entry per stage) no interleaving.
std::vector<std::pair<sim::ScheduleKind, int>> pipeline_variants(const PointConfig& base,
                                                                 const ParallelSearchOptions& options, int pp)
{
  using sim::ScheduleKind;
  const ScheduleKind own = base.parallelism.schedule;
  if (pp == 1)
    return {{own == ScheduleKind::interleaved ? ScheduleKind::one_f_one_b : own, 1}};
  std::vector<ScheduleKind> schedules = options.schedules;
  if (schedules.empty()) {
    schedules.push_back(own);
    for (ScheduleKind s : {ScheduleKind::one_f_one_b, ScheduleKind::interleaved})
      if (own != ScheduleKind::gpipe && s != own)
        schedules.push_back(s);
  }
  const int blocks = static_cast<int>(base.model.blocks().size());
  std::vector<std::pair<ScheduleKind, int>> out;
  for (ScheduleKind s : schedules) {
    if (s == ScheduleKind::interleaved && base.parallelism.partition == models::Partitioner::explicit_balance)
      continue;  // the balance lists one entry per stage: chunks of the file's own split only
    if (s != ScheduleKind::interleaved) {
      out.emplace_back(s, 1);
      continue;
    }
    std::vector<int> vs = options.virtual_stages.empty() ? models::even_virtual_stages(base.model, pp, 8)
                                                         : options.virtual_stages;
    for (int v : vs)
      if (v >= 2 && pp * v <= blocks && models::splits_evenly(base.model, pp * v))
        out.emplace_back(s, v);
  }
  return out;
}

}  // namespace

std::vector<ParallelLayout> parallel_layouts(const PointConfig& base, const ParallelSearchOptions& options)
{
  if (base.chakra)
    throw Error(chakra_refusal("search parallel"));
  const int gpus = base.cluster.gpu_count();
  const int per_node = base.cluster.gpus_per_node;
  const models::Model& model = base.model;
  const bool sequence = model.has(models::LayerKind::attention);
  const double tokens = model.input_shape().tokens;
  const long long batch = base.training.global_batch;
  const int blocks = static_cast<int>(model.blocks().size());
  int experts = 0;  // a mixture of experts: ep sizes to try
  for (const auto& l : model.layers())
    if (l.kind == models::LayerKind::moe) {
      experts = l.experts;
      break;
    }
  // The dtypes and frameworks asked for (each a shape of its own); none asked: the experiment's.
  std::vector<std::optional<Dtype>> dtypes(options.dtypes.begin(), options.dtypes.end());
  std::vector<std::optional<sim::Framework>> frameworks(options.frameworks.begin(), options.frameworks.end());
  if (dtypes.empty())
    dtypes.emplace_back();
  if (frameworks.empty())
    frameworks.emplace_back();
  std::vector<ParallelLayout> out;
  for (const auto& dtype : dtypes)
    for (const auto& framework : frameworks)
      for (int tp = 1; tp <= per_node; ++tp) {
        if (per_node % tp != 0 || gpus % tp != 0)
          continue;
        for (int cp = 1; tp * cp <= gpus; cp *= 2) {
          // Ring attention hides its K/V steps only behind chunks of at least min_cp_tokens tokens.
          if (cp > 1 && (!sequence || std::fmod(tokens, 2.0 * cp) != 0 || tokens / cp < options.min_cp_tokens))
            break;
          if ((gpus / tp) % cp != 0)
            break;
          const int rest = gpus / (tp * cp);
          for (int pp = 1; pp <= std::min(rest, blocks); ++pp) {
            if (rest % pp != 0)
              continue;
            const int dp = rest / pp;
            if (batch % dp != 0)
              continue;
            const long long per_replica = batch / dp;
            const auto variants = pipeline_variants(base, options, pp);
            // Expert parallelism out of the dp x cp replicas, in sizes that hold whole experts or shards.
            std::vector<int> eps{1};
            for (int ep = 2; experts > 0 && ep <= dp * cp; ++ep)
              if ((dp * cp) % ep == 0 && models::expert_parallel_fits(experts, ep))
                eps.push_back(ep);
            for (int ep : eps) {
              if (!options.expert_parallel.empty() &&
                  std::find(options.expert_parallel.begin(), options.expert_parallel.end(), ep) ==
                      options.expert_parallel.end())
                continue;
              for (const ZeroStage zero : options.zero_stages) {
                if (shards_optimizer(zero) && dp * cp == 1)
                  continue;  // nothing to shard over
                for (long long b = 1; b <= std::min<long long>(per_replica, options.max_micro_batch); ++b) {
                  // Every micro-batch that divides a replica's batch, with at least pp micro-batches:
                  // fewer leave stages idle for most of the iteration.
                  const long long m = per_replica / b;
                  if (per_replica % b != 0 || m > options.max_micro_batches || m < pp)
                    continue;
                  for (const auto& [schedule, v] : variants) {
                    if (schedule == sim::ScheduleKind::interleaved && m % pp != 0)
                      continue;  // Megatron's interleaved schedule cycles micro-batches in groups of pp
                    out.push_back({.tp = tp, .pp = pp, .dp = dp, .cp = cp, .zero = zero,
                                   .sequence_parallel = sequence && tp > 1, .micro_batch = static_cast<int>(b),
                                   .ep = ep, .schedule = schedule, .virtual_stages = v, .recompute = {},
                                   .dtype = dtype, .framework = framework});
                  }
                }
              }
            }
          }
        }
      }
  return out;
}

namespace {

// Closed-form time of one collective of `kind` over `group` (devices) of `bytes`, uncontended.
double collective_seconds(const PointConfig& point, sim::CollectiveKind kind, sim::CollectiveAlgorithm algorithm,
                          std::vector<int> group, double bytes)
{
  if (group.size() < 2 || bytes <= 0)
    return 0;
  sim::CollectiveTask task{.kind = kind, .algorithm = algorithm, .fidelity = sim::CollectiveFidelity::analytic,
                           .group = std::move(group), .bytes = bytes};
  sim::resolve_collective(task, point.cluster);  // NCCL's choice and protocol, as the simulation makes it
  return sim::analytic_seconds(task, point.cluster);
}

}  // namespace

// ZeRO 1-2's gather of a stage's weights after the step, or with overlap_param_gather under the next
// forward (about a third of a micro-batch's `work`) but for its first bucket (`last` of its `grads`
// gradient bytes). In the weights' bytes, as the simulation gathers them: bf16 beside fp32 gradients
// under Megatron.
double per_step_gather(const PointConfig& point, const sim::PipelinePlan& pipe, const std::vector<int>& group,
                       double grads, double last, double work)
{
  const double w      = pipe.gather_per_gradient_byte;
  const double gather = collective_seconds(point, sim::CollectiveKind::all_gather, pipe.dp_algorithm, group, grads * w);
  if (!point.parallelism.overlap_param_gather)
    return gather;
  return std::max(collective_seconds(point, sim::CollectiveKind::all_gather, pipe.dp_algorithm, group, last * w),
                  gather - work / 3);
}

double estimate_iteration(const PointConfig& point, const PointPlan& plan, const calibration::CostModel& cost)
{
  const auto& par = point.parallelism;
  const sim::PipelinePlan& pipe = plan.pipeline;
  const sim::ComputeOptions compute = compute_options(point);
  const int mb = point.training.micro_batch;
  const double m = point.micro_batches();
  const int ranks = par.pp;
  // Each pipeline rank's forward + backward per micro-batch (its chunks together), its tensor-parallel
  // collectives per micro-batch, and its gradient bytes and ZeRO units.
  std::vector<double> work(static_cast<std::size_t>(ranks), 0.0), tensor(static_cast<std::size_t>(ranks), 0.0),
      gradients(static_cast<std::size_t>(ranks), 0.0), optimizer(static_cast<std::size_t>(ranks), 0.0),
      gathers(static_cast<std::size_t>(ranks), 0.0), first_gather(static_cast<std::size_t>(ranks), 0.0);
  std::vector<int> tp_group, shard_group, across_group;
  for (int t = 0; t < pipe.tp; ++t)
    tp_group.push_back(pipe.device(0, 0, t));
  const int shard = shards_optimizer(par.zero) ? par.shard_group() : par.replicas();
  for (int r = 0; r < shard; ++r)
    shard_group.push_back(pipe.device(0, r, 0));
  std::vector<int> cp_group;  // context rank c of replica 0: replica c (a cp group is contiguous)
  for (int c = 0; c < pipe.cp; ++c)
    cp_group.push_back(pipe.device(0, c, 0));
  for (int r = 0; r < par.replicas(); r += shard)
    across_group.push_back(pipe.device(0, r, 0));
  // Expert parallelism: the ep group's all-to-alls (at their member loads) and the experts' gradients
  // over the replicas holding the same experts, sharded in groups of expert_shard.
  std::vector<int> ep_group, expert_group, expert_across;
  for (int r = 0; r < par.ep; ++r)
    ep_group.push_back(pipe.device(0, r, 0));
  const int expert_shard = shards_optimizer(par.zero) ? par.expert_shard_group() : par.expert_replicas();
  for (int i = 0; i < expert_shard; ++i)
    expert_group.push_back(pipe.device(0, i * par.ep, 0));
  for (int j = 0; j < par.expert_replicas(); j += expert_shard)
    expert_across.push_back(pipe.device(0, j * par.ep, 0));
  std::vector<double> experts(static_cast<std::size_t>(ranks), 0.0);
  const double busiest =
      pipe.expert_compute.empty() ? 1.0 : *std::max_element(pipe.expert_compute.begin(), pipe.expert_compute.end());
  for (std::size_t c = 0; c < pipe.stages.size(); ++c) {
    const sim::StagePlan& stage = pipe.stages[c];
    const auto r = c % static_cast<std::size_t>(ranks);
    work[r] += sim::range_seconds(point.model, stage.layers.begin, stage.layers.end, sim::Phase::forward, mb, compute, cost) +
               sim::range_seconds(point.model, stage.layers.begin, stage.layers.end, sim::Phase::backward, mb, compute, cost);
    optimizer[r] += sim::range_seconds(point.model, stage.layers.begin, stage.layers.end, sim::Phase::optimizer, mb,
                                       compute, cost) /
                    (shards_optimizer(par.zero) ? shard : 1);
    // Userbuffers (sim::PipelinePlan::tp_comm_overlap), as the graph runs them: a layer's overlapped
    // collectives run beside its compute at once, so what the longest of their (tp - 1) / tp leaves
    // unhidden is exposed, then each one's last chunk.
    // Megatron's asynchronous backward (tp_backward_overlap): a column layer's gather beside its input
    // gradient's GEMM, its reduction beside its weight gradient's; what each leaves unhidden is exposed.
    std::map<std::pair<std::size_t, sim::Phase>, double> beside;  // per layer and pass: the longest
    std::map<std::size_t, std::pair<double, double>> async;       // per layer: beside dgrad, beside wgrad
    const double tp_n = pipe.tp;
    for (const sim::TpCollective& tc : stage.tp_collectives) {
      const double comm = collective_seconds(point, tc.kind, pipe.tp_algorithm, tp_group, tc.bytes_per_sample * mb);
      const sim::TpOverlap how = tc.overlap(pipe.tp_comm_overlap, pipe.tp_backward_overlap);
      if (how == sim::TpOverlap::backward_async) {
        auto& [input_gradient, weight_gradient] = async[tc.layer];
        (tc.beside == sim::TpBeside::input_gradient ? input_gradient : weight_gradient) += comm;
        continue;
      }
      if (how == sim::TpOverlap::blocking) {
        tensor[r] += comm;
        continue;
      }
      double& longest = beside[{tc.layer, tc.phase}];
      longest = std::max(longest, comm * (tp_n - 1) / tp_n);
      tensor[r] += comm / tp_n;
    }
    for (const auto& [at, longest] : beside)
      tensor[r] += std::max(0.0, longest - sim::range_seconds(point.model, at.first, at.first + 1, at.second, mb,
                                                              compute, cost));
    // As the graph splits the layer: the gather beside the input gradient's part, the reduction after
    // it, beside the weight gradient's GEMMs.
    for (const auto& [layer, comm] : async) {
      const double input_gradient = sim::range_seconds(point.model, layer, layer + 1, sim::Phase::backward, mb, compute,
                                                       cost, sim::ComputePart::input_gradient);
      const double weight_gradient = sim::range_seconds(point.model, layer, layer + 1, sim::Phase::backward, mb,
                                                        compute, cost, sim::ComputePart::weight_gradient);
      tensor[r] += std::max(0.0, comm.first - input_gradient) + std::max(0.0, comm.second - weight_gradient);
    }
    // Context parallelism: the ring hides under the attention compute; Llama 3's all-gather blocks
    // the stream: K/V gathered before the forward and the backward (and its recomputed forward),
    // dK/dV reduce-scattered after the backward.
    if (pipe.cp > 1 && pipe.cp_algorithm == sim::CpAlgorithm::all_gather)
      for (const sim::RingAttention& ring : stage.rings)
        tensor[r] += (ring.recomputed ? 3 : 2) * collective_seconds(point, sim::CollectiveKind::all_gather,
                                                                    pipe.dp_algorithm, cp_group,
                                                                    ring.kv_bytes_per_sample * mb) +
                     collective_seconds(point, sim::CollectiveKind::reduce_scatter, pipe.dp_algorithm, cp_group,
                                        ring.kv_bytes_per_sample * mb);
    gradients[r] += stage.gradient_bytes;
    experts[r] += stage.expert_gradient_bytes;
    const double passes = pipe.expert_recompute ? 3 : 2;  // forward, backward, and the recomputed forward
    for (const sim::ExpertExchange& x : stage.exchanges) {
      // Four all-to-alls per micro-batch (six with full recomputation), as NCCL's tuner resolves them,
      // and the busiest GPU's extra expert work.
      for (bool at_source : {false, true}) {  // dispatch and combine
        sim::CollectiveTask a2a{.kind = sim::CollectiveKind::all_to_all, .algorithm = pipe.ep_algorithm,
                                .fidelity = sim::CollectiveFidelity::analytic, .group = ep_group,
                                .bytes = x.bytes_per_sample * mb, .member_load = pipe.expert_load,
                                .load_at_source = at_source};
        sim::resolve_collective(a2a, point.cluster);
        tensor[r] += passes * sim::analytic_seconds(a2a, point.cluster);
      }
      work[r] += (busiest - 1) *
                 (sim::range_seconds(point.model, x.layer, x.layer + 1, sim::Phase::forward, mb, compute, cost) +
                  sim::range_seconds(point.model, x.layer, x.layer + 1, sim::Phase::backward, mb, compute, cost));
    }
    for (const sim::ShardUnit& u : stage.units) {
      // ZeRO-3 gathers the unit's dense parameters over the shard group and its experts' over the expert
      // shard group, on their own streams at once (sim/PipelineBuilderSteps.cpp): the unit waits for the longer.
      const double g = std::max(
          collective_seconds(point, sim::CollectiveKind::all_gather, pipe.dp_algorithm, shard_group, u.bytes),
          collective_seconds(point, sim::CollectiveKind::all_gather, pipe.dp_algorithm, expert_group, u.expert_bytes));
      gathers[r] += g;
      first_gather[r] = first_gather[r] > 0 ? first_gather[r] : g;
    }
  }
  // Pipeline transfers (sim::P2pSends). Overlapped, hidden in the steady state but on the critical
  // path of the fill and the drain, where the first micro-batch's activations cross every chunk
  // boundary on the way down and the last one's gradients on the way back (K v - 1 boundaries each
  // way, interleaved or not). Blocking, each pass waits for its send, fill and drain included: part
  // of its rank's time per micro-batch; paired (Megatron's interleaved schedule), a forward's and a
  // backward's send leave together, the longer counts.
  const std::size_t chunk_count = pipe.stages.size();
  std::vector<double> hop(chunk_count, 0.0); // chunk c to c + 1
  for (std::size_t c = 0; c + 1 < chunk_count; ++c) {
    const int from = pipe.device(static_cast<int>(c), 0, 0), to = pipe.device(static_cast<int>(c) + 1, 0, 0);
    if (from != to)
      hop[c] = collective_seconds(point, sim::CollectiveKind::broadcast, sim::CollectiveAlgorithm::ring, {from, to},
                                  pipe.stages[c].activation_bytes * mb / pipe.tp);
  }
  double pipeline_transfers = 0;                                   // overlapped: the fill's and the drain's
  std::vector<double> sends(static_cast<std::size_t>(ranks), 0.0); // blocking: per micro-batch
  for (std::size_t c = 0; c < chunk_count; ++c) {
    const double forward = hop[c], backward = c > 0 ? hop[c - 1] : 0.0;
    if (pipe.p2p == sim::P2pSends::overlapped)
      pipeline_transfers += 2 * forward;
    else
      sends[c % static_cast<std::size_t>(ranks)] +=
          pipe.p2p == sim::P2pSends::paired ? std::max(forward, backward) : forward + backward;
  }
  // Communication hidden under compute slows that compute: D seconds of overlap add D s / (1 + s)
  // (the profile's comm_compute_slowdown s, as the replay applies it: sim/CommOverlap.hpp).
  const calibration::Parameter* slowdown = point.profile.find("comm_compute_slowdown");
  const double overlap_cost = slowdown ? slowdown->value / (1 + slowdown->value) : 0.0;
  double slowest = 0;
  for (int r = 0; r < ranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const double per_micro_batch = work[i] + tensor[i] + sends[i];
    // The pipeline: M passes of the slowest rank plus its fill and drain ((K - 1) / v of them).
    double t = per_micro_batch * (m + (ranks - 1.0) / par.virtual_stages) + pipeline_transfers;
    // Gradient reduction: what the last bucket (or all of it, unbucketed) leaves exposed, and with
    // ZeRO 1-2 the gather of the parameters after the step; ZeRO 3's gathers beyond the compute they
    // hide under, and at least the first unit of every pass.
    const double grads = gradients[i];
    const double last = par.dp_bucket > 0 ? std::min(par.dp_bucket, grads) : grads;
    const auto reduce  = sim::gradient_reduction(par.zero);
    if (par.replicas() > 1) {
      // Reductions hidden under the backward slow it: the earlier buckets (ZeRO 2 without buckets: every
      // unit) under the last micro-batch's; with ZeRO 2, every micro-batch's reduction under its own.
      const bool every_micro_batch = shards_gradients(par.zero); // in this branch ZeRO 2: reduces each one
      if (overlap_cost > 0 && !shards_parameters(par.zero)) {
        const double hidden_last = reduces_per_block(par.zero, par.dp_bucket > 0) ? grads : grads - last;
        double hidden = collective_seconds(point, reduce, pipe.dp_algorithm, shard_group, hidden_last);
        if (every_micro_batch)
          hidden += (m - 1) * collective_seconds(point, reduce, pipe.dp_algorithm, shard_group, grads);
        t += overlap_cost * std::min((every_micro_batch ? m : 1.0) * work[i], hidden);
      }
      t += collective_seconds(point, reduce, pipe.dp_algorithm, shard_group, shards_parameters(par.zero) ? 0.0 : last);
      if (shards_optimizer(par.zero) && shard < par.replicas())
        t += collective_seconds(point, sim::CollectiveKind::all_reduce, pipe.dp_algorithm, across_group, last / shard);
      if (gathers_per_step(par.zero))
        t += per_step_gather(point, pipe, shard_group, grads, last, work[i]);
      if (shards_parameters(par.zero))
        t += std::max(2 * m * first_gather[i], 2 * m * gathers[i] - m * work[i]) +
             overlap_cost * std::min(2 * m * gathers[i], m * work[i]);
      // The experts' gradients, reduced (and with ZeRO 1-2 gathered) over their own groups.
      t += collective_seconds(point, reduce, pipe.dp_algorithm, expert_group, experts[i]);
      if (shards_optimizer(par.zero) && expert_shard < par.expert_replicas())
        t += collective_seconds(point, sim::CollectiveKind::all_reduce, pipe.dp_algorithm, expert_across,
                                experts[i] / expert_shard);
      if (gathers_per_step(par.zero))
        t += collective_seconds(point, sim::CollectiveKind::all_gather, pipe.dp_algorithm, expert_group, experts[i]);
    }
    t += optimizer[i];
    slowest = std::max(slowest, t);
  }
  return slowest;
}

namespace {

// The recomputation tried per layout, cheapest first (ParallelSearchOptions::recomputes): per-op
// checkpointing reruns part of each block, full all of it; a layout whose framework cannot run one
// (selective-op is PyTorch's, eager or compiled) skips it by the rules.
std::vector<models::Recompute> recompute_order(const PointConfig& base, const ParallelSearchOptions& options)
{
  if (!options.recomputes.empty())
    return options.recomputes;
  if (base.model.has(models::LayerKind::attention))
    return {models::Recompute::none, models::Recompute::selective, models::Recompute::selective_op,
            models::Recompute::full};
  return {models::Recompute::none, models::Recompute::full};
}

bool same_shape(const ParallelLayout& a, const ParallelLayout& b)
{
  return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.cp == b.cp && a.ep == b.ep && a.zero == b.zero &&
         a.dtype == b.dtype && a.framework == b.framework;
}

// Step 3 for one layout on its shape's point: the first recomputation (cheapest first) whose plan
// fits in memory, as a candidate with its estimate (step 4); nothing when none fits. `valid` is set
// when the layout passes the checks that do not depend on memory.
std::optional<ParallelCandidate> screen_layout(ParallelLayout layout, const PointConfig& shape,
                                               const PointConfig& base, const std::vector<models::Recompute>& order,
                                               const calibration::CostModel& cost, bool& valid)
{
  PointConfig p = shape;
  p.parallelism.zero = layout.zero;
  p.parallelism.zero_group     = shards_optimizer(layout.zero) ? base.parallelism.zero_group : 0;
  p.training.micro_batch = layout.micro_batch;
  p.parallelism.schedule = layout.schedule;
  p.parallelism.virtual_stages = layout.virtual_stages;
  valid                        = false;
  for (std::size_t i = 0; i < order.size(); ++i) {
    p.training.recompute = order[i];
    // The shape passed the rules: what the layout changed, and its recomputation, may not.
    if (!rule_problems(p).empty() || !over_limits(p, estimate_resources(p)).empty())
      continue;
    valid = true;
    const PointPlan plan = plan_point(p, cost);
    const MemoryVerdict memory = stage_memory_verdict(p, plan);
    if (!memory.fits())
      continue;
    layout.recompute = order[i];
    const double estimate = estimate_iteration(p, plan, cost);
    return ParallelCandidate{.layout = layout, .point = std::move(p), .estimate_s = estimate,
                             .peak_bytes = memory.peak_bytes};
  }
  return std::nullopt;
}

// --confirm: the best `count` of the ranking simulated again with every collective as flows.
void confirm_best(ParallelSearch& search, std::size_t count, int jobs)
{
  std::vector<PointConfig> points;
  for (std::size_t i = 0; i < std::min(count, search.ranking.size()); ++i) {
    PointConfig p = search.simulated[search.ranking[i]].point;
    p.index = search.rows.size() + i;
    p.parallelism.dp_fidelity = sim::CollectiveFidelity::flow;
    p.parallelism.tp_fidelity = sim::CollectiveFidelity::flow;
    p.parallelism.ep_fidelity = sim::CollectiveFidelity::flow;
    points.push_back(std::move(p));
  }
  search.confirmed = run_sweep(points, {.jobs = jobs, .evaluate = {}, .on_progress = {}, .on_row = {}});
  for (std::size_t i = 0; i < search.confirmed.size(); ++i) {  // which row each one simulates again
    ResultRow& row = search.confirmed[i];
    const std::string note = "confirms config_id " + std::to_string(search.ranking[i]) + " with every collective as flows";
    row.set("message", row.get("message").empty() ? note : row.get("message") + "; " + note);
  }
  search.confirmed_ranking = rank_by_throughput(search.confirmed);
}

}  // namespace

ParallelSearch search_parallel(const PointConfig& base, const std::function<PointConfig(const ParallelLayout&)>& make_point,
                               const ParallelSearchOptions& options)
{
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  ParallelSearch search;
  const std::unique_ptr<calibration::CostModel> cost = calibration::make_cost_model(base.profile);
  const std::vector<models::Recompute> order = recompute_order(base, options);
  std::vector<ParallelCandidate> fitting;
  // One resolution per shape (tp, pp, dp, cp, ep, ZeRO stage, dtype, framework: the ZeRO stage too,
  // since rules such as overlap_param_gather's depend on it): its micro-batch sizes, schedules and
  // recomputation are that point with a few fields changed, checked again for what depends on them.
  std::optional<PointConfig> shape;
  ParallelLayout shape_layout;
  for (const ParallelLayout& layout : parallel_layouts(base, options)) {
    ++search.enumerated;
    if (!shape || !same_shape(layout, shape_layout)) {
      shape_layout = layout;
      shape = make_point(layout);
    }
    if (!shape->is_valid()) {
      // Built with this layout's micro-batch, which may be all that is wrong (over the resource
      // limits): the shape's next layout builds it again with its own.
      shape.reset();
      continue;
    }
    bool valid = false;
    std::optional<ParallelCandidate> candidate = screen_layout(layout, *shape, base, order, *cost, valid);
    search.valid += valid ? 1 : 0;
    if (!candidate)
      continue;
    ++search.fitting;
    fitting.push_back(std::move(*candidate));
  }
  if (fitting.empty())
    throw Error("none of the " + std::to_string(search.enumerated) + " layouts (" + std::to_string(search.valid) +
                " valid) fits in GPU memory");
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const ParallelCandidate& a, const ParallelCandidate& b) { return a.estimate_s < b.estimate_s; });
  fitting.resize(std::min(fitting.size(), options.top));
  const auto screened = clock::now();
  search.screen_s = std::chrono::duration<double>(screened - start).count();

  std::vector<PointConfig> points;
  for (std::size_t i = 0; i < fitting.size(); ++i) {
    fitting[i].point.index = i;
    points.push_back(fitting[i].point);
  }
  search.rows = run_sweep(points, {.jobs = options.jobs, .evaluate = {}, .on_progress = {}, .on_row = {}});
  search.simulated = std::move(fitting);
  search.ranking       = rank_by_throughput(search.rows);
  const auto simulated = clock::now();
  search.simulate_s = std::chrono::duration<double>(simulated - screened).count();
  if (options.confirm > 0) {
    confirm_best(search, options.confirm, options.jobs);
    search.confirm_s = std::chrono::duration<double>(clock::now() - simulated).count();
  }
  return search;
}

}  // namespace ddlsim::experiments
