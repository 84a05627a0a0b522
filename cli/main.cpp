// ddlsim: the command-line front end. A thin layer over the libraries: it parses arguments,
// calls them, prints, and is the only place that chooses an exit code.
//   0 success, 1 bad input (the message names file:line and key), 2 usage error.
#include "calibration/Profile.hpp"
#include "calibration/ProfileFit.hpp"
#include "cli/MpiSweep.hpp"
#include "cli/Plot.hpp"
#include "cli/Progress.hpp"
#include "common/AtomicFile.hpp"
#include "common/DataPath.hpp"
#include "common/Dtype.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"
#include "ddlsim/config.hpp"
#include "experiments/Bench.hpp"
#include "experiments/CrossCheck.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Search.hpp"
#include "experiments/SweepRunner.hpp"
#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"
#include "traces/Json.hpp"
#include "traces/NcclTestsImporter.hpp"
#include "traces/TraceRecords.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace ddlsim;

constexpr int exit_ok = 0;
constexpr int exit_bad_input = 1;
constexpr int exit_usage = 2;

const char* usage_text = R"(usage: ddlsim <command> [options]

Simulates distributed deep-learning training on a SimGrid model of a GPU cluster.

commands:
  run EXPERIMENT.yaml        simulate every point of the experiment's sweep and write one CSV
      -o, --output FILE      CSV path (default: the file's output.csv, else results/<name>.csv)
      -j, --jobs N           simulate N points at once, one process each (default 1)
      --set KEY=VALUE        override a key, e.g. --set training.micro_batch=4 (repeatable);
                             --set sweep.KEY=[v1,v2] replaces a sweep axis
      --trace-dir DIR        write a Chrome-trace timeline per point (open in Perfetto) and
                             a per-device CSV next to it
      --quiet                no progress or summary on stderr
      --plot                 also draw the experiment's figure (output.plot, a script of plots/)
                             next to the CSV as .png, with a python3 that has matplotlib
      --resume               keep the rows of the CSV already at -o that belong to this sweep
                             (same point, same configuration) and simulate only the rest
      --shard I/N            only the points whose index mod N is I (0 <= I < N), for job arrays;
                             join the parts with `ddlsim merge`
      --point-timeout S      kill a point still simulating after S seconds: an `error` row, and
                             the sweep goes on (a crashing point is an `error` row too)
      --mpi                  under mpirun: the ranks share the points, rank 0 writes the CSV
                             (built when MPI is found: libopenmpi-dev)
      --cfg=NAME:VALUE       pass a setting to SimGrid (repeatable)
      --log=SETTING          pass a log setting to SimGrid (repeatable)
  search microbatch EXPERIMENT.yaml
                             the memory-aware micro-batch size search: per mini-batch (doubling
                             from the experiment's), the fastest micro-batch size and count against
                             GPipe's M = 4 x pp, and the largest trainable mini-batch of each
      -o, --output FILE      every point tried (default results/NAME-microbatch.csv)
      -j, --jobs N           parallel simulations
      --max-batch B          the largest mini-batch tried (default 16 x the experiment's)
      --set KEY=VALUE        as for run (the file must resolve to one point)
  search grid EXPERIMENT.yaml
                             every pp x tp (P_r) x dp (P_c) shape of the cluster's GPUs, ranked by
                             throughput, with pure data and pure model parallelism marked
      --no-pipeline          only pp = 1: the P_r x P_c grid
      -o, -j, --set          as for search microbatch (default CSV results/NAME-grid.csv)
                             (the experiment's cp, zero and sequence_parallel stay: dp = GPUs / (pp tp cp))
  search parallel EXPERIMENT.yaml
                             every tp x pp x dp x cp, ZeRO stage and micro-batch of the cluster for the
                             experiment's model and global batch: those that fit in memory ranked by a
                             closed form, the best simulated and ranked by throughput
      --top K                layouts simulated in full (default 16)
      --zero LIST            ZeRO stages tried, e.g. 1,3 (default 0,1,2,3)
      -o, -j, --set          as for search microbatch (default CSV results/NAME-parallel.csv)
  merge CSV... -o OUT.csv    join the CSVs of a sharded sweep: rows in point order, a point present
                             twice must agree; refuses CSVs of other ddlsim versions
  validate EXPERIMENT.yaml   check the file and every sweep point; print every problem and every
                             point that does not fit in GPU memory (its stage and largest term);
                             exit 1 on an out-of-memory point
      --allow-oom            report out-of-memory points but exit 0
      --set KEY=VALUE        as for run
  model MODEL                print a model's blocks (pipeline partition units) and totals
                             (shipped name or YAML path)
      --layers               one row per layer, with output shape and kernel shapes
      --dtype DTYPE          element type for the byte columns (default bf16)
      --list                 list the shipped model names
  bench SCENARIO             time a scenario (bench/*.yaml, a built-in one, or a path), by kind:
                             simulation: one simulated iteration's wall time, peak memory and
                               activity rate, next to a bare SimGrid DAG of the same size;
                             sweep: a whole sweep's points per second at -j N;
                             import: a synthetic Kineto trace through the importer, MB per second
  bench import TRACE...      the import rate of trace files (Kineto, nccl-tests; gzip or not)
      --list                 list the scenarios and their kinds
      --repeat N             median of N runs (default 1)
      -o, --output FILE      append the figures to a CSV (one row per scenario, units in the names)
      --no-compare           simulation: skip the bare SimGrid DAG
      -j, --jobs N           sweep: points simulated at once (default 1)
      --trace-size BYTES     import: the synthetic trace's JSON size, e.g. 4MB (default 64MB)
  execute EXPERIMENT.yaml    simulate every point and run it for real, side by side: CSV with
                             measured_iteration_time_s and error_pct, and the mean absolute error
      --backend host|cuda    host: CPU threads, calibrated on this machine in the same run;
                             cuda: the GPUs, through ddlsim-run-cuda (built with CUDA)
      -o, --output FILE      the CSV (default: the experiment's, else results/NAME-BACKEND.csv)
      --iterations N         timed iterations per point (default 5), median reported
      --warmup N             untimed iterations first (default 1)
      --scale F              run every kernel at F of its rows (0 < F <= 1), simulated and executed
                             alike: a large model's step shrunk to fit this machine
      -j, --jobs N           parallel simulations (executions run one at a time)
      --set KEY=VALUE        as for run
      --map-devices          cuda: run more simulated devices than GPUs on the GPUs there are
      --launcher "CMD"       cuda, several machines: start the runner with CMD (e.g. "mpirun -np 2
                             -H node1,node2"); NCCL is then bootstrapped through MPI
      --quiet                no progress lines
  calibrate collect          time the microbenchmarks (GEMMs, batched GEMMs, cuDNN convolutions,
                             memory-bound kernels, copies, NCCL collectives) on this machine's
                             GPUs with CUPTI; runs ddlsim-collect (built when CUDA is found)
      --quick                a subset that takes minutes on one GPU
      --only OP[,OP...]      gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d,
                             copy_d2h, collective
      --gpus N               GPUs for the collectives (default: all visible, at most 8)
      --timing MODE          auto (CUPTI, CUDA events if CUPTI is unavailable), cupti, events
      --plan                 print the points and exit (no GPU needed)
      -o, --output FILE      the JSON-lines file to write
  calibrate import FILE...   import PyTorch profiler (Kineto) traces and nccl-tests output (text
                             or -J JSON), gzipped or not, into calibration records (kernels,
                             collectives with their sizes)
      -o, --output FILE      the JSON-lines file to write (required)
  calibrate fit TRACES.jsonl... --base PROFILE -o profile.yaml [--name NAME]
                             a measured profile: collectives as alpha-beta size regimes,
                             microbenchmark ops as lookup tables, roofline efficiencies; peaks
                             and bandwidth come from PROFILE
  calibrate report PROFILE   a profile's parameters, provenance and fit quality (R^2, errors)
  help                       this text

options:
  -h, --help                 this text
  --version                  version, git commit and SimGrid version

exit codes: 0 ok, 1 bad input (file:line: key: message), 2 usage error
)";

struct UsageError {
  std::string message;
};

// A strict argument reader: every option must be known, values are "--opt value" or "--opt=value".
class Args {
public:
  Args(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool done() const { return pos_ >= args_.size(); }
  const std::string& peek() const { return args_[pos_]; }
  std::string next() { return args_[pos_++]; }
  /// The whole command line, for provenance.
  std::string command_line() const
  {
    std::string out = "ddlsim";
    for (const auto& a : args_)
      out += " " + a;
    return out;
  }
  // If the current argument is `name` (or `name=...`), consumes it and returns its value.
  std::optional<std::string> option(const std::string& name, const std::string& short_name = "")
  {
    const std::string& a = args_[pos_];
    if (a == name || (!short_name.empty() && a == short_name)) {
      if (pos_ + 1 >= args_.size())
        throw UsageError{a + " needs a value"};
      pos_ += 2;
      return args_[pos_ - 1];
    }
    if (!short_name.empty() && a.size() > short_name.size() && a.rfind(short_name, 0) == 0) {
      ++pos_;  // attached short form: -j2, -oresults.csv
      return a.substr(short_name.size());
    }
    if (a.rfind(name + "=", 0) == 0) {
      ++pos_;
      return a.substr(name.size() + 1);
    }
    return std::nullopt;
  }
  bool flag(const std::string& name)
  {
    if (args_[pos_] == name) {
      ++pos_;
      return true;
    }
    return false;
  }

private:
  std::vector<std::string> args_;
  std::size_t pos_ = 0;
};

int parse_int(const std::string& text, const std::string& what, int min, int max)
{
  try {
    std::size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size() && v >= min && v <= max)
      return v;
  } catch (const std::exception&) {
  }
  throw UsageError{what + " expects an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], not '" +
                   text + "'"};
}

void print_diagnostics(const std::vector<Diagnostic>& diagnostics)
{
  std::set<std::string> seen;  // the same problem repeats in every sweep point
  for (const auto& d : diagnostics) {
    std::string line = d.to_string();
    if (seen.insert(line).second)
      std::cerr << "error: " << line << '\n';
  }
}

// True, after printing every point's problems, when no point can be simulated: that is bad input,
// and nothing is written.
bool nothing_valid(const std::vector<experiments::PointConfig>& points)
{
  for (const auto& p : points)
    if (p.is_valid())
      return false;
  for (const auto& p : points)
    print_diagnostics(p.problems);
  return true;
}

std::string axis_text(const experiments::Experiment& exp, std::size_t index)
{
  std::string text;
  for (const auto& [key, value] : exp.axis_values(index))
    text += (text.empty() ? "" : ", ") + key + "=" + value;
  return text;
}

int cmd_validate(Args& args)
{
  std::optional<std::string> file;
  std::vector<std::string> sets;
  bool allow_oom = false;
  while (!args.done()) {
    if (auto v = args.option("--set"))
      sets.push_back(*v);
    else if (args.flag("--allow-oom"))
      allow_oom = true;
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for validate: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"validate takes one experiment file"};
  }
  if (!file)
    throw UsageError{"validate needs an experiment file"};
  const auto exp = experiments::Experiment::load(*file, sets);
  const auto points = exp.points();
  std::size_t valid = 0, oom = 0;
  for (const auto& p : points) {
    if (p.is_valid()) {
      ++valid;
      // Memory is checked as `run` would, without simulating: partition and memory model only.
      if (const auto verdict = experiments::check_memory(p); !verdict.fits()) {
        ++oom;
        std::cerr << "oom point " << p.index << " (" << axis_text(exp, p.index) << "): " << verdict.message << '\n';
      }
      continue;
    }
    for (const auto& d : p.problems)
      std::cerr << "invalid point " << p.index << " (" << axis_text(exp, p.index) << "): " << d.to_string() << '\n';
  }
  std::cout << *file << ": " << points.size() << " point(s), " << valid << " valid (" << oom
            << " of them out of memory), " << points.size() - valid << " invalid\n";
  if (valid == 0) {
    if (points.size() == 1)
      print_diagnostics(points[0].problems);
    return exit_bad_input;
  }
  return oom > 0 && !allow_oom ? exit_bad_input : exit_ok;
}

int cmd_run(Args& args)
{
  std::optional<std::string> file;
  std::optional<std::string> output;
  std::vector<std::string> sets;
  experiments::SweepOptions options;
  bool quiet = false;
  bool resume = false, mpi = false, plot = false;
  int shard_index = 0, shard_count = 1;
  while (!args.done()) {
    if (auto v = args.option("--output", "-o"))
      output = *v;
    else if (args.flag("--plot"))
      plot = true;
    else if (auto j = args.option("--jobs", "-j"))
      options.jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (auto s = args.option("--set"))
      sets.push_back(*s);
    else if (auto d = args.option("--trace-dir"))
      options.evaluate.trace_dir = *d;
    else if (args.peek().rfind("--cfg=", 0) == 0)
      options.evaluate.replay.simgrid_config.push_back(args.next().substr(6));
    else if (args.peek().rfind("--log=", 0) == 0)
      options.evaluate.replay.simgrid_log.push_back(args.next().substr(6));
    else if (args.flag("--quiet"))
      quiet = true;
    else if (args.flag("--resume"))
      resume = true;
    else if (args.flag("--mpi"))
      mpi = true;
    else if (auto t = args.option("--point-timeout")) {
      char* end = nullptr;
      options.point_timeout_s = std::strtod(t->c_str(), &end);
      if (end == t->c_str() || *end != '\0' || !(options.point_timeout_s > 0))
        throw UsageError{"--point-timeout needs a positive number of seconds, not '" + *t + "'"};
    }
    else if (auto shard = args.option("--shard")) {
      const auto slash = shard->find('/');
      if (slash == std::string::npos)
        throw UsageError{"--shard expects I/N, e.g. --shard 0/4"};
      shard_count = parse_int(shard->substr(slash + 1), "--shard N", 1, 1 << 20);
      shard_index = parse_int(shard->substr(0, slash), "--shard I", 0, shard_count - 1);
    } else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for run: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"run takes one experiment file"};
  }
  if (!file)
    throw UsageError{"run needs an experiment file"};

  const auto exp = experiments::Experiment::load(*file, sets);
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const std::string csv = output ? *output : exp.output_csv().value_or("results/" + exp.get_name() + ".csv");

  const bool show_progress = !quiet && ::isatty(STDERR_FILENO) != 0;
  std::optional<cli::ProgressLine> progress;  // over this rank's points (set once they are known)
  if (show_progress)
    options.on_progress = [&](std::size_t done, std::size_t) { progress->sweep(done); };
  // Under MPI each rank takes every size-th point of the shard, and rank 0 writes the CSV.
  cli::MpiWorld world;
  if (mpi)
    world = cli::mpi_start();
  // This shard's points; with --resume, the rows the CSV already holds for them are kept.
  std::vector<experiments::PointConfig> todo;
  std::vector<std::size_t> todo_index;  // into `points`
  std::map<std::size_t, experiments::ResultRow> done;  // by point index
  std::vector<std::size_t> todo_elsewhere;  // under MPI: points other ranks simulate
  std::size_t to_simulate = 0;
  std::vector<experiments::ResultRow> previous;
  if (resume && std::filesystem::exists(csv))
    previous = experiments::read_csv(csv);
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(shard_count)) != shard_index)
      continue;
    const experiments::ResultRow fresh = experiments::describe_point(points[i]);
    auto kept = std::find_if(previous.begin(), previous.end(),
                             [&](const experiments::ResultRow& r) { return experiments::same_point(r, fresh); });
    if (kept != previous.end()) {
      done.emplace(i, *kept);
      continue;
    }
    // Every rank counts the same points to simulate, so they agree on who takes which.
    if (static_cast<int>(to_simulate++ % static_cast<std::size_t>(world.size)) == world.rank) {
      todo.push_back(points[i]);
      todo_index.push_back(i);
    } else {
      todo_elsewhere.push_back(i);
    }
  }
  auto rows_so_far = [&] {
    std::vector<experiments::ResultRow> rows;
    for (const auto& [i, row] : done)
      rows.push_back(row);
    return rows;
  };
  // Rewritten atomically as rows arrive (at most every checkpoint_s seconds), so that a killed
  // sweep leaves a valid CSV of what it finished, for --resume.
  const char* every = std::getenv("DDLSIM_CHECKPOINT_SECONDS");
  const double checkpoint_s = every ? std::atof(every) : 2.0;
  auto last_write = std::chrono::steady_clock::now();
  options.on_row = [&](std::size_t k, const experiments::ResultRow& row) {
    done.emplace(todo_index[k], row);
    if (progress)
      progress->finished(todo_index[k]);
    const auto now = std::chrono::steady_clock::now();
    if (!mpi && std::chrono::duration<double>(now - last_write).count() >= checkpoint_s) {
      experiments::write_csv(csv, rows_so_far());
      last_write = now;
    }
  };
  if (!todo.empty()) {
    // Test hook (tests/cli/test_cli_progress.py): DDLSIM_PROGRESS_AFTER_SECONDS=S shows points from S.
    const char* after = std::getenv("DDLSIM_PROGRESS_AFTER_SECONDS");
    progress.emplace(stderr, todo.size(), after ? std::atof(after) : 2.0);
    experiments::PointProgressCallback on_point;
    if (show_progress)
      on_point = [&](std::size_t k, const experiments::PointProgress& p) { progress->point(todo_index[k], p); };
    experiments::run_sweep(todo, options, on_point);
  }
  if (mpi) {
    std::map<std::size_t, std::string> mine;
    for (std::size_t i : todo_index)
      mine[i] = done.at(i).serialize();
    const auto gathered = cli::mpi_gather(mine, world);
    cli::mpi_stop();
    if (world.rank != 0)
      return exit_ok;  // rank 0 writes the CSV
    for (const auto& [i, text] : gathered)
      if (auto row = experiments::ResultRow::deserialize(text))
        done.emplace(i, std::move(*row));
    for (std::size_t i : todo_elsewhere)
      if (!done.count(i))
        throw Error("MPI: no row came back for point " + std::to_string(i));
  }
  const auto rows = rows_so_far();
  experiments::write_csv(csv, rows);

  if (!quiet) {
    std::map<std::string, int> counts;
    for (const auto& r : rows)
      ++counts[r.get("status")];
    std::string summary;
    for (const auto& [status, n] : counts)
      summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    std::cerr << "ddlsim: wrote " << rows.size() << " row(s) (" << summary << ") to " << csv;
    if (rows.size() > todo.size() + todo_elsewhere.size())
      std::cerr << "; " << rows.size() - todo.size() - todo_elsewhere.size() << " kept from the earlier run";
    if (shard_count > 1)
      std::cerr << "; shard " << shard_index << "/" << shard_count << " of " << points.size() << " points";
    if (mpi)
      std::cerr << "; " << world.size << " MPI ranks";
    std::cerr << '\n';
  }
  if (plot) {
    const std::string png = std::filesystem::path(csv).replace_extension(".png").string();
    cli::draw_plot(exp.output_plot(), csv, png);
    std::cout << png << '\n';
  }
  return exit_ok;
}

// The arguments of a command that takes input files and -o OUTPUT and nothing else.
void files_and_output(Args& args, const std::string& command, std::vector<std::string>& files,
                      std::optional<std::string>& output)
{
  while (!args.done()) {
    if (auto o = args.option("--output", "-o"))
      output = *o;
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for " + command + ": " + args.peek()};
    else
      files.push_back(args.next());
  }
}

// search grid: every pp x tp x dp shape of the cluster's GPUs, ranked (experiments/Search.hpp).
int cmd_search_grid(Args& args)
{
  std::optional<std::string> file, output;
  std::vector<std::string> sets;
  experiments::GridSearchOptions options;
  while (!args.done()) {
    if (auto o = args.option("--output", "-o"))
      output = *o;
    else if (auto j = args.option("--jobs", "-j"))
      options.jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (args.flag("--no-pipeline"))
      options.pipeline = false;
    else if (auto v = args.option("--set"))
      sets.push_back(*v);
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for search grid: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"search grid takes one experiment file"};
  }
  if (!file)
    throw UsageError{"search grid needs an experiment file"};
  const auto exp = experiments::Experiment::load(*file, sets);
  if (exp.point_count() != 1)
    throw UsageError{"search grid searches one configuration: fix the swept keys with --set (the file has " +
                     std::to_string(exp.point_count()) + " points)"};
  const experiments::PointConfig base = exp.point(0);
  // The experiment's context parallelism, ZeRO stage and sequence parallelism stay: the grid is
  // the cluster's GPUs over cp, written as pp x tp x dp.
  const int gpus = base.cluster.gpu_count() / base.parallelism.cp;
  auto make_point = [&](int pp, int tp, int dp) {
    std::vector<std::string> shape = sets;
    shape.push_back("parallelism.pp=" + std::to_string(pp));
    shape.push_back("parallelism.tp=" + std::to_string(tp));
    shape.push_back("parallelism.dp=" + std::to_string(dp));
    return experiments::Experiment::load(*file, shape).point(0);
  };
  const experiments::GridSearch search = experiments::search_grid(gpus, make_point, options);
  const std::string csv = output ? *output : "results/" + exp.get_name() + "-grid.csv";
  experiments::write_csv(csv, search.rows);
  std::printf("grid search: %s on %s (%d GPUs), %s; pp x tp (P_r) x dp (P_c) = %d%s\n", base.model_label.c_str(),
              base.cluster_label.c_str(), base.cluster.gpu_count(),
              std::string(sim::schedule_table.name(base.parallelism.schedule)).c_str(), gpus,
              base.parallelism.cp > 1 ? (" (x cp " + std::to_string(base.parallelism.cp) + ")").c_str() : "");
  std::printf("%5s %5s %5s %5s %14s %10s %16s %14s %10s  %s\n", "rank", "pp", "tp", "dp", "samples/s", "vs best",
              "comm_bytes/GPU", "exposed_comm_s", "memory", "");
  const double best = search.ranking.empty() ? 0 : std::stod(search.rows[search.ranking.front()].get("throughput_samples_per_s"));
  auto label = [&](const experiments::ResultRow& row) {
    const int pp = std::stoi(row.get("pp")), tp = std::stoi(row.get("tp")), dp = std::stoi(row.get("dp"));
    if (dp == gpus)
      return "pure data parallel";
    if (tp == gpus)
      return "pure model parallel (tensor)";
    if (pp == gpus)
      return "pure model parallel (pipeline)";
    return "";
  };
  int rank = 0;
  for (std::size_t r : search.ranking) {
    const auto& row = search.rows[r];
    const double t = std::stod(row.get("throughput_samples_per_s"));
    std::printf("%5d %5s %5s %5s %14.6g %9.1f%% %16.4g %14.4g %7.1fGiB  %s\n", ++rank, row.get("pp").c_str(), row.get("tp").c_str(),
                row.get("dp").c_str(), t, 100 * (t / best - 1), std::stod(row.get("comm_bytes_per_gpu")),
                std::stod(row.get("exposed_comm_time_s")), std::stod(row.get("peak_memory_bytes")) / (1024.0 * 1024 * 1024),
                label(row));
  }
  std::size_t others = 0;
  for (const auto& row : search.rows)
    if (row.get("status") != "ok") {
      ++others;
      std::printf("%5s %5s %5s %5s %14s  %s\n", "-", row.get("pp").c_str(), row.get("tp").c_str(), row.get("dp").c_str(),
                  row.get("status").c_str(), label(row));
    }
  std::printf("%zu shapes, %zu ok; every shape: %s\n", search.rows.size(), search.rows.size() - others, csv.c_str());
  return exit_ok;
}

// search parallel: every layout of the cluster, screened, the best simulated (experiments/Search.hpp).
int cmd_search_parallel(Args& args)
{
  std::optional<std::string> file, output;
  std::vector<std::string> sets;
  experiments::ParallelSearchOptions options;
  while (!args.done()) {
    if (auto o = args.option("--output", "-o"))
      output = *o;
    else if (auto j = args.option("--jobs", "-j"))
      options.jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (auto t = args.option("--top"))
      options.top = static_cast<std::size_t>(parse_int(*t, "--top", 1, 100000));
    else if (auto z = args.option("--zero")) {
      options.zero_stages.clear();
      std::stringstream in(*z);
      for (std::string stage; std::getline(in, stage, ',');)
        options.zero_stages.push_back(parse_int(stage, "--zero", 0, 3));
    } else if (auto v = args.option("--set"))
      sets.push_back(*v);
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for search parallel: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"search parallel takes one experiment file"};
  }
  if (!file)
    throw UsageError{"search parallel needs an experiment file"};
  const auto exp = experiments::Experiment::load(*file, sets);
  if (exp.point_count() != 1)
    throw UsageError{"search parallel searches one configuration: fix the swept keys with --set (the file has " +
                     std::to_string(exp.point_count()) + " points)"};
  const experiments::PointConfig base = exp.point(0);
  auto make_point = [&](const experiments::ParallelLayout& l) {
    std::vector<std::string> layout = sets;
    layout.push_back("parallelism.tp=" + std::to_string(l.tp));
    layout.push_back("parallelism.pp=" + std::to_string(l.pp));
    layout.push_back("parallelism.dp=" + std::to_string(l.dp));
    layout.push_back("parallelism.cp=" + std::to_string(l.cp));
    layout.push_back("parallelism.zero=" + std::to_string(l.zero));
    layout.push_back(std::string("parallelism.sequence_parallel=") + (l.sequence_parallel ? "true" : "false"));
    layout.push_back("training.micro_batch=" + std::to_string(l.micro_batch));
    if (l.zero == 0)
      layout.push_back("parallelism.zero_group=0");
    return experiments::Experiment::load(*file, layout).point(0);
  };
  const experiments::ParallelSearch search = experiments::search_parallel(base, make_point, options);
  const std::string csv = output ? *output : "results/" + exp.get_name() + "-parallel.csv";
  experiments::write_csv(csv, search.rows);
  const int gpus = base.cluster.gpu_count();
  std::printf("parallel search: %s on %s (%d GPUs), global batch %lld, %s\n", base.model.get_name().c_str(),
              base.cluster_label.c_str(), gpus, base.training.global_batch,
              std::string(sim::schedule_table.name(base.parallelism.schedule)).c_str());
  std::printf("%zu layouts, %zu valid, %zu fit in memory; screened in %.1f s; the %zu best estimates simulated in "
              "%.1f s\n",
              search.enumerated, search.valid, search.fitting, search.screen_s, search.rows.size(), search.simulate_s);
  const bool tokens = base.model.has(models::LayerKind::attention);
  std::printf("%4s %3s %3s %4s %3s %4s %3s %4s %5s %10s %11s %11s %13s %7s\n", "rank", "tp", "pp", "dp", "cp", "zero",
              "sp", "mb", "M", "memory", "estimate_s", "simulated_s", tokens ? "tokens/s" : "samples/s", "mfu");
  int rank = 0;
  for (std::size_t r : search.ranking) {
    const auto& row = search.rows[r];
    const auto& l = search.simulated[r].layout;
    char mfu[16] = "-";
    if (!row.get("mfu").empty())
      std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * std::stod(row.get("mfu")));
    std::printf("%4d %3d %3d %4d %3d %4d %3s %4d %5s %7.1fGiB %11.4g %11.4g %13.6g %7s\n", ++rank, l.tp, l.pp, l.dp, l.cp,
                l.zero, l.sequence_parallel ? "yes" : "no", l.micro_batch, row.get("num_micro_batches").c_str(),
                std::stod(row.get("peak_memory_bytes")) / (1024.0 * 1024 * 1024), search.simulated[r].estimate_s,
                std::stod(row.get("iteration_time_s")),
                std::stod(row.get(tokens ? "tokens_per_s" : "throughput_samples_per_s")), mfu);
  }
  for (std::size_t r = 0; r < search.rows.size(); ++r)
    if (search.rows[r].get("status") != "ok")
      std::printf("   - %s: %s\n", search.rows[r].get("status").c_str(), search.rows[r].get("message").c_str());
  std::printf("every simulated layout: %s\n", csv.c_str());
  return exit_ok;
}

// search microbatch: the memory-aware micro-batch size search (experiments/Search.hpp).
int cmd_search(Args& args)
{
  if (args.done())
    throw UsageError{"search needs a kind: microbatch, grid or parallel"};
  const std::string kind = args.next();
  if (kind == "grid")
    return cmd_search_grid(args);
  if (kind == "parallel")
    return cmd_search_parallel(args);
  if (kind != "microbatch")
    throw UsageError{"unknown search '" + kind + "' (this release has: microbatch, grid, parallel)"};
  std::optional<std::string> file, output;
  std::vector<std::string> sets;
  experiments::MicrobatchSearchOptions options;
  while (!args.done()) {
    if (auto o = args.option("--output", "-o"))
      output = *o;
    else if (auto j = args.option("--jobs", "-j"))
      options.jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (auto m = args.option("--max-batch"))
      options.max_batch = parse_int(*m, "--max-batch", 1, 1 << 30);
    else if (auto v = args.option("--set"))
      sets.push_back(*v);
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for search microbatch: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"search microbatch takes one experiment file"};
  }
  if (!file)
    throw UsageError{"search microbatch needs an experiment file"};
  const auto exp = experiments::Experiment::load(*file, sets);
  if (exp.point_count() != 1)
    throw UsageError{"search microbatch searches one configuration: fix the swept keys with --set (the file has " +
                     std::to_string(exp.point_count()) + " points)"};
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const experiments::PointConfig& base = points.front();
  const experiments::MicrobatchSearch search = experiments::search_microbatch(base, options);
  const std::string csv = output ? *output : "results/" + exp.get_name() + "-microbatch.csv";
  experiments::write_csv(csv, search.rows);

  const int pp = base.parallelism.pp, dp = base.parallelism.dp;
  std::printf("micro-batch search: %s on %s, %s, pp %d, dp %d, tp %d; baseline M = %d x pp = %d\n", base.model_label.c_str(),
              base.cluster_label.c_str(), std::string(sim::schedule_table.name(base.parallelism.schedule)).c_str(), pp, dp,
              base.parallelism.tp, options.baseline_factor, options.baseline_factor * pp);
  std::printf("%12s | %8s %8s %14s %10s | %8s %8s %14s %10s | %8s\n", "mini-batch", "best b", "M", "samples/s", "memory",
              "base b", "M", "samples/s", "memory", "gain");
  auto cells = [&](const std::optional<std::size_t>& r, char* out, std::size_t n) {
    if (!r) {
      std::snprintf(out, n, "%8s %8s %14s %10s", "-", "-", "-", "-");
      return;
    }
    const auto& row = search.rows[*r];
    const bool ok = row.get("status") == "ok";
    const std::string memory = row.get("peak_memory_bytes");
    constexpr double gib = 1024.0 * 1024 * 1024;
    std::snprintf(out, n, "%8s %8s %14.6g %7.1fGiB", row.get("micro_batch").c_str(),
                  row.get("num_micro_batches").c_str(), ok ? std::stod(row.get("throughput_samples_per_s")) : 0.0,
                  memory.empty() ? 0.0 : std::stod(memory) / gib);
    if (!ok)
      std::snprintf(out, n, "%8s %8s %14s %7.1fGiB", row.get("micro_batch").c_str(), row.get("num_micro_batches").c_str(),
                    row.get("status").c_str(), memory.empty() ? 0.0 : std::stod(memory) / gib);
  };
  for (const auto& b : search.batches) {
    char best[96], baseline[96], gain[32] = "-";
    cells(b.best, best, sizeof best);
    cells(b.baseline, baseline, sizeof baseline);
    if (b.best && b.baseline && search.rows[*b.baseline].get("status") == "ok")
      std::snprintf(gain, sizeof gain, "%+.1f%%",
                    100 * (std::stod(search.rows[*b.best].get("throughput_samples_per_s")) /
                               std::stod(search.rows[*b.baseline].get("throughput_samples_per_s")) -
                           1));
    std::printf("%12lld | %s | %s | %8s\n", b.global_batch, best, baseline, gain);
  }
  std::printf("largest trainable mini-batch: %lld with the search, %lld with the baseline", search.largest_batch,
              search.largest_baseline_batch);
  if (search.largest_baseline_batch > 0)
    std::printf(" (%+.0f%%)",
                100.0 * (static_cast<double>(search.largest_batch) / static_cast<double>(search.largest_baseline_batch) - 1));
  if (search.stopped_at_max)
    std::printf(" (the search stopped at --max-batch with points still fitting)");
  std::printf("\n%zu points simulated; every point: %s\n", search.rows.size(), csv.c_str());
  return exit_ok;
}

// merge: the CSVs of a sharded sweep, joined in point order.
int cmd_merge(Args& args)
{
  std::vector<std::string> files;
  std::optional<std::string> output;
  files_and_output(args, "merge", files, output);
  if (files.empty() || !output)
    throw UsageError{"merge needs CSV files and -o OUT.csv"};
  // (experiment, config_id) -> row; a point in two parts must have the same configuration.
  std::map<std::pair<std::string, long long>, experiments::ResultRow> rows;
  for (const auto& f : files)
    for (auto& row : experiments::read_csv(f)) {
      long long id = 0;
      try {
        id = std::stoll(row.get("config_id"));
      } catch (const std::exception&) {
        throw Error(f + ": a row whose config_id is '" + row.get("config_id") + "'");
      }
      const auto key = std::make_pair(row.get("experiment"), id);
      auto [it, added] = rows.emplace(key, row);
      if (!added && !experiments::same_point(it->second, row))
        throw Error(f + ": point " + std::to_string(id) + " of " + key.first + " differs from the same point in another part");
    }
  std::vector<experiments::ResultRow> ordered;
  for (auto& [key, row] : rows)
    ordered.push_back(std::move(row));
  experiments::write_csv(*output, ordered);
  std::fprintf(stderr, "ddlsim: merged %zu file(s) into %s: %zu row(s)\n", files.size(), output->c_str(), ordered.size());
  return exit_ok;
}

int cmd_model(Args& args)
{
  std::optional<std::string> name;
  Dtype dtype = Dtype::bf16;
  bool per_layer = false;
  while (!args.done()) {
    if (auto d = args.option("--dtype")) {
      auto parsed = dtype_table.parse(*d);
      if (!parsed)
        throw UsageError{"--dtype expects one of " + dtype_table.names()};
      dtype = *parsed;
    } else if (args.peek() == "--layers") {
      args.next();
      per_layer = true;
    } else if (args.peek() == "--list") {
      args.next();
      for (const auto& shipped : shipped_names("models/zoo"))
        std::printf("%s\n", shipped.c_str());
      return exit_ok;
    } else if (args.peek().rfind("-", 0) == 0) {
      throw UsageError{"unknown option for model: " + args.peek()};
    } else if (!name) {
      name = args.next();
    } else {
      throw UsageError{"model takes one model name"};
    }
  }
  if (!name)
    throw UsageError{"model needs a model name or path (ddlsim model --list shows the shipped ones)"};
  const models::Model model = models::load_model(*name);
  const double d = dtype_bytes(dtype);
  auto bytes = [](double b) { return format_quantity(b, Dimension::bytes); };
  std::printf("model %s: %zu blocks, %zu layers, input %s per sample, element type %s (%g bytes)\n\n",
              model.get_name().c_str(), model.blocks().size(), model.size(), model.input_shape().to_string().c_str(),
              std::string(dtype_table.name(dtype)).c_str(), d);
  if (per_layer) {
    std::printf("%-5s %-34s %-15s %-10s %-14s %14s %12s %12s  %s\n", "#", "layer", "type", "tp", "output",
                "parameters", "fwd_flop", "stash", "kernels (forward)");
    for (std::size_t i = 0; i < model.size(); ++i) {
      const auto& l = model.layers()[i];
      std::string kernels;
      for (const auto& k : l.kernels)
        kernels += (kernels.empty() ? "" : "; ") + k.shape_string();
      std::printf("%-5zu %-34s %-15s %-10s %-14s %14.0f %12.4g %12s  %s\n", i, l.name.c_str(),
                  std::string(models::layer_kind_table.name(l.kind)).c_str(),
                  std::string(models::tp_role_table.name(l.tp)).c_str(), l.output.to_string().c_str(),
                  l.parameters, l.forward_flop(),
                  bytes(model.owned_stash_bytes(i, dtype)).c_str(), kernels.c_str());
    }
  } else {
    std::printf("%-5s %-26s %7s %14s %16s %16s %14s %14s\n", "#", "block", "layers", "parameters", "fwd_flop/sample",
                "bwd_flop/sample", "stash/sample", "sent_at_end");
    for (std::size_t b = 0; b < model.blocks().size(); ++b) {
      const auto& block = model.blocks()[b];
      double params = 0, fwd = 0, bwd = 0, stash = 0;
      for (std::size_t i = block.layers.begin; i < block.layers.end; ++i) {
        const auto& l = model.layers()[i];
        params += l.parameters;
        fwd += l.forward_flop();
        bwd += l.backward_flop();
        stash += model.owned_stash_bytes(i, dtype);
      }
      const std::string sent = b + 1 < model.blocks().size() ? bytes(model.crossing_elements(block.layers.end) * d) : "-";
      std::printf("%-5zu %-26s %7zu %14.0f %16.4g %16.4g %14s %14s\n", b, block.name.c_str(), block.layers.size(),
                  params, fwd, bwd, bytes(stash).c_str(), sent.c_str());
    }
  }
  std::printf("\ntotal parameters            %.0f (%s)\n", model.parameter_count(),
              format_quantity(model.parameter_count(), Dimension::count).c_str());
  if (model.has(models::LayerKind::moe))
    std::printf("active parameters/token     %.0f (%s; the router and top-k experts of each MoE layer)\n",
                model.active_parameter_count(), format_quantity(model.active_parameter_count(), Dimension::count).c_str());
  std::printf("parameter bytes             %s\n", bytes(model.parameter_count() * d).c_str());
  std::printf("forward flop per sample     %s\n", format_quantity(model.forward_flop_per_sample(), Dimension::flop).c_str());
  std::printf("backward flop per sample    %s\n", format_quantity(model.backward_flop_per_sample(), Dimension::flop).c_str());
  std::printf("stashed activations/sample  %s\n", bytes(model.stashed_bytes_per_sample(dtype)).c_str());
  std::printf("training state (adam)       %s (%g bytes per parameter: weights, gradients, optimizer)\n",
              bytes(model.parameter_count() * (2 * d + models::optimizer_bytes_per_parameter(models::Optimizer::adam, dtype))).c_str(),
              2 * d + models::optimizer_bytes_per_parameter(models::Optimizer::adam, dtype));
  return exit_ok;
}

// bench: simulation, sweep and trace-import speed (experiments/Bench.hpp).
void print_bench(const experiments::BenchResult& r)
{
  const auto& s = r.scenario;
  auto bytes    = [](double b) { return format_quantity(b, Dimension::bytes); };
  std::printf("scenario %s (%s): %s\n", s.name.c_str(), std::string(experiments::bench_kind_table.name(s.kind)).c_str(),
              s.description.c_str());
  switch (s.kind) {
  case experiments::BenchKind::simulation:
    std::printf("  GPUs                      %d (%d simulated devices)\n", r.gpus, r.run.devices);
    std::printf("  simulated iteration       %.6g s\n", r.run.simulated_s);
    std::printf("  wall time                 %.3f s (median of %d)\n", r.run.wall_time_s, r.repeat);
    std::printf("  peak memory (RSS)         %s (the resource guard estimated %s)\n", bytes(r.run.max_rss_bytes).c_str(),
                bytes(r.run.estimated_memory_bytes).c_str());
    std::printf("  SimGrid activities        %llu (%.0f per second; the guard estimated %.0f)\n",
                static_cast<unsigned long long>(r.run.activities), r.activities_per_s(), r.run.estimated_activities);
    if (r.bare) {
      std::printf("  bare SimGrid DAG          %llu activities on %d hosts in %.3f s (%.0f per second), %s\n",
                  static_cast<unsigned long long>(r.bare->activities), r.bare->devices, r.bare->wall_time_s,
                  r.bare_activities_per_s(), bytes(r.bare->max_rss_bytes).c_str());
      std::printf("  ddlsim / bare SimGrid     %.2fx wall time per activity\n",
                  r.bare_activities_per_s() / r.activities_per_s());
    }
    break;
  case experiments::BenchKind::sweep:
    std::printf("  points                    %zu (%zu ok), -j %d\n", r.sweep.points, r.sweep.points_ok, r.sweep.jobs);
    std::printf("  wall time                 %.3f s (median of %d)\n", r.sweep.wall_time_s, r.repeat);
    std::printf("  points per second         %.1f\n", r.points_per_s());
    std::printf("  peak memory (RSS)         %s (the largest process)\n", bytes(r.sweep.max_rss_bytes).c_str());
    break;
  case experiments::BenchKind::trace_import:
    std::printf("  input                     %s%s\n", bytes(static_cast<double>(r.import.input_bytes)).c_str(),
                r.import.gzip ? (", gzip (" + bytes(static_cast<double>(r.import.json_bytes)) + " of JSON)").c_str()
                              : ", not compressed");
    std::printf("  imported                  %zu kernels, %zu collectives\n", r.import.kernels, r.import.collectives);
    std::printf("  wall time                 %.3f s (median of %d)\n", r.import.wall_time_s, r.repeat);
    std::printf("  import rate               %.1f MB/s of input", r.import_MB_per_s());
    if (r.import.gzip)
      std::printf(" (%.1f MB/s of JSON)", r.json_MB_per_s());
    std::printf("\n  peak memory (RSS)         %s\n", bytes(r.import.max_rss_bytes).c_str());
    break;
  }
}

int cmd_bench(Args& args)
{
  std::vector<std::string> names;
  std::optional<std::string> csv;
  experiments::BenchOptions options;
  std::optional<int> jobs;
  std::optional<std::uint64_t> trace_size;
  bool no_compare = false, import_files = false;
  while (!args.done()) {
    if (args.flag("--list")) {
      for (const auto& s : experiments::bench_scenarios())
        std::printf("%-24s %-11s %s\n", s.name.c_str(), std::string(experiments::bench_kind_table.name(s.kind)).c_str(),
                    s.description.c_str());
      return exit_ok;
    }
    if (auto r = args.option("--repeat"))
      options.repeat = parse_int(*r, "--repeat", 1, 100);
    else if (auto o = args.option("--output", "-o"))
      csv = *o;
    else if (auto j = args.option("--jobs", "-j"))
      jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (auto t = args.option("--trace-size")) {
      double bytes = 0;
      try {
        bytes = parse_quantity(*t, Dimension::bytes);
      } catch (const UnitError& e) {
        throw UsageError{"--trace-size: " + std::string(e.what())};
      }
      if (!(bytes >= 1e3 && bytes <= 1e11))
        throw UsageError{"--trace-size expects 1kB to 100GB, not '" + *t + "'"};
      trace_size = static_cast<std::uint64_t>(bytes);
    } else if (args.flag("--no-compare"))
      no_compare = true;
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for bench: " + args.peek()};
    else if (names.empty() && !import_files && args.flag("import"))
      import_files = true;
    else if (names.empty() || import_files)
      names.push_back(args.next());
    else
      throw UsageError{"bench takes one scenario (ddlsim bench --list shows them)"};
  }
  if (names.empty())
    throw UsageError{import_files ? "bench import needs trace files"
                                  : "bench needs a scenario name or experiment file (ddlsim bench --list shows them)"};
  std::vector<experiments::BenchScenario> scenarios;
  for (const auto& name : names)
    scenarios.push_back(import_files ? experiments::trace_file_scenario(name) : experiments::find_bench_scenario(name));
  // Each option belongs to one kind: say so rather than ignore it.
  const experiments::BenchKind kind = scenarios.front().kind;
  auto only_for                     = [&](bool given, const char* option, experiments::BenchKind k) {
    if (given && kind != k)
      throw UsageError{std::string(option) + " is for " + std::string(experiments::bench_kind_table.name(k)) +
                       " scenarios; " + scenarios.front().name + " is a " +
                       std::string(experiments::bench_kind_table.name(kind)) + " scenario"};
  };
  only_for(no_compare, "--no-compare", experiments::BenchKind::simulation);
  only_for(jobs.has_value(), "--jobs", experiments::BenchKind::sweep);
  only_for(trace_size.has_value(), "--trace-size", experiments::BenchKind::trace_import);
  if (trace_size && import_files)
    throw UsageError{"--trace-size is for the synthetic import scenarios, not for trace files"};
  options.compare         = !no_compare;
  options.jobs            = jobs.value_or(1);
  options.synthetic_bytes = trace_size.value_or(0);
  for (const auto& scenario : scenarios) {
    const experiments::BenchResult result = experiments::run_bench(scenario, options);
    print_bench(result);
    if (csv)
      experiments::append_bench_csv(*csv, result);
  }
  return exit_ok;
}

// "a, b, c"
template <typename Strings> std::string joined(const Strings& items)
{
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ", ") + i;
  return out;
}

// calibrate fit: trace records -> a measured profile (calibration/ProfileFit.hpp).
int cmd_calibrate_fit(Args& args, const std::string& command_line)
{
  std::vector<std::string> files;
  std::optional<std::string> output, base, name;
  while (!args.done()) {
    if (auto o = args.option("--output", "-o"))
      output = *o;
    else if (auto b = args.option("--base"))
      base = *b;
    else if (auto n = args.option("--name"))
      name = *n;
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for calibrate fit: " + args.peek()};
    else
      files.push_back(args.next());
  }
  if (files.empty() || !output || !base)
    throw UsageError{"calibrate fit needs TRACES.jsonl..., -o profile.yaml and --base PROFILE (the compute parameters)"};
  traces::TraceSet records;
  for (const auto& f : files)
    traces::append(records, traces::read_jsonl(f));
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const calibration::FitResult fit = calibration::fit_profile(
      calibration::load_profile(*base), records,
      {.name = name ? *name : std::filesystem::path(*output).stem().string(), .base = *base, .sources = joined(files),
       .command = command_line, .date = date});
  for (const auto& note : fit.notes)
    std::fprintf(stderr, "ddlsim: %s\n", note.c_str());
  const calibration::CalibrationProfile& profile = fit.profile;
  write_file_atomically(*output, "the profile", [&](std::ostream& out) { calibration::write_profile(profile, out); });
  std::fprintf(stderr, "ddlsim: wrote %s (%zu fitted collectives, %zu kernel tables)\n", output->c_str(),
               profile.collectives.size(), profile.kernel_tables.size());
  return exit_ok;
}

int cmd_calibrate_report(Args& args)
{
  if (args.done())
    throw UsageError{"calibrate report needs a profile"};
  const auto profile = calibration::load_profile(args.next());
  if (!args.done())
    throw UsageError{"calibrate report takes one profile"};
  std::printf("profile %s (%s)%s%s\n", profile.name.c_str(),
              profile.kind == calibration::ProfileKind::measured ? "measured" : "analytic",
              profile.device.empty() ? "" : ", device ", profile.device.c_str());
  for (const auto& [k, v] : profile.provenance)
    std::printf("  %-20s %s\n", k.c_str(), v.c_str());
  std::printf("\nparameters:\n");
  for (const auto& [name, p] : profile.parameters)
    std::printf("  %-20s %14.6g %-7s %s\n", name.c_str(), p.value, p.unit.c_str(), p.source.c_str());
  if (!profile.kernel_tables.empty()) {
    std::printf("\nkernel tables (log-log interpolation inside the measured range, roofline outside):\n");
    std::printf("  %-13s %-5s %6s %12s %12s %14s %14s %8s %14s\n", "op", "dtype", "points", "min_work", "max_work", "held_out_med",
                "held_out_max", "shapes", "grid_held_out");
    for (const auto& t : profile.kernel_tables) {
      char med[32] = "-", max[32] = "-";
      if (t.held_out_error >= 0) {
        std::snprintf(med, sizeof med, "%.2f%%", 100 * t.held_out_error);
        std::snprintf(max, sizeof max, "%.2f%%", 100 * t.max_held_out_error);
      }
      char grid[48] = "-";
      if (t.grid_held_out_error >= 0)
        std::snprintf(grid, sizeof grid, "%.2f%% (max %.0f%%)", 100 * t.grid_held_out_error, 100 * t.max_grid_held_out_error);
      std::printf("  %-13s %-5s %6zu %9.3g %-2s %9.3g %-2s %14s %14s %8zu %14s\n", t.op.c_str(), t.dtype.empty() ? "any" : t.dtype.c_str(),
                  t.points.size(), t.points.front().work, t.work_unit()[0] == 'f' ? "fl" : "B", t.points.back().work,
                  t.work_unit()[0] == 'f' ? "fl" : "B", med, max, t.shapes.size(), grid);
    }
  }
  if (profile.collectives.empty()) {
    std::printf("\nno fitted collectives\n");
    return exit_ok;
  }
  std::printf("\ncollectives (t = alpha + bytes / bandwidth per size regime):\n");
  std::printf("  %-15s %5s %12s %12s %12s %14s %8s %7s %9s\n", "collective", "ranks", "min_bytes", "max_bytes", "alpha_s",
              "bandwidth_B/s", "R^2", "points", "max_err");
  for (const auto& c : profile.collectives) {
    for (const auto& r : c.regimes)
      std::printf("  %-15s %5d %12.0f %12.0f %12.4g %14.4g %8.5f %7d %8.2f%%\n", c.collective.c_str(), c.group_size,
                  r.min_bytes, r.max_bytes, r.alpha_s, r.bandwidth, r.r2, r.points, 100 * r.max_relative_error);
    if (c.held_out_error >= 0)
      std::printf("  %-15s held-out median error %.2f%%\n", "", 100 * c.held_out_error);
    else
      std::printf("  %-15s held-out error not measured (fewer than 6 sizes)\n", "");
  }
  return exit_ok;
}

// calibrate collect: hands over to ddlsim-collect (calibration/collector/), which sits next to this
// binary when CUDA was found at build time; this binary itself links no CUDA library.
int cmd_calibrate_collect(Args& args)
{
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path collector = self.parent_path() / "ddlsim-collect";
  if (ec || !std::filesystem::exists(collector))
    throw Error(std::string("calibrate collect needs ddlsim-collect, which is built only with the CUDA toolkit (") +
                (config::have_cuda ? "this build found CUDA, but " + collector.string() + " is missing"
                                   : "this build found none: put nvcc on PATH and reconfigure, or build "
                                     "calibration/collector on its own with cmake") +
                ")");
  std::vector<std::string> rest{collector.string()};
  while (!args.done())
    rest.push_back(args.next());
  std::vector<char*> argv;
  for (auto& a : rest)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execv(collector.c_str(), argv.data());
  throw Error("cannot run " + collector.string() + ": " + std::strerror(errno));
}

int cmd_calibrate(Args& args, const std::string& command_line)
{
  if (args.done())
    throw UsageError{"calibrate needs a subcommand: collect, import, fit or report"};
  const std::string sub = args.next();
  if (sub == "collect")
    return cmd_calibrate_collect(args);
  if (sub == "fit")
    return cmd_calibrate_fit(args, command_line);
  if (sub == "report")
    return cmd_calibrate_report(args);
  if (sub != "import")
    throw UsageError{"unknown calibrate subcommand '" + sub + "' (this release has: collect, import, fit, report)"};
  std::vector<std::string> files;
  std::optional<std::string> output;
  files_and_output(args, "calibrate import", files, output);
  if (files.empty())
    throw UsageError{"calibrate import needs at least one trace file"};
  if (!output)
    throw UsageError{"calibrate import needs -o traces.jsonl"};
  // Read everything first: a bad file means nothing is written.
  std::vector<traces::TraceSet> sets;
  for (const auto& f : files)
    sets.push_back(traces::import_trace(f));
  write_file_atomically(*output, "the records", [&](std::ostream& out) {
    for (const auto& set : sets)
      traces::write_jsonl(set, out);
  });
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const auto& set = sets[i];
    std::map<std::string, int> kinds;
    for (const auto& c : set.collectives)
      ++kinds[c.collective + (c.source == "annotation" ? " (annotation)" : "")];
    std::string summary;
    for (const auto& [kind, n] : kinds)
      summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    std::fprintf(stderr, "%s: %zu kernels, %zu collectives%s%s; %d events skipped\n", files[i].c_str(),
                 set.kernels.size(), set.collectives.size(), summary.empty() ? "" : " (", summary.empty() ? "" : (summary + ")").c_str(),
                 set.skipped_total());
    for (const auto& [reason, n] : set.skipped)
      std::fprintf(stderr, "  skipped %d: %s\n", n, reason.c_str());
  }
  std::fprintf(stderr, "ddlsim: wrote %s\n", output->c_str());
  return exit_ok;
}

// execute: every point simulated and executed (experiments/CrossCheck.hpp).
int cmd_execute(Args& args)
{
  std::optional<std::string> file, output, backend;
  std::vector<std::string> sets;
  experiments::CrossCheckOptions options;
  bool quiet = false;
  while (!args.done()) {
    if (auto v = args.option("--output", "-o"))
      output = *v;
    else if (auto b = args.option("--backend"))
      backend = *b;
    else if (auto n = args.option("--iterations"))
      options.iterations = parse_int(*n, "--iterations", 1, 10000);
    else if (auto w = args.option("--warmup"))
      options.warmup = parse_int(*w, "--warmup", 0, 10000);
    else if (auto f = args.option("--scale")) {
      char* end = nullptr;
      options.scale = std::strtod(f->c_str(), &end);
      if (end == f->c_str() || *end != '\0' || !(options.scale > 0) || options.scale > 1)
        throw UsageError{"--scale must be a number in (0, 1], not '" + *f + "'"};
    }
    else if (auto j = args.option("--jobs", "-j"))
      options.jobs = parse_int(*j, "--jobs", 1, 1024);
    else if (auto s = args.option("--set"))
      sets.push_back(*s);
    else if (args.flag("--map-devices"))
      options.map_devices = true;
    else if (auto l = args.option("--launcher")) {
      std::istringstream words(*l);
      for (std::string word; words >> word;)
        options.launcher.push_back(word);
    }
    else if (args.flag("--quiet"))
      quiet = true;
    else if (args.peek().rfind("-", 0) == 0)
      throw UsageError{"unknown option for execute: " + args.peek()};
    else if (!file)
      file = args.next();
    else
      throw UsageError{"execute takes one experiment file"};
  }
  if (!file)
    throw UsageError{"execute needs an experiment file"};
  if (!backend || (*backend != "host" && *backend != "cuda"))
    throw UsageError{"execute needs --backend host or --backend cuda"};
  options.backend = *backend == "host" ? experiments::Backend::host : experiments::Backend::cuda;
  if (options.map_devices && !options.launcher.empty())
    throw UsageError{"--map-devices and --launcher do not go together: under MPI every device needs its own GPU"};
  if (options.backend == experiments::Backend::host && (options.map_devices || !options.launcher.empty()))
    throw UsageError{"--map-devices and --launcher are for --backend cuda"};
  if (options.backend == experiments::Backend::cuda) {
    std::error_code ec;
    const auto runner = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "ddlsim-run-cuda";
    if (ec || !std::filesystem::exists(runner))
      throw Error("execute --backend cuda needs ddlsim-run-cuda, which is built only with the CUDA toolkit (" +
                  std::string(config::have_cuda ? "this build found CUDA, but " + runner.string() + " is missing"
                                                : "this build found none: put nvcc on PATH and reconfigure") +
                  ")");
    options.cuda_runner = runner.string();
  }
  const auto exp = experiments::Experiment::load(*file, sets);
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const std::string csv =
      output ? *output : exp.output_csv().value_or("results/" + exp.get_name() + "-" + *backend + ".csv");
  options.work_dir = (std::filesystem::path(csv).parent_path() / (std::filesystem::path(csv).stem().string() + ".work")).string();
  std::filesystem::create_directories(options.work_dir);
  if (!quiet)
    options.on_status = [](const std::string& line) { std::fprintf(stderr, "ddlsim: %s\n", line.c_str()); };
  const experiments::CrossCheck result = experiments::cross_check(points, options);
  experiments::write_csv(csv, result.rows);
  std::map<std::string, int> counts;
  for (const auto& row : result.rows)
    ++counts[row.get("status")];
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  std::printf("%s: %zu points (%s); simulated vs measured on %s: mean absolute error %.2f%% over %d points\n", csv.c_str(),
              result.rows.size(), summary.c_str(), *backend == "host" ? "the host" : "the GPUs", result.mean_abs_error_pct,
              result.compared);
  if (!result.profile_path.empty())
    std::printf("host profile (measured in this run): %s\n", result.profile_path.c_str());
  return result.compared > 0 ? exit_ok : exit_bad_input;
}

int dispatch(Args& args)
{
  if (args.done())
    throw UsageError{"missing command"};
  const std::string command = args.next();
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << usage_text;
    return exit_ok;
  }
  if (command == "--version") {
    std::cout << "ddlsim " << config::version << " (git " << config::git_hash << ", SimGrid "
              << config::simgrid_version << ", CUDA toolkit " << (config::have_cuda ? "found" : "not found") << ", MPI "
              << (config::have_mpi ? "found" : "not found") << " at build time)\n";
    return exit_ok;
  }
  if (command == "run")
    return cmd_run(args);
  if (command == "execute")
    return cmd_execute(args);
  if (command == "merge")
    return cmd_merge(args);
  if (command == "search")
    return cmd_search(args);
  if (command == "validate")
    return cmd_validate(args);
  if (command == "model")
    return cmd_model(args);
  if (command == "bench")
    return cmd_bench(args);
  if (command == "calibrate")
    return cmd_calibrate(args, args.command_line());
  throw UsageError{"unknown command '" + command + "'"};
}

}  // namespace

int main(int argc, char** argv)
{
  Args args(argc, argv);
  try {
    return dispatch(args);
  } catch (const UsageError& e) {
    std::cerr << "ddlsim: " << e.message << "\n(see 'ddlsim --help')\n";
    return exit_usage;
  } catch (const ConfigError& e) {
    print_diagnostics(e.diagnostics());
    return exit_bad_input;
  } catch (const Error& e) {
    std::cerr << "ddlsim: error: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "ddlsim: internal error: " << e.what() << '\n';
    return 3;
  }
}
