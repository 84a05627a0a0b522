// The microbenchmark plan: which kernels, copies and collectives `ddlsim calibrate collect` times.
//
// The plan is plain data shared by every executor (the CUDA collector in calibration/collector/,
// and the host backend), so the points measured on a GPU and on the CPU are the same list:
//   gemm            C[m x n] = op(A) op(B) over a grid of sizes, fp32 / tf32 / fp16 / bf16, in the layouts training
//                   uses (GemmLayout): nn forward, nt for the data gradient, tn for the weight gradient
//   batched_gemm    attention-shaped strided batched GEMMs (s x s x d, batch = micro-batch x heads)
//   conv2d          forward, backward-data and backward-filter of the zoo's convolution layers
//   pointwise       a memory-bound kernel (read x, write y) over a bandwidth curve of sizes
//   copy_d2d / copy_h2d / copy_d2h   cudaMemcpyAsync over the same sizes
//   collective      NCCL all_reduce, all_gather, reduce_scatter, broadcast, send_recv, 8 B to 1 GiB, bf16 (and fp32),
//                   over groups of 2 to 8 GPUs (tensor-, pipeline-, expert-parallel groups are that small), each
//                   point naming its group size; buffers and peers as nccl-tests sizes them (collective_buffers)
// Each point has an id; the collector passes it to CUPTI as the external correlation id, so every
// kernel record names the point that launched it ("point" in the JSON-lines records).
//
// This file depends on the C++ standard library only, so the collector builds on a GPU machine
// that has the CUDA toolkit and nothing else.
//
//   PlanOptions options{.quick = true};
//   for (const BenchPoint& p : microbenchmark_plan(options)) std::cout << p.label() << "\n";
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace ddlsim::calibration {

enum class BenchOp { gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h, collective };

/// The op name as records and profiles spell it ("gemm", "copy_h2d", ...).
const char* bench_op_name(BenchOp op);

enum class ConvPass { forward, backward_data, backward_filter };
const char* conv_pass_name(ConvPass pass);

/// How a GEMM reads its operands, C[m x n] = op(A) op(B) with A stored m x k (nn, nt) or k x m (tn) and B stored
/// k x n (nn, tn) or n x k (nt), column-major as cuBLAS reads them. A linear layer Y = X W runs nn forward, its
/// data gradient dX = dY W^T as nt (m, k, n) and its weight gradient dW = X^T dY as tn (k, n, m): the three
/// layouts of every training step, whose kernels differ.
enum class GemmLayout { nn, nt, tn };
/// "nn", "nt", "tn".
const char* gemm_layout_name(GemmLayout layout);

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
  GemmLayout layout = GemmLayout::nn;         ///< gemm, batched_gemm
  ConvProblem conv;             ///< conv2d
  ConvPass pass = ConvPass::forward;
  double bytes = 0;             ///< pointwise, copies: bytes moved; collective: message size (nccl-tests' "size")
  std::string collective;       ///< all_reduce, all_gather, reduce_scatter, broadcast, send_recv
  int group = 0;                ///< collective: GPUs in the group, 0 .. group-1 (2 to 8)

  /// Floating-point operations of one run (0 for copies and collectives).
  double flop() const;
  /// Bytes one run reads and writes in device memory, at the point's dtype (operands once).
  double traffic_bytes() const;
  /// Element size of the point's dtype (common/Dtype's dtype_bytes: tf32 is stored as fp32, none counts as fp32).
  double element_bytes() const;
  /// Bytes of the three operands one run works on, in the executors' order: gemm A, B, C (each batch times);
  /// conv2d x, w, y; pointwise x, 0, y (fp32, half of `bytes` each, at least one element); zeros for copies and
  /// collectives.
  std::array<std::size_t, 3> operand_bytes() const;
  /// "gemm bf16 m=4096 n=4096 k=4096" (nn), "gemm bf16 m=4096 n=4096 k=4096 nt", "conv2d fp16 fwd n=32 64x56x56
  /// k=64 3x3/1", "all_reduce bf16 1048576 B over 8 GPUs", ...
  std::string label() const;
  /// The shape alone, as measured tables key exact shapes: "m=4 n=1024 k=1024 batch=1" (nn GEMMs), "m=4 n=1024
  /// k=1024 batch=1 layout=tn" (the other layouts), "n=32 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd"
  /// (convolutions); empty for other ops.
  std::string shape_key() const;
};

/// The buffers and peers of one rank of a collective point, as nccl-tests sizes them for `group` ranks: `bytes`
/// (the point's size, nccl-tests' "size" column) is the larger buffer, count = bytes / element rounded (at least
/// 1), and for all_gather (the receive buffer) and reduce_scatter (the send buffer) rounded up to a multiple of
/// the group; the smaller buffer holds count / group. send_recv is nccl-tests' sendrecv_perf: every rank sends
/// `count` elements to rank + 1 and receives as many from rank - 1 (mod group), so a group of 2 is one pair
/// exchanging, and a larger group a ring of point-to-point transfers, as pipeline stages pass activations.
struct CollectiveBuffers {
  std::size_t send_count = 0, recv_count = 0;  ///< elements
  double bytes = 0;                            ///< element x the larger count: the size records give
  int send_to = -1, recv_from = -1;            ///< send_recv: the peers of `rank`; -1 for the other kinds
};
/// Throws std::invalid_argument for an unknown collective, a group below 1 (below 2 for send_recv) or a rank
/// outside it.
CollectiveBuffers collective_buffers(const std::string& collective, double bytes, double element_bytes, int group,
                                     int rank);
/// The element type as NCCL and nccl-tests name it: "float" (fp32), "bfloat16", "half" (fp16).
std::string nccl_type_name(const std::string& dtype);

struct PlanOptions {
  bool quick = false;  ///< a subset that runs in minutes on one GPU
  int gpus = 1;        ///< visible GPUs: collectives run over groups of 2 .. gpus (none on one GPU)
  /// Only these ops (empty: all). Lets a user re-measure, say, just the collectives.
  std::vector<BenchOp> only;
};

/// Every point to time, ids from 1 in order. Deterministic for given options.
std::vector<BenchPoint> microbenchmark_plan(const PlanOptions& options);

/// Appends the points of `extra` whose label the plan lacks (each once), then orders the plan by op as
/// microbenchmark_plan does (stable: within an op, plan points first) and numbers the ids from 1 again.
void add_points(std::vector<BenchPoint>& plan, const std::vector<BenchPoint>& extra);

/// Moves the points whose label is one of `first`'s to the front (stable on both sides: by op, as add_points
/// leaves them) and numbers the ids from 1 again: a workload's own launches timed before the plan's grid, so
/// that a time limit cuts the grid rather than the step's kernels.
void put_first(std::vector<BenchPoint>& plan, const std::vector<BenchPoint>& first);

/// What a collection times: the plan of `options` (none with `extra_only`) with the points of `extra` (a
/// workload's launches) added by add_points, moved to the front with `extra_first` (put_first).
struct CollectionPoints {
  std::vector<BenchPoint> points;
  std::size_t added = 0;  ///< of which came from `extra` (its points the plan did not hold already)
};
CollectionPoints collection_points(const PlanOptions& options, const std::vector<BenchPoint>& extra, bool extra_first,
                                   bool extra_only);

/// The collectives' group sizes for `gpus` visible GPUs (at most 8): every size from 2 to gpus (the full plan), or
/// the powers of two up to gpus and gpus itself (quick): tensor-parallel groups of 2, 4 and 8, pipeline pairs,
/// expert-parallel groups. Empty for one GPU.
std::vector<int> collective_group_sizes(int gpus, bool quick);

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
