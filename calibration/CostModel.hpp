// The cost-model interface: how long one GPU takes for a unit of compute work.
//
// The simulator asks a CostModel for the duration of every compute op; implementations are the
// roofline model (spec-sheet or fitted constants) and measured lookup tables with the roofline
// outside their range (TableCostModel.hpp); make_cost_model() picks what a profile supports.
//
//   RooflineCostModel gpu(load_profile("h100-sxm"));
//   double t = gpu.seconds({.flop = 2.0 * 4096 * 4096 * 4096, .bytes = 3 * 4096.0 * 4096 * 2, .dtype = Dtype::bf16});
#pragma once

#include "common/Dtype.hpp"

#include <cstddef>

#include <string>

namespace ddlsim::calibration {

/// What kind of kernel the work is: lets a measured lookup table for that op price it
/// (TableCostModel.hpp), and a profile's shape-aware model its shape (KernelModel.hpp); `unknown`
/// work is priced by the roofline alone; `attention` is a fused attention kernel (FlashAttention),
/// never priced by a GEMM table.
enum class WorkKind { unknown, gemm, batched_gemm, conv2d, memory, attention };
inline constexpr std::size_t work_kind_count = 6;

/// The GEMM a kernel runs on one GPU: C[m x n] += A[m x k] B[k x n], `batch` times. A convolution's
/// is its implicit GEMM (KernelModel.hpp). m = 0: unknown (the flat roofline prices the kernel).
struct GemmDims {
  double m = 0;
  double n = 0;
  double k = 0;
  double batch = 1;
};

/// A fused attention kernel on one GPU: `heads` (micro-batch x heads) of `q` query rows against `kv`
/// key rows of `head_dim`; causal keeps the blocks on and below the diagonal. head_dim = 0: unknown.
struct AttentionDims {
  double heads = 0;
  double q = 0;
  double kv = 0;
  double head_dim = 0;
  bool causal = false;
  bool backward = false;
};

/// How a memory-bound kernel reaches memory: `contiguous` as the pointwise microbenchmark does (vectorized
/// loads and stores); the others as eager PyTorch's kernels do, slower (EagerFit.hpp): `strided` copies
/// and mixed-dtype elementwise kernels (PyTorch's unrolled loops), `broadcast` operands (its generic
/// elementwise loop), `dropout` (random numbers drawn in the kernel), `norm` (layer and batch norms and
/// their gradients' reductions), `reduction` (softmax, log-softmax, sums). A profile prices each at its
/// memory_efficiency_<access> of the contiguous kernel's bandwidth (1 where it has none).
enum class MemoryAccess : unsigned char { contiguous, strided, broadcast, dropout, norm, reduction };
inline constexpr std::size_t memory_access_count = 6;

/// Work of one layer pass (or a fused group of kernels) on one GPU.
struct KernelWork {
  double flop = 0;   ///< floating-point operations
  double bytes = 0;  ///< bytes moved to and from device memory
  Dtype dtype = Dtype::fp32;
  WorkKind kind = WorkKind::unknown;
  std::string shape{};  ///< GEMM or convolution shape key (BenchPoint::shape_key): exact-shape table lookups
  GemmDims gemm{};          ///< gemm, batched_gemm, conv2d: the (implicit) GEMM on this GPU, for shape-aware costs
  AttentionDims attention{};  ///< attention: its shape, for shape-aware costs
  /// A GEMM whose leading dimension is off 16 bytes (eager PyTorch's LM head over 50,257 classes): cuBLAS
  /// runs its unaligned kernels, priced at the profile's gemm_unaligned_efficiency where it has one
  bool unaligned = false;
  MemoryAccess access = MemoryAccess::contiguous;  ///< memory-bound work: how its kernel reaches memory
};

class CostModel {
public:
  virtual ~CostModel() = default;
  /// Seconds one GPU needs for `work` (>= 0). Throws CalibrationError when the profile lacks what
  /// this work needs (e.g. no peak rate for its dtype).
  virtual double seconds(const KernelWork& work) const = 0;
  /// One line saying what the model is, for logs and CSV provenance.
  virtual std::string describe() const = 0;
};

}  // namespace ddlsim::calibration
