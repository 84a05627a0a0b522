#include "experiments/Plan.hpp"

#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "models/Memory.hpp"
#include "models/Partition.hpp"
#include "sim/Collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace ddlsim::experiments {
namespace {

// Speed of the slowest GPU of a pipeline rank (its replicas and tensor ranks), relative to the profile:
// what the partitioners divide a stage's time by.
double rank_speed(const PointConfig& point, int rank)
{
  const int per_rank = point.parallelism.replicas() * point.parallelism.tp;
  double speed       = std::numeric_limits<double>::infinity();
  for (int g = 0; g < per_rank; ++g)
    speed = std::min(speed, point.cluster.speed_of(rank * per_rank + g));
  return speed;
}

// Memory of the smallest GPU of pipeline rank `rank` (its replicas and tensor ranks).
double rank_capacity(const PointConfig& point, int rank)
{
  const auto& par = point.parallelism;
  if (point.cluster.memory.empty())
    return point.cluster.gpu_memory;
  const int per_rank = par.replicas() * par.tp;
  double capacity    = std::numeric_limits<double>::infinity();
  for (int g = 0; g < per_rank; ++g)
    capacity = std::min(capacity, point.cluster.memory_of(rank * per_rank + g));
  return capacity;
}

// Whether the point's partitioner searches the stage boundaries (and so the memory verdict needs a plan).
bool par_partition_searches(const PointConfig& point)
{
  return point.parallelism.partition == models::Partitioner::optimal ||
         point.parallelism.partition == models::Partitioner::balanced;
}

} // namespace

std::vector<sim::GradientBucket> gradient_buckets(const models::Model& model, models::StageRange layers, double cap,
                                                  double dtype_bytes, int tp, bool without_experts)
{
  std::vector<sim::GradientBucket> buckets;
  double bytes = 0;
  for (std::size_t i = layers.end; i-- > layers.begin;) {
    if (!(without_experts && model.layers()[i].kind == models::LayerKind::moe))
      bytes += model.held_parameters(i, layers, tp) * dtype_bytes;
    if (bytes >= cap && i > layers.begin) {
      buckets.push_back({.layer = i, .bytes = bytes});
      bytes = 0;
    }
  }
  if (bytes > 0 || buckets.empty())
    buckets.push_back({.layer = layers.begin, .bytes = bytes});
  else
    buckets.back().layer = layers.begin; // no gradients below the last cut: extend that bucket down
  return buckets;
}

double kv_elements_per_rank(const models::Layer& l, int tp)
{
  const double kv_per_rank = std::max(1.0, static_cast<double>(l.kv_heads) / tp);
  return 2 * kv_per_rank * (l.output.features / l.heads) * l.output.tokens;
}

