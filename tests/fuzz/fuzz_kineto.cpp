// Fuzz target: PyTorch profiler (Kineto) traces, plain or gzip (traces/KinetoImporter.hpp, and
// through it traces/Json.hpp and traces/Gzip.hpp).
#include "tests/fuzz/FuzzInput.hpp"
#include "traces/KinetoImporter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] { traces::import_kineto(fuzz::as_file(data, size, "trace.json")); });
}
