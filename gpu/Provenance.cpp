#include "gpu/Provenance.hpp"

#include "gpu/CudaCheck.hpp"

#include <ctime>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <unistd.h>

namespace ddlsim::gpu {

std::string VisibleGpus::why_none() const
{
  return "no CUDA GPU is visible (" + (error.empty() ? std::string("cudaGetDeviceCount found none") : error) + ")";
}

VisibleGpus visible_gpus()
{
  int count                = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return {0, cuda_error_text(status)};
  }
  return {count, ""};
}

std::string version_text(int major, int minor, int patch)
{
  return std::to_string(major) + "." + std::to_string(minor) + (patch >= 0 ? "." + std::to_string(patch) : "");
}

std::string driver_version()
{
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? version_text(v / 1000, v % 1000 / 10) : std::string(); // 13000
}

std::string cublas_version()
{
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    return version_text(major, minor, patch);
  return {};
}

void add_software_provenance(std::map<std::string, std::string>& p)
{
  if (const std::string driver = driver_version(); !driver.empty())
    p["driver"] = driver;
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess)
    p["cuda_runtime"] = version_text(v / 1000, v % 1000 / 10);
  const auto cudnn = static_cast<int>(cudnnGetVersion()); // 91900 -> 9.19.0 (cuDNN 9 numbering)
  p["cudnn"]       = cudnn >= 90000 ? version_text(cudnn / 10000, cudnn % 10000 / 100, cudnn % 100)
                                    : version_text(cudnn / 1000, cudnn % 1000 / 100, cudnn % 100);
  if (ncclGetVersion(&v) == ncclSuccess) // 22809 -> 2.28.9 (2.9 and later; 2708 -> 2.7.8 before)
    p["nccl_version"] = v >= 10000 ? version_text(v / 10000, v % 10000 / 100, v % 100)
                                   : version_text(v / 1000, v % 1000 / 100, v % 100);
}

void add_date_and_host(std::map<std::string, std::string>& p)
{
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  p["date"]      = date;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0)
    p["host"] = host;
}

} // namespace ddlsim::gpu
