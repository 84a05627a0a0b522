// The host-side rules of the GPU path, checked without a GPU: what the collector measures (GEMM layouts, collective
// groups and dtypes, nccl-tests' buffer sizes and peers), how it measures (cold L2, whole runs only, host time per
// collective call compared with nccl-tests' own figures, PyTorch's math defaults, the timed cuDNN algorithm
// search), and what it records about the GPU (clocks and what slows them).
//
// Oracles: nccl-tests' definitions (src/all_gather.cu and friends for buffer counts, doc/PERFORMANCE.md for bus
// bandwidth) and rows of a published 8-GPU all_reduce_perf log (kvcache-ai/Mooncake pull request #3484:
// 33554432 B in 195.40 us, algbw 171.72 GB/s, busbw 300.51 GB/s; 4194304 B in 53.24 us, 78.78 and 137.87 GB/s).
#include "calibration/Measurement.hpp"
#include "calibration/Microbench.hpp"
#include "traces/NcclTestsImporter.hpp"

#include <cmath>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::calibration;

namespace {

constexpr double mib = 1024.0 * 1024.0;

std::size_t count_if_plan(const std::vector<BenchPoint>& plan, const std::function<bool(const BenchPoint&)>& f)
{
  std::size_t n = 0;
  for (const auto& p : plan)
    n += f(p) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("GEMM layouts: nn keeps its key, nt and tn are shapes of their own; the full plan times the gradients' layouts")
{
  BenchPoint p;
  p.op = BenchOp::gemm;
  p.dtype = "bf16";
  p.m = 4096;
  p.n = 1024;
  p.k = 768;
  CHECK(p.label() == "gemm bf16 m=4096 n=1024 k=768");
  CHECK(p.shape_key() == "m=4096 n=1024 k=768 batch=1");
  const double flop = p.flop(), bytes = p.traffic_bytes();
  p.layout = GemmLayout::nt;
  CHECK(p.label() == "gemm bf16 m=4096 n=1024 k=768 nt");
  CHECK(p.shape_key() == "m=4096 n=1024 k=768 batch=1 layout=nt");
  p.layout = GemmLayout::tn;
  CHECK(p.shape_key() == "m=4096 n=1024 k=768 batch=1 layout=tn");
  CHECK(p.flop() == flop);  // the same work in every layout
  CHECK(p.traffic_bytes() == bytes);

  const auto full = microbenchmark_plan({.quick = false, .gpus = 1, .only = {BenchOp::gemm}});
  const auto quick = microbenchmark_plan({.quick = true, .gpus = 1, .only = {BenchOp::gemm}});
  for (GemmLayout layout : {GemmLayout::nt, GemmLayout::tn}) {
    CHECK(count_if_plan(full, [&](const BenchPoint& q) { return q.layout == layout && q.dtype == "bf16"; }) == 7 * 7 * 7);
    CHECK(count_if_plan(quick, [&](const BenchPoint& q) { return q.layout == layout; }) == 0);
  }
  std::set<std::string> labels;
  for (const auto& q : full)
    labels.insert(q.label());
  CHECK(labels.size() == full.size());
}

TEST_CASE("collectives: groups of 2 to 8 GPUs in bf16 (and fp32), none on one GPU, each point naming its group")
{
  CHECK(collective_group_sizes(1, false).empty());
  CHECK(collective_group_sizes(8, false) == std::vector<int>{2, 3, 4, 5, 6, 7, 8});
  CHECK(collective_group_sizes(8, true) == std::vector<int>{2, 4, 8});
  CHECK(collective_group_sizes(6, true) == std::vector<int>{2, 4, 6});
  CHECK(collective_group_sizes(16, true) == std::vector<int>{2, 4, 8});  // a node's groups at most

  CHECK(microbenchmark_plan({.quick = true, .gpus = 1, .only = {BenchOp::collective}}).empty());
  const auto quick = microbenchmark_plan({.quick = true, .gpus = 8, .only = {BenchOp::collective}});
  CHECK(quick.size() == 3 * 5 * 15);  // groups 2, 4, 8; 5 collectives; 8 B to 1 GiB by 4 (and 1 GiB)
  const auto full = microbenchmark_plan({.quick = false, .gpus = 8, .only = {BenchOp::collective}});
  CHECK(full.size() == 7 * 2 * 5 * 28);  // groups 2..8; bf16 and fp32; 8 B to 1 GiB by 2
  std::map<int, std::size_t> by_group;
  for (const auto& p : quick) {
    CHECK(p.dtype == "bf16");
    ++by_group[p.group];
  }
  CHECK(by_group == std::map<int, std::size_t>{{2, 75}, {4, 75}, {8, 75}});
  CHECK(quick.front().label() == "all_reduce bf16 8 B over 2 GPUs");
  CHECK(count_if_plan(full, [](const BenchPoint& p) { return p.dtype == "fp32"; }) == full.size() / 2);
  CHECK(nccl_type_name("bf16") == "bfloat16");
  CHECK(nccl_type_name("fp32") == "float");
  CHECK(nccl_type_name("fp16") == "half");
}

TEST_CASE("collective buffers and peers as nccl-tests sizes them")
{
  // all_reduce: the size is each rank's buffer (nccl-tests: 33554432 B = 8388608 floats).
  const CollectiveBuffers ar = collective_buffers("all_reduce", 33554432, 4, 8, 3);
  CHECK(ar.send_count == 8388608);
  CHECK(ar.recv_count == 8388608);
  CHECK(ar.bytes == 33554432);
  CHECK(ar.send_to == -1);
  // all_gather: the size is the gathered buffer; each rank sends size / n (nccl-tests' count column, 8192 floats
  // of 65536 B over 2 ranks).
  const CollectiveBuffers ag = collective_buffers("all_gather", 65536, 4, 2, 0);
  CHECK(ag.send_count == 8192);
  CHECK(ag.recv_count == 16384);
  // A size that does not divide: rounded up to whole elements per rank (1000 B of bf16 over 3: 501 elements).
  const CollectiveBuffers odd = collective_buffers("all_gather", 1000, 2, 3, 0);
  CHECK(odd.recv_count == 501);
  CHECK(odd.send_count == 167);
  CHECK(odd.bytes == 1002);
  const CollectiveBuffers rs = collective_buffers("reduce_scatter", 1000, 2, 3, 2);
  CHECK(rs.send_count == 501);
  CHECK(rs.recv_count == 167);
  // send_recv: every rank sends to the next and receives from the one before, as sendrecv_perf: a group of 2 is
  // one pair exchanging, not a group of all GPUs with one left out.
  const CollectiveBuffers pair0 = collective_buffers("send_recv", 4096, 2, 2, 0);
  const CollectiveBuffers pair1 = collective_buffers("send_recv", 4096, 2, 2, 1);
  CHECK(pair0.send_to == 1);
  CHECK(pair0.recv_from == 1);
  CHECK(pair1.send_to == 0);
  CHECK(pair1.recv_from == 0);
  CHECK(pair0.send_count == 2048);
  for (int r = 0; r < 5; ++r) {
    const CollectiveBuffers b = collective_buffers("send_recv", 4096, 2, 5, r);
    CHECK(b.send_to == (r + 1) % 5);
    CHECK(b.recv_from == (r + 4) % 5);
    CHECK(collective_buffers("send_recv", 4096, 2, 5, b.send_to).recv_from == r);  // every send has its receive
  }
  CHECK_THROWS_AS(collective_buffers("send_recv", 4096, 2, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(collective_buffers("all_reduce", 4096, 2, 4, 4), std::invalid_argument);
  CHECK_THROWS_AS(collective_buffers("all_to_everyone", 4096, 2, 4, 0), std::invalid_argument);
}

TEST_CASE("collective time is nccl-tests' time: the same bytes and seconds give nccl-tests' published bus bandwidth")
{
  // Rows of a published all_reduce_perf log over 8 H100s (Mooncake PR #3484), out-of-place.
  CHECK(33554432 / 195.40e-6 / 1e9 == doctest::Approx(171.72).epsilon(1e-4));
  CHECK(bus_bandwidth("all_reduce", 33554432, 195.40e-6, 8) / 1e9 == doctest::Approx(300.51).epsilon(1e-4));
  CHECK(bus_bandwidth("all_reduce", 4194304, 53.24e-6, 8) / 1e9 == doctest::Approx(137.87).epsilon(1e-4));
  // A collector record of the same call: 20 calls back to back in 3.908 ms of host time is 195.40 us per call.
  const double per_call = 3.908e-3 / collective_calls_per_record;
  CHECK(per_call == doctest::Approx(195.40e-6));
  CHECK(collective_calls_per_record == 20);  // nccl-tests' default -n
  CHECK(collective_warmup_calls == 5);       // and -w
  // The importer reads nccl-tests' rows with the same meaning of bytes and time as the collector's records.
  const auto path = std::filesystem::temp_directory_path() / ("ddlsim_nccl_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(path);
    out << "# Collective test starting: all_reduce_perf\n# Using devices\n";
    for (int r = 0; r < 8; ++r)
      out << "#  Rank  " << r << " Group  0 Pid  1 on n device  " << r << " [0x18] NVIDIA H100 80GB HBM3\n";
    out << "    33554432       8388608     float     sum      -1   195.40  171.72  300.51      0   195.40  171.73  300.52      0\n";
  }
  const traces::TraceSet set = traces::import_nccl_tests(path.string());
  std::filesystem::remove(path);
  REQUIRE(set.collectives.size() == 1);
  const traces::CollectiveRecord& c = set.collectives[0];
  CHECK(c.group_size == 8);
  CHECK(c.bytes == collective_buffers("all_reduce", 33554432, 4, 8, 0).bytes);
  CHECK(c.dtype == nccl_type_name("fp32"));
  CHECK(bus_bandwidth(c.collective, c.bytes, c.duration_s, c.group_size) / 1e9 == doctest::Approx(300.51).epsilon(1e-4));
  // Bus bandwidth factors for the other kinds (doc/PERFORMANCE.md).
  CHECK(bus_bandwidth("all_gather", 8e6, 1e-3, 4) == doctest::Approx(8e9 * 3 / 4));
  CHECK(bus_bandwidth("reduce_scatter", 8e6, 1e-3, 2) == doctest::Approx(8e9 / 2));
  CHECK(bus_bandwidth("send_recv", 8e6, 1e-3, 2) == doctest::Approx(8e9));
  CHECK(bus_bandwidth("broadcast", 8e6, 1e-3, 8) == doctest::Approx(8e9));
  CHECK_THROWS_AS(bus_bandwidth("all_reduce", 8e6, 0, 8), std::invalid_argument);
}

TEST_CASE("cold L2: rotating operand copies when a few evict each other, else a 2 x L2 write before each run")
{
  const double l2 = 50 * mib, budget = 40e9;
  // A large GEMM (96 MiB of operands): two other copies move 192 MiB >= 2 x L2 through the cache.
  const L2Isolation big = plan_l2_isolation(96 * mib, l2, budget);
  CHECK(big.buffer_sets == 3);
  CHECK_FALSE(big.flush);
  // A tiny kernel would need thousands of copies: flush instead.
  const L2Isolation tiny = plan_l2_isolation(4096, l2, budget);
  CHECK(tiny.flush);
  CHECK(tiny.buffer_sets == 1);
  CHECK(tiny.flush_bytes == 2 * l2);
  // 30 MiB needs 4 others (5 sets > 4): flush.
  CHECK(plan_l2_isolation(30 * mib, l2, budget).flush);
  // 40 MiB: 3 others move 120 MiB >= 100 MiB: 4 sets.
  CHECK(plan_l2_isolation(40 * mib, l2, budget).buffer_sets == 4);
  // Not enough memory for the copies: flush.
  CHECK(plan_l2_isolation(96 * mib, l2, 200 * mib).flush);
  // Unknown L2: nothing.
  const L2Isolation none = plan_l2_isolation(96 * mib, 0, budget);
  CHECK(none.buffer_sets == 1);
  CHECK_FALSE(none.flush);
  // Whatever the footprint, a run's operands were last used at least 2 x L2 of traffic ago, or L2 is flushed.
  for (double f = 1024; f < 64 * 1024 * mib; f *= 1.7) {
    const L2Isolation iso = plan_l2_isolation(f, l2, budget);
    CHECK((iso.flush || (iso.buffer_sets - 1) * f >= 2 * l2));
    CHECK(iso.buffer_sets * f <= std::max(budget, f));
    CHECK(iso.buffer_sets <= 4);
  }
  CHECK_THROWS_AS(plan_l2_isolation(-1, l2, budget), std::invalid_argument);
}

TEST_CASE("whole runs only: a run that lost a CUPTI record is left out, not timed short")
{
  const RunCheck lost = check_runs({7, 7, 6, 7});
  CHECK(lost.expected == 7);
  CHECK(lost.complete == std::vector<bool>{true, true, false, true});
  CHECK(lost.whole == 3);
  CHECK(lost.partial == 1);
  CHECK(lost.missing == 0);
  const RunCheck extra = check_runs({8, 7, 7, 0});  // one run got another's record, one got none
  CHECK(extra.expected == 7);
  CHECK(extra.complete == std::vector<bool>{false, true, true, false});
  CHECK(extra.partial == 1);
  CHECK(extra.missing == 1);
  const RunCheck tie = check_runs({3, 4, 4, 3});  // a tie goes to the larger count: records are lost, not made
  CHECK(tie.expected == 4);
  CHECK(tie.whole == 2);
  const RunCheck nothing = check_runs({0, 0});
  CHECK(nothing.expected == 0);
  CHECK(nothing.whole == 0);
  CHECK(nothing.missing == 2);
  CHECK(check_runs({}).whole == 0);
}

TEST_CASE("a run's busy time leaves out the gaps between its kernels and counts overlaps once")
{
  // A cuDNN convolution as the H200 ran it: layout transform, convolution, transform back, with the gaps a stream
  // under CUPTI leaves between them (docs/crosscheck-gpu.md).
  CHECK(busy_ns({{1000, 3000}, {5500, 12500}, {14000, 15000}}) == 2000 + 7000 + 1000);
  CHECK(busy_ns({{5500, 12500}, {1000, 3000}}) == 9000);        // order does not matter
  CHECK(busy_ns({{0, 10}, {5, 20}, {8, 12}, {30, 31}}) == 21);  // overlaps count once
  CHECK(busy_ns({{7, 7}, {9, 3}}) == 0);                        // empty and reversed intervals
  CHECK(busy_ns({}) == 0);
}

TEST_CASE("a step's kernels keep their values' spread: alpha sqrt(3 / reduction), the pointwise kernel y = -x")
{
  // Operands uniform in [-1, 1) have variance 1/3; a sum of k products of two such has variance k / 9: the scale
  // that brings it back to 1/3 is sqrt(3 / k). Checked against a direct sum of products over a fixed sequence.
  CHECK(products_alpha(768) == doctest::Approx(0.0625));  // sqrt(3 / 768) = 1/16
  CHECK(products_alpha(3) == doctest::Approx(1.0));
  CHECK(products_alpha(1) == doctest::Approx(std::sqrt(3.0)));
  CHECK_THROWS_AS(products_alpha(0), std::invalid_argument);
  const int k = 3072;
  double sum2 = 0;
  const int outputs = 2000;
  std::uint32_t state = 12345;
  auto uniform = [&] {  // [-1, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<double>(state >> 8) / static_cast<double>(1u << 24) * 2 - 1;
  };
  for (int o = 0; o < outputs; ++o) {
    double dot = 0;
    for (int i = 0; i < k; ++i)
      dot += uniform() * uniform();
    const double y = products_alpha(k) * dot;
    sum2 += y * y;
  }
  CHECK(sum2 / outputs == doctest::Approx(1.0 / 3).epsilon(0.1));  // the fill's variance, kept
  CHECK(pointwise_a * pointwise_a == 1.0f);                        // |y| = |x|: nothing grows or shrinks
  CHECK(pointwise_b == 0.0f);
}

TEST_CASE("the gap between a CUDA graph's kernels: time per kernel less the kernel's median duration")
{
  // 200 kernels of 2.0 us (one outlier), 10 replays in 5.6 ms: 2.8 us a kernel, so 0.8 us between two.
  std::vector<double> durations(200, 2.0e-6);
  durations[7] = 40e-6;
  CHECK(graph_kernel_gap_s(5.6e-3, 200, 10, durations) == doctest::Approx(0.8e-6));
  CHECK(graph_kernel_gap_s(1e-3, 200, 10, durations) == 0);  // faster than the kernels: no gap, never negative
  CHECK_THROWS_AS(graph_kernel_gap_s(1e-3, 0, 10, durations), std::invalid_argument);
  CHECK_THROWS_AS(graph_kernel_gap_s(0, 200, 10, durations), std::invalid_argument);
  CHECK_THROWS_AS(graph_kernel_gap_s(1e-3, 200, 10, {}), std::invalid_argument);
}

TEST_CASE("math as PyTorch runs it by default, and the cuDNN algorithm by a timed search")
{
  CHECK(gemm_math("fp32") == MathMode::fp32);  // torch.backends.cuda.matmul.allow_tf32 = False
  CHECK(gemm_math("tf32") == MathMode::tf32);
  CHECK(gemm_math("bf16") == MathMode::tensor_op);
  CHECK(conv_math("fp32") == MathMode::tf32);  // torch.backends.cudnn.allow_tf32 = True
  CHECK(conv_math("fp16") == MathMode::tensor_op);
  CHECK(std::string(math_mode_name(conv_math("fp32"))) == "tf32");

  std::vector<AlgorithmTrial> trials{
      {.algorithm = 1, .runs = true, .workspace_bytes = 0, .seconds = {3e-3, 3.1e-3, 2.9e-3}},
      {.algorithm = 6, .runs = false, .workspace_bytes = 0, .seconds = {}},               // rejected
      {.algorithm = 7, .runs = true, .workspace_bytes = 2e9, .seconds = {1e-3, 1e-3, 1e-3}},  // fastest, big
      {.algorithm = 0, .runs = true, .workspace_bytes = 1e6, .seconds = {2e-3, 9e-3, 2e-3}},  // median 2 ms
  };
  CHECK(choose_fastest(trials, 1e12) == 2);
  CHECK(choose_fastest(trials, 1e8) == 3);  // the median, not the mean: one slow run does not decide
  trials[0].seconds = {2e-3, 2e-3, 2e-3};   // a tie: cuDNN's own order decides
  CHECK(choose_fastest(trials, 1e8) == 0);
  CHECK(choose_fastest({{.algorithm = 1, .runs = false, .workspace_bytes = 0, .seconds = {}}}, 1e12) == -1);
}

TEST_CASE("clocks and power state go into the provenance, with a warning when the GPU was slowed")
{
  CHECK(slowdown_reason_names(0) == "none");
  CHECK(slowdown_reason_names(0x4 | 0x40) == "sw_power_cap+hw_thermal_slowdown");
  CHECK(slowdown_reason_names(0x1 | 0x1000) == "gpu_idle+0x1000");
  GpuClockReading r;
  r.valid = true;
  r.sm_mhz = r.max_sm_mhz = r.app_sm_mhz = 1980;
  r.memory_mhz = r.max_memory_mhz = r.app_memory_mhz = 2619;
  r.pstate = 0;
  r.power_w = 312;
  r.power_limit_w = 700;
  r.temperature_c = 41;
  r.persistence_mode = true;
  CHECK(describe_clocks(r) ==
        "P0, SM 1980/1980 MHz, memory 2619/2619 MHz, application 1980/2619 MHz, 312/700 W, 41 C, slowdown: none, "
        "persistence on");
  std::map<std::string, std::string> p;
  add_clock_provenance(p, {r}, "end");
  CHECK(p.at("clocks_end") == describe_clocks(r));
  CHECK(p.count("clocks_warning") == 0);
  GpuClockReading capped = r;
  capped.device = 1;
  capped.sm_mhz = 1650;
  capped.slowdown_reasons = 0x4;
  add_clock_provenance(p, {r, capped}, "end");
  CHECK(p.at("clocks_end").find("GPU 0: P0") == 0);
  CHECK(p.at("clocks_end").find("; GPU 1: P0, SM 1650/1980 MHz") != std::string::npos);
  CHECK(p.at("clocks_warning") == "GPU 1 at SM 1650 of 1980 MHz, slowdown: sw_power_cap");
  GpuClockReading none;
  none.error = "libnvidia-ml.so.1 cannot be opened: no NVIDIA driver here";
  std::map<std::string, std::string> q;
  add_clock_provenance(q, {none}, "start");
  CHECK(q.at("clocks_start") == "unavailable (libnvidia-ml.so.1 cannot be opened: no NVIDIA driver here)");
}

namespace {
// A data-gradient GEMM of GPT-2's MLP (dY W^T, layout nt), which no quick plan holds.
BenchPoint gemm_nt_launch()
{
  BenchPoint nt;
  nt.op = BenchOp::gemm;
  nt.dtype = "bf16";
  nt.m = 8192;
  nt.n = 768;
  nt.k = 3072;
  nt.layout = GemmLayout::nt;
  return nt;
}
}  // namespace

TEST_CASE("a workload's launches join the plan once each, ordered by op, ids renumbered")
{
  auto plan = microbenchmark_plan({.quick = true, .gpus = 1, .only = {BenchOp::gemm, BenchOp::pointwise}});
  const std::size_t planned = plan.size();
  BenchPoint in_plan = plan.front();  // already there
  const BenchPoint nt = gemm_nt_launch();
  BenchPoint conv;
  conv.op = BenchOp::conv2d;
  conv.dtype = "fp32";
  conv.conv = zoo_convolutions().front();
  add_points(plan, {in_plan, nt, nt, conv});
  CHECK(plan.size() == planned + 2);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    CHECK(plan[i].id == static_cast<int>(i) + 1);
    if (i > 0)
      CHECK(static_cast<int>(plan[i - 1].op) <= static_cast<int>(plan[i].op));
  }
  CHECK(count_if_plan(plan, [](const BenchPoint& p) { return p.layout == GemmLayout::nt; }) == 1);
}

TEST_CASE("put_first: a workload's launches before the grid, each side in its order, ids renumbered")
{
  auto plan = microbenchmark_plan({.quick = true, .gpus = 1, .only = {BenchOp::gemm, BenchOp::pointwise}});
  const BenchPoint nt = gemm_nt_launch();
  const BenchPoint pointwise = plan.back();  // a plan point named as a launch moves too
  add_points(plan, {nt});
  std::vector<std::string> rest;
  for (const BenchPoint& p : plan)
    if (p.label() != nt.label() && p.label() != pointwise.label())
      rest.push_back(p.label());
  put_first(plan, {pointwise, nt});
  REQUIRE(plan.size() == rest.size() + 2);
  CHECK(plan[0].label() == nt.label());  // gemm before pointwise: the plan's order among the moved
  CHECK(plan[1].label() == pointwise.label());
  for (std::size_t i = 0; i < rest.size(); ++i)
    CHECK(plan[i + 2].label() == rest[i]);
  for (std::size_t i = 0; i < plan.size(); ++i)
    CHECK(plan[i].id == static_cast<int>(i) + 1);
}

TEST_CASE("collection_points: the plan with a workload's launches, first or alone")
{
  const PlanOptions options{.quick = true, .gpus = 1, .only = {BenchOp::gemm, BenchOp::pointwise}};
  const auto plan = microbenchmark_plan(options);
  const BenchPoint nt = gemm_nt_launch();
  const std::vector<BenchPoint> extra = {nt, plan.back(), nt};  // a plan point named again, a launch twice

  auto with = plan;
  add_points(with, extra);
  const auto mixed = collection_points(options, extra, false, false).points;
  REQUIRE(mixed.size() == plan.size() + 1);
  for (std::size_t i = 0; i < mixed.size(); ++i)
    CHECK(mixed[i].label() == with[i].label());

  const auto first = collection_points(options, extra, true, false).points;
  REQUIRE(first.size() == mixed.size());
  CHECK(first[0].label() == nt.label());
  CHECK(first[1].label() == plan.back().label());

  CHECK(collection_points(options, extra, true, false).added == 1);  // the plan held the pointwise point already
  const auto alone_points = collection_points(options, extra, false, true);
  CHECK(alone_points.added == 2);
  const auto& alone = alone_points.points;
  REQUIRE(alone.size() == 2);  // each launch once, ordered by op (gemm before pointwise), ids from 1
  CHECK(alone[0].label() == nt.label());
  CHECK(alone[1].label() == plan.back().label());
  CHECK(alone[0].id == 1);
  CHECK(alone[1].id == 2);
}

