// Measured lookup tables, the table cost model, fitting a whole profile from records, the JSON-lines
// reader, and the microbenchmark plan. Expected values come from closed forms written here:
//   a kernel that takes t = c w^p between two measured points is interpolated exactly in log-log;
//   a GEMM is 2mnk flop and a convolution 2 N K C R S H_out W_out per pass.
#include "calibration/KernelTable.hpp"
#include "calibration/Microbench.hpp"
#include "calibration/ProfileFit.hpp"
#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "models/ModelLoader.hpp"
#include "traces/TraceRecords.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {

// Piecewise power law: launch-bound below 1e9 flop (t = 8 us), then t ~ w^0.8, then linear at 600 TF/s.
double gemm_time(double flop)
{
  if (flop <= 1e9)
    return 8e-6;
  if (flop <= 1e11)
    return 8e-6 * std::pow(flop / 1e9, 0.8);
  return 8e-6 * std::pow(100.0, 0.8) * flop / 1e11;
}

CalibrationProfile reparse(const CalibrationProfile& p)
{
  std::stringstream yaml;
  write_profile(p, yaml);
  Diagnostics diags("p.yaml");
  YAML::Node root = load_yaml_string(yaml.str(), "p.yaml");
  YamlMap map(root, "", diags);
  CalibrationProfile back = parse_profile(map);
  diags.throw_if_any();
  return back;
}

std::string temp_path(const std::string& name)
{
  return (std::filesystem::temp_directory_path() / ("ddlsim_unit_" + name)).string();
}

}  // namespace

TEST_CASE("a table interpolates a power law exactly between its points and merges repeats at the median")
{
  std::vector<WorkTime> samples;
  for (double w : {1e9, 1e10, 1e11, 1e12})
    for (double noise : {0.97, 1.0, 1.05})  // three runs: the median is the exact time
      samples.push_back({w, gemm_time(w) * noise});
  const KernelTable t = fit_kernel_table("gemm", "bf16", samples);
  REQUIRE(t.points.size() == 4);
  CHECK(t.points[1].seconds == doctest::Approx(gemm_time(1e10)));
  for (double w : {2e9, 3.7e10, 5e11, 9.9e11})
    CHECK(t.seconds(w) == doctest::Approx(gemm_time(w)).epsilon(1e-12));
  CHECK(t.covers(1e9));
  CHECK_FALSE(t.covers(2e12));
  CHECK(std::string(t.work_unit()) == "flop");
  CHECK_THROWS_AS(fit_kernel_table("gemm", "bf16", {{1e9, 1e-5}, {1e9, 2e-5}}), std::invalid_argument);
  CHECK_THROWS_AS(fit_kernel_table("gemm", "bf16", {{1e9, 1e-5}, {0, 2e-5}}), std::invalid_argument);
}

TEST_CASE("held-out error of a table: every other point predicted from its neighbours")
{
  // t = e^w at w = 1..7 (not a power law, so interpolation errs): the points w = 2, 4, 6 are each
  // predicted from w-1 and w+1 by log-log interpolation, written out here independently.
  std::vector<WorkTime> samples;
  for (int w = 1; w <= 7; ++w)
    samples.push_back({static_cast<double>(w), std::exp(static_cast<double>(w))});  // not a power law
  const KernelTable t = fit_kernel_table("pointwise", "", samples);
  std::vector<double> errors;
  for (int w = 2; w <= 6; w += 2) {
    const double lo = w - 1, hi = w + 1;
    const double f = std::log(w / lo) / std::log(hi / lo);
    const double predicted = std::exp((1 - f) * lo + f * hi);
    errors.push_back(std::abs(predicted - std::exp(static_cast<double>(w))) / std::exp(static_cast<double>(w)));
  }
  std::sort(errors.begin(), errors.end());
  CHECK(t.held_out_error == doctest::Approx(errors[1]).epsilon(1e-9));
  CHECK(t.max_held_out_error == doctest::Approx(errors[2]).epsilon(1e-9));
  CHECK(std::string(t.work_unit()) == "bytes");
}

