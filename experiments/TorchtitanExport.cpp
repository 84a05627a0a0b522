#include "experiments/TorchtitanExport.hpp"

#include "calibration/TableCostModel.hpp"
#include "common/Dtype.hpp"
#include "experiments/Plan.hpp"

#include "common/Units.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>

namespace ddlsim::experiments {

namespace {

std::string quoted(const std::string& s)
{
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) { // control characters as TOML's \uXXXX
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string boolean(bool b)
{
  return b ? "true" : "false";
}

void set(TorchtitanJob& job, const std::string& table, std::string key, std::string value)
{
  auto it = std::find_if(job.tables.begin(), job.tables.end(), [&](const TomlTable& t) { return t.name == table; });
  if (it == job.tables.end())
    it = job.tables.insert(job.tables.end(), TomlTable{table, {}});
  it->entries.push_back({std::move(key), std::move(value)});
}

// torchtitan builds registered flavors only (torchtitan/models/llama3/__init__.py); their SwiGLU
// width is compute_ffn_hidden_dim(dim, multiple_of, ffn_dim_multiplier), the vocabulary 128,256.
struct Flavor {
  const char* name;
  int layers, hidden, heads, kv_heads, ffn_hidden;
};
constexpr std::array<Flavor, 3> llama3_flavors{{
    {"8B", 32, 4096, 32, 8, 14336},
    {"70B", 80, 8192, 64, 8, 28672},
    {"405B", 126, 16384, 128, 8, 53248},
}};

std::optional<std::string> llama3_flavor(const models::Architecture& a)
{
  if (!a.swiglu || !a.rms_norm || !a.rope || a.bias || a.tied_embeddings || a.experts > 0 || a.vocab != 128256)
    return std::nullopt;
  for (const Flavor& f : llama3_flavors)
    if (f.layers == a.layers && f.hidden == a.hidden && f.heads == a.heads && f.kv_heads == a.kv_heads &&
        f.ffn_hidden == a.ffn_hidden)
      return f.name;
  return std::nullopt;
}

// Sharding: FSDP2 over dp x cp (HSDP when a shard group is smaller), DDP for plain data parallelism.
void add_data_parallel(const PointConfig& point, TorchtitanJob& job)
{
  const ParallelismSpec& par = point.parallelism;
  const bool other_dims      = par.tp > 1 || par.pp > 1 || par.cp > 1;
  // torchtitan applies FSDP only over more than one shard (or cp); without it, tensor or pipeline
  // parallelism runs without mixed precision (its maybe_enable_amp): a 16-bit point would train in fp32.
  const bool fsdp = shards_gradients(par.zero) && (par.shard_group() > 1 || par.cp > 1);
  if (!fsdp && (par.tp > 1 || par.pp > 1) && point.training.dtype != Dtype::fp32)
    add_problem(job.problems, "training.dtype",
                "torchtitan runs tensor or pipeline parallelism without FSDP in float32 (no mixed precision "
                "without a sharded data-parallel dimension): shard over dp x cp > 1 with zero 2 or 3, or "
                "simulate fp32");
  if (!shards_optimizer(par.zero)) {
    if (other_dims && par.dp > 1)
      add_problem(job.problems,
                  par.tp > 1   ? "parallelism.tp"
                  : par.pp > 1 ? "parallelism.pp"
                               : "parallelism.cp",
                  "torchtitan replicates (DDP) only without tensor, pipeline or context parallelism: "
                  "simulate zero 2 or 3 (FSDP)");
    set(job, "parallelism", "data_parallel_replicate_degree", std::to_string(par.dp));
    set(job, "parallelism", "data_parallel_shard_degree", "1");
    if (par.dp > 1 && par.dp_bucket != 100.0 * 1024 * 1024)
      job.notes.push_back("torchtitan's DDP reduces in 100 MiB buckets (replicate(bucket_cap_mb=100)); the point "
                          "simulated `dp_bucket: " +
                          format_quantity(par.dp_bucket, Dimension::bytes) + "`");
    // Under DDP the parameters stay float32 (autocast computes in bf16): their gradients are float32.
    if (par.dp > 1 && point_dtypes(point).gradients != Dtype::fp32)
      job.notes.push_back(fmt::format("torchtitan's DDP keeps float32 parameters under autocast and reduces float32 "
                                      "gradients; the point reduced them in {}: simulate `training.grad_dtype: fp32` "
                                      "to compare",
                                      dtype_table.name(point_dtypes(point).gradients)));
    return;
  }
  if (par.zero == ZeroStage::optimizer) {
    add_problem(job.problems, "parallelism.zero",
                "torchtitan shards with FSDP2, which shards parameters and gradients too: simulate zero 2 "
                "(fsdp_reshard_after_forward never) or zero 3 (always)");
    return;
  }
  if (par.shard_group() % par.cp != 0) {
    add_problem(job.problems, "parallelism.zero_group",
                fmt::format("torchtitan shards over whole context-parallel groups: zero_group {} must be a "
                            "multiple of cp {}",
                            par.shard_group(), par.cp));
    return;
  }
  set(job, "parallelism", "data_parallel_replicate_degree", std::to_string(par.replicas() / par.shard_group()));
  set(job, "parallelism", "data_parallel_shard_degree", std::to_string(par.shard_group() / par.cp));
  // ZeRO 2 keeps the gathered parameters from forward to backward; ZeRO 3 gathers them again.
  set(job, "parallelism", "fsdp_reshard_after_forward", quoted(par.zero == ZeroStage::gradients ? "never" : "always"));
  if (point_dtypes(point).gradients != Dtype::fp32)
    job.notes.push_back(fmt::format("torchtitan's FSDP reduces gradients in float32 (mixed_precision_reduce); the "
                                    "point reduced them in {}: simulate `training.grad_dtype: fp32` to compare",
                                    dtype_table.name(point_dtypes(point).gradients)));
}

// The model chunks as ddlsim cut them: block 0 is the embedding, 1..layers the transformer blocks,
// the last the final norm and the output projection. Chunk c runs on pipeline rank c mod pp, as
// torchtitan's looped schedules place them.
std::string model_parts(const PointConfig& point, const models::Architecture& a)
{
  const std::unique_ptr<calibration::CostModel> cost = calibration::make_cost_model(point.profile);
  const PointPlan plan                               = plan_point(point, *cost);
  std::string parts                                  = "[";
  for (const models::StageRange& chunk : plan.stage_blocks) {
    std::string names;
    auto name = [&](const std::string& n) { names += (names.empty() ? "" : ", ") + quoted(n); };
    for (std::size_t b = chunk.begin; b < chunk.end; ++b) {
      if (b == 0)
        name("tok_embeddings");
      else if (b <= static_cast<std::size_t>(a.layers))
        name(fmt::format("layers.{}", b - 1));
      else {
        name("norm");
        name("output");
      }
    }
    parts += "\n  [" + names + "],";
  }
  return parts + "\n]";
}

void add_pipeline(const PointConfig& point, const models::Architecture& a, TorchtitanJob& job)
{
  const ParallelismSpec& par = point.parallelism;
  set(job, "parallelism", "pipeline_parallel_degree", std::to_string(par.pp));
  if (par.pp == 1)
    return;
  const bool looped    = par.schedule == sim::ScheduleKind::interleaved && par.virtual_stages > 1;
  const char* schedule = par.schedule == sim::ScheduleKind::gpipe ? "GPipe" : looped ? "Interleaved1F1B" : "1F1B";
  set(job, "parallelism", "pipeline_parallel_schedule", quoted(schedule));
  set(job, "parallelism", "pipeline_parallel_microbatch_size", std::to_string(point.training.micro_batch));
  set(job, "parallelism", "module_fqns_per_model_part", model_parts(point, a));
}

void add_model_parallel(const PointConfig& point, const models::Architecture& a, TorchtitanJob& job)
{
  const ParallelismSpec& par = point.parallelism;
  set(job, "parallelism", "tensor_parallel_degree", std::to_string(par.tp));
  // Its attention views each GPU's K and V as whole heads (ColwiseParallel wk and wv), and its
  // sequences split into 2 x cp chunks (load-balanced causal attention) whose tokens sequence
  // parallelism splits again over tp.
  const int kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  if (par.tp > 1 && kv_heads % par.tp != 0)
    add_problem(job.problems, "parallelism.tp",
                fmt::format("torchtitan splits the {} K/V heads over tensor parallelism: tp {} must divide them",
                            kv_heads, par.tp));
  const int chunks = (par.cp > 1 ? 2 * par.cp : 1) * par.tp;
  if (chunks > 1 && a.seq % chunks != 0) {
    std::string how = par.cp > 1 ? fmt::format("into 2 x cp = {} chunks", 2 * par.cp) : "";
    if (par.tp > 1)
      how += fmt::format("{}over tp = {} GPUs (sequence parallelism)", how.empty() ? "" : " and their tokens ", par.tp);
    add_problem(job.problems, "training.seq",
                fmt::format("torchtitan splits each sequence {}: seq {} must be a multiple of {}", how, a.seq, chunks));
  }
  if (par.tp > 1 && !par.sequence_parallel)
    job.notes.push_back("torchtitan's tensor parallelism always runs the norms and the loss on s/tp tokens "
                        "(sequence parallelism): simulate `sequence_parallel: true` to compare");
  if (par.tp > 1 && par.tp_comm_overlap) {
    set(job, "parallelism", "enable_async_tensor_parallel", "true");
    job.notes.push_back("async tensor parallelism (for tp_comm_overlap) needs torch.compile, so "
                        "training.compile is on: ddlsim simulated eager kernels");
  }
  set(job, "parallelism", "context_parallel_degree", std::to_string(par.cp));
  if (par.cp > 1) // torchtitan's 'alltoall' rotates the K/V shards around the ring
    set(job, "parallelism", "context_parallel_rotate_method",
        quoted(par.cp_algorithm == sim::CpAlgorithm::all_gather ? "allgather" : "alltoall"));
  if (par.ep > 1)
    add_problem(job.problems, "parallelism.ep", "torchtitan's llama3 has no experts");
  if (par.ps)
    add_problem(job.problems, "parallelism.ps", "torchtitan has no parameter servers");
}

void add_training(const PointConfig& point, const models::Architecture& a, TorchtitanJob& job)
{
  const TrainingSpec& t      = point.training;
  const ParallelismSpec& par = point.parallelism;
  // A pipeline takes a replica's whole batch and splits it into micro-batches; without one,
  // torchtitan accumulates gradients over global / (local x dp) micro-batches.
  const long long local = par.pp > 1 ? t.global_batch / par.dp : t.micro_batch;
  set(job, "training", "local_batch_size", std::to_string(local));
  if (par.pp == 1 && point.micro_batches() > 1 && par.dp * par.cp > 1)
    job.notes.push_back(fmt::format("torchtitan accumulates the {} micro-batches without holding gradient sync: it "
                                    "reduces (and with FSDP gathers) every micro-batch, ddlsim once per step",
                                    point.micro_batches()));
  set(job, "training", "global_batch_size", std::to_string(t.global_batch));
  set(job, "training", "seq_len", std::to_string(a.seq));
  switch (t.dtype) {
  case Dtype::bf16:
  case Dtype::fp8:
    set(job, "training", "mixed_precision_param", quoted("bfloat16"));
    break;
  case Dtype::fp32:
    set(job, "training", "mixed_precision_param", quoted("float32"));
    break;
  default:
    add_problem(job.problems, "training.dtype",
                fmt::format("torchtitan trains in bfloat16 or float32 (mixed_precision_param), not {}",
                            dtype_table.name(t.dtype)));
  }
  const bool compiled = t.framework == sim::Framework::pytorch_compile;
  set(job, "training", "compile", boolean(compiled || (par.tp > 1 && par.tp_comm_overlap)));
  if (compiled)
    job.notes.push_back("torchtitan compiles each transformer block on its own (the embedding, final norm and output "
                        "outside them, one graph call per block); the point fused across the blocks' edges and "
                        "padded the output GEMM");
  if (compiled && t.cuda_graphs)
    job.notes.push_back("torchtitan compiles without CUDA graphs: the point simulated them (training.cuda_graphs)");
  if (t.dtype == Dtype::fp8) { // torchao's float8 Linear (tensorwise scaling), not Transformer Engine
    set(job, "model", "converters", "[\"float8\"]");
    set(job, "float8", "recipe_name", quoted("tensorwise"));
  }
  const bool selective = t.recompute == models::Recompute::selective || t.recompute == models::Recompute::selective_op;
  const char* mode     = t.recompute == models::Recompute::full ? "full" : selective ? "selective" : "none";
  set(job, "activation_checkpoint", "mode", quoted(mode));
  if (selective)
    set(job, "activation_checkpoint", "selective_ac_option", quoted("op"));
  if (t.recompute == models::Recompute::selective)
    job.notes.push_back("torchtitan's per-op selective checkpointing keeps every other matmul's output and the "
                        "attention's, and recomputes the other matmuls and every elementwise kernel; the point's "
                        "selective recomputes the attention core (Megatron's), nothing with flash attention: "
                        "simulate recompute: selective-op for torchtitan's");
  if (t.optimizer != models::Optimizer::adam)
    add_problem(job.problems, "training.optimizer", "torchtitan's optimizers are Adam and AdamW: simulate adam");
  set(job, "optimizer", "name", quoted("AdamW"));
  set(job, "optimizer", "implementation", quoted("fused"));
}

} // namespace

TorchtitanJob torchtitan_job(const PointConfig& point)
{
  TorchtitanJob job;
  static_cast<LaunchShape&>(job)          = launch_shape(point);
  const models::Architecture* a           = point.model.architecture();
  const std::optional<std::string> flavor = a ? llama3_flavor(*a) : std::nullopt;
  if (!flavor) {
    add_problem(job.problems, "model",
                "model '" + point.model_label +
                    "' is not one of torchtitan's llama3 flavors (8B, 70B, 405B: the llama generator with their "
                    "layers, hidden, heads, kv_heads, ffn_hidden and vocabulary 128,256)");
    return job;
  }
  set(job, "job", "description",
      quoted(
          fmt::format("{} point {}: {} on {}", point.experiment, point.index, point.model_label, point.cluster_label)));
  set(job, "model", "name", quoted("llama3"));
  set(job, "model", "flavor", quoted(*flavor));
  if (!sim::is_pytorch(point.training.framework))
    job.notes.push_back(fmt::format("simulated with framework {}; torchtitan runs PyTorch, closest to "
                                    "`training.framework: pytorch` or `pytorch-compile` (which model FSDP2's mixed "
                                    "precision under zero 2 and 3)",
                                    sim::framework_table.name(point.training.framework)));
  if (!a->flash)
    job.notes.push_back("torchtitan's llama3 attends with SDPA (FlashAttention kernels); the point simulated the "
                        "unfused attention core");
  add_model_parallel(point, *a, job);
  add_data_parallel(point, job);
  add_pipeline(point, *a, job);
  add_training(point, *a, job);
  return job;
}

std::string TorchtitanJob::text() const
{
  std::string s;
  for (const std::string& n : notes)
    s += "# " + n + "\n";
  s += fmt::format("# saved as FILE.toml, run with: torchrun --nnodes {} --nproc-per-node {} -m torchtitan.train "
                   "--job.config_file FILE.toml\n",
                   nodes, gpus_per_node);
  for (const TomlTable& t : tables) {
    s += "\n[" + t.name + "]\n";
    for (const TomlEntry& e : t.entries)
      s += e.key + " = " + e.value + "\n";
  }
  return s;
}

} // namespace ddlsim::experiments