// The tensor-parallel collectives of a stage, from each layer's role (models::TpRole): row layers
// all-reduce their output in forward; column layers all-reduce their input gradient in backward;
// gathered layers (the grid's) all-gather their output in forward and all-reduce the input
// gradient in backward. Sizes are the full tensors per sample.
std::vector<sim::TpCollective> tensor_collectives(const models::Model& model, models::StageRange layers, double d,
                                                  bool sequence_parallel, int ep, models::Recompute recompute)
{
  std::vector<sim::TpCollective> out;
  // Sequence parallelism (Korthikanti et al. 2022): the tensors between the tensor-parallel regions
  // are split over the sequence, so a row layer reduce-scatters its output (forward) and all-gathers
  // its output gradient before its backward; a column layer all-gathers its input before its
  // forward and reduce-scatters its input gradient. Same bytes as the all-reduces they replace.
  const bool sp = sequence_parallel && model.has(models::LayerKind::attention);
  // Transformer Engine's linear layers are those of the transformer blocks (a block holding an
  // attention layer): their sequence-parallel collectives are the ones its userbuffers overlap. The
  // LM head is Megatron's own ColumnParallelLinear, outside them.
  std::vector<char> te_block(model.blocks().size(), 0);
  for (const models::Layer& l : model.layers())
    if (l.kind == models::LayerKind::attention)
      te_block[l.block] = 1;
  for (std::size_t i = layers.begin; i < layers.end; ++i) {
    const models::Layer& l = model.layers()[i];
    double input           = 0;
    for (std::size_t in : l.inputs)
      input += model.layers()[in].output_elements();
    if (l.inputs.empty())
      input = model.input_shape().elements();
    const bool first = i == 0; // the model input needs no gradient
    // A mixture of experts: the router gathers/all-reduces at the input as a column layer does, the
    // combine reduces at the output as a row layer does (ep 1, or without sequence parallelism);
    // with ep > 1 and SP, the experts gather the dispatched tokens and reduce-scatter their outputs.
    const bool around_experts = sp && ep > 1;
    if (l.kind == models::LayerKind::moe_router || l.kind == models::LayerKind::moe_combine ||
        l.kind == models::LayerKind::moe) {
      const double output = l.output_elements() * d;
      const bool router = l.kind == models::LayerKind::moe_router, combine = l.kind == models::LayerKind::moe_combine;
      if (l.kind == models::LayerKind::moe && around_experts) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = input * d,
                       .before           = true});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = output});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = output,
                       .before           = true});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = input * d});
      } else if (router && !around_experts && sp && !first) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = input * d,
                       .before           = true});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = input * d});
      } else if (router && !sp && !first) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_reduce,
                       .bytes_per_sample = input * d});
      } else if (combine && !around_experts && sp) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = output});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = output,
                       .before           = true});
      } else if (combine && !sp) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::all_reduce,
                       .bytes_per_sample = output});
      }
      continue;
    }
    const bool te = sp && l.kind == models::LayerKind::linear && te_block[l.block] != 0;
    switch (l.tp) {
    case models::TpRole::row:
      if (sp) {
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = l.output_elements() * d,
                       .overlappable     = te});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = l.output_elements() * d,
                       .before           = true,
                       .overlappable     = te});
        break;
      }
      out.push_back({.layer            = i,
                     .phase            = sim::Phase::forward,
                     .kind             = sim::CollectiveKind::all_reduce,
                     .bytes_per_sample = l.output_elements() * d});
      break;
    case models::TpRole::column:
      if (sp && !first) {
        // Forward all-gathers the input; backward gathers it again for the weight gradient (only the
        // s/tp shard was kept: Korthikanti's 34 s h / t) and reduce-scatters the input gradient.
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::forward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = input * d,
                       .before           = true,
                       .overlappable     = te});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_gather,
                       .bytes_per_sample = input * d,
                       .before           = true,
                       .overlappable     = te,
                       .beside           = sim::TpBeside::input_gradient});
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::reduce_scatter,
                       .bytes_per_sample = input * d,
                       .overlappable     = te,
                       .beside           = sim::TpBeside::weight_gradient});
        break;
      }
      if (!first)
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_reduce,
                       .bytes_per_sample = input * d,
                       .beside           = sim::TpBeside::weight_gradient});
      break;
    case models::TpRole::gathered:
      out.push_back({.layer            = i,
                     .phase            = sim::Phase::forward,
                     .kind             = sim::CollectiveKind::all_gather,
                     .bytes_per_sample = l.output_elements() * d});
      if (!first)
        out.push_back({.layer            = i,
                       .phase            = sim::Phase::backward,
                       .kind             = sim::CollectiveKind::all_reduce,
                       .bytes_per_sample = input * d});
      break;
    case models::TpRole::split:
    case models::TpRole::replicated:
      break;
    }
  }
  // Full recomputation reruns every layer's forward (sim/OpCosts puts its compute in the layer's
  // backward task), and with it the forward's collectives, just before the layer's backward. Per-op
  // checkpointing reruns a checkpointed block's forward but what its policy keeps: the outputs of
  // reduce-scatters (torchtitan's _save_list), not those of all-gathers and all-reduces. A column
  // layer's gather, which its backward runs again anyway (sequence parallelism, above), is that
  // gather: the recomputed input feeds the weight gradient once.
  std::vector<char> rerun(model.size(), recompute == models::Recompute::full);
  std::vector<char> gathers_back(model.size(), 0);
  if (recompute == models::Recompute::selective_op) {
    for (const auto& [l, kept] : models::op_checkpoint_layers(model, layers.begin, layers.end))
      rerun[l] = 1;
    for (const sim::TpCollective& c : out)
      gathers_back[c.layer] |= c.phase == sim::Phase::backward && c.kind == sim::CollectiveKind::all_gather;
  }
  const auto reruns = [&](const sim::TpCollective& c) {
    if (recompute == models::Recompute::full)
      return true;
    return c.kind == sim::CollectiveKind::all_reduce ||
           (c.kind == sim::CollectiveKind::all_gather && !gathers_back[c.layer]);
  };
  const std::size_t forward = out.size();
  for (std::size_t k = 0; k < forward; ++k)
    if (out[k].phase == sim::Phase::forward && rerun[out[k].layer] && reruns(out[k])) {
      sim::TpCollective again = out[k];
      again.phase             = sim::Phase::backward;
      again.recomputed        = true;
      out.push_back(again);
    }
  return out;
}

