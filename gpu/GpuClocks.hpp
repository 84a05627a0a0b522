// Reads the clocks and power state of CUDA GPUs through NVML (libnvidia-ml.so.1, the driver's), for the records'
// provenance: a measurement says at which clocks it was taken. Clocks are only read, never set: the GPU's
// settings are its owner's.
//
// NVML is opened at run time (dlopen), so that ddlsim-collect and ddlsim-run-cuda start, and print their plan or
// refuse cleanly, on a machine without the driver. Each CUDA device is matched to its NVML device by PCI bus id.
//
//   std::vector<calibration::GpuClockReading> now = read_gpu_clocks(2);   // GPUs 0 and 1; never throws
//   calibration::add_clock_provenance(provenance, now, "start");
#pragma once

#include "calibration/Measurement.hpp"

#include <vector>

namespace ddlsim::gpu {

/// One reading per CUDA device 0 .. devices-1. A reading NVML cannot give is `valid = false` with the reason
/// (no libnvidia-ml, nvmlInit failed, no such device, ...); nothing throws.
std::vector<calibration::GpuClockReading> read_gpu_clocks(int devices);

} // namespace ddlsim::gpu
