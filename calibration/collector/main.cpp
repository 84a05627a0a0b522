// ddlsim-collect: times the microbenchmark plan on this machine's CUDA GPUs and writes JSON-lines trace
// records for `ddlsim calibrate fit`. The only part of the collector that prints or chooses an exit code:
//   0 success, 1 nothing measured (no GPU, a GPU failure, CUPTI refused under --timing cupti, the file could
//   not be written), 2 usage error.
#include "calibration/Microbench.hpp"
#include "calibration/collector/Collector.hpp"
#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "common/Text.hpp"
#include "gpu/CommandLine.hpp"
#include "gpu/CudaCheck.hpp"
#include "gpu/CuptiTracer.hpp"
#include "gpu/Provenance.hpp"
#include "sim/backends/Workload.hpp"
#include "traces/TraceRecords.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ddlsim;
using calibration::BenchOp;
using gpu::UsageError;

constexpr int exit_ok        = 0;
constexpr int exit_failed    = 1;
constexpr int exit_usage     = 2;
constexpr const char* prefix = "ddlsim-collect: ";

const char* usage_text =
    R"(usage: ddlsim-collect [--quick] [--only OP[,OP...]] [--gpus N] [--timing auto|cupti|events]
                      [--workload FILE]... [--provenance KEY=VALUE]... [--time-limit SECONDS]
                      [--workloads-first | --workloads-only] [--l2 cold|warm] -o FILE
       ddlsim-collect --plan [--quick] [--only OP[,OP...]] [--gpus N] [--workload FILE]...
                      [--workloads-first | --workloads-only]

Times the microbenchmark plan (GEMMs, attention-shaped batched GEMMs, the model zoo's convolutions, a
memory-bound kernel, memory copies, NCCL collectives) on the visible CUDA GPUs, with CUPTI, and writes one
JSON-lines trace record per timed run, for `ddlsim calibrate fit`.

options:
  -o, --output FILE    the JSON-lines file to write (required unless --plan); it appears only once complete
  --quick              the quick plan, minutes on one GPU (default: the full plan)
  --only OP[,OP...]    only these ops: gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h,
                       collective
  --gpus N             GPUs the collectives run over, 1 to 8 (default: every visible GPU, at most 8)
  --timing MODE        auto: CUPTI, else CUDA events (default); cupti: CUPTI or fail; events: CUDA events
                       (kernels and copies; collectives are always timed on the host, as nccl-tests)
  --workload FILE      also time every distinct launch of this workload (`ddlsim execute --backend cuda`
                       writes them), at its exact shape, layout and dtype: the step's own kernels; repeatable
  --provenance K=V     add K: V to the records' provenance (e.g. commit=abc123); repeatable
  --time-limit S       start no point after S seconds of measuring: the records so far are written and the
                       points not run are counted in the provenance (default: no limit)
  --workloads-first    time the workloads' launches before the plan's points
  --workloads-only     time the workloads' launches only, not the plan (--quick and --only then do nothing)
  --l2 MODE            cold: every timed run starts with none of its operands in the L2 (default); warm: every
                       run reuses one set of operands, in the L2 when they fit, as a kernel finds the
                       activation the kernel before it wrote
  --plan               print the plan, one point per line: id, label, flop, bytes (tab-separated), and exit
                       without touching a GPU; the collectives assume --gpus GPUs (default 1)
  -h, --help           this text
)";

struct Args {
  bool help = false;
  bool plan = false;
  std::string output;
  std::vector<std::string> workloads;
  collector::CollectOptions options;
};

std::vector<BenchOp> parse_ops(const std::string& list)
{
  constexpr BenchOp all[] = {BenchOp::gemm,     BenchOp::batched_gemm, BenchOp::conv2d,   BenchOp::pointwise,
                             BenchOp::copy_d2d, BenchOp::copy_h2d,     BenchOp::copy_d2h, BenchOp::collective};
  std::vector<BenchOp> out;
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    const std::string name  = list.substr(from, comma - from);
    std::optional<BenchOp> op;
    for (BenchOp candidate : all)
      if (name == calibration::bench_op_name(candidate))
        op = candidate;
    if (!op)
      throw UsageError("--only: unknown op '" + name +
                       "' (gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h, collective)");
    out.push_back(*op);
    from = comma + 1;
  }
  return out;
}