TEST_CASE("the table cost model uses a table inside its range and the roofline outside")
{
  CalibrationProfile p = load_profile("h100-sxm");
  std::vector<WorkTime> samples;
  for (double w : {1e9, 1e10, 1e11, 1e12})
    samples.push_back({w, gemm_time(w)});
  p.kernel_tables.push_back(fit_kernel_table("gemm", "bf16", samples));
  p.kernel_tables.push_back(fit_kernel_table("pointwise", "", {{1e6, 2e-6}, {1e9, 5e-4}}));
  const std::unique_ptr<CostModel> model = make_cost_model(p);
  const RooflineCostModel roofline(p);
  const KernelWork inside{.flop = 5e10, .bytes = 1e7, .dtype = Dtype::bf16, .kind = WorkKind::gemm};
  CHECK(model->seconds(inside) == doctest::Approx(gemm_time(5e10)).epsilon(1e-12));
  KernelWork outside = inside;
  outside.flop = 5e12;
  CHECK(model->seconds(outside) == doctest::Approx(roofline.seconds(outside)));
  KernelWork other_dtype = inside;
  other_dtype.dtype = Dtype::fp16;  // no fp16 table
  CHECK(model->seconds(other_dtype) == doctest::Approx(roofline.seconds(other_dtype)));
  const KernelWork memory{.flop = 1e6, .bytes = 1e8, .dtype = Dtype::fp16, .kind = WorkKind::memory};
  const double expected = 2e-6 * std::pow(5e-4 / 2e-6, std::log(1e8 / 1e6) / std::log(1e9 / 1e6));
  CHECK(model->seconds(memory) == doctest::Approx(expected).epsilon(1e-12));  // memory tables serve any dtype
  KernelWork unknown = inside;
  unknown.kind = WorkKind::unknown;
  CHECK(model->seconds(unknown) == doctest::Approx(roofline.seconds(unknown)));
  CHECK(model->describe().find("tables(h100-sxm: 2 measured)") == 0);
  CHECK(make_cost_model(load_profile("h100-sxm"))->describe().find("roofline(") == 0);
}

TEST_CASE("kernel tables survive the profile's YAML round trip, and bad tables name file, line and key")
{
  CalibrationProfile p = load_profile("h100-sxm");
  KernelTable t = fit_kernel_table("conv2d", "fp16", {{1e8, 1e-5}, {1e9, 4e-5}, {1e10, 3e-4}, {1e11, 2.9e-3}, {1e12, 2.8e-2}});
  t.source = "c.jsonl";
  p.kernel_tables.push_back(t);
  const CalibrationProfile back = reparse(p);
  REQUIRE(back.kernel_tables.size() == 1);
  CHECK(back.kernel_tables[0].op == "conv2d");
  CHECK(back.kernel_tables[0].dtype == "fp16");
  CHECK(back.kernel_tables[0].points.size() == 5);
  CHECK(back.kernel_tables[0].seconds(3e10) == doctest::Approx(t.seconds(3e10)).epsilon(1e-9));
  CHECK(back.kernel_tables[0].held_out_error == doctest::Approx(t.held_out_error).epsilon(1e-9));

  const std::string bad = "name: x\nparameters:\n  memory_bandwidth: {value: 1TBps}\n  peak_flops_bf16: {value: 1PFlops}\n"
                          "kernel_tables:\n"
                          "  - {op: gemm, points: [[1, 1], [2, 2]]}\n"
                          "  - {op: warp, dtype: bf16, points: [[1, 1], [2, 2]]}\n"
                          "  - op: pointwise\n"
                          "    points: [[1, 1e-6], [1, 2e-6], [3, -1]]\n";
  Diagnostics diags("bad.yaml");
  YAML::Node root = load_yaml_string(bad, "bad.yaml");
  YamlMap map(root, "", diags);
  parse_profile(map);
  std::string all;
  for (const auto& d : diags.list())
    all += d.to_string() + "\n";
  CHECK(all.find("bad.yaml:6: kernel_tables[0].dtype: a compute op's table needs a dtype") != std::string::npos);
  CHECK(all.find("bad.yaml:7: kernel_tables[1].op: unknown op 'warp'") != std::string::npos);
  CHECK(all.find("bad.yaml:9: kernel_tables[2].points[1]: work must increase") != std::string::npos);
  CHECK(all.find("bad.yaml:9: kernel_tables[2].points[2]: expected [work, seconds], both positive numbers") != std::string::npos);
}

