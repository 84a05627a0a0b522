#include "gpu/CudaCheck.hpp"

namespace ddlsim::gpu {

std::string cuda_error_text(cudaError_t status)
{
  return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
}

void check_cuda(cudaError_t status, const std::string& what)
{
  if (status != cudaSuccess)
    throw PointFailed(what + ": " + cuda_error_text(status));
}

void check_cublas(cublasStatus_t status, const std::string& what)
{
  if (status != CUBLAS_STATUS_SUCCESS)
    throw PointFailed(what + ": " + cublasGetStatusString(status) + " (" + cublasGetStatusName(status) + ")");
}

void check_cudnn(cudnnStatus_t status, const std::string& what)
{
  if (status != CUDNN_STATUS_SUCCESS)
    throw PointFailed(what + ": " + cudnnGetErrorString(status));
}

void check_nccl(ncclResult_t status, const std::string& what)
{
  if (status != ncclSuccess)
    throw PointFailed(what + ": " + ncclGetErrorString(status));
}

} // namespace ddlsim::gpu
