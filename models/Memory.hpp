// First-order GPU memory estimate for one pipeline stage (weights, gradients, optimizer state,
// stashed activations). A later version adds workspace, recomputation and a framework reserve.
//
// Bytes per parameter (mixed precision keeps an fp32 master copy when training in fp16/bf16/fp8):
//   optimizer   fp32/tf32 (w + g + state)    16/8-bit (w + g + master + state)
//   sgd         4 + 4 + 0       =  8         d + d + 4 + 0
//   momentum    4 + 4 + 4       = 12         d + d + 4 + 4
//   adam        4 + 4 + 8       = 16         d + d + 4 + 8      (= 16 for bf16, Rajbhandari et al.)
//
//   auto m = estimate_stage_memory(model, {0, 13}, Dtype::bf16, Optimizer::adam, 4 * 8);
//   m.total();  // bytes on the device that holds layers [0, 13) with 32 samples in flight
#pragma once

#include "common/Dtype.hpp"
#include "common/EnumTable.hpp"
#include "models/Model.hpp"
#include "models/Partition.hpp"

namespace ddlsim::models {

enum class Optimizer { sgd, momentum, adam };

inline constexpr EnumTable<Optimizer, 3> optimizer_table{{{
    {"sgd", Optimizer::sgd, "plain SGD: no optimizer state"},
    {"momentum", Optimizer::momentum, "SGD with momentum: one fp32 buffer per parameter"},
    {"adam", Optimizer::adam, "Adam/AdamW: two fp32 moments per parameter"},
}}};

struct MemoryBreakdown {
  double weights = 0;          ///< bytes
  double gradients = 0;        ///< bytes
  double optimizer_state = 0;  ///< bytes (moments and the fp32 master copy in mixed precision)
  double activations = 0;      ///< bytes stashed for backward at the peak
  double total() const { return weights + gradients + optimizer_state + activations; }
};

/// Memory of the device holding `stage`, with `in_flight_samples` samples' activations stashed at the
/// peak (GPipe: all M micro-batches x micro-batch size).
MemoryBreakdown estimate_stage_memory(const Model& model, StageRange stage, Dtype dtype, Optimizer optimizer,
                                      double in_flight_samples);

}  // namespace ddlsim::models
