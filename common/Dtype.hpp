// Numeric formats of tensors: element size for memory and traffic, and the key under which a
// calibration profile stores the peak rate of that format.
#pragma once

#include "common/EnumTable.hpp"

#include <string_view>

namespace ddlsim {

enum class Dtype { fp32, tf32, fp16, bf16, fp8 };

inline constexpr EnumTable<Dtype, 5> dtype_table{{{
    {"fp32", Dtype::fp32, "IEEE single precision on CUDA cores"},
    {"tf32", Dtype::tf32, "fp32 storage, TF32 tensor-core math"},
    {"fp16", Dtype::fp16, "half precision on tensor cores"},
    {"bf16", Dtype::bf16, "bfloat16 on tensor cores"},
    {"fp8", Dtype::fp8, "8-bit floating point on tensor cores (Hopper and later)"},
}}};

/// Bytes per stored element (tf32 is stored as fp32).
constexpr double dtype_bytes(Dtype d)
{
  switch (d) {
  case Dtype::fp32:
  case Dtype::tf32: return 4.0;
  case Dtype::fp16:
  case Dtype::bf16: return 2.0;
  case Dtype::fp8: return 1.0;
  }
  return 4.0;
}

/// The 16-bit floating-point dtypes (bf16, fp16): what mixed precision computes in.
constexpr bool sixteen_bit(Dtype d)
{
  return d == Dtype::bf16 || d == Dtype::fp16;
}

/// Bytes per stored element of a dtype by name, as plan points and workloads carry it ("bf16": 2); a name the
/// table does not know, or none (a copy's), counts as fp32 (4).
inline double dtype_bytes(std::string_view name)
{
  const auto d = dtype_table.parse(name);
  return d ? dtype_bytes(*d) : 4.0;
}

}  // namespace ddlsim
