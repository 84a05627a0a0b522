// The collective fitter against synthetic measurements with known alpha-beta regimes, and the
// fitted profile's YAML round trip.
#include "calibration/Fitter.hpp"
#include "calibration/Profile.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {
// Two regimes as NCCL shows them: latency-bound LL up to 64 KiB, bandwidth-bound Simple above.
constexpr double alpha_small = 5e-6, bw_small = 2e9, alpha_large = 30e-6, bw_large = 150e9;

std::vector<SizeTime> synthetic(double noise)
{
  std::vector<SizeTime> points;
  int i = 0;
  for (double bytes = 8; bytes <= 1024.0 * 1024 * 1024; bytes *= 2, ++i) {
    const double t = bytes <= 65536 ? alpha_small + bytes / bw_small : alpha_large + bytes / bw_large;
    // Deterministic "noise" alternating in sign, +-noise relative.
    points.push_back({bytes, t * (1 + (i % 2 == 0 ? noise : -noise) * ((i % 3) / 2.0))});
  }
  return points;
}
}  // namespace

TEST_CASE("one alpha-beta line is recovered exactly from exact points")
{
  const std::vector<SizeTime> points = {{1e3, 2e-6 + 1e3 / 1e10}, {1e6, 2e-6 + 1e6 / 1e10}, {1e9, 2e-6 + 1e9 / 1e10}};
  const AlphaBetaFit f = fit_alpha_beta(points);
  CHECK(f.alpha_s == doctest::Approx(2e-6).epsilon(1e-9));
  CHECK(f.bandwidth == doctest::Approx(1e10).epsilon(1e-9));
  CHECK(f.r2 == doctest::Approx(1.0));
  CHECK_THROWS_AS(fit_alpha_beta(std::vector<SizeTime>{{1, 1}}), std::invalid_argument);
  CHECK_THROWS_AS(fit_alpha_beta(std::vector<SizeTime>{{1, 1}, {1, 2}}), std::invalid_argument);
}

TEST_CASE("size regimes: the break and both lines are recovered within 1%")
{
  for (double noise : {0.0, 0.005}) {
    CAPTURE(noise);
    const auto fits = fit_regimes(synthetic(noise));
    REQUIRE(fits.size() >= 2);
    const AlphaBetaFit& small = fits.front();
    const AlphaBetaFit& large = fits.back();
    CHECK(small.max_bytes == 65536);
    CHECK(large.min_bytes == 131072);
    CHECK(small.alpha_s == doctest::Approx(alpha_small).epsilon(0.01));
    CHECK(small.bandwidth == doctest::Approx(bw_small).epsilon(0.01));
    CHECK(large.alpha_s == doctest::Approx(alpha_large).epsilon(0.01));
    CHECK(large.bandwidth == doctest::Approx(bw_large).epsilon(0.01));
    CHECK(held_out_error(synthetic(noise)) < 0.01);
  }
}

TEST_CASE("a fitted profile survives its YAML round trip")
{
  CalibrationProfile p = load_profile("h100-sxm");
  p.name = "fitted";
  p.kind = ProfileKind::measured;
  p.provenance["traces"] = "a \"quoted\" name";
  CollectiveCurve c;
  c.collective = "all_reduce";
  c.group_size = 8;
  c.source = "t.jsonl";
  c.held_out_error = 0.004;
  c.regimes = fit_regimes(synthetic(0));
  p.collectives.push_back(c);
  std::stringstream yaml;
  write_profile(p, yaml);
  Diagnostics diags("fitted.yaml");
  YAML::Node root = load_yaml_string(yaml.str(), "fitted.yaml");
  YamlMap map(root, "", diags);
  const CalibrationProfile back = parse_profile(map);
  diags.throw_if_any();
  CHECK(back.kind == ProfileKind::measured);
  CHECK(back.provenance.at("traces") == "a \"quoted\" name");
  CHECK(back.value("peak_flops_bf16") == doctest::Approx(989.4e12));
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].regimes.size() == c.regimes.size());
  CHECK(back.collectives[0].seconds(1 << 20) == doctest::Approx(c.seconds(1 << 20)).epsilon(1e-9));
  CHECK(back.collectives[0].seconds(1 << 20) == doctest::Approx(alpha_large + (1 << 20) / bw_large).epsilon(1e-6));
  CHECK(back.collectives[0].held_out_error == doctest::Approx(0.004));
}

TEST_CASE("roofline fit: compute and memory efficiency and the per-kernel overhead, within 1%")
{
  constexpr double peak = 989.4e12, bandwidth = 3.35e12, e_c = 0.62, e_m = 0.83, overhead = 3e-6;
  for (double noise : {0.0, 0.005}) {
    CAPTURE(noise);
    std::vector<KernelSample> samples;
    int i = 0;
    for (double n = 256; n <= 16384; n *= 2, ++i) {  // square bf16 GEMMs: compute-bound
      const double flop = 2 * n * n * n, bytes = 3 * n * n * 2;
      const double t = overhead + std::max(flop / (peak * e_c), bytes / (bandwidth * e_m));
      samples.push_back({flop, bytes, peak, t * (1 + (i % 2 ? noise : -noise))});
    }
    for (double bytes = 1 << 20; bytes <= 4.0 * (1 << 30); bytes *= 4, ++i) {  // copies: memory-bound
      const double t = overhead + bytes / (bandwidth * e_m);
      samples.push_back({0, bytes, peak, t * (1 + (i % 2 ? noise : -noise))});
    }
    const RooflineFit f = fit_roofline(samples, bandwidth);
    CHECK(f.compute_efficiency == doctest::Approx(e_c).epsilon(0.01));
    CHECK(f.memory_efficiency == doctest::Approx(e_m).epsilon(0.01));
    CHECK(f.overhead_s == doctest::Approx(overhead).epsilon(0.01));
    CHECK(f.compute_bound > 0);
    CHECK(f.memory_bound > 0);
  }
  const std::vector<KernelSample> only_copies = {{0, 1e6, 1, 1e-5}, {0, 2e6, 1, 2e-5}, {0, 4e6, 1, 4e-5}};
  CHECK_THROWS_AS(fit_roofline(only_copies, bandwidth), std::invalid_argument);
}
