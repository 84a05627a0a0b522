// The step a framework really runs: its kernels and its host operators (docs/frameworks.md).
//
// `training.framework` chooses whose step a point simulates:
//   ideal    the simulator's own kernel list: library GEMMs and convolutions, one memory-bound kernel per
//            layer in the training dtype, one fused optimizer kernel; no host (the GPU never waits)
//   pytorch  eager PyTorch as its users run it: fp32 weights under torch.autocast (bf16/fp16), every
//            memory-bound kernel an eager module launches (autocast's casts of weights and activations,
//            dropout with its mask, eager attention's fp32 softmax over the s x s scores, a GELU written in
//            Python, the fp32 loss over the classes, gradient casts and accumulation), fused AdamW over the
//            fp32 weights; and the host: each operator (forward) or autograd node (backward) costs host
//            time by kind (the profile's host_* parameters, calibrate fit of a PyTorch profiler trace)
//
// The host issues a compute task's kernels in order and never waits for the GPU within a step (the
// measured steps do not synchronise before their end): on each GPU, task i is issued from
// host_start = the host time of the tasks before it to host_end = host_start + its host time. Its
// kernels start no earlier than host_start, and its last one no earlier than host_end (issue and
// execution overlap kernel by kernel): Replay.hpp's ReplayOptions::host.
#pragma once

#include "calibration/HostModel.hpp"
#include "calibration/Profile.hpp"
#include "common/EnumTable.hpp"
#include "models/Model.hpp"
#include "sim/OpCosts.hpp"

#include <array>
#include <vector>

namespace ddlsim::sim {

inline constexpr EnumTable<Framework, 5> framework_table{{{
    {"ideal", Framework::ideal,
     "the simulator's own kernel list (library GEMMs and convolutions, one fused memory-bound kernel per layer); no "
     "host"},
    {"pytorch", Framework::pytorch,
     "eager PyTorch, autocast over fp32 weights: every kernel and host operator of the step (docs/frameworks.md)"},
    {"pytorch-compile", Framework::pytorch_compile,
     "PyTorch under torch.compile (Inductor): pointwise chains fused between library kernels, compiled graphs "
     "issued by the host, optionally as CUDA graphs"},
    {"megatron", Framework::megatron,
     "Megatron-Core with Transformer Engine: fused kernels, fp32 gradients and master weights, FP8 GEMMs as TE runs "
     "them"},
    {"megatron-2021", Framework::megatron_2021,
     "Megatron-LM as of SC'21 (Narayanan et al.): apex fused kernels, fp32 master weights, gradients in the training "
     "dtype"},
}}};

/// The dtypes of a step's parts under a framework (docs/frameworks.md#dtypes). Under `ideal` and
/// `pytorch` every part is the training dtype (fp8 halves weights, activations and every transfer).
/// Megatron keeps bf16 weights whatever the GEMMs run in: with `dtype: fp8` Transformer Engine runs
/// the GEMMs in FP8 (their inputs cast per GEMM) and everything else in bf16; gradients are accumulated
/// and reduced in fp32 whenever the weights are bf16 (megatron/training/arguments.py: "bfloat16
/// requires gradient accumulation and all-reduce to be done in fp32").
struct StepDtypes {
  Dtype gemm = Dtype::bf16;         ///< the GEMMs' inputs and rate
  Dtype activations = Dtype::bf16;  ///< activations and their stash, every other kernel, pipeline and tp/cp transfers
  Dtype weights = Dtype::bf16;      ///< the weights a GPU holds and gathers
  Dtype gradients = Dtype::bf16;    ///< gradients accumulated and reduced
};
StepDtypes step_dtypes(Framework framework, Dtype training);

/// Whether `framework` is PyTorch's, eager or compiled.
inline bool is_pytorch(Framework framework)
{
  return framework == Framework::pytorch || framework == Framework::pytorch_compile;
}

/// Whether a PyTorch step holds its parameters in the training dtype, FSDP's mixed precision
/// (fully_shard with MixedPrecisionPolicy(param_dtype = the 16-bit training dtype, reduce_dtype = fp32),
/// as torchtitan and DeepSpeed run ZeRO 2 and 3) instead of fp32 weights under autocast (DDP, one GPU,
/// PyTorch's ZeRO 1): no weight casts, bf16 activations, gradients reduced in fp32.
inline bool fsdp_params(const ComputeOptions& o)
{
  return is_pytorch(o.framework) && shards_gradients(o.zero) && o.shard > 1 && sixteen_bit(o.dtype);
}

/// Whether `framework` is one of Megatron's.
inline bool is_megatron(Framework framework)
{
  return framework == Framework::megatron || framework == Framework::megatron_2021;
}

/// Megatron's launches of layers [begin, end) in `phase` (docs/frameworks.md#megatron): the ideal list's
/// fused kernels in bf16 and its GEMMs in StepDtypes::gemm; with FP8 GEMMs, Transformer Engine's casts
/// (each GEMM input cast and transposed in forward, its output gradient in backward; the weights once
/// per step, in the optimizer phase); the optimizer phase is the distributed optimizer's step over
/// fp32 master weights and gradients, the gradient norm for clipping and the gradient buffer zeroed.
std::vector<KernelLaunch> megatron_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                            int samples, const ComputeOptions& options);