sim::PipelinePlan pipeline_layout(const PointConfig& point)
{
  const auto& par = point.parallelism;
  sim::PipelinePlan pipe;
  pipe.schedule                 = par.schedule;
  pipe.dp                       = par.replicas();
  pipe.cp                       = par.cp;
  pipe.cp_algorithm             = par.cp_algorithm;
  pipe.tp_comm_overlap          = par.tp_comm_overlap;
  pipe.tp_backward_overlap      = par.tp_backward_overlap;
  pipe.p2p                      = p2p_sends(point);
  pipe.overlap_param_gather     = par.overlap_param_gather;
  pipe.zero                     = par.zero;
  pipe.shard                    = par.shard_group();
  const sim::StepDtypes dt      = point_dtypes(point);
  pipe.gather_per_gradient_byte = dtype_bytes(dt.weights) / dtype_bytes(dt.gradients);
  pipe.virtual_stages           = par.virtual_stages;
  pipe.tp                       = par.tp;
  pipe.dp_algorithm             = par.dp_collective;
  pipe.dp_fidelity              = par.dp_fidelity;
  pipe.tp_algorithm             = par.tp_collective;
  pipe.tp_fidelity              = par.tp_fidelity;
  pipe.ep                       = par.ep;
  pipe.expert_shard             = par.expert_shard_group();
  pipe.ep_algorithm             = par.ep_collective;
  pipe.ep_fidelity              = par.ep_fidelity;
  pipe.expert_recompute         = point.training.recompute == models::Recompute::full;
  const auto load               = point_expert_load(point);
  if (par.ep > 1 && load) {
    pipe.expert_load = load->rank_load;
    for (double l : load->rank_load)
      pipe.expert_compute.push_back(l / load->kept); // the cost model counts the kept share already
  }
  pipe.stages.resize(static_cast<std::size_t>(par.pp) * static_cast<std::size_t>(par.virtual_stages));
  return pipe;
}

