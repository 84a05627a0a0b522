#include "gpu/GpuClocks.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <string>

namespace ddlsim::gpu {
namespace {

// The few NVML entry points read here, declared as nvml.h declares them (its ABI is stable; the toolkit here may
// ship no nvml.h). Return codes: 0 success.
using nvmlReturn       = int;
using nvmlDevice       = struct nvmlDevice_st*;
constexpr int clock_sm = 1, clock_mem = 2; // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr int temperature_gpu = 0;         // NVML_TEMPERATURE_GPU

struct Nvml {
  void* library                                          = nullptr;
  nvmlReturn (*init)()                                   = nullptr;
  nvmlReturn (*shutdown)()                               = nullptr;
  const char* (*error_string)(nvmlReturn)                = nullptr;
  nvmlReturn (*by_pci_bus_id)(const char*, nvmlDevice*)  = nullptr;
  nvmlReturn (*clock)(nvmlDevice, int, unsigned*)        = nullptr;
  nvmlReturn (*max_clock)(nvmlDevice, int, unsigned*)    = nullptr;
  nvmlReturn (*app_clock)(nvmlDevice, int, unsigned*)    = nullptr;
  nvmlReturn (*pstate)(nvmlDevice, int*)                 = nullptr;
  nvmlReturn (*power)(nvmlDevice, unsigned*)             = nullptr;
  nvmlReturn (*power_limit)(nvmlDevice, unsigned*)       = nullptr;
  nvmlReturn (*temperature)(nvmlDevice, int, unsigned*)  = nullptr;
  nvmlReturn (*reasons)(nvmlDevice, unsigned long long*) = nullptr;
  nvmlReturn (*persistence)(nvmlDevice, int*)            = nullptr;

  template <typename F> bool bind(F& f, const char* name, const char* fallback = nullptr)
  {
    void* p = dlsym(library, name);
    if (p == nullptr && fallback != nullptr)
      p = dlsym(library, fallback);
    f = reinterpret_cast<F>(p);
    return p != nullptr;
  }
  std::string text(nvmlReturn r) const
  {
    return error_string != nullptr ? std::string(error_string(r)) : "NVML error " + std::to_string(r);
  }
};

} // namespace

std::vector<calibration::GpuClockReading> read_gpu_clocks(int devices)
{
  std::vector<calibration::GpuClockReading> out(static_cast<std::size_t>(devices < 0 ? 0 : devices));
  for (int d = 0; d < devices; ++d)
    out[static_cast<std::size_t>(d)].device = d;
  auto fail_all = [&](const std::string& why) {
    for (auto& r : out)
      r.error = why;
    return out;
  };
  Nvml nvml;
  nvml.library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml.library == nullptr)
    return fail_all("libnvidia-ml.so.1 cannot be opened: no NVIDIA driver here");
  const bool bound =
      nvml.bind(nvml.init, "nvmlInit_v2", "nvmlInit") && nvml.bind(nvml.shutdown, "nvmlShutdown") &&
      nvml.bind(nvml.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId") &&
      nvml.bind(nvml.clock, "nvmlDeviceGetClockInfo");
  nvml.bind(nvml.error_string, "nvmlErrorString");
  nvml.bind(nvml.max_clock, "nvmlDeviceGetMaxClockInfo");
  nvml.bind(nvml.app_clock, "nvmlDeviceGetApplicationsClock");
  nvml.bind(nvml.pstate, "nvmlDeviceGetPerformanceState");
  nvml.bind(nvml.power, "nvmlDeviceGetPowerUsage");
  nvml.bind(nvml.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  nvml.bind(nvml.temperature, "nvmlDeviceGetTemperature");
  nvml.bind(nvml.reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
  nvml.bind(nvml.persistence, "nvmlDeviceGetPersistenceMode");
  if (!bound) {
    dlclose(nvml.library);
    return fail_all("libnvidia-ml.so.1 lacks the NVML calls read here");
  }
  if (const nvmlReturn r = nvml.init(); r != 0) {
    const std::string why = "nvmlInit: " + nvml.text(r);
    dlclose(nvml.library);
    return fail_all(why);
  }
  for (auto& reading : out) {
    char bus[64] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, reading.device) != cudaSuccess) {
      cudaGetLastError();
      reading.error = "cudaDeviceGetPCIBusId failed";
      continue;
    }
    nvmlDevice device = nullptr;
    if (const nvmlReturn r = nvml.by_pci_bus_id(bus, &device); r != 0) {
      reading.error = std::string("NVML has no device at ") + bus + ": " + nvml.text(r);
      continue;
    }
    if (const nvmlReturn r = nvml.clock(device, clock_sm, &reading.sm_mhz); r != 0) {
      reading.error = "nvmlDeviceGetClockInfo: " + nvml.text(r);
      continue;
    }
    reading.valid = true;
    // The rest is best effort: a field NVML does not support stays 0 (or -1 for the state).
    nvml.clock(device, clock_mem, &reading.memory_mhz);
    if (nvml.max_clock != nullptr) {
      nvml.max_clock(device, clock_sm, &reading.max_sm_mhz);
      nvml.max_clock(device, clock_mem, &reading.max_memory_mhz);
    }
    if (nvml.app_clock != nullptr) {
      nvml.app_clock(device, clock_sm, &reading.app_sm_mhz);
      nvml.app_clock(device, clock_mem, &reading.app_memory_mhz);
    }
    if (int p = -1; nvml.pstate != nullptr && nvml.pstate(device, &p) == 0 && p >= 0 && p < 16)
      reading.pstate = p;
    if (unsigned mw = 0; nvml.power != nullptr && nvml.power(device, &mw) == 0)
      reading.power_w = mw * 1e-3;
    if (unsigned mw = 0; nvml.power_limit != nullptr && nvml.power_limit(device, &mw) == 0)
      reading.power_limit_w = mw * 1e-3;
    if (unsigned c = 0; nvml.temperature != nullptr && nvml.temperature(device, temperature_gpu, &c) == 0)
      reading.temperature_c = c;
    if (unsigned long long bits = 0; nvml.reasons != nullptr && nvml.reasons(device, &bits) == 0)
      reading.slowdown_reasons = bits;
    if (int on = 0; nvml.persistence != nullptr && nvml.persistence(device, &on) == 0)
      reading.persistence_mode = on != 0;
  }
  nvml.shutdown();
  dlclose(nvml.library);
  return out;
}

} // namespace ddlsim::gpu
