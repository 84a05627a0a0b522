#include "experiments/CrossCheck.hpp"

#include "experiments/ChakraWorkload.hpp"

#include "calibration/ProfileFit.hpp"
#include "calibration/TableCostModel.hpp"
#include "common/AtomicFile.hpp"
#include "common/Child.hpp"
#include "common/DataPath.hpp"
#include "common/Error.hpp"
#include "sim/Schedules.hpp"
#include "sim/backends/FromTaskGraph.hpp"
#include "sim/backends/HostBackend.hpp"
#include "sim/backends/HostOps.hpp"
#include "sim/backends/TorchPoint.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace ddlsim::experiments {
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;

// The workload of a valid point: its TaskGraph with every compute task's kernels, and each device's memory as the
// memory model holds it at that device's peak (what the CSV's peak_memory_bytes reports for the largest).
backends::Workload point_workload(const PointConfig& point, double scale)
{
  const auto cost = calibration::make_cost_model(point.profile);
  PointPlan plan = plan_point(point, *cost);
  for (auto& stage : plan.pipeline.stages)
    stage.activation_bytes *= scale;  // as evaluate_point does
  const sim::TaskGraph graph = sim::build_schedule(plan.pipeline);
  backends::Workload w =
      backends::make_workload(graph, point.model,
                              {.dtype = point.training.dtype, .optimizer = point.training.optimizer,
                               .recompute = point.training.recompute, .tp = point.parallelism.tp, .scale = scale},
                              point.experiment + " point " + std::to_string(point.index));
  // Device d holds pipeline rank d / (devices / pp), as the timeline's memory counters count it.
  const int pp = std::max<int>(1, static_cast<int>(plan.stage_memory.size()));
  const int per_rank = std::max(1, w.devices / pp);
  for (int d = 0; d < w.devices && !plan.stage_memory.empty(); ++d) {
    const models::MemoryBreakdown& m = plan.stage_memory[static_cast<std::size_t>(std::min(d / per_rank, pp - 1))];
    w.memory.push_back({.weights = m.weights, .gradients = m.gradients, .optimizer_state = m.optimizer_state,
                        .activations = m.activations, .workspace = m.workspace, .reserve = m.reserve});
  }
  return w;
}

