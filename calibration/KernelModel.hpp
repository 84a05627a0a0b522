// Shape-aware kernel costs: how long a GEMM, a convolution, a fused attention kernel or a
// memory-bound kernel of a given shape takes on one GPU, from the profile's SM count, the tile
// shapes its GEMM libraries use, and efficiencies calibrated on published measurements
// (docs/kernels.md gives every formula, parameter and source).
//
// GEMM C[m x n] += A[m x k] B[k x n], `batch` times (cuBLAS/CUTLASS as they run on the SMs):
//   for every tile (tm, tn) of the profile's `gemm_tiles` and split-K factor s:
//     ctas    = ceil(m / tm) ceil(n / tn) batch s           one CTA per output tile and K slice
//     waves   = ceil(ctas / sm_count)                        the last wave may leave SMs idle
//     steps   = ceil(ceil(k / tk) / s) + gemm_pipeline_steps  K steps of tk = gemm_tile_k_bytes / dtype
//                                                            bytes, plus the pipeline fill and epilogue
//     t_step  = 2 tm tn tk / (peak / sm_count x gemm_efficiency x min(1, tm tn / (tm + tn) / gemm_tile_intensity))
//     compute = waves x steps x t_step
//     memory  = bytes / (memory_bandwidth x memory_efficiency)      (operands and result once)
//     split   = s > 1 ? 8 m n batch s / (memory_bandwidth x memory_efficiency) : 0   (fp32 partials)
//     time    = max(compute, memory) + split
//   the kernel takes the fastest (tile, s), as cuBLAS's heuristics aim to; a skinny product (m or n
//   at most gemv_max_rows) may instead run as a matrix-vector kernel, bound by memory:
//     time    = min(time, max(memory, flop / (peak x compute_efficiency)))
//   and costs
//     seconds = kernel_overhead + max(kernel_launch_floor, time)
// A convolution is priced as its implicit GEMM (cuDNN's), per pass:
//   forward          m = N P Q, n = K / g, k = C / g R S, batch g
//   backward data    m = N H W, n = C / g, k = K / g R S, batch g
//   backward weight  m = K / g, n = C / g R S, k = N P Q, batch g
// Fused attention (FlashAttention-2/3) over `heads` (batch x heads) of q query rows and kv key rows
// of head dimension d, forward:
//   efficiency = 1 / (1 / attention_efficiency + peak / (4 d special_function_rate))   softmax exps per score
//                x n / (n + attention_block_overhead)    n = KV blocks of attention_block rows per query
//                                                        block ((n + 1) / 2 when causal)
//                x ctas / (sm_count ceil(ctas / sm_count))   ctas = heads x ceil(q / attention_block)
//   backward: the forward's efficiency x attention_backward_efficiency
//   seconds = kernel_overhead + max(kernel_launch_floor, flop / (peak x efficiency), memory)
// Everything else (memory-bound kernels): kernel_overhead + max(kernel_launch_floor, roofline).
//
//   const KernelModel model = *KernelModel::from_profile(load_profile("h100-sxm"));
//   GemmEstimate e = model.gemm({.m = 8192, .n = 8192, .k = 8192}, Dtype::bf16);
//   e.efficiency;   // ~0.80 of the dense BF16 peak; e.tile, e.waves, e.bound say why
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/Profile.hpp"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::calibration {

/// What limits a kernel's time.
enum class KernelBound { compute, memory, launch_floor };
const char* kernel_bound_name(KernelBound bound);

/// The estimate of one GEMM (or implicit-GEMM convolution) with the choice behind it.
struct GemmEstimate {
  double seconds    = 0; ///< what the simulator charges: overhead + max(floor, time)
  double compute_s  = 0; ///< waves x steps x t_step of the chosen tile
  double memory_s   = 0; ///< bytes at the effective memory bandwidth
  double split_s    = 0; ///< the split-K reduction's fp32 traffic
  double flop       = 0; ///< 2 m n k batch
  double efficiency = 0; ///< flop / (seconds x the dtype's dense peak)
  GemmTile tile{};       ///< the chosen tile ({0, 0}: the matrix-vector path)
  int split_k       = 1; ///< K slices (1: no split)
  long long ctas    = 0; ///< CTAs launched: tiles x batch x split_k
  long long waves   = 0; ///< ceil(ctas / sm_count)
  KernelBound bound = KernelBound::compute;
};