FoldPlan plan_fold(const PointConfig& point)
{
  FoldPlan f;
  const auto& par    = point.parallelism;
  const int replicas = par.replicas();
  if (par.ps || !point.is_valid() || (par.tp < 2 && replicas < 2))
    return f;
  if (!par.fold_replicas) {
    f.note = "off";
    return f;
  }
  if (par.gpus() > point.cluster.gpu_count())
    return f;
  const sim::PipelinePlan layout = pipeline_layout(point);
  auto note                      = [&](const std::string& text) { f.note += (f.note.empty() ? "" : "; ") + text; };
  // A binary tree all-reduce is not mapped onto itself by rotating its members (the root is apart).
  auto tree = [](sim::CollectiveAlgorithm a, sim::CollectiveFidelity fidelity, int members) {
    return a == sim::CollectiveAlgorithm::tree && fidelity == sim::CollectiveFidelity::flow && members > 2;
  };
  if (par.tp > 1 && par.tp_aggregate) {
    sim::FoldGenerator g  = sim::tensor_rotation(layout);
    const std::string why = sim::platform_asymmetry(point.cluster, g);
    if (tree(par.tp_collective, par.tp_fidelity, par.tp)) {
      note("tp: tree all-reduces do not fold");
    } else if (!why.empty()) {
      note("tp: " + why);
    } else {
      f.tp = par.tp;
      f.generators.push_back(std::move(g));
    }
  }
  if (replicas > 1 && par.ep > 1) {
    // The experts' all-to-alls and their ranks' loads (imbalance, capacity) differ replica by
    // replica: no shift of the replicas is proven to map them onto themselves.
    note("dp: expert parallelism (ep " + std::to_string(par.ep) + ") is not folded");
  } else if (replicas > 1) {
    // Gradient all-reduces that run as trees (a tree's root is apart) do not fold: they run apart
    // (Fold.hpp), and the replay checks that nothing else crosses their links meanwhile.
    {
      const int step = sim::replica_shift_step(layout);
      std::string first_why; // why the last smaller shift failed
      for (int shift = step; shift < replicas; shift += step) {
        if (replicas % shift != 0)
          continue;
        sim::FoldGenerator g  = sim::replica_shift(layout, shift);
        const std::string why = sim::platform_asymmetry(point.cluster, g);
        if (why.empty()) {
          f.replicas = g.order;
          f.generators.push_back(std::move(g));
          if (shift > step)
            note("dp: replicas alike in blocks of " + std::to_string(shift) + " (a smaller shift: " + first_why + ")");
          break;
        }
        first_why = why; // the nearest smaller shift's reason
      }
      if (f.replicas == 1 && replicas / step > 1)
        note("dp: " + (first_why.empty() ? std::string("no symmetry") : first_why));
    }
  }
  return f;
}

std::string fold_description(const FoldPlan& f)
{
  std::string text;
  if (f.tp > 1)
    text = "tp" + std::to_string(f.tp);
  if (f.replicas > 1)
    text += (text.empty() ? "" : "x") + std::string("dp") + std::to_string(f.replicas);
  if (text.empty())
    text = f.note == "off" ? "off" : "none";
  if (!f.note.empty() && f.note != "off")
    text += " (" + f.note + ")";
  return text;
}

std::string collective_fidelity(const PointConfig& p, const FoldPlan& f)
{
  const auto& par  = p.parallelism;
  std::string text = "dp=" + std::string(sim::collective_fidelity_table.name(par.dp_fidelity)) +
                     ";tp=" + std::string(sim::collective_fidelity_table.name(par.tp_fidelity)) +
                     (f.tp > 1 ? "+aggregated" : "");
  if (!par.ps && (par.tp > 1 || par.replicas() > 1))
    text += ";fold=" + fold_description(f);
  if (par.ep > 1) // last, as before folding existed
    text += ";ep=" + std::string(sim::collective_fidelity_table.name(par.ep_fidelity));
  return text;
}

sim::StepDtypes point_dtypes(const PointConfig& point)
{
  sim::StepDtypes dt = sim::step_dtypes(point.training.framework, point.training.dtype);
  if (sim::is_pytorch(point.training.framework) && sixteen_bit(point.training.dtype)) {
    // FSDP's MixedPrecisionPolicy: 16-bit parameters gathered, gradients reduced in fp32 (reduce_dtype);
    // else autocast over fp32 weights, whose gradients are fp32 (DDP all-reduces them so).
    if (!sim::fsdp_params(compute_options(point)))
      dt.weights = Dtype::fp32;
    dt.gradients = Dtype::fp32;
  }
  if (point.training.grad_dtype)
    dt.gradients = *point.training.grad_dtype;
  return dt;
}

sim::ComputeOptions compute_options(const PointConfig& point)
{
  const auto& par = point.parallelism;
  return {.dtype             = point.training.dtype,
          .optimizer         = point.training.optimizer,
          .recompute         = point.training.recompute,
          .tp                = par.tp,
          .sequence_parallel = par.sequence_parallel,
          .cp                = par.cp,
          .ep                = par.ep,
          .framework         = point.training.framework,
          .cuda_graphs       = point.training.cuda_graphs,
          .zero              = par.zero,
          .shard             = par.shard_group(),
          .expert_shard      = par.expert_shard_group()};
}

