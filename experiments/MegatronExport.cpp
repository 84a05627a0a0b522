#include "experiments/MegatronExport.hpp"

#include "common/Dtype.hpp"
#include "experiments/Plan.hpp"

#include <fmt/core.h>

#include <cmath>

namespace ddlsim::experiments {

namespace {

void add(MegatronLaunch& out, std::string flag, std::string value = {})
{
  out.arguments.push_back({std::move(flag), std::move(value)});
}

void refuse(MegatronLaunch& out, std::string key, std::string message)
{
  add_problem(out.problems, std::move(key), std::move(message));
}

// Megatron-LM splits the layers evenly over pp x v chunks; with one chunk per rank the first and
// last stages may hold fewer (--decoder-first/last-pipeline-num-layers), as Llama 3 405B's 126 on 16;
// interleaved, the embedding and the loss may count as a layer each (--account-for-*-in-pipeline-split:
// 126 + 2 over 16 x 8). The experiment's validator refuses other interleaved splits.
void add_layer_split(const models::Architecture& a, const ParallelismSpec& par, MegatronLaunch& out)
{
  const int chunks = par.pp * par.virtual_stages;
  if (a.layers % chunks == 0)
    return;
  if (par.virtual_stages > 1 && (a.layers + 2) % chunks == 0) { // the embedding and the loss as a layer each
    add(out, "--account-for-embedding-in-pipeline-split");
    add(out, "--account-for-loss-in-pipeline-split");
    return;
  }
  const int middle = (a.layers + par.pp - 1) / par.pp;
  const int ends   = a.layers - (par.pp - 2) * middle;
  if (par.virtual_stages > 1 || par.pp < 3 || ends < 2) {
    refuse(out, par.virtual_stages > 1 ? "parallelism.virtual_stages" : "parallelism.pp",
           fmt::format("Megatron-LM splits the {} layers evenly over pp x virtual_stages = {} "
                       "model chunks: choose a divisor of {}",
                       a.layers, chunks, a.layers));
    return;
  }
  add(out, "--decoder-first-pipeline-num-layers", std::to_string(ends / 2));
  add(out, "--decoder-last-pipeline-num-layers", std::to_string(ends - ends / 2));
}

void add_model(const models::Architecture& a, MegatronLaunch& out)
{
  add(out, "--num-layers", std::to_string(a.layers));
  add(out, "--hidden-size", std::to_string(a.hidden));
  add(out, "--ffn-hidden-size", std::to_string(a.ffn_hidden));
  add(out, "--num-attention-heads", std::to_string(a.heads));
  if (a.kv_heads != a.heads) {
    add(out, "--group-query-attention");
    add(out, "--num-query-groups", std::to_string(a.kv_heads));
  }
  add(out, "--seq-length", std::to_string(a.seq));
  add(out, "--max-position-embeddings", std::to_string(a.seq));
  add(out, "--position-embedding-type", a.rope ? "rope" : "learned_absolute");
  add(out, "--normalization", a.rms_norm ? "RMSNorm" : "LayerNorm");
  if (a.swiglu)
    add(out, "--swiglu");
  if (!a.bias)
    add(out, "--disable-bias-linear");
  if (!a.tied_embeddings)
    add(out, "--untie-embeddings-and-output-weights");
  if (!a.dropout) {
    add(out, "--attention-dropout", "0");
    add(out, "--hidden-dropout", "0");
  }
  add(out, "--tokenizer-type", "NullTokenizer"); // the vocabulary as simulated; set your tokenizer instead
  add(out, "--vocab-size", std::to_string(a.vocab));
  add(out, "--attention-backend", a.flash ? "flash" : "unfused");
  if (a.experts > 0) {
    add(out, "--num-experts", std::to_string(a.experts));
    add(out, "--moe-router-topk", std::to_string(a.top_k));
    add(out, "--moe-ffn-hidden-size", std::to_string(a.expert_ffn_hidden));
    if (a.shared_experts > 0)
      add(out, "--moe-shared-expert-intermediate-size", std::to_string(a.shared_experts * a.expert_ffn_hidden));
    if (a.dense_layers > 0)
      add(out, "--moe-layer-freq", fmt::format("([0]*{}+[1]*{})", a.dense_layers, a.layers - a.dense_layers));
    if (a.capacity_factor > 0)
      add(out, "--moe-expert-capacity-factor", fmt::format("{}", a.capacity_factor));
  }
}

void add_parallelism(const PointConfig& point, MegatronLaunch& out)
{
  const ParallelismSpec& par = point.parallelism;
  add(out, "--tensor-model-parallel-size", std::to_string(par.tp));
  add(out, "--pipeline-model-parallel-size", std::to_string(par.pp));
  if (par.cp > 1) {
    add(out, "--context-parallel-size", std::to_string(par.cp));
    add(out, "--cp-comm-type", par.cp_algorithm == sim::CpAlgorithm::all_gather ? "allgather" : "p2p");
  }
  if (par.ep > 1) {
    add(out, "--expert-model-parallel-size", std::to_string(par.ep));
    add(out, "--moe-token-dispatcher-type", "alltoall"); // as simulated (Megatron's default is allgather)
    if (point.training.dtype == Dtype::fp16)
      refuse(out, "training.dtype", "Megatron-LM runs expert parallelism in bf16, not fp16 (it asserts so)");
  }
  // Megatron turns sequence parallelism off at tp 1 and then refuses userbuffers without it.
  if (par.sequence_parallel && par.tp > 1)
    add(out, "--sequence-parallel");
  if (par.tp_comm_overlap && par.tp > 1)
    add(out, "--tp-comm-overlap");
  if (par.virtual_stages > 1)
    add(out, "--num-virtual-stages-per-pipeline-rank", std::to_string(par.virtual_stages));
  if (par.virtual_stages > 1 && !overlaps_p2p(point))
    add(out, "--no-overlap-p2p-communication");
  if (par.pp > 1 && par.schedule == sim::ScheduleKind::gpipe)
    refuse(out, "parallelism.schedule",
           "Megatron-LM pipelines with 1F1B (interleaved with virtual stages), not GPipe: "
           "simulate schedule 1f1b or interleaved");
  if (par.ps)
    refuse(out, "parallelism.ps", "Megatron-LM has no parameter servers");
  // Sharding: the distributed optimizer (ZeRO 1, in instances across the hybrid groups), else
  // Megatron FSDP's strategies for ZeRO 2 and 3.
  if (par.zero == ZeroStage::optimizer) {
    add(out, "--use-distributed-optimizer");
    if (par.shard_group() < par.replicas())
      add(out, "--num-distributed-optimizer-instances", std::to_string(par.replicas() / par.shard_group()));
  } else if (shards_gradients(par.zero)) {
    if (par.shard_group() < par.replicas())
      refuse(out, "parallelism.zero_group",
             "Megatron FSDP shards over every data-parallel GPU: zero_group must be 0 with zero 2 or 3");
    add(out, "--use-distributed-optimizer");
    add(out, "--use-megatron-fsdp");
    add(out, "--data-parallel-sharding-strategy", shards_parameters(par.zero) ? "optim_grads_params" : "optim_grads");
    add(out, "--ckpt-format", "fsdp_dtensor"); // Megatron FSDP's only checkpoint format
  }
  const sim::StepDtypes dt = point_dtypes(point);
  if (par.dp_bucket > 0) {
    add(out, "--overlap-grad-reduce");
    add(out, "--ddp-bucket-size",
        fmt::format("{:.0f}", std::round(par.dp_bucket / dtype_bytes(dt.gradients)))); // parameters
  }
  if (par.overlap_param_gather)
    add(out, "--overlap-param-gather");
}

void add_training(const PointConfig& point, MegatronLaunch& out)
{
  const TrainingSpec& t = point.training;
  add(out, "--micro-batch-size", std::to_string(t.micro_batch));
  add(out, "--global-batch-size", std::to_string(t.global_batch));
  switch (t.dtype) {
  case Dtype::bf16:
    add(out, "--bf16");
    break;
  case Dtype::fp16:
    add(out, "--fp16");
    break;
  case Dtype::fp8:
    add(out, "--bf16");
    add(out, "--fp8-format", "hybrid"); // Transformer Engine: E4M3 forward, E5M2 gradients
    break;
  default:
    break;
  }
  const Dtype gradients = point_dtypes(point).gradients;
  if ((t.dtype == Dtype::bf16 || t.dtype == Dtype::fp8) && gradients == Dtype::bf16)
    add(out, "--grad-reduce-in-bf16");
  if (t.dtype == Dtype::fp16 && gradients == Dtype::fp32)
    add(out, "--accumulate-allreduce-grads-in-fp32");
  if (t.recompute == models::Recompute::full) {
    add(out, "--recompute-granularity", "full");
    add(out, "--recompute-method", "uniform");
    add(out, "--recompute-num-layers", "1");
  } else if (t.recompute == models::Recompute::selective) {
    add(out, "--recompute-granularity", "selective");
  } else if (t.recompute == models::Recompute::selective_op) {
    refuse(out, "training.recompute",
           "Megatron has no per-op checkpointing (torchtitan's selective-op): choose selective or full");
  }
  add(out, "--optimizer", t.optimizer == models::Optimizer::adam ? "adam" : "sgd");
  if (t.optimizer != models::Optimizer::adam)
    add(out, "--sgd-momentum", t.optimizer == models::Optimizer::sgd ? "0" : "0.9");
}

} // namespace

MegatronLaunch megatron_launch(const PointConfig& point)
{
  MegatronLaunch out;
  static_cast<LaunchShape&>(out) = launch_shape(point);
  std::vector<std::string> shape_notes; // printed after the framework's and the partition's, as before
  shape_notes.swap(out.notes);
  const models::Architecture* a  = point.model.architecture();
  if (a == nullptr) {
    refuse(out, "model",
           "model '" + point.model_label +
               "' is not a decoder from the gpt or llama generator: "
               "Megatron-LM's pretrain_gpt.py builds those");
    return out;
  }
  if (point.training.framework != sim::Framework::megatron)
    out.notes.push_back(fmt::format("simulated with framework {}; these arguments run Megatron-Core, whose step "
                                    "`training.framework: megatron` simulates",
                                    sim::framework_table.name(point.training.framework)));
  if (point.training.framework == sim::Framework::megatron && !point.parallelism.tp_backward_overlap &&
      point.parallelism.tp > 1)
    out.notes.push_back("simulated with tp_backward_overlap: false; Megatron-Core always overlaps a column "
                        "layer's backward collectives with its GEMMs (no flag turns it off)");
  if (point.parallelism.pp > 1 && point.parallelism.virtual_stages == 1 && overlaps_p2p(point))
    out.notes.push_back("simulated with overlap_p2p_comm: true; Megatron-Core overlaps pipeline sends in the "
                        "interleaved schedule only (its 1F1B waits for each send and receive)");
  if (point.parallelism.pp > 1 && point.parallelism.partition != models::Partitioner::uniform)
    out.notes.push_back(
        fmt::format("ddlsim cut the stages by `partition: {}`; Megatron-LM splits the layers evenly "
                    "(--pipeline-model-parallel-layout sets another split): simulate `partition: uniform` "
                    "to compare like with like",
                    models::partitioner_table.name(point.parallelism.partition)));
  out.notes.insert(out.notes.end(), shape_notes.begin(), shape_notes.end());
  add_parallelism(point, out);
  add_layer_split(*a, point.parallelism, out);
  add_model(*a, out);
  add_training(point, out);
  return out;
}

std::string MegatronLaunch::text() const
{
  std::string s;
  for (const std::string& n : notes)
    s += "# " + n + "\n";
  s += fmt::format("torchrun --nnodes {} --nproc-per-node {} pretrain_gpt.py", nodes, gpus_per_node);
  for (const MegatronArgument& a : arguments)
    s += " \\\n  " + a.flag +
         (a.value.empty()
              ? ""
              : " " + (a.value.find_first_of("()*+ ") == std::string::npos ? a.value : "\"" + a.value + "\""));
  return s + "\n";
}

} // namespace ddlsim::experiments
