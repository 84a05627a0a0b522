// Fuzz target: Chakra execution traces (experiments/ChakraWorkload.hpp, and through it
// traces/ChakraTrace.hpp, protobuf and the process groups' JSON): the input is rank 0 of a
// one-rank workload, loaded and built into a task graph.
#include "calibration/Profile.hpp"
#include "calibration/TableCostModel.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "tests/fuzz/FuzzInput.hpp"

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const std::string path = fuzz::as_file(data, size, "w.0.et");
    const auto workload = experiments::ChakraWorkload::load(std::filesystem::path(path).parent_path().string());
    calibration::CalibrationProfile profile;  // no parameters: an untimed node's roofline is refused
    workload->build(*calibration::make_cost_model(profile), Dtype::bf16);
  });
}