TEST_CASE("JSON-lines records: write, read back, merge files, and refuse bad lines with file:line: key")
{
  traces::TraceSet set;
  set.provenance = {{"device", "GPU A"}, {"source", "ddlsim-collect"}};
  traces::KernelRecord k;
  k.name = "sm90_gemm";
  k.duration_s = 1.5e-5;
  k.op = "gemm";
  k.flop = 2e9;
  k.bytes = 3e6;
  k.dtype = "bf16";
  k.point = 4;
  set.kernels.push_back(k);
  traces::CollectiveRecord c{.collective = "all_reduce", .bytes = 1 << 20, .dtype = "float", .group_size = 8,
                             .duration_s = 3e-5, .source = "kernel", .name = "nccl", .point = 9};
  set.collectives.push_back(c);
  const std::string path = temp_path("records.jsonl");
  {
    std::ofstream out(path);
    traces::write_jsonl(set, out);
  }
  traces::TraceSet back = traces::read_jsonl(path);
  REQUIRE(back.kernels.size() == 1);
  CHECK(back.kernels[0].op == "gemm");
  CHECK(back.kernels[0].point == 4);
  CHECK(back.kernels[0].flop == 2e9);
  CHECK(back.kernels[0].dtype == "bf16");
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].point == 9);
  CHECK(back.collectives[0].group_size == 8);
  CHECK(back.provenance.at("device") == "GPU A");

  traces::TraceSet more = back;
  more.provenance["device"] = "GPU B";
  traces::append(back, more);
  CHECK(back.kernels.size() == 2);
  CHECK(back.kernels[1].point == 4 + 9);  // shifted past the first file's largest point id
  CHECK(back.collectives[1].point == 9 + 9);
  CHECK(back.provenance.at("device") == "GPU A; GPU B");

  {
    std::ofstream out(path);
    out << "{\"type\":\"provenance\"}\n\n{\"type\":\"kernel\",\"name\":\"k\",\"duration_s\":\"fast\"}\n";
  }
  try {
    traces::read_jsonl(path);
    FAIL("no exception");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()) == path + ":3: duration_s: must be a number");
  }
  {
    std::ofstream out(path);
    out << "{\"type\":\"collective\",\"collective\":\"all_reduce\",\"duration_s\":1e-5}\n";
  }
  CHECK_THROWS_WITH_AS(traces::read_jsonl(path), (path + ":1: bytes: missing").c_str(), TraceError);
  {
    std::ofstream out(path);
    out << "{\"type\":\"kernel\",\"name\":\"k\",\"duration_s\":1e-5,\"flop\":-3}\n{\"type\":\"kernel\",";
  }
  CHECK_THROWS_WITH_AS(traces::read_jsonl(path), (path + ":1: flop: must not be negative").c_str(), TraceError);
  std::filesystem::remove(path);
}

