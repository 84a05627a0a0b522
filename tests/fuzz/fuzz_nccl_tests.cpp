// Fuzz target: nccl-tests output, text tables or -J JSON (traces/NcclTestsImporter.hpp), through
// import_trace, which also decides which kind of trace a file is.
#include "tests/fuzz/FuzzInput.hpp"
#include "traces/NcclTestsImporter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const std::string path = fuzz::as_file(data, size, "all_reduce_perf.txt");
    traces::import_nccl_tests(path);
    traces::import_trace(path);
  });
}