std::optional<models::ExpertLoad> point_expert_load(const PointConfig& point)
{
  for (const auto& l : point.model.layers())
    if (l.kind == models::LayerKind::moe)
      return models::expert_load(l, point.parallelism.ep);
  return std::nullopt;
}

double dropped_tokens(const PointConfig& point)
{
  double dropped = 0;
  for (const auto& l : point.model.layers())
    if (l.kind == models::LayerKind::moe) // its input: tokens x top_k copies per sample
      dropped += (1 - models::expert_load(l, 1).kept) * l.output.tokens;
  return dropped * static_cast<double>(point.training.global_batch);
}

models::MemoryOptions memory_options(const PointConfig& point)
{
  const auto& par          = point.parallelism;
  const auto load          = point_expert_load(point);
  const sim::StepDtypes dt = point_dtypes(point);
  return {.dtype             = dt.activations,
          .optimizer         = point.training.optimizer,
          .recompute         = point.training.recompute,
          .reserve_bytes     = point.training.memory_reserve,
          .tp                = par.tp,
          .sequence_parallel = par.sequence_parallel,
          .cp                = par.cp,
          .zero              = par.zero,
          .shard             = par.shard_group(),
          .ep                = par.ep,
          .expert_shard      = par.expert_shard_group(),
          .expert_load       = load ? load->busiest() : 1.0,
          .gradient_bytes    = dtype_bytes(dt.gradients),
          .weight_copy_bytes = dt.gemm == Dtype::fp8 && dt.weights != Dtype::fp8 ? 2 * dtype_bytes(Dtype::fp8) : 0.0,
          .gemm_input_bytes  = dt.gemm == Dtype::fp8 && dt.activations != Dtype::fp8 ? dtype_bytes(Dtype::fp8) : 0.0,
          .weights           = dt.weights != dt.activations ? std::optional<Dtype>(dt.weights) : std::nullopt};
}

double model_flop_per_token(const models::Model& model)
{
  double attention = 0;
  for (const auto& l : model.layers())
    if (l.kind == models::LayerKind::attention)
      attention += 12 * l.output.features * l.output.tokens;
  return 6 * model.active_parameter_count() + attention; // a token uses only its experts' parameters
}