/// The estimate of one fused-attention kernel part.
struct AttentionEstimate {
  double seconds    = 0;
  double efficiency = 0; ///< of the dtype's dense peak, the share the attention's flop reach
  KernelBound bound = KernelBound::compute;
};

class KernelModel {
public:
  /// The shape-aware model a profile describes: nullopt when the profile has no `gemm_tiles` (old
  /// and host profiles keep the flat roofline). Throws CalibrationError naming the profile when it has
  /// gemm_tiles but lacks a parameter they need (sm_count, gemm_efficiency, gemm_tile_k_bytes,
  /// gemm_pipeline_steps, gemm_tile_intensity, memory_bandwidth).
  static std::optional<KernelModel> from_profile(const CalibrationProfile& profile);

  /// One GEMM of `dims` (m, n, k > 0; batch >= 1) in `dtype`; `bytes` is its device-memory traffic
  /// (0: operands and result once at the dtype's size). Throws CalibrationError when the profile has no
  /// peak for the dtype.
  GemmEstimate gemm(const GemmDims& dims, Dtype dtype, double bytes = 0) const;
  /// One fused-attention kernel part of `flop` and `bytes` (see the header's formula). Throws as gemm().
  AttentionEstimate attention(const AttentionDims& dims, double flop, double bytes, Dtype dtype) const;
  /// A kernel the model has no shape for: kernel_overhead + max(floor, flop / (peak x compute_efficiency),
  /// bytes / effective bandwidth).
  double other(double flop, double bytes, Dtype dtype) const;

  /// Dense peak of a dtype (flop/s); throws CalibrationError when the profile has none.
  double peak(Dtype dtype) const;
  int sm_count() const { return sm_count_; }
  const std::vector<GemmTile>& tiles() const { return tiles_; }

private:
  KernelModel() = default;
  std::string profile_name_;
  std::array<double, 5> peak_{}; // by Dtype; 0 = not in the profile
  std::vector<GemmTile> tiles_;
  int sm_count_              = 0;
  double gemm_efficiency_    = 1;
  double tile_k_bytes_       = 128;
  double pipeline_steps_     = 0;
  double tile_intensity_     = 1;
  double gemv_max_rows_      = 0;
  double compute_efficiency_ = 1;
  double memory_bandwidth_   = 0; // effective: bandwidth x memory_efficiency
  double overhead_           = 0;
  double floor_              = 0;
  // Fused attention; attention_efficiency_ 0 = no attention parameters (flat compute_efficiency).
  double attention_efficiency_     = 0;
  double special_function_rate_    = 0;
  double attention_block_          = 128;
  double attention_block_overhead_ = 0;
  double attention_backward_       = 1;
};

/// The GEMM estimate of `ddlsim profile gemm`: the profile's shape-aware model when it lists
/// gemm_tiles, else its flat roofline (kernel_overhead + max(floor, flop / (peak x compute_efficiency),
/// bytes / (bandwidth x memory_efficiency)); tile, ctas and waves stay 0). Throws CalibrationError when
/// the profile lacks a parameter or the dtype's peak, std::invalid_argument when a dimension is < 1.
GemmEstimate estimate_gemm(const CalibrationProfile& profile, const GemmDims& dims, Dtype dtype);

/// The fused-attention estimate of `ddlsim profile attention`: the forward kernel of `dims` (or its
/// backward with dims.backward), flop 4 heads q kv head_dim (half when causal; backward 2.5 x), its
/// memory traffic Q, K, V and O once. Without attention parameters, the profile's compute_efficiency.
/// Throws as estimate_gemm().
AttentionEstimate estimate_attention(const CalibrationProfile& profile, const AttentionDims& dims, Dtype dtype);

} // namespace ddlsim::calibration
