#include "gpu/LibraryTypes.hpp"

namespace ddlsim::gpu {

FillType fill_type(Dtype dtype)
{
  switch (dtype) {
  case Dtype::fp16:
    return FillType::f16;
  case Dtype::bf16:
    return FillType::bf16;
  case Dtype::fp32:
  case Dtype::tf32:
  case Dtype::fp8:
    return FillType::f32;
  }
  return FillType::f32;
}

FillType fill_type(std::string_view dtype)
{
  return fill_type(dtype_table.parse(dtype).value_or(Dtype::fp32));
}

std::size_t fill_element_bytes(FillType type)
{
  return type == FillType::f32 ? 4 : 2;
}

ncclDataType_t nccl_type(Dtype dtype)
{
  switch (dtype) {
  case Dtype::fp16:
    return ncclFloat16;
  case Dtype::bf16:
    return ncclBfloat16;
  case Dtype::fp8:
    return ncclInt8;
  case Dtype::fp32:
  case Dtype::tf32:
    return ncclFloat32;
  }
  return ncclFloat32;
}

} // namespace ddlsim::gpu