TEST_CASE("fit_profile recovers a table, alpha-beta regimes and roofline efficiencies from synthetic records")
{
  const CalibrationProfile base = load_profile("h100-sxm");
  const double peak = base.value("peak_flops_bf16"), bw = base.value("memory_bandwidth");
  const double ce = 0.62, me = 0.81, overhead = 4e-6;
  traces::TraceSet set;
  int point = 0;
  auto kernel = [&](const std::string& op, double flop, double bytes, double seconds) {
    ++point;
    for (double noise : {1.02, 1.0, 0.99}) {  // three runs of one point: the median is exact
      traces::KernelRecord k;
      k.name = op;
      k.op = op;
      k.flop = flop;
      k.bytes = bytes;
      k.dtype = "bf16";
      k.duration_s = seconds * noise;
      k.point = point;
      set.kernels.push_back(k);
    }
  };
  // GEMMs m = n = k from 1024 to 16384: compute-bound at efficiency ce; pointwise kernels memory-bound at me.
  for (double n = 1024; n <= 16384; n *= 2) {
    const double flop = 2 * n * n * n, bytes = 3 * n * n * 2;
    kernel("gemm", flop, bytes, overhead + flop / (peak * ce));
  }
  for (double bytes = 1e6; bytes <= 1e10; bytes *= 10)
    kernel("pointwise", 0, bytes, overhead + bytes / (bw * me));
  for (double bytes = 1e4; bytes <= 1e9; bytes *= 4)  // copies do not enter the roofline
    kernel("copy_h2d", 0, bytes, 1e-5 + bytes / 25e9);
  const double alpha = 21e-6, bus = 180e9;
  for (double bytes = 1 << 16; bytes <= (1 << 30); bytes *= 2)
    set.collectives.push_back({.collective = "all_reduce", .bytes = bytes, .dtype = "float", .group_size = 8,
                               .duration_s = alpha + bytes / bus, .source = "kernel", .name = "nccl", .point = 0});
  set.collectives.push_back({.collective = "broadcast", .bytes = 1e6, .dtype = "float", .group_size = 8,
                             .duration_s = 1e-5, .source = "kernel", .name = "nccl", .point = 0});
  set.provenance = {{"device", "NVIDIA H100 80GB HBM3"}, {"driver", "580.1"}};

  const FitResult fit = fit_profile(base, set, {.name = "synthetic", .base = "h100-sxm", .sources = "s.jsonl",
                                                .command = "test", .date = "2026-11-21"});
  const CalibrationProfile& p = fit.profile;
  CHECK(p.kind == ProfileKind::measured);
  CHECK(p.device == "NVIDIA H100 80GB HBM3");
  CHECK(p.provenance.at("driver") == "580.1");
  CHECK(p.value("compute_efficiency") == doctest::Approx(ce).epsilon(0.01));
  CHECK(p.value("memory_efficiency") == doctest::Approx(me).epsilon(0.01));
  CHECK(p.value("kernel_overhead") == doctest::Approx(overhead).epsilon(0.01));
  REQUIRE(p.kernel_tables.size() == 3);  // copy_h2d, gemm bf16, pointwise
  const KernelTable* gemm = nullptr;
  for (const auto& t : p.kernel_tables)
    if (t.op == "gemm")
      gemm = &t;
  REQUIRE(gemm != nullptr);
  CHECK(gemm->dtype == "bf16");
  CHECK(gemm->points.size() == 5);
  const double n = 3000, flop = 2 * n * n * n;
  CHECK(gemm->seconds(flop) == doctest::Approx(overhead + flop / (peak * ce)).epsilon(0.02));
  REQUIRE(p.collectives.size() == 1);
  CHECK(p.collectives[0].regime(1 << 20).alpha_s == doctest::Approx(alpha).epsilon(0.01));
  CHECK(p.collectives[0].regime(1 << 20).bandwidth == doctest::Approx(bus).epsilon(0.01));
  REQUIRE(fit.notes.size() == 1);  // the broadcast has one size
  CHECK(fit.notes[0].find("broadcast over 8 ranks: only 1 distinct sizes") == 0);
  // The result is a valid profile.
  CHECK(reparse(p).kernel_tables.size() == 3);

  traces::TraceSet empty;
  CHECK_THROWS_AS(fit_profile(base, empty, {}), CalibrationError);

  // A point whose runs each ran three kernels is timed by their busy time, not their span: 11.25 us, not 15.7.
  traces::TraceSet three = set;
  for (int run = 0; run < 3; ++run) {
    traces::KernelRecord k;
    k.name       = "nchwToNhwc+conv+nhwcToNchw";
    k.op         = "conv2d";
    k.dtype      = "bf16";
    k.flop       = 231211008;
    k.bytes      = 876544;
    k.shape      = "n=1 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd";
    k.duration_s = 15.7e-6;
    k.busy_s     = 11.25e-6;
    k.kernels    = 3;
    k.point      = 1000;
    three.kernels.push_back(k);
    k.shape = "n=2 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd";  // a second point: a table needs two
    k.flop *= 2;
    k.kernels = 1;  // one kernel: its span is its time
    k.point   = 1001;
    three.kernels.push_back(k);
  }
  const FitResult busy =
      fit_profile(base, three, {.name = "busy", .base = "h100-sxm", .sources = "", .command = "", .date = ""});
  const KernelTable* conv = nullptr;
  for (const auto& t : busy.profile.kernel_tables)
    if (t.op == "conv2d")
      conv = &t;
  REQUIRE(conv != nullptr);
  CHECK(conv->shapes.at("n=1 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd") == 11.25e-6);
  CHECK(conv->shapes.at("n=2 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 fwd") == 15.7e-6);
  CHECK(busy.profile.provenance.count("kernel_time") == 1);
  CHECK(fit.profile.provenance.count("kernel_time") == 0);
}

TEST_CASE("the microbenchmark plan: ids in order, work from closed forms, quick is a subset")
{
  const auto quick = microbenchmark_plan({.quick = true, .gpus = 1, .only = {}});
  const auto full = microbenchmark_plan({.quick = false, .gpus = 8, .only = {}});
  CHECK(quick.size() < full.size() / 4);
  for (std::size_t i = 0; i < full.size(); ++i)
    CHECK(full[i].id == static_cast<int>(i) + 1);
  std::set<std::string> labels;
  for (const auto& p : full)
    labels.insert(p.label());
  CHECK(labels.size() == full.size());  // every point is distinct
  std::size_t send_recv = 0, gemm_bf16 = 0;
  for (const auto& p : full) {
    send_recv += p.collective == "send_recv";
    gemm_bf16 += p.op == BenchOp::gemm && p.dtype == "bf16" && p.layout == GemmLayout::nn;
    if (p.op == BenchOp::gemm) {
      CHECK(p.flop() == 2.0 * p.m * p.n * p.k);
    }
  }
  CHECK(send_recv == 7 * 2 * 28);  // groups of 2 to 8, bf16 and fp32, 8 B to 1 GiB doubling
  CHECK(gemm_bf16 == 7 * 7 * 7);
  for (const auto& p : quick)
    CHECK(p.collective != "send_recv");  // needs two GPUs
  // ResNet-50's stem at batch 32: 2 N K C R S H_out W_out = 2 * 32 * 64 * 3 * 7 * 7 * 112 * 112.
  BenchPoint stem;
  stem.op = BenchOp::conv2d;
  stem.dtype = "fp16";
  stem.conv = zoo_convolutions().front();
  stem.conv.n = 32;
  CHECK(stem.flop() == 2.0 * 32 * 64 * 3 * 7 * 7 * 112 * 112);
  CHECK(stem.label() == "conv2d fp16 fwd n=32 3x224x224 k=64 7x7/2 pad 3");
  const auto only = microbenchmark_plan({.quick = true, .gpus = 2, .only = {BenchOp::collective}});
  CHECK(only.size() == 5 * 15);  // 5 collectives over the pair, bf16, 8 B to 1 GiB in steps of 4 (and 1 GiB)
}

