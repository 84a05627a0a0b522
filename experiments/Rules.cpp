// The cross-field rules of a point, written once: Experiment::resolve reports them at the keys' lines
// (experiments/Experiment.cpp), rule_problems collects their messages (the search's screening).
#include "experiments/Rules.hpp"

#include "models/ChunkSplit.hpp"
#include "models/ExpertLoad.hpp"
#include "sim/Framework.hpp"

#include <algorithm>
#include <cmath>

namespace ddlsim::experiments {
namespace {

// Expert parallelism: a mixture of experts to spread, ep GPUs that can hold its experts, carved out of
// the dp x cp replicas; sequence parallelism with tp (Megatron-Core's rule), whole ep groups per ZeRO
// shard group.
template <typename Problem, typename Blame>
void check_expert_parallelism(const PointConfig& p, Problem problem, Blame blame)
{
  const auto& par    = p.parallelism;
  const bool experts = p.model.has(models::LayerKind::moe);
  for (const auto& [key, set] : {std::pair{"training.load_imbalance", p.training.load_imbalance.has_value()},
                                 std::pair{"training.capacity_factor", p.training.capacity_factor.has_value()}})
    if (set && !experts)
      problem(key, "model '" + p.model_label + "' has no mixture of experts to route");
  const auto moe = std::find_if(p.model.layers().begin(), p.model.layers().end(),
                                [](const models::Layer& l) { return l.kind == models::LayerKind::moe; });
  if (moe != p.model.layers().end() && p.training.load_imbalance && *p.training.load_imbalance > moe->experts)
    problem("training.load_imbalance", "the busiest expert cannot take more than all the tokens: at most the " +
                                           std::to_string(moe->experts) + " experts of model '" + p.model_label + "'");
  if (par.ep == 1)
    return;
  if (moe == p.model.layers().end()) {
    problem("parallelism.ep",
            "expert parallelism spreads a mixture of experts: model '" + p.model_label + "' has no moe layer");
    return;
  }
  if (!models::expert_parallel_fits(moe->experts, par.ep))
    problem("parallelism.ep", "ep = " + std::to_string(par.ep) + " neither divides the " +
                                  std::to_string(moe->experts) + " experts of layer '" + moe->name +
                                  "' nor is a multiple of them (each GPU holds experts / ep experts, or 1 / (ep / "
                                  "experts) of one)");
  if (par.replicas() % par.ep != 0)
    problem(blame({"parallelism.ep", "parallelism.dp", "parallelism.cp"}),
            "ep = " + std::to_string(par.ep) + " does not divide dp x cp = " + std::to_string(par.replicas()) +
                " (expert parallelism is carved out of the data- and context-parallel GPUs)");
  if (par.tp > 1 && !par.sequence_parallel)
    problem(blame({"parallelism.ep", "parallelism.tp", "parallelism.sequence_parallel"}),
            "expert parallelism with tp > 1 needs sequence_parallel: true (as Megatron-Core: each tensor rank "
            "dispatches its share of the tokens)");
  if (shards_optimizer(par.zero) && par.zero_group > 0 && par.zero_group % par.ep != 0)
    problem(blame({"parallelism.zero_group", "parallelism.ep"}),
            "zero_group = " + std::to_string(par.zero_group) + " is not a multiple of ep = " + std::to_string(par.ep) +
                " (a shard group holds whole expert-parallel groups)");
  if (par.ps)
    problem("parallelism.ps", "parameter servers are simulated for dense models: ep must be 1");
}

// An interleaved split that models::splits_evenly refuses, unless the balance is explicit; "" when fine.
std::string virtual_stage_problem(const PointConfig& p)
{
  const auto& par               = p.parallelism;
  const models::Architecture* a = p.model.architecture();
  if (par.virtual_stages <= 1 || par.pp == 1 || par.schedule != sim::ScheduleKind::interleaved || a == nullptr ||
      par.partition == models::Partitioner::explicit_balance)
    return "";
  if (models::splits_evenly(p.model, par.pp * par.virtual_stages))
    return "";
  std::string valid;
  for (int v : models::even_virtual_stages(p.model, par.pp, a->layers + 2))
    valid += (valid.empty() ? "" : ", ") + std::to_string(v);
  return "pp x virtual_stages = " + std::to_string(par.pp * par.virtual_stages) + " model chunks divide neither the " +
         std::to_string(a->layers) + " layers of model '" + p.model_label + "' nor " + std::to_string(a->layers + 2) +
         " (with the embedding and the loss): Megatron-Core splits them evenly; " +
         (valid.empty() ? "use virtual_stages: 1"
                        : "choose virtual_stages from " + valid + " (at pp " + std::to_string(par.pp) + ")") +
         ", or give partition: explicit with a balance";
}

// The pipeline's split: virtual stages only with the interleaved schedule and pp > 1, micro-batches
// the interleaved schedule can cycle, chunks enough blocks to hold, Megatron-Core's even layer split
// over the chunks (see virtual_stage_problem), an explicit balance that adds up. `clean`: no problem
// found so far (the micro-batch count is only meaningful then).
template <typename Problem, typename Blame>
void check_pipeline_split(const PointConfig& p, bool clean, Problem problem, Blame blame)
{
  const auto& par          = p.parallelism;
  const std::size_t blocks = p.model.blocks().size();
  const int chunks         = par.pp * par.virtual_stages;
  if (par.virtual_stages > 1 && par.schedule != sim::ScheduleKind::interleaved)
    problem("parallelism.virtual_stages", "virtual_stages > 1 needs schedule: interleaved");
  else if (par.virtual_stages > 1 && par.pp == 1)
    problem(blame({"parallelism.virtual_stages", "parallelism.pp"}),
            "virtual_stages = " + std::to_string(par.virtual_stages) +
                " interleaves model chunks over pipeline stages, and pp = 1 has one (Megatron-Core needs pp > 1 "
                "for virtual stages); set virtual_stages: 1 or pp > 1");
  if (par.schedule == sim::ScheduleKind::interleaved && clean && p.micro_batches() % par.pp != 0)
    problem(blame({"parallelism.schedule", "training.micro_batch", "training.global_batch", "parallelism.pp"}),
            "the interleaved schedule needs the number of micro-batches (" + std::to_string(p.micro_batches()) +
                ") divisible by pp (" + std::to_string(par.pp) + ")");
  if (static_cast<std::size_t>(chunks) > blocks)
    problem(blame({"parallelism.pp", "parallelism.virtual_stages"}),
            (par.virtual_stages > 1 ? "pp x virtual_stages = " + std::to_string(chunks) + " chunks"
                                    : "pp = " + std::to_string(par.pp) + " stages") +
                " for a model of only " + std::to_string(blocks) + " blocks (see `ddlsim model " + p.model_label +
                "`)");
  else if (const std::string why = virtual_stage_problem(p); !why.empty())
    problem(blame({"parallelism.virtual_stages", "parallelism.pp"}), why);
  if (par.partition == models::Partitioner::explicit_balance) {
    long long sum = 0;
    for (int b : par.balance)
      sum += b;
    if (par.balance.empty())
      problem("parallelism.partition", "partition: explicit needs parallelism.balance: [blocks per stage]");
    else if (par.balance.size() != static_cast<std::size_t>(chunks))
      problem(blame({"parallelism.balance", "parallelism.pp"}),
              "balance lists " + std::to_string(par.balance.size()) + " stages but pp = " + std::to_string(par.pp) +
                  (par.virtual_stages > 1 ? " x virtual_stages = " + std::to_string(chunks) : ""));
    else if (sum != static_cast<long long>(blocks))
      problem("parallelism.balance", "balance adds up to " + std::to_string(sum) + " blocks but model '" +
                                         p.model_label + "' has " + std::to_string(blocks));
  }
}

// The checks of the 2024-2026 recipes: sequence length, grouped-query attention under tensor
// parallelism, context parallelism, ZeRO sharding groups.
template <typename Problem, typename Blame>
void check_modern_parallelism(const PointConfig& p, Problem problem, Blame blame)
{
  const auto& par           = p.parallelism;
  const double tokens       = p.model.input_shape().tokens;
  const bool sequence_model = p.model.has(models::LayerKind::attention);
  if (p.training.seq > 0 && (!sequence_model || tokens != p.training.seq))
    problem("training.seq", "model '" + p.model_label +
                                "' has no sequence length to set (training.seq applies to the "
                                "gpt, llama and bert generators)");
  if (p.training.attention && !sequence_model)
    problem("training.attention", "model '" + p.model_label + "' has no attention layer");
  if (par.sequence_parallel && !sequence_model)
    problem("parallelism.sequence_parallel",
            "sequence parallelism splits a sequence: model '" + p.model_label + "' has no attention layer");
  if (par.cp > 1 && !sequence_model)
    problem("parallelism.cp",
            "context parallelism splits a sequence: model '" + p.model_label + "' has no attention layer");
  else if (par.cp > 1 && std::fmod(tokens, 2.0 * par.cp) != 0)
    problem(blame({"training.seq", "parallelism.cp"}),
            "the sequence of " + format_count(tokens) + " tokens is not divisible by 2 x cp = " +
                std::to_string(2 * par.cp) + " (ring attention balances the causal mask with 2 cp chunks)");
  // Megatron asserts both: userbuffers are Transformer Engine's, and overlap the all-gathers and
  // reduce-scatters of sequence parallelism (megatron/training/arguments.py).
  if (par.tp_comm_overlap && !sim::is_megatron(p.training.framework))
    problem(blame({"parallelism.tp_comm_overlap", "training.framework"}),
            "tp_comm_overlap is Transformer Engine's userbuffers: it needs framework megatron, not " +
                std::string(sim::framework_table.name(p.training.framework)));
  else if (par.tp_comm_overlap && p.training.framework != sim::Framework::megatron)
    problem(blame({"parallelism.tp_comm_overlap", "training.framework"}),
            "tp_comm_overlap: Megatron-LM 2021 (framework megatron-2021) had no userbuffers; use framework megatron");
  else if (par.tp_comm_overlap && par.tp > 1 && !par.sequence_parallel)
    problem(blame({"parallelism.tp_comm_overlap", "parallelism.sequence_parallel"}),
            "tp_comm_overlap overlaps sequence parallelism's all-gathers and reduce-scatters: it needs "
            "sequence_parallel: true (as Megatron asserts)");
  if (p.training.cuda_graphs && p.training.framework != sim::Framework::pytorch_compile)
    problem(
        blame({"training.cuda_graphs", "training.framework"}),
        "cuda_graphs replays torch.compile's graphs (mode=\"reduce-overhead\"): it needs framework pytorch-compile, "
        "not " +
            std::string(sim::framework_table.name(p.training.framework)));
  if (par.tp_backward_overlap && !sim::is_megatron(p.training.framework))
    problem(blame({"parallelism.tp_backward_overlap", "training.framework"}),
            "tp_backward_overlap is Megatron's asynchronous tensor-parallel backward: it needs framework megatron "
            "or megatron-2021, not " +
                std::string(sim::framework_table.name(p.training.framework)));
  // Megatron asserts both (megatron/training/arguments.py): the gathers are the distributed
  // optimizer's, and they use the gradient buckets of overlap_grad_reduce.
  if (par.overlap_param_gather && !gathers_per_step(par.zero))
    problem(blame({"parallelism.overlap_param_gather", "parallelism.zero"}),
            "overlap_param_gather moves the distributed optimizer's parameter gather into the forward: it needs "
            "zero 1 or 2 (zero " +
                std::to_string(zero_level(par.zero)) +
                (shards_parameters(par.zero) ? " gathers in the forward already)" : " gathers nothing)"));
  else if (par.overlap_param_gather && par.dp_bucket <= 0)
    problem(blame({"parallelism.overlap_param_gather", "parallelism.dp_bucket"}),
            "overlap_param_gather gathers in the gradient buckets (Megatron asserts --overlap-grad-reduce): it "
            "needs dp_bucket > 0");
  if (par.cp_algorithm != sim::CpAlgorithm::ring && par.cp == 1)
    problem("parallelism.cp_algorithm", "cp_algorithm: " + std::string(sim::cp_algorithm_table.name(par.cp_algorithm)) +
                                            " needs cp > 1 (no sequence is split)");
  for (const auto& l : p.model.layers()) {
    if (l.kind != models::LayerKind::attention || par.tp == 1)
      continue;
    if (l.heads % par.tp != 0) {
      problem("parallelism.tp", "tp = " + std::to_string(par.tp) + " does not divide the " + std::to_string(l.heads) +
                                    " attention heads of layer '" + l.name + "'");
    } else if (l.kv_heads % par.tp != 0 && par.tp % l.kv_heads != 0) {
      problem("parallelism.tp", "tp = " + std::to_string(par.tp) + " neither divides the " +
                                    std::to_string(l.kv_heads) + " K/V heads of layer '" + l.name +
                                    "' nor is a multiple of them (Megatron replicates K/V heads only then)");
    }
    break;
  }
  check_expert_parallelism(p, problem, blame);
  if (par.zero_group > 0 && !shards_optimizer(par.zero))
    problem("parallelism.zero_group", "zero_group needs zero: 1, 2 or 3");
  else if (par.zero_group == 1)
    problem("parallelism.zero_group", "zero_group = 1 shards nothing (every GPU keeps everything): use zero: 0");
  else if (par.zero_group > 0 && par.replicas() % par.zero_group != 0)
    problem(blame({"parallelism.zero_group", "parallelism.dp", "parallelism.cp"}),
            "zero_group = " + std::to_string(par.zero_group) + " does not divide dp x cp = " +
                std::to_string(par.replicas()) + " (hybrid sharding: shard inside a group, replicate across groups)");
}

// torchtitan's per-op checkpointing: of a PyTorch step's transformer blocks (eager or compiled), without
// the expert-parallel all-to-alls, whose rerun the model does not place.
template <typename Problem, typename Blame> void check_recompute(const PointConfig& p, Problem problem, Blame blame)
{
  if (p.training.recompute != models::Recompute::selective_op)
    return;
  const auto& par = p.parallelism;
  if (!sim::is_pytorch(p.training.framework))
    problem(blame({"training.recompute", "training.framework"}),
            "recompute: selective-op is torchtitan's per-op checkpointing of a PyTorch step: it needs framework "
            "pytorch or pytorch-compile, not " +
                std::string(sim::framework_table.name(p.training.framework)));
  else if (!p.model.has(models::LayerKind::attention))
    problem("training.recompute", "recompute: selective-op checkpoints transformer blocks: model '" + p.model_label +
                                      "' has no attention layer");
  else if (par.ep > 1)
    problem(blame({"training.recompute", "parallelism.ep"}),
            "recompute: selective-op with ep > 1: the per-op policy reruns the experts' all-to-alls, which the model "
            "does not place; use ep: 1, or recompute: full");
}

} // namespace

// Every cross-field rule of a derived point (the resource guard aside), reported through `problem` at
// the key `blame` picks; `clean()` says whether nothing was reported so far (some rules only mean
// something then). Experiment::resolve reports at the keys' lines; rule_problems collects the messages.
void check_rules(const PointConfig& p, const RuleProblem& problem, const RuleBlame& blame,
                 const std::function<bool()>& clean)
{
  const auto& par = p.parallelism;
  if (!p.cluster_problem.first.empty())
    problem(p.cluster_problem.first, p.cluster_problem.second);
  check_modern_parallelism(p, problem, blame);
  check_recompute(p, problem, blame);
  if (par.ps && (par.pp != 1 || par.tp != 1 || par.cp != 1 || shards_optimizer(par.zero)))
    problem("parallelism.ps", "parameter servers are simulated for pure data parallelism: pp, tp and cp must be 1, "
                              "zero 0");
  if (par.ps && par.ps->hosts.empty() && !par.ps->dedicated && par.ps->servers > par.dp)
    problem("parallelism.ps.servers", "colocated servers need as many workers (" + std::to_string(par.dp) + ")");
  if (par.ps && par.ps->consistency != sim::Consistency::ssp && par.ps->staleness != 0)
    problem("parallelism.ps.staleness", "staleness applies to consistency: ssp");
  if (clean() && par.ps && par.gpus() != p.cluster.gpu_count())
    problem(blame({"parallelism.dp", "parallelism.ps.servers"}),
            "dp workers + servers on other GPUs = " + std::to_string(par.gpus()) + " does not match the " +
                std::to_string(p.cluster.gpu_count()) + " GPUs of cluster '" + p.cluster.name + "'");
  else if (clean() && par.gpus() != p.cluster.gpu_count())
    problem(blame({"parallelism.pp", "parallelism.dp", "parallelism.tp", "parallelism.cp"}),
            "pp x dp x tp" + std::string(par.cp > 1 ? " x cp" : "") + " = " + std::to_string(par.pp) + " x " +
                std::to_string(par.dp) + " x " + std::to_string(par.tp) +
                (par.cp > 1 ? " x " + std::to_string(par.cp) : "") + " = " + std::to_string(par.gpus()) +
                " does not match the " + std::to_string(p.cluster.gpu_count()) + " GPUs of cluster '" + p.cluster.name +
                "'");
  const long long per_step = static_cast<long long>(p.training.micro_batch) * par.dp;
  if (p.training.global_batch % per_step != 0)
    problem(blame({"training.global_batch", "training.micro_batch", "parallelism.dp"}),
            "global_batch " + std::to_string(p.training.global_batch) +
                " is not divisible by micro_batch x dp = " + std::to_string(p.training.micro_batch) + " x " +
                std::to_string(par.dp) + " = " + std::to_string(per_step));
  check_pipeline_split(p, clean(), problem, blame);
}

std::vector<std::string> rule_problems(const PointConfig& point)
{
  std::vector<std::string> out;
  check_rules(
      point, [&](const std::string& key, const std::string& message) { out.push_back(key + ": " + message); },
      [](std::initializer_list<std::string> keys) { return *keys.begin(); }, [&] { return out.empty(); });
  return out;
}

} // namespace ddlsim::experiments