PointPlan plan_point(const PointConfig& point, const calibration::CostModel& cost)
{
  const models::Model& model = point.model;
  const int mb               = point.training.micro_batch;
  // Bytes of an activation (sends, tensor and context-parallel collectives, expert dispatch), of a
  // gradient (reductions) and of a weight (ZeRO-3 gathers): the training dtype's, or Megatron's.
  const sim::StepDtypes dt = point_dtypes(point);
  const double d = dtype_bytes(dt.activations), grad_d = dtype_bytes(dt.gradients), weight_d = dtype_bytes(dt.weights);
  const auto& par                   = point.parallelism;
  const sim::ComputeOptions compute = compute_options(point);

  // Forward + backward seconds of each block at this micro-batch size: what the partitioners balance.
  std::vector<double> block_seconds;
  for (const auto& block : model.blocks())
    block_seconds.push_back(
        sim::range_seconds(model, block.layers.begin, block.layers.end, sim::Phase::forward, mb, compute, cost) +
        sim::range_seconds(model, block.layers.begin, block.layers.end, sim::Phase::backward, mb, compute, cost));

  PointPlan plan;
  auto& pipe = plan.pipeline;
  pipe       = pipeline_layout(point);
  pipe.stages.clear(); // filled below
  pipe.micro_batches     = point.micro_batches();
  pipe.micro_batch_size  = mb;
  const auto load        = point_expert_load(point);
  const int chunks       = par.pp * par.virtual_stages;
  const bool interleaved = par.virtual_stages > 1;

  const models::StageMemoryModel memory(model, memory_options(point), mb);
  auto stage_memory = [&](int s, models::StageRange blocks) {
    return memory.stage(blocks, sim::in_flight_micro_batches(par.schedule, par.pp, s, pipe.micro_batches));
  };
  // With interleaving a device holds several non-contiguous chunks: its memory is not a property
  // of one range, so the partitioners balance time alone and the devices are checked afterwards.
  const models::StageFits fits = interleaved ? models::StageFits{} : [&](int s, models::StageRange blocks) {
    return stage_memory(s, blocks).total() <= rank_capacity(point, s);
  };
  // Heterogeneous GPUs and stragglers: chunk c runs on pipeline rank c mod pp at that rank's slowest
  // GPU's speed, so the partitioners balance time, not work (empty: every GPU at the profile's speed).
  std::vector<double> speeds;
  if (!point.cluster.speed.empty())
    for (int c = 0; c < chunks; ++c)
      speeds.push_back(rank_speed(point, c % par.pp));
  std::vector<models::StageRange> ranges;
  switch (par.partition) {
  case models::Partitioner::optimal: {
    auto found = models::partition_optimal(block_seconds, chunks, fits, speeds);
    ranges     = found ? *found : *models::partition_optimal(block_seconds, chunks, {}, speeds);
    break;
  }
  case models::Partitioner::balanced: {
    auto found = models::partition_balanced(block_seconds, chunks, fits, speeds);
    ranges     = found ? *found : *models::partition_balanced(block_seconds, chunks, {}, speeds);
    break;
  }
  case models::Partitioner::uniform:
    ranges = models::partition_uniform(block_seconds.size(), chunks);
    break;
  case models::Partitioner::explicit_balance:
    ranges = models::partition_from_balance(par.balance, block_seconds.size());
    break;
  }

  for (std::size_t s = 0; s < ranges.size(); ++s) {
    const models::StageRange layers = model.layer_range(ranges[s]);
    sim::StagePlan stage;
    stage.layers = layers;
    // Each context-parallel rank holds and sends its s/cp tokens of the tensors crossing the cut.
    const double token_share = model.has(models::LayerKind::attention) ? 1.0 / par.cp : 1.0;
    stage.activation_bytes   = s + 1 < ranges.size() ? model.crossing_elements(layers.end) * d * token_share : 0.0;
    stage.gradient_bytes     = memory.parameters(ranges[s]) * grad_d;
    if (par.ep > 1) { // the experts' gradients go to their own groups
      stage.expert_gradient_bytes = memory.expert_parameters(ranges[s]) * grad_d;
      stage.gradient_bytes -= stage.expert_gradient_bytes;
    }
    for (std::size_t i = layers.begin; i < layers.end; ++i)
      if (model.layers()[i].norm_channels > 0) // sum and sum of squares per channel, fp32
        stage.sync_points.push_back({.layer = i + 1, .bytes = 2 * model.layers()[i].norm_channels * 4});
    if (par.dp_bucket > 0)
      stage.buckets = gradient_buckets(model, layers, par.dp_bucket, grad_d, par.tp, par.ep > 1);
    // A tensor-parallel group works on its cp rank's s/cp tokens: its collectives carry those.
    if (par.tp > 1)
      stage.tp_collectives =
          tensor_collectives(model, layers, d * token_share, par.sequence_parallel, par.ep, point.training.recompute);
    // ZeRO units (blocks): gathered with stage 3, and the reduce-scatter units of stages 2-3 (FSDP
    // reduces per wrapped module; with dp_bucket, stage 2 reduces in those buckets instead).
    if (reduces_per_block(par.zero, par.dp_bucket > 0))
      for (std::size_t b = ranges[s].begin; b < ranges[s].end; ++b) {
        const models::StageRange unit = model.blocks()[b].layers;
        double params = 0, experts = 0;
        for (std::size_t i = unit.begin; i < unit.end; ++i)
          (par.ep > 1 && model.layers()[i].kind == models::LayerKind::moe ? experts : params) +=
              model.held_parameters(i, layers, par.tp) /
              (model.layers()[i].kind == models::LayerKind::moe ? par.ep : 1);
        stage.units.push_back({.begin          = unit.begin,
                               .end            = unit.end,
                               .bytes          = params * weight_d,
                               .expert_bytes   = experts * weight_d,
                               .gradient_bytes = params * grad_d});
      }
    if (par.cp > 1)
      for (std::size_t i = layers.begin; i < layers.end; ++i)
        if (const models::Layer& l = model.layers()[i]; l.kind == models::LayerKind::attention) {
          // Recomputed (full, or selective on an eager attention core): its backward reruns the ring.
          stage.rings.push_back({.layer               = i,
                                 .kv_bytes_per_sample = kv_elements_per_rank(l, par.tp) * d,
                                 .recomputed          = models::reruns_forward(point.training.recompute, l)});
        }
    if (par.ep > 1)
      for (std::size_t i = layers.begin; i < layers.end; ++i)
        if (const models::Layer& l = model.layers()[i]; l.kind == models::LayerKind::moe) {
          // Each GPU sends its tokens' copies (tokens x top_k x hidden), to every shard of an expert
          // split over several GPUs; its s/cp tokens, and with sequence parallelism its 1/tp of them.
          const double tokens_share = token_share / (par.sequence_parallel ? par.tp : 1);
          stage.exchanges.push_back(
              {.layer = i, .bytes_per_sample = model.layers()[i].output_elements() * d * tokens_share * load->shards});
        }
    pipe.stages.push_back(std::move(stage));
    plan.stage_blocks.push_back(ranges[s]);
  }

  // Memory per pipeline rank: the sum of its chunks (one chunk without interleaving), with the
  // micro-batches each chunk holds at its peak; workspace is the largest, the reserve counted once.
  for (int rank = 0; rank < par.pp; ++rank) {
    const std::vector<int> in_flight =
        interleaved ? sim::in_flight_per_chunk(par.schedule, par.pp, par.virtual_stages, rank, pipe.micro_batches)
                    : std::vector<int>{sim::in_flight_micro_batches(par.schedule, par.pp, rank, pipe.micro_batches)};
    models::MemoryBreakdown device;
    for (int v = 0; v < par.virtual_stages; ++v) {
      const models::MemoryBreakdown m =
          memory.stage(ranges[static_cast<std::size_t>(v * par.pp + rank)], in_flight[static_cast<std::size_t>(v)]);
      device.weights += m.weights;
      device.gradients += m.gradients;
      device.optimizer_state += m.optimizer_state;
      device.activations += m.activations;
      device.parameters += m.parameters;
      device.workspace = std::max(device.workspace, m.workspace);
      device.reserve   = m.reserve;
    }
    plan.stage_memory.push_back(device);
    if (plan.oom_stage < 0 && device.total() > rank_capacity(point, rank))
      plan.oom_stage = rank;
  }
  return plan;
}

