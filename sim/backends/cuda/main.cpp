// ddlsim-run-cuda: runs one training iteration, given as a workload file, for real on the visible NVIDIA GPUs and
// writes the measured iteration times. `ddlsim execute --backend cuda` runs it in a child process per sweep point,
// so that a GPU failure on one point cannot take the sweep down. The only part of the backend that prints or
// chooses an exit code: 0 success; 1 failure (a bad workload file, no GPU, too few GPUs, a CUDA, cuBLAS, cuDNN or
// NCCL error, out of memory), and then no result file; 2 usage error.
#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/CudaExecutor.hpp"
#include "traces/TraceRecords.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

namespace {

using namespace ddlsim;

constexpr int exit_ok        = 0;
constexpr int exit_failed    = 1;
constexpr int exit_usage     = 2;
constexpr int max_iterations = 1000000;
constexpr const char* prefix = "ddlsim-run-cuda: ";

const char* usage_text =
    R"(usage: ddlsim-run-cuda WORKLOAD.json -o RESULT.json [--warmup N] [--iterations N] [--map-devices]
                       [--trace FILE.jsonl]

Runs one training iteration, given as a workload file (`ddlsim execute --backend cuda` writes one per sweep
point), for real on the visible NVIDIA GPUs: each compute task's kernels with cuBLAS and cuDNN at their real
shapes and dtype, transfers as peer-to-peer copies that overlap compute, collectives with NCCL; one host thread
per GPU, simulated device d on GPU d. Writes the wall time of each timed iteration to RESULT.json.

options:
  -o, --output FILE    the result file (required); an old one is removed first, and the new one appears only
                       once the run has succeeded
  --warmup N           untimed iterations first (default 1)
  --iterations N       timed iterations (default 5)
  --map-devices        run a workload with more devices than visible GPUs: device d on GPU d % GPUs, on its own
                       streams; collectives among devices that share a GPU are emulated with copies
  --trace FILE.jsonl   record the timed iterations' kernels with CUPTI and write one trace record per launch
                       (op, flop, bytes, dtype; point = task index + 1), as ddlsim-collect does, for
                       `ddlsim calibrate fit`; without CUPTI, a warning and no trace
  -h, --help           this text

exit status: 0 success; 1 a bad workload file, no GPU, too few GPUs, a CUDA, cuBLAS, cuDNN or NCCL error (no
result file then); 2 usage error
)";

struct UsageError {
  std::string message;
};

struct Args {
  bool help = false;
  std::string workload;
  std::string output;
  std::string trace;
  backends::cuda::CudaRunOptions options;
};

int parse_count(const std::string& option, const std::string& text, int min)
{
  std::size_t used = 0;
  long value       = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < min || value > max_iterations)
    throw UsageError{option + ": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max_iterations) + ", got '" + text + "'"};
  return static_cast<int>(value);
}

Args parse(int argc, char** argv)
{
  Args args;
  for (int i = 0; i < argc; ++i)
    args.options.command += (i > 0 ? " " : "") + std::string(argv[i]);

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value; // --name=value
    if (arg.rfind("--", 0) == 0) {
      if (const std::size_t eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg          = arg.substr(0, eq);
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value)
        return *inline_value;
      if (i + 1 >= argc)
        throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    auto no_value = [&] {
      if (inline_value)
        throw UsageError{arg + " takes no value"};
    };
    if (arg == "-h" || arg == "--help") {
      no_value();
      args.help = true;
    } else if (arg == "-o" || arg == "--output") {
      args.output = value();
      if (args.output.empty())
        throw UsageError{arg + " needs a file name"};
    } else if (arg == "--warmup") {
      args.options.warmup = parse_count(arg, value(), 0);
    } else if (arg == "--iterations") {
      args.options.iterations = parse_count(arg, value(), 1);
    } else if (arg == "--map-devices") {
      no_value();
      args.options.map_devices = true;
    } else if (arg == "--trace") {
      args.trace = value();
      if (args.trace.empty())
        throw UsageError{arg + " needs a file name"};
      args.options.trace = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError{"unknown option '" + arg + "'"};
    } else if (args.workload.empty()) {
      args.workload = arg;
    } else {
      throw UsageError{"unexpected argument '" + arg + "' (one workload file per run)"};
    }
  }
  if (args.help)
    return args;
  if (args.workload.empty())
    throw UsageError{"a WORKLOAD.json file is required"};
  if (args.output.empty())
    throw UsageError{"-o RESULT.json is required"};
  // The outputs are removed before the run: they must not be the workload, nor each other.
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
  };
  if (same(args.output, args.workload) || (!args.trace.empty() && same(args.trace, args.workload)))
    throw UsageError{"the output files must differ from the workload file"};
  if (!args.trace.empty() && same(args.trace, args.output))
    throw UsageError{"--trace and -o must name different files"};
  return args;
}