/// torch.compile's launches of layers [begin, end) in `phase` (docs/frameworks.md#pytorch-compile): the
/// library GEMMs (padded to aligned shapes), convolutions and attention kernels as under eager PyTorch,
/// autocast's per-weight casts and the eager AccumulateGrad beside them, and each maximal run of
/// memory-bound layers between them fused by Inductor into one kernel per reduction, which reads the
/// run's inputs and writes its outputs once (the backward recomputes the run from its saved inputs).
std::vector<KernelLaunch> compiled_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                            int samples, const ComputeOptions& options);

/// Host operators of one layer pass: how many of each kind (calibration::HostOpKind, in its order); the
/// profile prices one of each (calibration::host_parameter).
using HostOps = std::array<double, calibration::host_op_kinds.size()>;

/// Eager PyTorch's launches of layers [begin, end) in `phase` for `samples` samples: the library
/// GEMMs and convolutions of range_launches, and the memory-bound kernels an eager step runs around them.
std::vector<KernelLaunch> pytorch_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                           int samples, const ComputeOptions& options);

/// What a backward over layers [begin, end) runs forward again under torchtitan's per-op checkpointing
/// (models::Recompute::selective_op), as the framework launches it (`rerun`: the step's options,
/// recomputing; eager PyTorch's kernels, or with pytorch-compile each checkpointed block's fused ones): each
/// checkpointed block's forward but the ops it kept (models::op_checkpoint_kept), a fused attention's kernel and the
/// kept matmuls' columns of each GEMM.
std::vector<KernelLaunch> op_checkpoint_reruns(const models::Model& model, std::size_t begin, std::size_t end,
                                               int samples, const ComputeOptions& rerun);

/// The host operators of layers [begin, end) in `phase` (the optimizer: one per parameter tensor), trained
/// in `dtype` (bf16 and fp16 under autocast, with its casts; fp32, or `autocast` false, without: FSDP's
/// mixed precision, fsdp_params).
HostOps pytorch_host_ops(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, Dtype dtype,
                         bool autocast = true);

/// Parameter tensors of layers [begin, end): what optimizer.step and zero_grad go through one by one.
double optimizer_tensors(const models::Model& model, std::size_t begin, std::size_t end);

/// Host seconds of `ops` in `phase` under `profile`. Throws CalibrationError naming the profile and the
/// missing parameter when it has no host costs.
double host_seconds(const HostOps& ops, Phase phase, const calibration::CalibrationProfile& profile);

/// Host seconds of every task of `graph` (0 for transfers and collectives) under framework pytorch
/// (each operator by kind) or pytorch-compile (each task's compiled graph called, and each of its
/// kernels launched, or the graph replayed as a CUDA graph; AccumulateGrad eager).
std::vector<double> host_durations(const TaskGraph& graph, const models::Model& model, const ComputeOptions& options,
                                   const calibration::CalibrationProfile& profile);

}  // namespace ddlsim::sim