// Memory of parameter-server training: workers hold the model, weights and gradients and their
// activations; servers hold 1/S of the weights and the optimizer state each.
MemoryVerdict parameter_server_memory(const PointConfig& point)
{
  const auto& ps = *point.parallelism.ps;
  const models::Model& model = point.model;
  const Dtype dtype = point.training.dtype;
  const double d = dtype_bytes(dtype);
  const int workers = point.parallelism.dp;
  const models::StageMemoryModel memory(
      model, {.dtype = dtype, .optimizer = point.training.optimizer, .recompute = point.training.recompute,
              .reserve_bytes = point.training.memory_reserve},
      point.training.micro_batch);
  models::MemoryBreakdown worker = memory.stage({0, model.blocks().size()}, point.micro_batches());
  worker.optimizer_state = 0;  // on the servers
  const double server_params = model.parameter_count() / ps.servers;
  const double server = server_params * (d + models::optimizer_bytes_per_parameter(point.training.optimizer, dtype)) +
                        point.training.memory_reserve +
                        (ps.server_gpu(0, workers) < workers ? worker.total() : 0.0);  // colocated with a worker
  MemoryVerdict v;
  v.peak_bytes = std::max(worker.total(), server);
  v.activation_bytes = worker.activations;
  v.capacity_bytes = point.cluster.smallest_memory();  // workers and servers fill the cluster
  if (v.peak_bytes > v.capacity_bytes)
    v.message = std::string(worker.total() >= server ? "a worker" : "a server") + " needs " +
                format_quantity(v.peak_bytes, Dimension::bytes) + " > capacity " +
                format_quantity(v.capacity_bytes, Dimension::bytes);
  return v;
}

