// The GPU programs' two errors, and the status checks of CUDA, cuBLAS, cuDNN and NCCL that throw them.
//
// A point that cannot be measured (out of memory, a shape a library rejects) throws PointFailed: the
// collector names the point, counts it as skipped and carries on. A GPU that cannot be used any more (a
// sticky CUDA error such as an illegal address, which every later call returns too) throws DeviceFailed:
// the run stops and writes nothing.
//
//   check_cuda(cudaMalloc(&p, bytes), "cudaMalloc of A");
//       // throws PointFailed("cudaMalloc of A: out of memory (cudaErrorMemoryAllocation)")
//   check_cublas(cublasGemmEx(...), "cublasGemmEx");
#pragma once

#include "common/Error.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <string>

namespace ddlsim::gpu {

/// One microbenchmark point cannot be measured; the others can.
class PointFailed : public Error {
public:
  using Error::Error;
};

/// The GPU (or the CUDA context on it) cannot be used any more; nothing else can be measured.
class DeviceFailed : public Error {
public:
  using Error::Error;
};

/// "out of memory (cudaErrorMemoryAllocation)": the runtime's description and the error's name.
std::string cuda_error_text(cudaError_t status);

/// Each throws PointFailed("<what>: <the library's error text>") unless `status` is success.
void check_cuda(cudaError_t status, const std::string& what);
void check_cublas(cublasStatus_t status, const std::string& what);
void check_cudnn(cudnnStatus_t status, const std::string& what);
void check_nccl(ncclResult_t status, const std::string& what);

} // namespace ddlsim::gpu