TEST_CASE("zoo_convolutions lists the zoo's convolution layers")
{
  std::set<std::tuple<int, int, int, int, int, int, int>> zoo, listed;
  for (const char* name : {"resnet50", "vgg16", "alexnet"}) {
    const models::Model model = models::load_model(name);
    for (const auto& layer : model.layers())
      for (const auto& k : layer.kernels)
        if (k.kind == models::KernelKind::conv2d)
          zoo.insert({k.conv.c, k.conv.h, k.conv.w, k.conv.k, k.conv.r, k.conv.stride_h, k.conv.pad_h});
  }
  for (const auto& c : zoo_convolutions())
    listed.insert({c.c, c.h, c.w, c.k, c.r, c.stride, c.pad});
  CHECK(listed == zoo);
  CHECK(zoo_convolutions().size() == zoo.size());
}

TEST_CASE("a GEMM grid interpolates a power law of m, n and k exactly, and its held-out error is 0 there")
{
  // t = 3e-12 m^0.9 n^1.0 k^0.8 on a 4 x 4 x 4 grid; a power law is linear in log-log-log space.
  auto law = [](double m, double n, double k) { return 3e-12 * std::pow(m, 0.9) * n * std::pow(k, 0.8); };
  std::map<std::string, double> shapes;
  for (long long m : {16, 64, 256, 1024})
    for (long long n : {16, 64, 256, 1024})
      for (long long k : {16, 64, 256, 1024})
        shapes["m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " batch=1"] = law(m, n, k);
  const GemmGrid grid(shapes);
  CHECK(grid.seconds(100, 500, 33) == doctest::Approx(law(100, 500, 33)).epsilon(1e-12));
  CHECK(grid.seconds(64, 1000, 16) == doctest::Approx(law(64, 1000, 16)).epsilon(1e-12));
  CHECK(grid.seconds(8, 64, 64) < 0);    // outside the grid
  CHECK(grid.seconds(64, 64, 2000) < 0);
  const std::vector<double> errors = grid.held_out_errors();
  CHECK(errors.size() == 3 * 2 * 16);  // per axis, the 2 interior values x 16 shapes
  for (double e : errors)
    CHECK(e < 1e-12);

  // A missing corner: no interpolation in that cell.
  shapes.erase("m=64 n=64 k=64 batch=1");
  CHECK(GemmGrid(shapes).seconds(40, 40, 40) < 0);

  // The cost model uses the grid for an unmeasured GEMM shape inside it.
  CalibrationProfile p = load_profile("h100-sxm");
  std::vector<WorkTime> samples;
  for (const auto& [key, seconds] : shapes) {
    long long m = 0, n = 0, k = 0, b = 0;
    REQUIRE(parse_gemm_shape(key, m, n, k, b));
    samples.push_back({2.0 * m * n * k, seconds, key});
  }
  const KernelTable table = fit_kernel_table("gemm", "fp32", samples);
  CHECK(table.grid_held_out_error >= 0);
  p.kernel_tables.push_back(table);
  const auto model = make_cost_model(p);
  const KernelWork w{.flop = 2.0 * 100 * 500 * 200, .bytes = 0, .dtype = Dtype::fp32, .kind = WorkKind::gemm,
                     .shape = "m=100 n=500 k=200 batch=1"};
  CHECK(model->seconds(w) == doctest::Approx(law(100, 500, 200)).epsilon(1e-12));
  long long m = 0, n = 0, k = 0, b = 0;
  CHECK_FALSE(parse_gemm_shape("m=1 n=2 k=3", m, n, k, b));
  CHECK_FALSE(parse_gemm_shape("m=1 n=2 k=3 batch=1 extra", m, n, k, b));
}