MemoryVerdict stage_memory_verdict(const PointConfig& point, const PointPlan& plan)
{
  std::size_t peak_stage = 0;
  for (std::size_t s = 0; s < plan.stage_memory.size(); ++s)
    if (plan.stage_memory[s].total() > plan.stage_memory[peak_stage].total())
      peak_stage = s;
  if (plan.oom_stage >= 0)
    peak_stage = static_cast<std::size_t>(plan.oom_stage);
  const models::MemoryBreakdown& peak = plan.stage_memory[peak_stage];
  MemoryVerdict v;
  v.peak_bytes       = peak.total();
  v.activation_bytes = peak.activations;
  v.capacity_bytes   = rank_capacity(point, static_cast<int>(peak_stage));
  if (plan.oom_stage < 0)
    return v;
  auto q = [](double bytes) { return format_quantity(bytes, Dimension::bytes); };
  const std::vector<std::pair<const char*, double>> terms = {
      {"weights", peak.weights},         {"gradients", peak.gradients}, {"optimizer", peak.optimizer_state},
      {"activations", peak.activations}, {"workspace", peak.workspace}, {"reserve", peak.reserve}};
  const auto largest =
      std::max_element(terms.begin(), terms.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string parts;
  for (const auto& [name, bytes] : terms)
    parts += std::string(parts.empty() ? "" : ", ") + name + " " + q(bytes);
  const bool searched = par_partition_searches(point);
  v.message           = "stage " + std::to_string(peak_stage) + " (GPU " +
              std::to_string(plan.pipeline.device(static_cast<int>(peak_stage), 0)) + ") needs " + q(peak.total()) +
              " > capacity " + q(v.capacity_bytes) + ": " + parts + " (largest: " + largest->first + ")" +
              (searched ? "; no partition into " + std::to_string(point.parallelism.pp) + " stages fits" : "");
  return v;
}

MemoryVerdict check_memory(const PointConfig& point)
{
  if (point.chakra) { // the memory the exporting point needed, if ddlsim wrote the traces
    const auto peak = point.chakra->columns().find("peak_memory_bytes");
    MemoryVerdict v;
    v.peak_bytes     = peak == point.chakra->columns().end() ? 0.0 : std::stod(peak->second);
    v.capacity_bytes = point.cluster.smallest_memory();
    if (v.peak_bytes > v.capacity_bytes)
      v.message = "the traces' peak memory " + format_quantity(v.peak_bytes, Dimension::bytes) + " > capacity " +
                  format_quantity(v.capacity_bytes, Dimension::bytes);
    return v;
  }
  if (point.parallelism.ps)
    return parameter_server_memory(point);
  const std::unique_ptr<calibration::CostModel> cost = calibration::make_cost_model(point.profile);
  return stage_memory_verdict(point, plan_point(point, *cost));
}

WorkloadFlop workload_flop(const PointConfig& point)
{
  if (point.chakra)
    return {.per_sample       = point.chakra->flop_per_sample(point.training.global_batch),
            .model_per_sample = point.chakra->model_flop_per_sample(point.training.global_batch),
            .tokens           = point.chakra->tokens_per_sample()};
  const models::Model& model = point.model;
  WorkloadFlop flop;
  flop.per_sample       = model.forward_flop_per_sample() + model.backward_flop_per_sample();
  flop.model_per_sample = flop.per_sample;
  if (model.has(models::LayerKind::attention)) {
    flop.tokens           = model.input_shape().tokens;
    flop.model_per_sample = flop.tokens * model_flop_per_token(model);
  }
  return flop;
}

long long bn_batch(const PointConfig& point)
{
  if (point.model.has(models::LayerKind::sync_batch_norm))
    return static_cast<long long>(point.training.micro_batch) * point.parallelism.dp;
  if (point.model.has(models::LayerKind::batch_norm))
    return point.training.micro_batch;
  return 0;
}

} // namespace ddlsim::experiments
