// What a PyTorch operator costs the host: the kind of an eager operator or autograd node, and the
// profile parameter that prices one of that kind (docs/calibration.md, "Host costs from a PyTorch
// profiler trace").
//
// Eager PyTorch spends host time per operator (Python, the dispatcher, autocast, the launch), whatever
// its size: a ResNet-50 step at micro-batch 2 is bound by it. A forward operator is one top-level aten
// op (aten::linear, aten::conv2d, ...) with the Python up to the next one; a backward one is one node of
// the autograd engine (AddmmBackward0, ...). Both are classed into a few kinds, each priced by one
// parameter per pass, fitted from profiler traces by `ddlsim calibrate fit` (HostFit.hpp):
//
//   kind         forward (aten ops)                          backward (autograd nodes)
//   gemm         linear, addmm, mm, bmm, baddbmm, matmul     AddmmBackward0, MmBackward0, BmmBackward0
//   conv         conv2d, convolution, cudnn_convolution      ConvolutionBackward0
//   norm         layer_norm, batch_norm, group_norm, rms_norm NativeLayerNormBackward0, CudnnBatchNormBackward0
//   view         view, reshape, transpose, t, split, slice, expand, flatten, detach, contiguous, ...
//   reduction    softmax, log_softmax, cross_entropy_loss, nll_loss, mean, sum, pooling
//   gather       embedding, index_select, gather, index      EmbeddingBackward0
//   elementwise  everything else (add, mul, gelu, dropout, to, copy_, cat, ...)
//   accumulate   -                                           torch::autograd::AccumulateGrad
//
//   host_op_kind("aten::conv2d");                                            // HostOpKind::conv
//   host_op_kind("autograd::engine::evaluate_function: AddmmBackward0");    // HostOpKind::gemm
//   host_parameter(HostOpKind::view, true);                                  // "host_backward_view_s"
//
// Only the standard library is included: the simulator prices operators with it.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace ddlsim::calibration {

enum class HostOpKind { gemm, conv, norm, elementwise, view, reduction, gather, accumulate };

/// Every kind, in declaration order.
inline constexpr std::array<HostOpKind, 8> host_op_kinds{
    HostOpKind::gemm,      HostOpKind::conv,   HostOpKind::norm,       HostOpKind::elementwise,
    HostOpKind::view,      HostOpKind::reduction, HostOpKind::gather, HostOpKind::accumulate};

/// The kind of an operator as a PyTorch profiler names it: an aten op ("aten::linear", or "linear"),
/// an autograd node ("AddmmBackward0", "torch::autograd::AccumulateGrad") or the engine's wrapper
/// around one ("autograd::engine::evaluate_function: AddmmBackward0"). A node is classed as the op
/// it differentiates; names in no list are elementwise. Case and underscores are ignored. Throws
/// nothing.
HostOpKind host_op_kind(std::string_view name);

/// "gemm", "conv", "norm", "elementwise", "view", "reduction", "gather", "accumulate".
std::string_view host_kind_name(HostOpKind kind);

/// The profile parameter (seconds) that prices one operator of `kind` in the forward (`backward`
/// false) or one autograd node of it: "host_forward_conv_s", "host_backward_gemm_s"; the accumulate
/// kind is "host_accumulate_s" in either pass.
std::string host_parameter(HostOpKind kind, bool backward);

}  // namespace ddlsim::calibration
