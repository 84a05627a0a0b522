// What eager PyTorch's own kernels reach, against the microbenchmarks' (framework pytorch, docs/frameworks.md):
// fitted by `ddlsim calibrate fit` from the kernel records of a PyTorch profiler trace (records whose
// cpu_op is set), which are kept out of the lookup tables.
//
//   memory_efficiency_<access>  for access strided, broadcast, dropout, norm, reduction: the median, over
//                               the trace's memory-bound kernels of that access (by kernel name, below) that
//                               run 10 us or more, of (the profile's time for their bytes as a contiguous
//                               kernel) / (their measured time)
//   gemm_unaligned_efficiency   the trace's unaligned GEMMs (unaligned_gemm: a dimension of 64 or more off 16
//                               bytes, as the LM head's 50,257 classes): their flop / (their seconds x peak)
//
// Access by kernel name (PyTorch's CUDA kernels): vectorized_elementwise_kernel contiguous;
// unrolled_elementwise_kernel strided; elementwise_kernel (the generic loop) broadcast; fused_dropout
// dropout; layer_norm, LayerNorm, GammaBeta, batch_norm, bn_ norm; softmax, SoftMax, reduce_kernel
// reduction; other names are not used.
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/Profile.hpp"
#include "traces/TraceRecords.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::calibration {

/// "contiguous", "strided", "broadcast", "dropout", "norm", "reduction".
const char* memory_access_name(MemoryAccess access);

/// The access of a PyTorch kernel by its name; nullopt for a name in no list.
std::optional<MemoryAccess> memory_access_of(const std::string& kernel_name);

/// A 16-bit GEMM (m x n x k) one of whose dimensions of 64 or more is not a multiple of 8 elements (16
/// bytes): as a leading dimension it keeps cuBLAS off its aligned kernels (the LM head's 50,257 classes).
/// Smaller dimensions (a micro-batch's rows in a weight gradient) do not count: such GEMMs are launch-bound.
bool unaligned_gemm(double m, double n, double k, Dtype dtype);

/// True for a record this fit uses and the tables must not: a traced (cpu_op set) memory-bound kernel,
/// or a traced GEMM with an unaligned leading dimension.
bool eager_record(const traces::KernelRecord& k);

struct EagerFit {
  std::vector<Parameter> parameters;  ///< memory_efficiency_<access>, gemm_unaligned_efficiency
  std::vector<std::string> notes;     ///< what was not fitted, and why
};

/// Fits the parameters above from the eager records of `kernels`, pricing their bytes with `profile`
/// (its tables and roofline, as fitted without them).
EagerFit fit_eager(const std::vector<traces::KernelRecord>& kernels, const CalibrationProfile& profile,
                   const std::string& sources);

}  // namespace ddlsim::calibration
