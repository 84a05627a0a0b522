// Fuzz target: calibration profiles (calibration/Profile.hpp), then the cost model built from one
// pricing a GEMM, a convolution and a memory-bound kernel.
#include "calibration/Profile.hpp"
#include "calibration/TableCostModel.hpp"
#include "tests/fuzz/FuzzInput.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const auto profile = calibration::load_profile_file(fuzz::as_file(data, size, "profile.yaml"));
    const auto cost    = calibration::make_cost_model(profile);
    using calibration::WorkKind;
    volatile double sink = cost->seconds({.flop  = 2.0 * 1024 * 1024 * 1024,
                                          .bytes = 6.0 * 1024 * 1024,
                                          .dtype = Dtype::bf16,
                                          .kind  = WorkKind::gemm,
                                          .shape = "1024x1024x1024"}) +
                           cost->seconds({.flop = 1e9, .bytes = 1e7, .dtype = Dtype::fp16, .kind = WorkKind::conv2d}) +
                           cost->seconds({.flop = 0, .bytes = 1e8, .dtype = Dtype::fp32, .kind = WorkKind::memory});
    (void)sink;
  });
}
