// The CUDA side of common/Dtype: which element type the fill kernel writes for a dtype's operands, and which type
// NCCL moves it as. Dtype names are read through common/Dtype's one table (dtype_table), never compared here.
//
//   FillType f = fill_type("bf16");                      // FillType::bf16; fp32, tf32, fp8, "": FillType::f32
//   std::size_t n = bytes / fill_element_bytes(f);
//   ncclDataType_t t = nccl_type(Dtype::fp8);            // ncclInt8: the same bytes on the wire
#pragma once

#include "common/Dtype.hpp"
#include "gpu/Kernels.hpp"

#include <cstddef>
#include <nccl.h>
#include <string_view>

namespace ddlsim::gpu {

/// The fill kernel's element type for operands of `dtype`: f16, bf16, else f32 (fp32 and tf32 are stored as fp32;
/// fp8 operands, which no library op here takes, are filled as fp32 too).
FillType fill_type(Dtype dtype);
/// As fill_type(Dtype) for a dtype name; a name dtype_table does not know, or none (a copy's), is f32.
FillType fill_type(std::string_view dtype);

/// Bytes of one element of `type` (4 or 2).
std::size_t fill_element_bytes(FillType type);

/// NCCL's type for data of `dtype`: ncclFloat32 for fp32 and tf32, ncclFloat16, ncclBfloat16, and ncclInt8 for
/// fp8 (the same bytes on the wire; what a reduction computes does not matter to a timing).
ncclDataType_t nccl_type(Dtype dtype);

} // namespace ddlsim::gpu
