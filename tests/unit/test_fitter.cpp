// The collective fitter against synthetic measurements with known alpha-beta regimes, and the
// fitted profile's YAML round trip.
#include "calibration/Fitter.hpp"
#include "calibration/Profile.hpp"
#include "calibration/ProfileFit.hpp"

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

namespace {
// A curve t = alpha + S / bandwidth over `ranks` GPUs on `nodes` nodes.
CollectiveCurve line(const std::string& op, int ranks, int nodes, double alpha, double bandwidth)
{
  CollectiveCurve c{.collective = op, .group_size = ranks, .nodes = nodes, .source = "test", .held_out_error = -1, .regimes = {}};
  c.regimes.push_back({.alpha_s = alpha, .bandwidth = bandwidth, .min_bytes = 0, .max_bytes = 1e12, .points = 4, .r2 = 1,
                       .max_relative_error = 0});
  return c;
}
}  // namespace

TEST_CASE("measured curves know their topology: a curve of one node never times a group across nodes")
{
  CalibrationProfile p = load_profile("h100-sxm");
  p.collectives = {line("all_reduce", 8, 1, 10e-6, 300e9), line("all_reduce", 16, 2, 30e-6, 200e9),
                   line("all_reduce", 32, 4, 50e-6, 100e9), line("all_reduce", 4, 0, 6e-6, 350e9)};
  const double S = 1e9;
  // Exact: same size, same spread.
  auto t = p.measured_time("all_reduce", 8, 1, S);
  REQUIRE(t);
  CHECK(t->alpha_s == doctest::Approx(10e-6));
  CHECK(t->transfer_s == doctest::Approx(S / 300e9));
  t = p.measured_time("all_reduce", 16, 2, S);
  REQUIRE(t);
  CHECK(t->transfer_s == doctest::Approx(S / 200e9));
  // The 8-GPU NVLink curve does not time 8 GPUs over two nodes (issue 17: 42x too fast), nor 16 GPUs
  // on 4 nodes (a different spread of that size), nor 64 GPUs (beyond the measured sizes).
  CHECK_FALSE(p.measured_time("all_reduce", 8, 2, S));
  CHECK_FALSE(p.measured_time("all_reduce", 16, 4, S));
  CHECK_FALSE(p.measured_time("all_reduce", 64, 8, S));
  CHECK_FALSE(p.measured_time("all_gather", 8, 1, S));
  // Between measured sizes of the same spread: linear in the group size.
  t = p.measured_time("all_reduce", 24, 3, S);
  REQUIRE(t);
  CHECK(t->alpha_s == doctest::Approx(40e-6));
  CHECK(t->transfer_s == doctest::Approx(0.5 * S / 200e9 + 0.5 * S / 100e9));
  CHECK(t->how.find("interpolated") != std::string::npos);
  // 6 GPUs in one node: between the 4-GPU curve (no `nodes`: an old profile, taken as one node) and
  // the 8-GPU one.
  t = p.measured_time("all_reduce", 6, 1, S);
  REQUIRE(t);
  CHECK(t->alpha_s == doctest::Approx(8e-6));
  CHECK(t->transfer_s == doctest::Approx(0.5 * S / 350e9 + 0.5 * S / 300e9));
  // `nodes` survives the YAML round trip; a profile without it loads, as unknown.
  std::stringstream yaml;
  write_profile(p, yaml);
  CHECK(yaml.str().find("nodes: 2") != std::string::npos);
  Diagnostics diags("p.yaml");
  YAML::Node root = load_yaml_string(yaml.str(), "p.yaml");
  YamlMap map(root, "", diags);
  const CalibrationProfile back = parse_profile(map);
  diags.throw_if_any();
  CHECK(back.collectives[1].nodes == 2);
  CHECK(back.collectives[3].nodes == 0);
}

TEST_CASE("fit_profile keeps curves of one group size on different node counts apart")
{
  traces::TraceSet records;
  for (double bytes : {1e6, 1e7, 1e8, 1e9}) {
    records.collectives.push_back({.collective = "all_reduce", .bytes = bytes, .dtype = "float", .group_size = 8,
                                   .nodes = 1, .duration_s = 5e-6 + bytes / 400e9, .source = "t", .name = "", .point = 0});
    records.collectives.push_back({.collective = "all_reduce", .bytes = bytes, .dtype = "float", .group_size = 8,
                                   .nodes = 8, .duration_s = 20e-6 + bytes / 40e9, .source = "t", .name = "", .point = 0});
  }
  const FitResult fit = fit_profile(load_profile("h100-sxm"), records,
                                    {.name = "t", .base = "h100-sxm", .sources = "", .command = "", .date = ""});
  REQUIRE(fit.profile.collectives.size() == 2);
  const auto inside = fit.profile.measured_time("all_reduce", 8, 1, 1e9);
  const auto across = fit.profile.measured_time("all_reduce", 8, 8, 1e9);
  REQUIRE(inside);
  REQUIRE(across);
  CHECK(inside->alpha_s + inside->transfer_s == doctest::Approx(5e-6 + 1e9 / 400e9).epsilon(1e-3));
  CHECK(across->alpha_s + across->transfer_s == doctest::Approx(20e-6 + 1e9 / 40e9).epsilon(1e-3));
}

