// Where a GPU measurement was taken, for the provenance of ddlsim-collect's and ddlsim-run-cuda's records: how many
// GPUs this process sees, the driver's and the libraries' versions, the date and the host. Nothing here throws: a
// query that fails leaves its key out (or says why, for the GPU count).
//
//   const VisibleGpus visible = visible_gpus();
//   if (visible.count <= 0)
//     print(visible.why_none());          // "no CUDA GPU is visible (cudaGetDeviceCount found none)"
//   add_software_provenance(provenance);  // driver, cuda_runtime, cudnn, nccl_version: "13.0", "9.19.0", ...
//   add_date_and_host(provenance);        // date "2026-11-27T09:30:00Z" (UTC), host
#pragma once

#include <map>
#include <string>

namespace ddlsim::gpu {

/// The number of CUDA GPUs this process sees, or why it sees none.
struct VisibleGpus {
  int count = 0;
  std::string error; ///< cudaGetDeviceCount's error text when it failed ("... (cudaErrorNoDevice)"); else empty

  /// "no CUDA GPU is visible (<error, or: cudaGetDeviceCount found none>)", for a program's one line.
  std::string why_none() const;
};
VisibleGpus visible_gpus();

/// "13.0" (patch < 0), "9.19.0": a version as major.minor[.patch].
std::string version_text(int major, int minor, int patch = -1);

/// The driver's CUDA version ("13.0"); empty when the runtime cannot say.
std::string driver_version();

/// cuBLAS's version ("12.9.1"); empty when cuBLAS cannot say.
std::string cublas_version();

/// Sets driver and cuda_runtime ("13.0"), cudnn ("9.19.0") and nccl_version ("2.28.9"), each that can be read.
void add_software_provenance(std::map<std::string, std::string>& provenance);

/// Sets date (now, UTC, "%Y-%m-%dT%H:%M:%SZ") and host (gethostname, when it answers).
void add_date_and_host(std::map<std::string, std::string>& provenance);

} // namespace ddlsim::gpu