Args parse(int argc, char** argv)
{
  Args args;
  gpu::CommandLine line(argc, argv);
  args.options.command = line.command();
  while (line.next()) {
    if (line.is("--plan")) {
      args.plan = line.flag();
    } else if (line.is("--quick")) {
      args.options.plan.quick = line.flag();
    } else if (line.is("-o", "--output")) {
      args.output = line.file_value();
    } else if (line.is("--workload")) {
      args.workloads.push_back(line.file_value());
    } else if (line.is("--provenance")) {
      const std::string v  = line.value();
      const std::size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError("--provenance: expected KEY=VALUE, got '" + v + "'");
      args.options.provenance[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (line.is("--only")) {
      args.options.plan.only = parse_ops(line.value());
    } else if (line.is("--gpus")) {
      const std::string v = line.value();
      const std::optional<int> n =
          whole_number<int>(v, [](const std::string& t, std::size_t* used) { return std::stoi(t, used); });
      if (!n || *n < 1 || *n > 8)
        throw UsageError("--gpus: expected a number of GPUs from 1 to 8, got '" + v + "'");
      args.options.gpus = *n;
    } else if (line.is("--workloads-only")) {
      args.options.extra_points_only = line.flag();
    } else if (line.is("--l2")) {
      const std::string v = line.value();
      if (v != "cold" && v != "warm")
        throw UsageError("--l2: expected cold or warm, got '" + v + "'");
      args.options.warm_l2 = v == "warm";
    } else if (line.is("--workloads-first")) {
      args.options.extra_points_first = line.flag();
    } else if (line.is("--time-limit")) {
      const std::string v = line.value();
      const std::optional<double> s =
          whole_number<double>(v, [](const std::string& t, std::size_t* used) { return std::stod(t, used); });
      if (!s || !(*s > 0))
        throw UsageError("--time-limit: expected a positive number of seconds, got '" + v + "'");
      args.options.time_limit_s = *s;
    } else if (line.is("--timing")) {
      const std::string v = line.value();
      if (v == "auto")
        args.options.timing = collector::Timing::automatic;
      else if (v == "cupti")
        args.options.timing = collector::Timing::cupti;
      else if (v == "events")
        args.options.timing = collector::Timing::events;
      else
        throw UsageError("--timing: expected auto, cupti or events, got '" + v + "'");
    } else if (line.arg().rfind("-", 0) == 0) {
      line.unknown_option();
    } else {
      throw UsageError("unexpected argument '" + line.arg() + "'");
    }
  }
  args.help = line.help();
  if (args.options.extra_points_only && args.workloads.empty())
    throw UsageError("--workloads-only needs at least one --workload FILE");
  if (args.options.extra_points_only && args.options.extra_points_first)
    throw UsageError("--workloads-only and --workloads-first exclude each other");
  args.options.plan_name = args.options.extra_points_only ? "none (the workloads' launches only)"
                           : args.options.plan.quick      ? "quick"
                                                          : "full";
  return args;
}

// Every distinct compute launch of the workload files, in order. Throws TraceError naming a bad file.
void read_extra_points(Args& args)
{
  for (const std::string& file : args.workloads) {
    const backends::Workload w = backends::read_workload(file);
    for (const backends::WorkTask& t : w.tasks)
      for (const calibration::BenchPoint& p : t.launches)
        args.options.extra_points.push_back(p);
    args.options.extra_points_source += (args.options.extra_points_source.empty() ? "" : ", ") + file;
  }
}

// The plan as --plan prints it; no CUDA call.
void print_plan(const collector::CollectOptions& options)
{
  calibration::PlanOptions plan = options.plan;
  plan.gpus                     = options.gpus > 0 ? options.gpus : 1;
  const std::vector<calibration::BenchPoint> points =
      calibration::collection_points(plan, options.extra_points, options.extra_points_first, options.extra_points_only)
          .points;
  for (const calibration::BenchPoint& p : points)
    std::printf("%d\t%s\t%.10g\t%.10g\n", p.id, p.label().c_str(), p.flop(), p.traffic_bytes());
}

int run(const Args& args)
{
  // Checked here, before anything else touches CUDA, so that a machine without a GPU gets one plain line.
  const gpu::VisibleGpus visible = gpu::visible_gpus();
  if (visible.count <= 0) {
    std::cerr << prefix << visible.why_none() << "; nothing was measured\n";
    return exit_failed;
  }
  collector::CollectHooks hooks;
  hooks.on_start_cb = [](int points, int gpus, const std::string& timing) {
    std::cerr << prefix << points << " points on " << gpus << " GPU(s), timing: " << timing << '\n';
  };
  hooks.on_warning_cb    = [](const std::string& message) { std::cerr << prefix << "warning: " << message << '\n'; };
  hooks.on_group_done_cb = [](const collector::GroupSummary& g) {
    char line[160];
    std::snprintf(line, sizeof line, "%s: %d points, %.1f s", calibration::bench_op_name(g.op), g.points, g.seconds);
    std::cerr << line;
    if (g.skipped > 0)
      std::cerr << ", " << g.skipped << " skipped";
    std::cerr << '\n';
  };

  const collector::CollectResult result = collector::collect(args.options, hooks);
  const traces::TraceSet& set           = result.traces;
  if (set.kernels.empty() && set.collectives.empty()) {
    std::cerr << prefix << "no point could be measured (" << result.skipped_points << " skipped); " << args.output
              << " was not written\n";
    return exit_failed;
  }
  write_file_atomically(args.output, "the trace records", [&](std::ostream& out) { traces::write_jsonl(set, out); });
  std::cerr << prefix << "wrote " << set.kernels.size() << " kernel and " << set.collectives.size()
            << " collective record(s) of " << result.points - result.skipped_points - result.points_not_run << " point(s) to " << args.output
            << " (" << result.skipped_points << " skipped, " << result.points_not_run
            << " not run; timing: " << result.timing << ")\n";
  return exit_ok;
}

} // namespace

int main(int argc, char** argv)
{
  Args args;
  try {
    args = parse(argc, argv);
    if (!args.help && !args.plan && args.output.empty())
      throw UsageError("-o FILE is required (or --plan to print the plan)");
  } catch (const UsageError& e) {
    std::cerr << prefix << e.what() << " (see ddlsim-collect --help)\n";
    return exit_usage;
  }
  if (args.help) {
    std::cout << usage_text;
    return exit_ok;
  }
  try {
    read_extra_points(args);
    if (args.plan) {
      print_plan(args.options);
      return exit_ok;
    }
    return run(args);
  } catch (const gpu::CuptiUnavailable& e) {
    std::cerr << prefix << "CUPTI cannot trace here: " << e.what()
              << "; nothing was measured (--timing auto falls back to CUDA events)\n";
  } catch (const gpu::DeviceFailed& e) {
    std::cerr << prefix << "error: " << e.what() << "; nothing was written\n";
  } catch (const Error& e) {
    std::cerr << prefix << "error: " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << prefix << "internal error: " << e.what() << '\n';
  }
  return exit_failed;
}