std::string read_text(const std::string& path)
{
  std::ifstream in(path);
  if (!in)
    throw ExecutionError(path + ": cannot read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `work` in a child process (common/Child.hpp) and returns what it wrote; an exception, a crash or a
// non-zero exit becomes ExecutionError with the reason. (fork: the parent runs no threads, and a failing run must
// not take the sweep down.)
std::string run_point_in_child(const std::function<std::string()>& work)
{
  const ChildOutput child = run_in_child([&]() -> std::string {
    try {
      return "ok\n" + work();
    } catch (const std::exception& e) {
      return std::string("error\n") + e.what();
    } catch (...) {
      return "error\nan unknown exception";
    }
  });
  const std::string& output = child.text;
  const int status          = child.status;
  if (output.rfind("ok\n", 0) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return output.substr(3);
  if (output.rfind("error\n", 0) == 0)
    throw ExecutionError(output.substr(6));
  if (WIFSIGNALED(status))
    throw ExecutionError(std::string("the run died of signal ") + std::to_string(WTERMSIG(status)) + " (" +
                         strsignal(WTERMSIG(status)) + ")");
  throw ExecutionError("the run exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
}

// Runs `args` (args[0] found on PATH) in `cwd` (empty: here), its output into `log` (empty: ours), and returns its
// status as waitpid gives it. The program dies with us (SIGTERM: a launcher can stop its own children).
int run_program(std::vector<std::string> args, const std::string& cwd, const std::string& log)
{
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw ExecutionError("cannot fork to run " + args.front());
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (!log.empty()) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0)
        ::_exit(126);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The point as the torch backend runs it: data parallelism only. Throws ExecutionError naming the key it cannot
// run. Its profiler trace goes to torch-trace-<i>.json in the folder run_point.py runs in.
backends::TorchPoint torch_point(const PointConfig& p, std::size_t i, const CrossCheckOptions& o)
{
  const ParallelismSpec& par = p.parallelism;
  if (par.ps)
    throw ExecutionError("parallelism.ps: the torch backend all-reduces gradients (DDP); it runs no parameter servers");
  for (const auto& [key, value] : {std::pair<std::string, int>{"parallelism.pp", par.pp}, {"parallelism.tp", par.tp},
                                   {"parallelism.cp", par.cp}, {"parallelism.ep", par.ep}})
    if (value > 1)
      throw ExecutionError(key + " = " + std::to_string(value) +
                           ": the torch backend runs data parallelism only (DDP over dp ranks); set it to 1");
  if (shards_optimizer(par.zero))
    throw ExecutionError("parallelism.zero = " + std::to_string(zero_level(par.zero)) +
                         ": the torch backend runs DDP without sharding (no ZeRO/FSDP); set it to 0");
  if (p.training.recompute != models::Recompute::none)
    throw ExecutionError("training.recompute = " + std::string(models::recompute_table.name(p.training.recompute)) +
                         ": the torch backend keeps every activation; set it to none");
  if (p.training.dtype == Dtype::fp8)
    throw ExecutionError("training.dtype = fp8: PyTorch's autocast has no fp8 (that needs Transformer Engine)");
  return {.label           = p.experiment + " point " + std::to_string(p.index),
          .global_batch    = p.training.global_batch,
          .micro_batch     = p.training.micro_batch,
          .dtype           = p.training.dtype,
          .optimizer       = p.training.optimizer,
          .dp              = par.dp,
          .dp_bucket_bytes = par.dp_bucket,
          .warmup          = o.warmup,
          .iterations      = o.iterations,
          .trace           = "torch-trace-" + std::to_string(i) + ".json",
          .compile         = p.training.framework == sim::Framework::pytorch_compile,
          .cuda_graphs     = p.training.cuda_graphs};
}

std::string torch_point_text(const PointConfig& p, std::size_t i, const CrossCheckOptions& o)
{
  std::ostringstream out;
  backends::write_torch_point(p.model, torch_point(p, i, o), out);
  return out.str();
}

// Why a run of run_point.py failed, from its log: its own one-line reason, a missing PyTorch, or the log's end.
std::string torch_failure(const std::string& log, int status, const std::string& python)
{
  std::ifstream in(log);
  std::string line, reason, last;
  bool no_torch = false;
  while (std::getline(in, line)) {
    if (const auto at = line.find("run_point.py: "); at != std::string::npos)
      reason = line.substr(at + 14);
    no_torch = no_torch || line.find("No module named 'torch'") != std::string::npos;
    if (line.find_first_not_of(" \t") != std::string::npos)
      last = line;
  }
  if (!reason.empty())
    return reason;
  if (no_torch)
    return python + " has no PyTorch (No module named 'torch'): name an interpreter that has it with --python";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return "cannot run " + python + ": name the interpreter with PyTorch with --python";
  return python + " failed" + (last.empty() ? std::string() : ": " + last) + " (the run's output: " + log + ")";
}

// Runs point i with run_point.py in `dir` (dp ranks when dp > 1) and reads what it measured.
backends::ExecutionResult execute_torch(const PointConfig& point, std::size_t i, const CrossCheckOptions& o,
                                        const std::filesystem::path& dir)
{
  const std::filesystem::path script = data_dir() / "sim" / "backends" / "torch" / "run_point.py";
  if (!std::filesystem::exists(script))
    throw ExecutionError(script.string() + " is missing (DDLSIM_DATA_DIR names the source tree that has it)");
  const std::string text = torch_point_text(point, i, o);
  const std::filesystem::path folder = std::filesystem::absolute(dir);
  const std::string index = std::to_string(i);
  const std::string point_file = (folder / ("point-" + index + ".json")).string();
  const std::string out = (folder / ("measured-" + index + ".json")).string();
  const std::string log = (folder / ("torch-" + index + ".log")).string();
  write_file_atomically(point_file, "the torch point", [&](std::ostream& f) { f << text; });
  std::filesystem::remove(out);
  std::filesystem::remove(folder / ("torch-trace-" + index + ".json"));
  // dp > 1: dp ranks with torchrun's environment, started by launch_ranks.py (Debian's torchrun does not start on
  // Python 3.11), each joining the DDP process group.
  std::vector<std::string> args{o.python};
  if (point.parallelism.dp > 1)
    for (const std::string& a : {(script.parent_path() / "launch_ranks.py").string(), std::string("--nproc-per-node"),
                                 std::to_string(point.parallelism.dp)})
      args.push_back(a);
  for (const std::string& a : {script.string(), point_file, out})
    args.push_back(a);
  const int status = run_program(args, folder.string(), log);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !std::filesystem::exists(out))
    throw ExecutionError(torch_failure(log, status, o.python));
  return backends::parse_execution_result(read_text(out), out);
}

// Bytes per second of a large memcpy, and the one-way latency of handing a message to another thread.
std::pair<double, double> host_links()
{
  std::vector<char> from(64 << 20, 1), to(64 << 20, 0);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), from.size());
    rates.push_back(static_cast<double>(from.size()) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(rates.begin(), rates.end());
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  constexpr int rounds = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread other([&] {
    for (int r = 0; r < rounds; ++r) {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return turn == 1; });
      turn = 0;
      cv.notify_all();
    }
  });
  for (int r = 0; r < rounds; ++r) {
    std::unique_lock lock(m);
    turn = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return turn == 0; });
  }
  other.join();
  const double latency = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / (2.0 * rounds);
  return {rates[rates.size() / 2], latency};
}

