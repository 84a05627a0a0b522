// The microbenchmark plan: which kernels, copies and collectives `ddlsim calibrate collect` times.
//
// The plan is plain data shared by every executor (the CUDA collector in calibration/collector/,
// and the host backend), so the points measured on a GPU and on the CPU are the same list:
//   gemm            C[m x n] = A[m x k] B[k x n] over a grid of sizes, fp32 / tf32 / fp16 / bf16
//   batched_gemm    attention-shaped strided batched GEMMs (s x s x d, batch = micro-batch x heads)
//   conv2d          forward, backward-data and backward-filter of the zoo's convolution layers
//   pointwise       a memory-bound kernel (read x, write y) over a bandwidth curve of sizes
//   copy_d2d / copy_h2d / copy_d2h   cudaMemcpyAsync over the same sizes
//   collective      NCCL all_reduce, all_gather, reduce_scatter, broadcast, send_recv, 8 B to 1 GiB
// Each point has an id; the collector passes it to CUPTI as the external correlation id, so every
// kernel record names the point that launched it ("point" in the JSON-lines records).
//
// This file depends on the C++ standard library only, so the collector builds on a GPU machine
// that has the CUDA toolkit and nothing else.
//
//   PlanOptions options{.quick = true};
//   for (const BenchPoint& p : microbenchmark_plan(options)) std::cout << p.label() << "\n";
#pragma once

#include <string>
#include <vector>

namespace ddlsim::calibration {

enum class BenchOp { gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h, collective };

/// The op name as records and profiles spell it ("gemm", "copy_h2d", ...).
const char* bench_op_name(BenchOp op);

enum class ConvPass { forward, backward_data, backward_filter };
const char* conv_pass_name(ConvPass pass);

/// A convolution at a batch size: n x c x h x w input, k filters of r x s, stride, padding.
struct ConvProblem {
  int n = 1, c = 0, h = 0, w = 0;
  int k = 0, r = 1, s = 1;
  int stride = 1, pad = 0;
  int out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int out_w() const { return (w + 2 * pad - s) / stride + 1; }
};

struct BenchPoint {
  int id = 0;                   ///< external correlation id (1, 2, ...; 0 is "no point")
  BenchOp op = BenchOp::gemm;
  std::string dtype;            ///< fp32, tf32, fp16, bf16 (compute ops); empty for copies
  long long m = 0, n = 0, k = 0, batch = 1;  ///< gemm, batched_gemm
  ConvProblem conv;             ///< conv2d
  ConvPass pass = ConvPass::forward;
  double bytes = 0;             ///< pointwise, copies: bytes moved; collective: message size per rank
  std::string collective;       ///< all_reduce, all_gather, reduce_scatter, broadcast, send_recv

  /// Floating-point operations of one run (0 for copies and collectives).
  double flop() const;
  /// Bytes one run reads and writes in device memory, at the point's dtype (operands once).
  double traffic_bytes() const;
  /// Element size of the point's dtype (tf32 is stored as fp32).
  double element_bytes() const;
  /// "gemm bf16 m=4096 n=4096 k=4096", "conv2d fp16 fwd n=32 64x56x56 k=64 3x3/1", ...
  std::string label() const;
  /// The shape alone, as measured tables key exact shapes: "m=4 n=1024 k=1024 batch=1" (GEMMs),
  /// "n=32 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd" (convolutions); empty for other ops.
  std::string shape_key() const;
};

struct PlanOptions {
  bool quick = false;  ///< a subset that runs in minutes on one GPU
  int gpus = 1;        ///< visible GPUs: the collectives' group size (send_recv needs 2)
  /// Only these ops (empty: all). Lets a user re-measure, say, just the collectives.
  std::vector<BenchOp> only;
};

/// Every point to time, ids from 1 in order. Deterministic for given options.
std::vector<BenchPoint> microbenchmark_plan(const PlanOptions& options);

/// Warm-up and timed runs per point: at least `min_repeats` runs and until `min_seconds` have
/// been spent, whichever is later, capped at `max_repeats`.
struct RepeatPolicy {
  int warmup = 2;
  int min_repeats = 5;
  int max_repeats = 50;
  double min_seconds = 0.02;
};

/// The convolution layers of the zoo's ResNet-50, VGG-16 and AlexNet (per sample, deduplicated,
/// in order of first appearance). A unit test keeps this list equal to the zoo's layers.
std::vector<ConvProblem> zoo_convolutions();

}  // namespace ddlsim::calibration