int run(const Args& args)
{
  // A result left by an earlier run must not pass for this one's if it fails.
  std::error_code ignored;
  std::filesystem::remove(args.output, ignored);
  if (!args.trace.empty())
    std::filesystem::remove(args.trace, ignored);

  const backends::Workload workload = backends::read_workload(args.workload); // TraceError naming the file

  // Checked here, before anything else touches CUDA, so that a machine without a GPU gets one plain line.
  const backends::cuda::GpuCount visible = backends::cuda::count_visible_gpus();
  if (visible.count <= 0) {
    std::cerr << prefix << "no CUDA GPU is visible ("
              << (visible.error.empty() ? "cudaGetDeviceCount found none" : visible.error) << "); nothing was run\n";
    return exit_failed;
  }
  if (workload.devices > visible.count && !args.options.map_devices) {
    std::cerr << prefix << "the workload needs " << workload.devices << " GPUs, " << visible.count
              << (visible.count == 1 ? " is" : " are") << " visible (--map-devices runs them on " << visible.count
              << ")\n";
    return exit_failed;
  }

  // NCCL connects its communicators at creation rather than at their first collective, which could fall in a
  // timed iteration (--warmup 0). A value the user set wins.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  backends::cuda::CudaRunHooks hooks;
  hooks.on_warning_cb = [](const std::string& message) { std::cerr << prefix << "warning: " << message << '\n'; };
  const backends::cuda::CudaRunResult result = backends::cuda::run_on_gpus(workload, args.options, hooks);

  if (result.trace)
    write_file_atomically(args.trace, "the trace records",
                          [&](std::ostream& out) { traces::write_jsonl(*result.trace, out); });
  write_file_atomically(args.output, "the execution result",
                        [&](std::ostream& out) { backends::write_execution_result(result.execution, out); });

  const backends::ExecutionResult& r = result.execution;
  char line[256];
  std::snprintf(line, sizeof line, "%zu timed iteration(s), median %.6g s (%.6g to %.6g s)", r.iterations_s.size(),
                r.median_s(), r.min_s(), r.max_s());
  std::cerr << prefix << (workload.label.empty() ? args.workload : workload.label) << " on " << r.device << ": " << line
            << "; wrote " << args.output;
  if (result.trace)
    std::cerr << " and " << result.trace->kernels.size() << " kernel record(s) to " << args.trace;
  std::cerr << '\n';
  return exit_ok;
}

} // namespace

int main(int argc, char** argv)
{
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << prefix << e.message << " (see ddlsim-run-cuda --help)\n";
    return exit_usage;
  }
  if (args.help) {
    std::cout << usage_text;
    return exit_ok;
  }
  try {
    return run(args);
  } catch (const TraceError& e) {
    std::cerr << prefix << e.what() << '\n';
  } catch (const Error& e) {
    std::cerr << prefix << "error: " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << prefix << "internal error: " << e.what() << '\n';
  }
  return exit_failed;
}
