// ddlsim execute: every point simulated and run for real, side by side (experiments/CrossCheck.hpp).
#include "cli/Commands.hpp"
#include "common/Error.hpp"
#include "ddlsim/config.hpp"
#include "experiments/CrossCheck.hpp"
#include "experiments/Experiment.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ddlsim::cli {

namespace {

struct ExecuteArgs {
  std::string file, backend;
  std::optional<std::string> output, launcher, prepare;
  std::optional<int> warmup, iterations; ///< unset: the backend's default (torch 2 and 3, else 1 and 5)
  std::vector<std::string> sets;
  experiments::CrossCheckOptions options;
  experiments::ColumnSelection columns;
  bool quiet = false;
};

int cmd_execute(const ExecuteArgs& a)
{
  experiments::CrossCheckOptions options = a.options;
  if (a.launcher) {
    std::istringstream words(*a.launcher);
    for (std::string word; words >> word;)
      options.launcher.push_back(word);
  }
  options.backend    = a.backend == "host"   ? experiments::Backend::host
                       : a.backend == "cuda" ? experiments::Backend::cuda
                                             : experiments::Backend::torch;
  const bool torch   = options.backend == experiments::Backend::torch;
  options.warmup     = a.warmup.value_or(torch ? 2 : 1); // torch: as ../shared/data/pytorch-h200/README.md times
  options.iterations = a.iterations.value_or(torch ? 3 : 5);
  if (options.map_devices && !options.launcher.empty())
    throw UsageError{"--map-devices and --launcher do not go together: under MPI every device needs its own GPU"};
  const bool cuda_only = options.map_devices || !options.launcher.empty() || options.cuda_graph;
  if (options.backend != experiments::Backend::cuda && cuda_only)
    throw UsageError{"--map-devices, --launcher and --cuda-graph are for --backend cuda"};
  if (torch && options.scale != 1)
    throw UsageError{"--scale is for --backend host and cuda: the torch backend runs the model's own layers"};
  if (!torch && options.python != "python3")
    throw UsageError{"--python is for --backend torch"};
  if (options.cuda_graph && (options.map_devices || !options.launcher.empty()))
    throw UsageError{"--cuda-graph replays one device's step on one GPU: not with --map-devices or --launcher"};
  if ((a.prepare || !options.measured_dir.empty()) && options.backend == experiments::Backend::host)
    throw UsageError{"--prepare and --measured are for --backend cuda and torch"};
  if (a.prepare && !options.measured_dir.empty())
    throw UsageError{"--prepare writes the workloads that --measured reads back later: give one of them"};
  if (a.prepare || !options.measured_dir.empty()) {
    if (!options.launcher.empty() || options.map_devices || options.cuda_graph)
      throw UsageError{"--launcher, --map-devices and --cuda-graph are for the machine that runs ddlsim-run-cuda"};
  } else if (options.backend == experiments::Backend::cuda) {
    std::error_code ec;
    const auto runner = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "ddlsim-run-cuda";
    if (ec || !std::filesystem::exists(runner))
      throw Error("execute --backend cuda needs ddlsim-run-cuda, which is built only with the CUDA toolkit (" +
                  std::string(config::have_cuda ? "this build found CUDA, but " + runner.string() + " is missing"
                                                : "this build found none: put nvcc on PATH and reconfigure") +
                  ")");
    options.cuda_runner = runner.string();
  }
  const auto exp    = experiments::Experiment::load(a.file, a.sets);
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  if (a.prepare) {
    options.work_dir                       = *a.prepare;
    const std::vector<std::string> written = experiments::prepare_workloads(points, options);
    if (torch)
      fmt::print("{}: {} point(s) of {}; in that folder run each with python3 run_point.py point-<i>.json "
                 "measured-<i>.json (sim/backends/torch/), then execute --measured {}\n",
                 *a.prepare, written.size(), points.size(), *a.prepare);
    else
      fmt::print("{}: {} workload(s) of {} point(s); run each with ddlsim-run-cuda FILE -o measured-<i>.json in "
                 "that folder, then execute --measured {}\n",
                 *a.prepare, written.size(), points.size(), *a.prepare);
    return written.empty() ? exit_bad_input : exit_ok;
  }
  const std::string csv =
      a.output ? *a.output : exp.output_csv().value_or("results/" + exp.get_name() + "-" + a.backend + ".csv");
  const std::filesystem::path path(csv);
  options.work_dir = (path.parent_path() / (path.stem().string() + ".work")).string();
  std::filesystem::create_directories(options.work_dir);
  if (!a.quiet)
    options.on_status = [](const std::string& line) { fmt::print(stderr, "ddlsim: {}\n", line); };
  const experiments::CrossCheck result = experiments::cross_check(points, options);
  experiments::write_csv(csv, result.rows, a.columns);
  fmt::print("{}: {} points ({}); simulated vs measured on {}: mean absolute error {:.2f}% over {} points\n", csv,
             result.rows.size(), status_counts(result.rows),
             a.backend == "host" ? "the host"
             : torch             ? "PyTorch"
                                 : "the GPUs",
             result.mean_abs_error_pct, result.compared);
  if (!result.profile_path.empty())
    fmt::print("host profile (measured in this run): {}\n", result.profile_path);
  return result.compared > 0 ? exit_ok : exit_bad_input;
}

} // namespace

