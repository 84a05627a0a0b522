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

inline constexpr EnumTable<Framework, 2> framework_table{{{
    {"ideal", Framework::ideal,
     "the simulator's own kernel list (library GEMMs and convolutions, one fused memory-bound kernel per layer); no host"},
    {"pytorch", Framework::pytorch,
     "eager PyTorch, autocast over fp32 weights: every kernel and host operator of the step (docs/frameworks.md)"},
}}};

/// Host operators of one layer pass: how many of each kind (calibration::HostOpKind, in its order); the
/// profile prices one of each (calibration::host_parameter).
using HostOps = std::array<double, calibration::host_op_kinds.size()>;

/// Eager PyTorch's launches of layers [begin, end) in `phase` for `samples` samples: the library
/// GEMMs and convolutions of range_launches, and the memory-bound kernels an eager step runs around them.
std::vector<KernelLaunch> pytorch_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                           int samples, const ComputeOptions& options);

/// The host operators of layers [begin, end) in `phase` (the optimizer: one per parameter tensor).
HostOps pytorch_host_ops(const models::Model& model, std::size_t begin, std::size_t end, Phase phase);

/// Parameter tensors of layers [begin, end): what optimizer.step and zero_grad go through one by one.
double optimizer_tensors(const models::Model& model, std::size_t begin, std::size_t end);

/// Host seconds of `ops` in `phase` under `profile`. Throws CalibrationError naming the profile and the
/// missing parameter when it has no host costs.
double host_seconds(const HostOps& ops, Phase phase, const calibration::CalibrationProfile& profile);

/// Host seconds of every task of `graph` (0 for transfers and collectives) under framework pytorch.
std::vector<double> host_durations(const TaskGraph& graph, const models::Model& model,
                                   const calibration::CalibrationProfile& profile);

}  // namespace ddlsim::sim