struct HostSetup {
  calibration::CalibrationProfile profile;
  sim::ClusterSpec cluster;
  std::string profile_path;
};

// Measures this machine's kernels (every distinct one the points launch, and a grid) and links.
HostSetup calibrate_host(const std::vector<PointConfig>& points, const CrossCheckOptions& options)
{
  auto status = [&](const std::string& s) {
    if (options.on_status)
      options.on_status(s);
  };
  std::vector<BenchPoint> plan;
  std::map<std::string, bool> seen;
  auto add = [&](BenchPoint p) {
    if (seen.emplace(p.label(), true).second) {
      p.id = static_cast<int>(plan.size()) + 1;
      plan.push_back(std::move(p));
    }
  };
  for (long long m : {16, 64, 256, 1024})
    for (long long n : {16, 64, 256, 1024})
      for (long long k : {16, 64, 256, 1024}) {
        BenchPoint p;
        p.op = BenchOp::gemm;
        p.dtype = "fp32";
        p.m = m;
        p.n = n;
        p.k = k;
        add(p);
      }
  for (double bytes = 4096; bytes <= 64.0 * 1024 * 1024; bytes *= 4) {
    BenchPoint p;
    p.op = BenchOp::pointwise;
    p.dtype = "fp32";
    p.bytes = bytes;
    add(p);
  }
  int devices = 1;
  for (const auto& point : points) {
    if (!point.is_valid())
      continue;
    devices = std::max(devices, point.cluster.gpu_count());
    try {
      for (const auto& task : point_workload(point, options.scale).tasks)
        for (const auto& launch : task.launches)
          add(launch);
    } catch (const std::exception&) {
      // The simulation reports what is wrong with this point.
    }
  }
  status("host calibration: timing " + std::to_string(plan.size()) + " kernels");
  // Timed with every device's core busy, as the executions will keep them.
  const traces::TraceSet records =
      backends::time_points(plan, {.warmup = 1, .min_repeats = 5, .max_repeats = 30, .min_seconds = 0.03}, devices);
  const auto [bandwidth, latency] = host_links();

  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const std::filesystem::path dir = std::filesystem::path(options.work_dir.empty() ? std::string("results") : options.work_dir);
  const std::string records_path = (dir / "host-records.jsonl").string();
  write_file_atomically(records_path, "the host records", [&](std::ostream& out) { traces::write_jsonl(records, out); });
  // The host's own measurements of every kernel it will run: the tables carry the exact shapes, and the
  // roofline only prices the rest, so a loose roofline (a loaded machine) is kept rather than refused.
  calibration::FitResult fit = calibration::fit_profile(calibration::load_profile("host-cpu"), records,
                                                        {.name = "host-measured", .base = "host-cpu", .sources = records_path,
                                                         .command = "ddlsim execute --backend host", .date = date,
                                                         .accept_poor_fit = true});
  HostSetup setup;
  setup.profile = std::move(fit.profile);
  setup.profile.provenance["host_copy_bandwidth_B_per_s"] = std::to_string(bandwidth);
  setup.profile.provenance["host_handoff_latency_s"] = std::to_string(latency);
  setup.profile_path = (dir / "host-profile.yaml").string();
  write_file_atomically(setup.profile_path, "the host profile", [&](std::ostream& out) { calibration::write_profile(setup.profile, out); });

  sim::ClusterSpec& c = setup.cluster;
  c.name = "host";
  c.description = backends::host_description();
  c.nodes = 1;
  c.gpus_per_node = devices;
  c.gpu_name = backends::host_description();
  c.gpu_memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  c.intra_node = {.bandwidth = bandwidth, .latency = latency};
  c.intra_link = sim::IntraLink::host;  // threads, not NCCL: collectives at the measured links
  c.nics_per_node = 1;
  c.nic = {.bandwidth = bandwidth, .latency = latency};
  status("host calibration: " + std::to_string(setup.profile.kernel_tables.size()) + " tables, copies at " +
         std::to_string(bandwidth / 1e9) + " GB/s, hand-off " + std::to_string(latency * 1e6) + " us");
  return setup;
}

}  // namespace

