// ddlsim-run-cuda: runs one training iteration, given as a workload file, for real on the visible NVIDIA GPUs and
// writes the measured iteration times. `ddlsim execute --backend cuda` runs it in a child process per sweep point,
// so that a GPU failure on one point cannot take the sweep down. The only part of the backend that prints or
// chooses an exit code: 0 success; 1 failure (a bad workload file, no GPU, too few GPUs, a CUDA, cuBLAS, cuDNN or
// NCCL error, out of memory), and then no result file; 2 usage error, and --mpi in a build without MPI.
//
// With --mpi, one process per machine under mpirun: checks that every rank can start are agreed on first, so that
// all ranks stop together (exit 1) when one cannot; after that, a rank that fails prints its error, prefixed with
// its rank, and ends every rank with MPI_Abort (exit 1), so that none waits forever for it.
#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "common/Text.hpp"
#include "gpu/CommandLine.hpp"
#include "gpu/Provenance.hpp"
#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/CudaExecutor.hpp"
#include "sim/backends/cuda/MpiBootstrap.hpp"
#include "traces/TraceRecords.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

namespace {

using namespace ddlsim;
using gpu::UsageError;

constexpr int exit_ok        = 0;
constexpr int exit_failed    = 1;
constexpr int exit_usage     = 2;
constexpr int max_iterations = 1000000;
constexpr const char* prefix = "ddlsim-run-cuda: ";

const char* usage_text =
    R"(usage: ddlsim-run-cuda WORKLOAD.json -o RESULT.json [--warmup N] [--iterations N] [--map-devices]
                       [--cuda-graph] [--trace FILE.jsonl]
       mpirun -np RANKS [-H HOST1,HOST2,...] ddlsim-run-cuda WORKLOAD.json -o RESULT.json --mpi [options]

Runs one training iteration, given as a workload file (`ddlsim execute --backend cuda` writes one per sweep
point), for real on the visible NVIDIA GPUs: each compute task's kernels with cuBLAS and cuDNN at their real
shapes and dtype, transfers as peer-to-peer copies that overlap compute, collectives with NCCL; one host thread
per GPU, simulated device d on GPU d. Writes the wall time of each timed iteration and the most device memory
one GPU used to RESULT.json.

options:
  -o, --output FILE    the result file (required); an old one is removed first, and the new one appears only
                       once the run has succeeded
  --warmup N           untimed iterations first (default 1)
  --iterations N       timed iterations (default 5)
  --map-devices        run a workload with more devices than visible GPUs: device d on GPU d % GPUs, on its own
                       streams; collectives among devices that share a GPU are emulated with copies
  --cuda-graph         capture one iteration as a CUDA graph after the warm-up and replay it for the timed
                       ones: the GPU's time for the step without the host's cost of issuing each launch (one
                       device, compute only; with --trace, the traced iterations replay the graph too)
  --trace FILE.jsonl   after the timed iterations, run two more with CUPTI tracing (never while timing) and
                       write one trace record per launch (op, flop, bytes, dtype; point = task index + 1; its
                       span, and its kernels' busy time and count), as ddlsim-collect does, for `ddlsim
                       calibrate fit`; with --cuda-graph, one eager iteration so, then one record per
                       kernel of two graph replays in the order they ran (no launch named: the eager
                       iteration's kernel counts, in order, map them); without CUPTI, a warning and no trace
  --mpi                run across machines, one process (rank) per machine under mpirun: rank r runs devices
                       r*G .. (r+1)*G-1 on its G visible GPUs (every rank must see as many, and the workload
                       must have RANKS x G devices; not with --map-devices); NCCL communicators are bootstrapped
                       through MPI and transfers between ranks are ncclSend/ncclRecv. An iteration's time is its
                       slowest rank's; rank 0 writes RESULT.json, rank r > 0 writes --trace FILE as FILE.rank<r>.
                       Every rank needs the same WORKLOAD.json (a shared folder, or a copy on each machine)
  -h, --help           this text

exit status: 0 success; 1 a bad workload file, no GPU, too few GPUs, a CUDA, cuBLAS, cuDNN or NCCL error, with
--mpi on any rank (no result file then); 2 usage error, or --mpi in a build without MPI
)";

struct Args {
  bool help = false;
  bool mpi  = false;
  std::string workload;
  std::string output;
  std::string trace;
  backends::cuda::CudaRunOptions options;
};

int parse_count(const std::string& option, const std::string& text, int min)
{
  const std::optional<long> value =
      whole_number<long>(text, [](const std::string& t, std::size_t* used) { return std::stol(t, used); });
  if (!value || *value < min || *value > max_iterations)
    throw UsageError(option + ": expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max_iterations) + ", got '" + text + "'");
  return static_cast<int>(*value);
}

Args parse(int argc, char** argv)
{
  Args args;
  gpu::CommandLine line(argc, argv);
  args.options.command = line.command();
  while (line.next()) {
    const std::string& arg = line.arg();
    if (line.is("-o", "--output")) {
      args.output = line.file_value();
    } else if (line.is("--warmup")) {
      args.options.warmup = parse_count(arg, line.value(), 0);
    } else if (line.is("--iterations")) {
      args.options.iterations = parse_count(arg, line.value(), 1);
    } else if (line.is("--map-devices")) {
      args.options.map_devices = line.flag();
    } else if (line.is("--cuda-graph")) {
      args.options.cuda_graph = line.flag();
    } else if (line.is("--mpi")) {
      args.mpi = line.flag();
    } else if (line.is("--trace")) {
      args.trace         = line.file_value();
      args.options.trace = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      line.unknown_option();
    } else if (args.workload.empty()) {
      args.workload = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "' (one workload file per run)");
    }
  }
  args.help = line.help();
  if (args.help)
    return args;
  if (args.workload.empty())
    throw UsageError("a WORKLOAD.json file is required");
  if (args.output.empty())
    throw UsageError("-o RESULT.json is required");
  if (args.options.cuda_graph && args.options.warmup < 1)
    throw UsageError("--cuda-graph needs at least one warm-up iteration (the step is captured after them)");
  if (args.mpi && args.options.cuda_graph)
    throw UsageError("--cuda-graph is for one device on one GPU, not --mpi");
  if (args.mpi && args.options.map_devices)
    throw UsageError("--map-devices cannot be combined with --mpi (across machines, every device runs on a GPU of its "
                     "own)");
  // The outputs are removed before the run: they must not be the workload, nor each other.
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
  };
  if (same(args.output, args.workload) || (!args.trace.empty() && same(args.trace, args.workload)))
    throw UsageError("the output files must differ from the workload file");
  if (!args.trace.empty() && same(args.trace, args.output))
    throw UsageError("--trace and -o must name different files");
  return args;
}

// What went wrong, as one line after the prefix.
std::string error_text(const std::exception& e)
{
  if (dynamic_cast<const TraceError*>(&e) != nullptr)
    return e.what(); // names the file already
  if (dynamic_cast<const Error*>(&e) != nullptr)
    return std::string("error: ") + e.what();
  return std::string("internal error: ") + e.what();
}

std::string no_gpu_text(const gpu::VisibleGpus& visible)
{
  return visible.why_none() + "; nothing was run";
}

// FILE.jsonl on rank 0, FILE.jsonl.rank<r> on the others: one trace per rank, which may share a folder.
std::string rank_trace_path(const std::string& trace, int rank)
{
  return trace.empty() || rank == 0 ? trace : trace + ".rank" + std::to_string(rank);
}

// One line to stderr in one write: mpirun forwards the ranks' output as it comes, and would mix their pieces.
void say(const std::string& line)
{
  std::cerr << (line + '\n') << std::flush;
}

void print_summary(const Args& args, const backends::Workload& workload, const backends::cuda::CudaRunResult& result,
                   const std::string& trace)
{
  const backends::ExecutionResult& r = result.execution;
  char line[256];
  std::snprintf(line, sizeof line, "%zu timed iteration(s), median %.6g s (%.6g to %.6g s)", r.iterations_s.size(),
                r.median_s(), r.min_s(), r.max_s());
  std::string text = prefix + (workload.label.empty() ? args.workload : workload.label) + " on " + r.device + ": " +
                     line + "; wrote " + args.output;
  if (result.trace)
    text += " and " + std::to_string(result.trace->kernels.size()) + " kernel record(s) to " + trace;
  say(text);
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
  const gpu::VisibleGpus visible = gpu::visible_gpus();
  if (visible.count <= 0) {
    std::cerr << prefix << no_gpu_text(visible) << '\n';
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

  print_summary(args, workload, result, args.trace);
  return exit_ok;
}

// Everything that has to be the same on every rank for the ranks to plan alike, as one number (FNV-1a).
std::int64_t agreement_key(const backends::Workload& workload, const backends::cuda::CudaRunOptions& options)
{
  std::ostringstream text;
  backends::write_workload(workload, text);
  text << '\n' << options.warmup << ' ' << options.iterations;
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : text.str()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return static_cast<std::int64_t>(hash);
}

// One rank of an --mpi run.
int run_rank(const Args& args, backends::cuda::ProcessGroup& ranks)
{
  const int rank          = ranks.rank();
  const int size          = ranks.size();
  const std::string me    = prefix + ("rank " + std::to_string(rank) + ": ");
  const std::string trace = rank_trace_path(args.trace, rank);
  std::error_code ignored;
  if (rank == 0)
    std::filesystem::remove(args.output, ignored);
  if (!trace.empty())
    std::filesystem::remove(trace, ignored);

  // What each rank finds on its own, then agreed on: every rank stops at the same check, and cleanly.
  backends::Workload workload;
  bool read = true;
  try {
    workload = backends::read_workload(args.workload);
  } catch (const std::exception& e) {
    say(me + error_text(e));
    read = false;
  }
  if (ranks.max_over_ranks(read ? 0 : 1) != 0)
    return exit_failed; // the ranks that could not read it said why
  const std::int64_t key = agreement_key(workload, args.options);
  if (ranks.min_over_ranks(key) != ranks.max_over_ranks(key)) {
    if (rank == 0)
      say(prefix + std::string("the ranks read different workloads or iteration counts: with --mpi every rank "
                               "needs the same WORKLOAD.json and options"));
    return exit_failed;
  }
  const gpu::VisibleGpus visible = gpu::visible_gpus();
  if (visible.count <= 0)
    say(me + no_gpu_text(visible));
  const std::int64_t fewest = ranks.min_over_ranks(visible.count), most = ranks.max_over_ranks(visible.count);
  if (fewest <= 0)
    return exit_failed;
  if (fewest != most) {
    if (rank == 0)
      say(prefix + ("the ranks see from " + std::to_string(fewest) + " to " + std::to_string(most) +
                    " GPUs: with --mpi every rank must see as many (CUDA_VISIBLE_DEVICES can hide some)"));
    return exit_failed;
  }
  const std::int64_t gpus = static_cast<std::int64_t>(size) * visible.count;
  if (workload.devices != gpus) {
    if (rank == 0)
      say(prefix + ("the workload has " + std::to_string(workload.devices) + " devices, " + std::to_string(size) +
                    " rank(s) of " + std::to_string(visible.count) + " GPU(s) make " + std::to_string(gpus) +
                    ": with --mpi every device runs on a GPU of its own" +
                    (workload.devices % visible.count == 0
                         ? " (run it with mpirun -np " + std::to_string(workload.devices / visible.count) + ")"
                         : std::string())));
    return exit_failed;
  }

  // From here on a rank that fails ends them all: the others may be waiting for it inside NCCL or MPI.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0); // as in run()
  backends::cuda::CudaRunHooks hooks;
  hooks.on_warning_cb = [&](const std::string& message) { say(me + "warning: " + message); };
  hooks.on_failure_cb = [&](const std::string& message) {
    say(me + "error: " + message);
    ranks.abort(exit_failed);
  };
  backends::cuda::CudaRunResult result;
  try {
    result = backends::cuda::run_on_gpus(workload, args.options, hooks, &ranks);
  } catch (const std::exception& e) {
    say(me + error_text(e));
    ranks.abort(exit_failed);
  }

  // The last collective step: rank 0 writes the result only once every rank has written its trace.
  bool wrote = true;
  try {
    if (result.trace) {
      write_file_atomically(trace, "the trace records",
                            [&](std::ostream& out) { traces::write_jsonl(*result.trace, out); });
      if (rank > 0)
        say(me + "wrote " + std::to_string(result.trace->kernels.size()) + " kernel record(s) to " + trace);
    }
  } catch (const std::exception& e) {
    say(me + error_text(e));
    wrote = false;
  }
  if (ranks.max_over_ranks(wrote ? 0 : 1) != 0)
    return exit_failed;
  if (rank == 0) {
    try {
      write_file_atomically(args.output, "the execution result",
                            [&](std::ostream& out) { backends::write_execution_result(result.execution, out); });
    } catch (const std::exception& e) {
      say(me + error_text(e));
      return exit_failed;
    }
    print_summary(args, workload, result, trace);
  }
  return exit_ok;
}

int run_with_mpi(const Args& args, int& argc, char**& argv)
{
  if constexpr (!backends::cuda::mpi_built) {
    std::cerr << prefix << "this ddlsim-run-cuda was built without MPI (install libopenmpi-dev and rebuild)\n";
    return exit_usage;
  } else {
    std::unique_ptr<backends::cuda::ProcessGroup> mpi;
    try {
      mpi = std::make_unique<backends::cuda::MpiBootstrap>(argc, argv);
    } catch (const Error& e) {
      std::cerr << prefix << "error: " << e.what() << '\n';
      return exit_failed;
    }
    try {
      return run_rank(args, *mpi);
    } catch (const std::exception& e) { // out of memory, say: not worth a check of its own, but no hang either
      say(prefix + ("rank " + std::to_string(mpi->rank()) + ": ") + error_text(e));
      mpi->abort(exit_failed);
    }
    return exit_failed; // not reached: abort() does not return, but GCC does not see it through the virtual call
  }
}

} // namespace

int main(int argc, char** argv)
{
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << prefix << e.what() << " (see ddlsim-run-cuda --help)\n";
    return exit_usage;
  }
  if (args.help) {
    std::cout << usage_text;
    return exit_ok;
  }
  if (args.mpi)
    return run_with_mpi(args, argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << prefix << error_text(e) << '\n';
  }
  return exit_failed;
}
