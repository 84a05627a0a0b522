#include "calibration/Profile.hpp"
#include "calibration/RooflineCostModel.hpp"
#include "common/Error.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;
using namespace ddlsim::calibration;

TEST_CASE("the shipped h100-sxm profile is labelled analytic and carries provenance")
{
  CalibrationProfile p = load_profile("h100-sxm");
  CHECK(p.kind == ProfileKind::analytic);
  CHECK(p.value("peak_flops_bf16") == doctest::Approx(989.4e12));
  CHECK(p.value("memory_bandwidth") == doctest::Approx(3.35e12));
  CHECK(p.find("peak_flops_bf16")->unit == "flop/s");
  CHECK(p.find("compute_efficiency")->source == "assumption");
  CHECK_FALSE(p.provenance.at("source").empty());
  CHECK_THROWS_AS(p.value("no_such_parameter"), CalibrationError);
}

TEST_CASE("spec-sheet A100 and H200 profiles: datasheet peaks, no FP8 on A100")
{
  const CalibrationProfile a100 = load_profile("a100-sxm");
  CHECK(a100.kind == ProfileKind::analytic);
  CHECK(a100.value("peak_flops_bf16") == doctest::Approx(312e12));
  CHECK(a100.value("memory_bandwidth") == doctest::Approx(2.039e12));
  CHECK(a100.find("peak_flops_fp8") == nullptr);
  const RooflineCostModel a100_cost(a100);
  CHECK_THROWS_AS(a100_cost.seconds({.flop = 1e9, .bytes = 0, .dtype = Dtype::fp8}), CalibrationError);
  const CalibrationProfile h200 = load_profile("h200");
  CHECK(h200.kind == ProfileKind::analytic);
  CHECK(h200.value("peak_flops_bf16") == doctest::Approx(989.4e12));
  CHECK(h200.value("memory_bandwidth") == doctest::Approx(4.8e12));
  // The same memory-bound kernel is faster on H200's HBM3e than on H100's HBM3.
  const RooflineCostModel h100_cost(load_profile("h100-sxm")), h200_cost(h200);
  const KernelWork stream{.flop = 0, .bytes = 1e9, .dtype = Dtype::bf16};
  CHECK(h200_cost.seconds(stream) < h100_cost.seconds(stream));
}

TEST_CASE("roofline time is the larger of the compute and memory terms plus the overhead")
{
  CalibrationProfile p;
  p.name = "test";
  p.parameters["peak_flops_bf16"] = {"peak_flops_bf16", 100e12, "flop/s", "", ""};
  p.parameters["compute_efficiency"] = {"compute_efficiency", 0.5, "1", "", ""};
  p.parameters["memory_bandwidth"] = {"memory_bandwidth", 2e12, "B/s", "", ""};
  p.parameters["memory_efficiency"] = {"memory_efficiency", 0.5, "1", "", ""};
  p.parameters["kernel_overhead"] = {"kernel_overhead", 1e-6, "s", "", ""};
  RooflineCostModel m(p);
  // Compute-bound: 1e12 flop at 50 TFlop/s = 20 ms.
  CHECK(m.seconds({.flop = 1e12, .bytes = 1e6, .dtype = Dtype::bf16}) == doctest::Approx(0.02 + 1e-6));
  // Memory-bound: 1e10 bytes at 1 TB/s = 10 ms.
  CHECK(m.seconds({.flop = 1e6, .bytes = 1e10, .dtype = Dtype::bf16}) == doctest::Approx(0.01 + 1e-6));
  // No peak for fp8 in this profile.
  CHECK_THROWS_AS(m.seconds({.flop = 1, .bytes = 0, .dtype = Dtype::fp8}), CalibrationError);
}

TEST_CASE("a profile with a wrong unit is refused with file, line and key")
{
  try {
    load_profile_file(std::string(DDLSIM_TEST_FIXTURES) + "/bad_profile.yaml");
    FAIL("no exception");
  } catch (const ConfigError& e) {
    const std::string all = e.what();
    CHECK(all.find("bad_profile.yaml:5: parameters.memory_bandwidth.value: unknown unit 'TFlops'") != std::string::npos);
    CHECK(all.find("bad_profile.yaml:6: parameters.compute_efficiency.value: a fraction must lie in (0, 1]") !=
          std::string::npos);
    CHECK(all.find("bad_profile.yaml:7: parameters.peak_flops_fp64: unknown key") != std::string::npos);
  }
}
