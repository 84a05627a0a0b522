// Fuzz target: calibration records in JSON lines (traces/TraceRecords.hpp), as `calibrate fit`
// reads them, merged into a second set as several files are.
#include "tests/fuzz/FuzzInput.hpp"
#include "traces/TraceRecords.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    traces::TraceSet set   = traces::read_jsonl(fuzz::as_file(data, size, "records.jsonl"));
    traces::TraceSet twice = set;
    traces::append(twice, std::move(set));
  });
}