void add_execute_command(CommandTable& table)
{
  CLI::App& root = table.root();
  auto c =
      table.add<ExecuteArgs>(root, "execute", "simulate every point and run it for real, side by side", cmd_execute);
  auto& a = c.args;
  c.app->footer("The CSV has measured_iteration_time_s and error_pct next to the simulated columns; the mean "
                "absolute error is printed. docs/execute.md");
  add_experiment(c.app, a.file);
  c.app
      ->add_option("--backend", a.backend,
                   "host: CPU threads, calibrated on this machine in the same run; cuda: the GPUs, through "
                   "ddlsim-run-cuda (built with CUDA); torch: real PyTorch training steps of the model (DDP "
                   "when dp > 1), on the GPU PyTorch sees or the CPU")
      ->required()
      ->check(CLI::IsMember({"host", "cuda", "torch"}))
      ->type_name("host|cuda|torch");
  add_output(c.app, a.output, "the CSV (default: the experiment's, else results/NAME-BACKEND.csv)");
  cli::add_int(c.app, "--iterations", a.iterations, 1, 10000,
               "timed iterations per point (default 5; torch 3), median reported");
  cli::add_int(c.app, "--warmup", a.warmup, 0, 10000, "untimed iterations first (default 1; torch 2)");
  c.app->add_option("--python", a.options.python, "torch: the Python interpreter with PyTorch (default python3)")
      ->type_name("CMD");
  c.app
      ->add_option_function<std::string>(
          "--scale",
          [&a](const std::string& f) {
            char* end       = nullptr;
            a.options.scale = std::strtod(f.c_str(), &end);
            if (end == f.c_str() || *end != '\0' || !(a.options.scale > 0) || a.options.scale > 1)
              throw CLI::ValidationError("--scale must be a number in (0, 1], not '" + f + "'");
          },
          "run every kernel at F of its rows (0 < F <= 1), simulated and executed alike: a large model's step "
          "shrunk to fit this machine")
      ->type_name("F");
  cli::add_int(c.app, "-j,--jobs", a.options.jobs, 1, 1024, "parallel simulations (executions run one at a time)");
  add_sets(c.app, a.sets);
  add_columns(c.app, a.columns);
  c.app->add_flag("--cuda-graph", a.options.cuda_graph,
                  "cuda: time each step as one CUDA graph replay (no host cost per launch; one device, compute "
                  "only)");
  c.app->add_flag("--map-devices", a.options.map_devices,
                  "cuda: run more simulated devices than GPUs on the GPUs there are");
  c.app
      ->add_option("--launcher", a.launcher,
                   "cuda, several machines: start the runner with CMD (e.g. \"mpirun -np 2 -H node1,node2\"); "
                   "NCCL is then bootstrapped through MPI")
      ->type_name("\"CMD\"");
  c.app
      ->add_option("--prepare", a.prepare,
                   "cuda, torch: only write each point's workload (DIR/workload-<i>.json) or point "
                   "(DIR/point-<i>.json), for ddlsim-run-cuda or run_point.py on a GPU machine without ddlsim "
                   "(docs/gpu.md, docs/execute.md)")
      ->type_name("DIR");
  c.app
      ->add_option("--measured", a.options.measured_dir,
                   "cuda, torch: take each point's times from DIR/measured-<i>.json, which ddlsim-run-cuda or "
                   "run_point.py wrote for DIR/workload-<i>.json or DIR/point-<i>.json, instead of running")
      ->type_name("DIR");
  c.app->add_flag("--quiet", a.quiet, "no progress lines");
}

} // namespace ddlsim::cli
