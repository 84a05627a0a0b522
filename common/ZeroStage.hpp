// Sharded data parallelism (ZeRO, FSDP): what a data-parallel shard group splits among its replicas,
// and the rules each stage implies, written once for the graph builder (sim/PipelineBuilder*.cpp,
// sim/PassSteps.cpp), the fold, the memory model, the resource estimate, the search's closed form and
// the exports.
//
//   stage 0 (none)        every replica holds and steps everything; gradients all-reduced
//   stage 1 (optimizer)   the optimizer state is sharded: gradients reduce-scattered once per step,
//                         each replica steps its shard, the parameters all-gathered per step
//                         (Megatron's distributed optimizer)
//   stage 2 (gradients)   + the gradients: reduce-scattered after every micro-batch's backward (FSDP
//                         SHARD_GRAD_OP, DeepSpeed ZeRO-2); parameters all-gathered per step
//   stage 3 (parameters)  + the parameters: each unit (block) gathered before its forward and its
//                         backward, its gradients reduced per unit (FSDP FULL_SHARD, ZeRO-3)
//
// In YAML and in the CSV the stage is its number (`parallelism.zero: 0-3`).
#pragma once

#include <cstdint>

namespace ddlsim {

enum class ZeroStage : std::uint8_t { none = 0, optimizer = 1, gradients = 2, parameters = 3 };

/// The stage's number, as YAML and the CSV write it.
constexpr int zero_level(ZeroStage z)
{
  return static_cast<int>(z);
}

/// The stage of number `level` (0-3; the caller checks the range).
constexpr ZeroStage zero_stage(int level)
{
  return static_cast<ZeroStage>(level);
}

/// Anything is sharded (stages 1-3): the gradients are reduce-scattered over the shard group and each
/// replica steps its shard of the optimizer.
constexpr bool shards_optimizer(ZeroStage z)
{
  return z != ZeroStage::none;
}

/// The gradients are sharded too (stages 2, 3): reduced after every micro-batch's backward, not once
/// per step.
constexpr bool shards_gradients(ZeroStage z)
{
  return zero_level(z) >= 2;
}

/// The parameters are sharded (stage 3): each unit gathered before its forward and its backward.
constexpr bool shards_parameters(ZeroStage z)
{
  return z == ZeroStage::parameters;
}

/// The parameters are all-gathered once per step, after it or (overlap_param_gather) in the next
/// forward (stages 1, 2).
constexpr bool gathers_per_step(ZeroStage z)
{
  return z == ZeroStage::optimizer || z == ZeroStage::gradients;
}

/// The gradients are reduced per unit (block), as FSDP reduces each wrapped module: stage 3, or stage 2
/// without gradient buckets; otherwise per bucket, or per model chunk without buckets.
constexpr bool reduces_per_block(ZeroStage z, bool bucketed)
{
  return shards_parameters(z) || (z == ZeroStage::gradients && !bucketed);
}

} // namespace ddlsim