std::vector<std::string> prepare_workloads(const std::vector<PointConfig>& points, const CrossCheckOptions& options)
{
  const std::filesystem::path dir(options.work_dir.empty() ? std::string("results") : options.work_dir);
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!points[i].is_valid())
      continue;
    const bool torch = options.backend == Backend::torch;
    const std::string file = (dir / ((torch ? "point-" : "workload-") + std::to_string(i) + ".json")).string();
    try {
      if (torch) {
        const std::string text = torch_point_text(points[i], i, options);
        write_file_atomically(file, "the torch point", [&](std::ostream& o) { o << text; });
      } else {
        const backends::Workload w = point_workload(points[i], options.scale);
        write_file_atomically(file, "the workload", [&](std::ostream& o) { backends::write_workload(w, o); });
      }
      written.push_back(file);
    } catch (const ExecutionError&) {
      // A point the backend does not run (tensor parallelism, parameter servers): `execute` reports it.
    }
  }
  return written;
}

CrossCheck cross_check(std::vector<PointConfig> points, const CrossCheckOptions& options)
{
  for (const PointConfig& p : points)
    if (p.chakra)
      throw Error(chakra_refusal("execute"));
  CrossCheck result;
  const std::string backend = options.backend == Backend::host   ? "host"
                              : options.backend == Backend::cuda ? "cuda"
                                                                 : "torch";
  if (options.backend == Backend::host) {
    for (auto& p : points)
      p.training.dtype = Dtype::fp32;  // the host computes in fp32
    HostSetup setup = calibrate_host(points, options);
    for (auto& p : points) {
      p.profile = setup.profile;
      p.calibration_label = setup.profile_path;
      const int gpus = p.cluster.gpu_count();
      p.cluster = setup.cluster;
      p.cluster.gpus_per_node = gpus;
      p.cluster_label = "host";
    }
    result.profile_path = setup.profile_path;
  }
  if (options.on_status)
    options.on_status("simulating " + std::to_string(points.size()) + " points");
  result.rows = run_sweep(points, {.jobs = options.jobs, .evaluate = {.replay = {}, .trace_dir = {}, .trace_view = {}, .work_scale = options.scale, .on_workload = {}},
                                   .on_progress = {}, .on_row = {}});

  double total_error = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    ResultRow& row = result.rows[i];
    row.set("backend", backend);
    if (!row.is_ok())
      continue;
    const PointConfig& point = points[i];
    if (options.on_status)
      options.on_status("executing point " + std::to_string(i) + " of " + std::to_string(points.size()));
    try {
      backends::ExecutionResult measured;
      if (options.backend == Backend::host) {
        const std::string text = run_point_in_child([&] {
          std::ostringstream out;
          backends::write_execution_result(
              backends::execute_on_host(point_workload(point, options.scale),
                                        {.warmup = options.warmup, .iterations = options.iterations}),
              out);
          return out.str();
        });
        measured = backends::parse_execution_result(text, "host run of point " + std::to_string(i));
      } else if (options.backend == Backend::torch && !options.measured_dir.empty()) {
        // Measured elsewhere (a machine with PyTorch): the point run there must be this one.
        const std::filesystem::path dir(options.measured_dir);
        const std::string file = (dir / ("point-" + std::to_string(i) + ".json")).string();
        const std::string out = (dir / ("measured-" + std::to_string(i) + ".json")).string();
        if (read_text(file) != torch_point_text(point, i, options))
          throw ExecutionError(file + " is not this point's (the experiment, the options or ddlsim changed since it "
                               "was prepared): prepare and measure again");
        measured = backends::parse_execution_result(read_text(out), out);
      } else if (options.backend == Backend::torch) {
        measured = execute_torch(point, i, options,
                                 options.work_dir.empty() ? std::string("results") : options.work_dir);
      } else if (!options.measured_dir.empty()) {
        // Measured elsewhere (a GPU machine without ddlsim): the workload run there must be this point's.
        const std::filesystem::path dir(options.measured_dir);
        const std::string workload = (dir / ("workload-" + std::to_string(i) + ".json")).string();
        const std::string out = (dir / ("measured-" + std::to_string(i) + ".json")).string();
        std::ostringstream expected;
        backends::write_workload(point_workload(point, options.scale), expected);
        if (read_text(workload) != expected.str())
          throw ExecutionError(workload + " is not this point's workload (the experiment, the profile's partition or "
                               "ddlsim changed since it was prepared): prepare and measure again");
        measured = backends::parse_execution_result(read_text(out), out);
      } else {
        const std::filesystem::path dir = std::filesystem::path(options.work_dir.empty() ? std::string("results") : options.work_dir);
        const std::string workload = (dir / ("workload-" + std::to_string(i) + ".json")).string();
        const std::string out = (dir / ("measured-" + std::to_string(i) + ".json")).string();
        const std::string trace = (dir / ("trace-" + std::to_string(i) + ".jsonl")).string();
        write_file_atomically(workload, "the workload",
                              [&](std::ostream& o) { backends::write_workload(point_workload(point, options.scale), o); });
        std::filesystem::remove(out);
        const std::string runner = options.cuda_runner;
        const std::string warmup = std::to_string(options.warmup), iterations = std::to_string(options.iterations);
        const std::string text = run_point_in_child([&]() -> std::string {
          std::vector<std::string> args = options.launcher;
          for (const std::string& a : {runner, workload, std::string("-o"), out, std::string("--warmup"), warmup,
                                       std::string("--iterations"), iterations, std::string("--trace"), trace})
            args.push_back(a);
          if (options.map_devices)
            args.push_back("--map-devices");
          if (options.cuda_graph)
            args.push_back("--cuda-graph");
          if (!options.launcher.empty())
            args.push_back("--mpi");
          const int status = run_program(args, {}, {});  // the runner, or the launcher found on PATH
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            throw ExecutionError(runner + " failed (see its message above)");
          std::ifstream in(out);
          std::stringstream s;
          s << in.rdbuf();
          return s.str();
        });
        measured = backends::parse_execution_result(text, out);
      }
      const double sim   = row.number("iteration_time_s").value_or(std::nan("")); // an ok row has one
      const double real = measured.median_s();
      const double batch = static_cast<double>(point.training.global_batch);
      const double error = 100.0 * (sim - real) / real;
      row.set("device", measured.device);
      row.set("measured_iteration_time_s", real);
      row.set("measured_min_s", measured.min_s());
      row.set("measured_max_s", measured.max_s());
      row.set("measured_throughput_samples_per_s", batch / real);
      row.set("error_pct", error);
      if (measured.peak_memory_bytes > 0)
        row.set("measured_peak_memory_bytes", measured.peak_memory_bytes);
      std::string notes;  // what the backend changed or shared: mapped devices, fp32 on the host, ...
      for (const auto& n : measured.notes)
        notes += (notes.empty() ? "" : "; ") + n;
      row.set("message", notes);
      total_error += std::abs(error);
      ++result.compared;
    } catch (const std::exception& e) {
      row.set("status", std::string("error"));
      row.set("message", std::string("execution failed: ") + e.what());
    }
  }
  result.mean_abs_error_pct = result.compared ? total_error / result.compared : 0.0;
  return result;
}

}  // namespace ddlsim::experiments
