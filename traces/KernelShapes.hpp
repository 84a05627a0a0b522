// The work of a profiled GPU kernel, from the CPU op that launched it (Kineto traces recorded with
// record_shapes=True).
//
// PyTorch's profiler records each CPU op (cat "cpu_op") with its "Input Dims", "Input type" and, from
// PyTorch 2.1, "Concrete Inputs" (scalars and lists: a convolution's stride and padding). A kernel
// links to the op that launched it by its "External id" (the op's), or else through its correlation id
// to the runtime call that launched it (cat "cuda_runtime") and the innermost op on that thread
// around the call. From the op's shapes:
//   aten::mm [M,K] x [K,N], aten::addmm (bias, [M,K], [K,N]), aten::_scaled_mm     gemm m n k
//   aten::linear ([..., K], [N, K]), aten::matmul of 2-D operands                   gemm
//   aten::bmm [B,M,K] x [B,K,N], aten::baddbmm (C, [B,M,K], [B,K,N])                batched_gemm
//   aten::convolution, aten::_convolution, aten::cudnn_convolution, aten::conv2d     conv2d forward
//   aten::convolution_backward (dY, X, W, ...)                                       conv2d data and weight
// each with its flop (2 m n k batch; 2 N K P Q C/g R S per convolution pass), its bytes (operands and
// result once) and its dtype (fp32, or tf32 when the kernel is a TF32 tensor-core one; fp16, bf16,
// fp8), and the shape key the microbenchmarks use (BenchPoint::shape_key), so that imported traces
// fill the same GEMM and convolution tables as `calibrate collect`. When an op launches several
// kernels, its longest one carries the work (a convolution's backward: the data- and weight-gradient
// kernels, by name, else its two longest); the others are auxiliary (layout transforms, split-K
// reductions). Every kernel left without work says why in `unusable`.
//
//   attach_kernel_shapes(set.kernels, ops, launches, links);   // KinetoImporter.cpp
#pragma once

#include "traces/Json.hpp"
#include "traces/TraceRecords.hpp"

#include <memory>
#include <string>
#include <vector>

namespace ddlsim::traces {

/// A CPU op of the trace: what the linking needs, and its args (shapes) in the parsed document.
struct CpuOp {
  std::string name;
  double ts = 0, dur = 0; ///< microseconds
  double pid = -1, tid = -1;
  double external_id    = -1;
  double memory_bytes   = 0;  ///< a memory-bound op (not priced_op): the bytes it moves (memory_bound_bytes); 0 else
  /// its args (shapes): kept for the ops whose shapes price their kernels (priced_op), else null
  std::shared_ptr<const JsonValue> args;
};

/// A runtime call that launched a kernel (cudaLaunchKernel, cuLaunchKernel, ...).
struct RuntimeLaunch {
  double correlation = -1;
  double external_id = -1; ///< the launching op's, in PyTorch 2 traces
  double pid = -1, tid = -1;
  double ts = 0; ///< microseconds
};

/// How kernel `kernel` (an index into the kernels) names its launch.
struct KernelLink {
  std::size_t kernel = 0;
  double external_id = -1;
  double correlation = -1;
};

/// Fills op, flop, bytes, dtype and shape of the kernels whose launching op has a GEMM or
/// convolution shape, and `unusable` (why not) of the others. NCCL kernels are left as they are.
/// The ops whose recorded shapes give their kernels' work (aten::mm, aten::linear, convolutions, ...).
bool priced_op(const std::string& name);

/// Bytes a memory-bound op moves, from its args' Input Dims and Input type: every input read and an
/// output the size of the largest written (an in-place op, name ending in _, writes its first input;
/// copy_, fill_ and zero_ do not read it). 0 when it has no tensor input or its kernels are not
/// memory-bound (fused attention, fused optimizers over tensor lists).
double memory_bound_bytes(const std::string& name, const JsonValue* args);

/// False for the ops that never launch a kernel (views, detach, empty): their args need not be read.
bool may_launch(const std::string& name);

/// What the linking collects while a trace's events stream past in batches (KinetoImporter.cpp):
/// it owns what it keeps, so that each batch of events can be dropped once read.
struct KernelLinks {
  std::vector<CpuOp> ops;
  std::vector<RuntimeLaunch> launches;
  std::vector<KernelLink> links;
};

void attach_kernel_shapes(std::vector<KernelRecord>& kernels, const std::vector<CpuOp>& ops,
                          const std::vector<RuntimeLaunch>& launches, const std::vector<KernelLink>& links);

} // namespace ddlsim::traces
