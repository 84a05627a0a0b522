// ddlsim: the command-line front end. A thin layer over the libraries: it parses arguments
// (CLI11, through cli/CommandLine.hpp), calls them, prints, and is the only place that chooses an
// exit code: 0 success, 1 bad input (the message names file:line and key), 2 usage error.
//
// Every subcommand is one block of define_commands() at the end of this file: its options, bound to
// the fields of its arguments struct, and the function that runs it.
#include "calibration/HostFit.hpp"
#include "calibration/KernelModel.hpp"
#include "calibration/Profile.hpp"
#include "calibration/ProfileFit.hpp"
#include "cli/CommandLine.hpp"
#include "cli/MpiSweep.hpp"
#include "cli/Plot.hpp"
#include "cli/Progress.hpp"
#include "common/AtomicFile.hpp"
#include "common/DataPath.hpp"
#include "common/Dtype.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"
#include "ddlsim/config.hpp"
#include "ddlsim/git_hash.hpp"
#include "experiments/Bench.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/CollectiveBench.hpp"
#include "experiments/CrossCheck.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Report.hpp"
#include "experiments/Search.hpp"
#include "experiments/SweepRunner.hpp"
#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"
#include "traces/Json.hpp"
#include "traces/NcclTestsImporter.hpp"
#include "traces/Gzip.hpp"
#include "traces/TraceRecords.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
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
using cli::exit_bad_input;
using cli::exit_ok;
using cli::print_diagnostics;
using cli::UsageError;

constexpr double gib = 1024.0 * 1024 * 1024;

// ---- Options several commands share ---------------------------------------------------------

void add_experiment(CLI::App* app, std::string& file)
{
  app->add_option("EXPERIMENT.yaml", file, "the experiment file")->required()->type_name("");
}

void add_sets(CLI::App* app, std::vector<std::string>& sets, const std::string& help = "as for run")
{
  app->add_option("--set", sets, help)->allow_extra_args(false)->type_name("KEY=VALUE");
}

void add_output(CLI::App* app, std::optional<std::string>& output, const std::string& help)
{
  app->add_option("-o,--output", output, help)->type_name("FILE");
}

// "a, b, c"
template <typename Strings> std::string joined(const Strings& items)
{
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ", ") + i;
  return out;
}

void add_columns(CLI::App* app, experiments::ColumnSelection& columns)
{
  app->add_option_function<std::string>(
         "--columns",
         [&columns](const std::string& spec) {
           try {
             columns = experiments::ColumnSelection::parse(spec);
           } catch (const Error& e) {
             throw CLI::ValidationError(std::string("--columns: ") + e.what());
           }
         },
         "the CSV's columns: names and presets (" + joined(experiments::ColumnSelection::presets()) +
             "); -NAME takes one out (default: every column some row fills; docs/csv.md)")
      ->type_name("LIST");
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

// An experiment that resolves to one point, for the searches.
experiments::Experiment load_one_point(const std::string& file, const std::vector<std::string>& sets,
                                       const std::string& search)
{
  auto exp = experiments::Experiment::load(file, sets);
  if (exp.point_count() != 1)
    throw UsageError{"search " + search + " searches one configuration: fix the swept keys with --set (the file has " +
                     std::to_string(exp.point_count()) + " points)"};
  return exp;
}

// "4 ok, 1 invalid"
std::string status_counts(const std::vector<experiments::ResultRow>& rows)
{
  std::map<std::string, int> counts;
  for (const auto& r : rows)
    ++counts[r.get("status")];
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  return summary;
}

// ---- validate -------------------------------------------------------------------------------

struct ValidateArgs {
  std::string file;
  std::vector<std::string> sets;
  bool allow_oom = false;
};

int cmd_validate(const ValidateArgs& a)
{
  const auto exp    = experiments::Experiment::load(a.file, a.sets);
  const auto points = exp.points();
  std::size_t valid = 0, oom = 0;
  for (const auto& p : points) {
    if (p.is_valid()) {
      ++valid;
      // Memory is checked as `run` would, without simulating: partition and memory model only.
      if (const auto verdict = experiments::check_memory(p); !verdict.fits()) {
        ++oom;
        fmt::print(stderr, "oom point {} ({}): {}\n", p.index, axis_text(exp, p.index), verdict.message);
      }
      continue;
    }
    for (const auto& d : p.problems)
      fmt::print(stderr, "invalid point {} ({}): {}\n", p.index, axis_text(exp, p.index), d.to_string());
  }
  fmt::print("{}: {} point(s), {} valid ({} of them out of memory), {} invalid\n", a.file, points.size(), valid, oom,
             points.size() - valid);
  if (valid == 0) {
    if (points.size() == 1)
      print_diagnostics(points[0].problems);
    return exit_bad_input;
  }
  return oom > 0 && !a.allow_oom ? exit_bad_input : exit_ok;
}

// ---- run ------------------------------------------------------------------------------------

struct RunArgs {
  std::string file;
  std::optional<std::string> output;
  std::vector<std::string> sets;
  experiments::SweepOptions options;
  experiments::ColumnSelection columns;
  bool quiet = false, resume = false, mpi = false, plot = false;
  std::optional<std::string> shard;
  double point_timeout_s = 0;
  std::optional<std::string> progress;  ///< --progress; by default auto, never under --quiet
};

// Test hooks (tests/cli/test_cli_progress.py): DDLSIM_PROGRESS_AFTER_SECONDS=S shows points from S
// seconds (default 2), DDLSIM_PROGRESS_INTERVAL_SECONDS=S writes plain lines every S (default 5).
double progress_setting(const char* variable, double fallback)
{
  const char* value = std::getenv(variable);
  return value ? std::atof(value) : fallback;
}

int cmd_run(const RunArgs& a)
{
  experiments::SweepOptions options = a.options;
  int shard_index = 0, shard_count = 1;
  if (a.shard) {
    const auto slash = a.shard->find('/');
    if (slash == std::string::npos)
      throw UsageError{"--shard expects I/N, e.g. --shard 0/4"};
    shard_count = cli::parse_int(a.shard->substr(slash + 1), "--shard N", 1, 1 << 20);
    shard_index = cli::parse_int(a.shard->substr(0, slash), "--shard I", 0, shard_count - 1);
  }
  options.point_timeout_s = a.point_timeout_s;

  const auto exp    = experiments::Experiment::load(a.file, a.sets);
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const std::string csv = a.output ? *a.output : exp.output_csv().value_or("results/" + exp.get_name() + ".csv");

  const cli::ProgressMode mode = a.progress ? *cli::progress_mode_table.parse(*a.progress)
                                 : a.quiet  ? cli::ProgressMode::never
                                            : cli::ProgressMode::automatic;
  const std::optional<cli::ProgressStyle> style = cli::progress_style(mode, ::isatty(STDERR_FILENO) != 0);
  const bool show_progress = style.has_value();
  std::optional<cli::ProgressLine> progress;  // over this rank's points (set once they are known)
  if (show_progress)
    options.on_progress = [&](std::size_t done, std::size_t) { progress->sweep(done); };
  // Under MPI each rank takes every size-th point of the shard, and rank 0 writes the CSV.
  cli::MpiWorld world;
  if (a.mpi)
    world = cli::mpi_start();
  // This shard's points; with --resume, the rows the CSV already holds for them are kept.
  std::vector<experiments::PointConfig> todo;
  std::vector<std::size_t> todo_index;                // into `points`
  std::map<std::size_t, experiments::ResultRow> done; // by point index
  std::vector<std::size_t> todo_elsewhere;            // under MPI: points other ranks simulate
  std::size_t to_simulate = 0;
  std::vector<experiments::ResultRow> previous;
  if (a.resume && std::filesystem::exists(csv)) {
    auto table = experiments::read_csv_table(csv);
    experiments::require_identity_columns(csv, table, "--resume matches rows to points by it");
    previous = std::move(table.rows);
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(shard_count)) != shard_index)
      continue;
    const experiments::ResultRow fresh = experiments::describe_point(points[i]);
    auto kept                          = std::find_if(previous.begin(), previous.end(),
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
  const char* every         = std::getenv("DDLSIM_CHECKPOINT_SECONDS");
  const double checkpoint_s = every ? std::atof(every) : 2.0;
  auto last_write           = std::chrono::steady_clock::now();
  options.on_row            = [&](std::size_t k, const experiments::ResultRow& row) {
    done.emplace(todo_index[k], row);
    if (progress)
      progress->finished(todo_index[k]);
    const auto now = std::chrono::steady_clock::now();
    if (!a.mpi && std::chrono::duration<double>(now - last_write).count() >= checkpoint_s) {
      experiments::write_csv(csv, rows_so_far(), a.columns);
      last_write = now;
    }
  };
  if (!todo.empty()) {
    progress.emplace(stderr, todo.size(), style.value_or(cli::ProgressStyle::terminal),
                     progress_setting("DDLSIM_PROGRESS_AFTER_SECONDS", 2.0),
                     progress_setting("DDLSIM_PROGRESS_INTERVAL_SECONDS", 5.0));
    experiments::PointProgressCallback on_point;
    if (show_progress)
      on_point = [&](std::size_t k, const experiments::PointProgress& p) { progress->point(todo_index[k], p); };
    experiments::run_sweep(todo, options, on_point);
  }
  if (a.mpi) {
    std::map<std::size_t, std::string> mine;
    for (std::size_t i : todo_index)
      mine[i] = done.at(i).serialize();
    const auto gathered = cli::mpi_gather(mine, world);
    cli::mpi_stop();
    if (world.rank != 0)
      return exit_ok; // rank 0 writes the CSV
    for (const auto& [i, text] : gathered)
      if (auto row = experiments::ResultRow::deserialize(text))
        done.emplace(i, std::move(*row));
    for (std::size_t i : todo_elsewhere)
      if (!done.count(i))
        throw Error("MPI: no row came back for point " + std::to_string(i));
  }
  const auto rows = rows_so_far();
  experiments::write_csv(csv, rows, a.columns);

  if (!a.quiet) {
    std::string line = fmt::format("ddlsim: wrote {} row(s) ({}) to {}", rows.size(), status_counts(rows), csv);
    if (rows.size() > todo.size() + todo_elsewhere.size())
      line += fmt::format("; {} kept from the earlier run", rows.size() - todo.size() - todo_elsewhere.size());
    if (shard_count > 1)
      line += fmt::format("; shard {}/{} of {} points", shard_index, shard_count, points.size());
    if (a.mpi)
      line += fmt::format("; {} MPI ranks", world.size);
    fmt::print(stderr, "{}\n", line);
  }
  if (a.plot) {
    const std::string png = std::filesystem::path(csv).replace_extension(".png").string();
    cli::draw_plot(exp.output_plot(), csv, png);
    fmt::print("{}\n", png);
  }
  return exit_ok;
}

// ---- search: what every search takes --------------------------------------------------------

struct SearchArgs {
  std::string file; // resolving to one point
  std::optional<std::string> output;
  std::vector<std::string> sets;
  experiments::ColumnSelection columns;
};

void add_search_options(CLI::App* app, SearchArgs& a, int& jobs, const std::string& csv_help)
{
  add_experiment(app, a.file);
  add_output(app, a.output, csv_help);
  cli::add_int(app, "-j,--jobs", jobs, 1, 1024, "parallel simulations");
  add_sets(app, a.sets, "as for run (the file must resolve to one point)");
  add_columns(app, a.columns);
}

// ---- search grid: every pp x tp x dp shape of the cluster's GPUs, ranked (experiments/Search.hpp)

struct SearchGridArgs : SearchArgs {
  experiments::GridSearchOptions options;
};

int cmd_search_grid(const SearchGridArgs& a)
{
  const auto exp                      = load_one_point(a.file, a.sets, "grid");
  const experiments::PointConfig base = exp.point(0);
  // The experiment's context parallelism, ZeRO stage and sequence parallelism stay: the grid is
  // the cluster's GPUs over cp, written as pp x tp x dp.
  const int gpus  = base.cluster.gpu_count() / base.parallelism.cp;
  auto make_point = [&](int pp, int tp, int dp) {
    std::vector<std::string> shape = a.sets;
    shape.push_back("parallelism.pp=" + std::to_string(pp));
    shape.push_back("parallelism.tp=" + std::to_string(tp));
    shape.push_back("parallelism.dp=" + std::to_string(dp));
    return experiments::Experiment::load(a.file, shape).point(0);
  };
  const experiments::GridSearch search = experiments::search_grid(gpus, make_point, a.options);
  const std::string csv                = a.output ? *a.output : "results/" + exp.get_name() + "-grid.csv";
  experiments::write_csv(csv, search.rows, a.columns);
  fmt::print("grid search: {} on {} ({} GPUs), {}; pp x tp (P_r) x dp (P_c) = {}{}\n", base.model_label,
             base.cluster_label, base.cluster.gpu_count(), sim::schedule_table.name(base.parallelism.schedule), gpus,
             base.parallelism.cp > 1 ? fmt::format(" (x cp {})", base.parallelism.cp) : "");
  fmt::print("{:>5} {:>5} {:>5} {:>5} {:>14} {:>10} {:>16} {:>14} {:>10}  \n", "rank", "pp", "tp", "dp", "samples/s",
             "vs best", "comm_bytes/GPU", "exposed_comm_s", "memory");
  const double best =
      search.ranking.empty() ? 0 : std::stod(search.rows[search.ranking.front()].get("throughput_samples_per_s"));
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
    const double t  = std::stod(row.get("throughput_samples_per_s"));
    fmt::print("{:5} {:>5} {:>5} {:>5} {:14.6g} {:9.1f}% {:16.4g} {:14.4g} {:7.1f}GiB  {}\n", ++rank, row.get("pp"),
               row.get("tp"), row.get("dp"), t, 100 * (t / best - 1), std::stod(row.get("comm_bytes_per_gpu")),
               std::stod(row.get("exposed_comm_time_s")), std::stod(row.get("peak_memory_bytes")) / gib, label(row));
  }
  std::size_t others = 0;
  for (const auto& row : search.rows)
    if (row.get("status") != "ok") {
      ++others;
      fmt::print("{:>5} {:>5} {:>5} {:>5} {:>14}  {}\n", "-", row.get("pp"), row.get("tp"), row.get("dp"),
                 row.get("status"), label(row));
    }
  fmt::print("{} shapes, {} ok; every shape: {}\n", search.rows.size(), search.rows.size() - others, csv);
  return exit_ok;
}

// ---- search parallel: every layout of the cluster, screened, the best simulated ---------------

struct SearchParallelArgs : SearchArgs {
  experiments::ParallelSearchOptions options;
  std::optional<std::string> zero, ep;
  int top = 16;
};

int cmd_search_parallel(const SearchParallelArgs& a)
{
  experiments::ParallelSearchOptions options = a.options;
  options.top                                = static_cast<std::size_t>(a.top);
  if (a.zero) {
    options.zero_stages.clear();
    std::stringstream in(*a.zero);
    for (std::string stage; std::getline(in, stage, ',');)
      options.zero_stages.push_back(cli::parse_int(stage, "--zero", 0, 3));
  }
  if (a.ep) {
    std::stringstream in(*a.ep);
    for (std::string size; std::getline(in, size, ',');)
      options.expert_parallel.push_back(cli::parse_int(size, "--ep", 1, 1 << 20));
  }
  const auto exp                      = load_one_point(a.file, a.sets, "parallel");
  const experiments::PointConfig base = exp.point(0);
  auto make_point                     = [&](const experiments::ParallelLayout& l) {
    std::vector<std::string> layout = a.sets;
    layout.push_back("parallelism.tp=" + std::to_string(l.tp));
    layout.push_back("parallelism.pp=" + std::to_string(l.pp));
    layout.push_back("parallelism.dp=" + std::to_string(l.dp));
    layout.push_back("parallelism.cp=" + std::to_string(l.cp));
    layout.push_back("parallelism.zero=" + std::to_string(l.zero));
    layout.push_back(std::string("parallelism.sequence_parallel=") + (l.sequence_parallel ? "true" : "false"));
    layout.push_back("training.micro_batch=" + std::to_string(l.micro_batch));
    layout.push_back("parallelism.ep=" + std::to_string(l.ep));
    if (l.zero == 0)
      layout.push_back("parallelism.zero_group=0");
    return experiments::Experiment::load(a.file, layout).point(0);
  };
  const experiments::ParallelSearch search = experiments::search_parallel(base, make_point, options);
  const std::string csv                    = a.output ? *a.output : "results/" + exp.get_name() + "-parallel.csv";
  experiments::write_csv(csv, search.rows, a.columns);
  fmt::print("parallel search: {} on {} ({} GPUs), global batch {}, {}\n", base.model.get_name(), base.cluster_label,
             base.cluster.gpu_count(), base.training.global_batch, sim::schedule_table.name(base.parallelism.schedule));
  fmt::print(
      "{} layouts, {} valid, {} fit in memory; screened in {:.1f} s; the {} best estimates simulated in {:.1f} s\n",
      search.enumerated, search.valid, search.fitting, search.screen_s, search.rows.size(), search.simulate_s);
  const bool tokens = base.model.has(models::LayerKind::attention);
  fmt::print("{:>4} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>3} {:>4} {:>5} {:>10} {:>11} {:>11} {:>13} {:>7}\n", "rank",
             "tp", "pp", "dp", "cp", "ep", "zero", "sp", "mb", "M", "memory", "estimate_s", "simulated_s",
             tokens ? "tokens/s" : "samples/s", "mfu");
  int rank = 0;
  for (std::size_t r : search.ranking) {
    const auto& row       = search.rows[r];
    const auto& l         = search.simulated[r].layout;
    const std::string mfu = row.get("mfu").empty() ? "-" : fmt::format("{:.1f}%", 100 * std::stod(row.get("mfu")));
    fmt::print("{:4} {:3} {:3} {:4} {:3} {:3} {:4} {:>3} {:4} {:>5} {:7.1f}GiB {:11.4g} {:11.4g} {:13.6g} {:>7}\n",
               ++rank, l.tp, l.pp, l.dp, l.cp, l.ep, l.zero, l.sequence_parallel ? "yes" : "no", l.micro_batch,
               row.get("num_micro_batches"), std::stod(row.get("peak_memory_bytes")) / gib,
               search.simulated[r].estimate_s, std::stod(row.get("iteration_time_s")),
               std::stod(row.get(tokens ? "tokens_per_s" : "throughput_samples_per_s")), mfu);
  }
  for (const auto& row : search.rows)
    if (row.get("status") != "ok")
      fmt::print("   - {}: {}\n", row.get("status"), row.get("message"));
  fmt::print("every simulated layout: {}\n", csv);
  return exit_ok;
}

// ---- search microbatch: the memory-aware micro-batch size search (experiments/Search.hpp) ------

struct SearchMicrobatchArgs : SearchArgs {
  experiments::MicrobatchSearchOptions options;
};

int cmd_search_microbatch(const SearchMicrobatchArgs& a)
{
  const auto exp    = load_one_point(a.file, a.sets, "microbatch");
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const experiments::PointConfig& base       = points.front();
  const experiments::MicrobatchSearch search = experiments::search_microbatch(base, a.options);
  const std::string csv                      = a.output ? *a.output : "results/" + exp.get_name() + "-microbatch.csv";
  experiments::write_csv(csv, search.rows, a.columns);

  const int pp = base.parallelism.pp, dp = base.parallelism.dp;
  fmt::print("micro-batch search: {} on {}, {}, pp {}, dp {}, tp {}; baseline M = {} x pp = {}\n", base.model_label,
             base.cluster_label, sim::schedule_table.name(base.parallelism.schedule), pp, dp, base.parallelism.tp,
             a.options.baseline_factor, a.options.baseline_factor * pp);
  fmt::print("{:>12} | {:>8} {:>8} {:>14} {:>10} | {:>8} {:>8} {:>14} {:>10} | {:>8}\n", "mini-batch", "best b", "M",
             "samples/s", "memory", "base b", "M", "samples/s", "memory", "gain");
  auto cells = [&](const std::optional<std::size_t>& r) {
    if (!r)
      return fmt::format("{:>8} {:>8} {:>14} {:>10}", "-", "-", "-", "-");
    const auto& row          = search.rows[*r];
    const std::string memory = row.get("peak_memory_bytes");
    const double mem_gib     = memory.empty() ? 0.0 : std::stod(memory) / gib;
    if (row.get("status") != "ok")
      return fmt::format("{:>8} {:>8} {:>14} {:7.1f}GiB", row.get("micro_batch"), row.get("num_micro_batches"),
                         row.get("status"), mem_gib);
    return fmt::format("{:>8} {:>8} {:14.6g} {:7.1f}GiB", row.get("micro_batch"), row.get("num_micro_batches"),
                       std::stod(row.get("throughput_samples_per_s")), mem_gib);
  };
  for (const auto& b : search.batches) {
    std::string gain = "-";
    if (b.best && b.baseline && search.rows[*b.baseline].get("status") == "ok")
      gain = fmt::format("{:+.1f}%", 100 * (std::stod(search.rows[*b.best].get("throughput_samples_per_s")) /
                                                std::stod(search.rows[*b.baseline].get("throughput_samples_per_s")) -
                                            1));
    fmt::print("{:12} | {} | {} | {:>8}\n", b.global_batch, cells(b.best), cells(b.baseline), gain);
  }
  fmt::print("largest trainable mini-batch: {} with the search, {} with the baseline", search.largest_batch,
             search.largest_baseline_batch);
  if (search.largest_baseline_batch > 0)
    fmt::print(
        " ({:+.0f}%)",
        100.0 * (static_cast<double>(search.largest_batch) / static_cast<double>(search.largest_baseline_batch) - 1));
  if (search.stopped_at_max)
    fmt::print(" (the search stopped at --max-batch with points still fitting)");
  fmt::print("\n{} points simulated; every point: {}\n", search.rows.size(), csv);
  return exit_ok;
}

// ---- merge: the CSVs of a sharded sweep, joined in point order -------------------------------

struct MergeArgs {
  std::vector<std::string> files;
  std::string output;
  experiments::ColumnSelection columns;
};

int cmd_merge(const MergeArgs& a)
{
  // (experiment, config_id) -> row; a point in two parts must have the same configuration.
  std::map<std::pair<std::string, long long>, experiments::ResultRow> rows;
  for (const auto& f : a.files) {
    auto table = experiments::read_csv_table(f);
    experiments::require_identity_columns(f, table, "merge matches rows to points by it");
    for (auto& row : table.rows) {
      long long id = 0;
      try {
        id = std::stoll(row.get("config_id"));
      } catch (const std::exception&) {
        throw Error(f + ": a row whose config_id is '" + row.get("config_id") + "'");
      }
      const auto key   = std::make_pair(row.get("experiment"), id);
      auto [it, added] = rows.emplace(key, row);
      if (!added && !experiments::same_point(it->second, row))
        throw Error(f + ": point " + std::to_string(id) + " of " + key.first +
                    " differs from the same point in another part");
    }
  }
  std::vector<experiments::ResultRow> ordered;
  for (auto& [key, row] : rows)
    ordered.push_back(std::move(row));
  experiments::write_csv(a.output, ordered, a.columns);
  fmt::print(stderr, "ddlsim: merged {} file(s) into {}: {} row(s)\n", a.files.size(), a.output, ordered.size());
  return exit_ok;
}

// ---- report: the best points of a CSV, readable (experiments/Report.hpp) ---------------------

struct ReportArgs {
  std::string file;
  int top = 10;
};

int cmd_report(const ReportArgs& a)
{
  fmt::print("{}", experiments::report_csv(a.file, {.top = static_cast<std::size_t>(a.top)}));
  return exit_ok;
}

// ---- model ----------------------------------------------------------------------------------

struct ModelArgs {
  std::optional<std::string> name;
  std::string dtype = "bf16";
  bool layers = false, list = false;
};

int cmd_model(const ModelArgs& a)
{
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  if (a.list) {
    for (const auto& shipped : shipped_names("models/zoo"))
      fmt::print("{}\n", shipped);
    return exit_ok;
  }
  if (!a.name)
    throw UsageError{"model needs a model name or path (ddlsim model --list shows the shipped ones)"};
  const models::Model model = models::load_model(*a.name);
  const double d            = dtype_bytes(*dtype);
  auto bytes                = [](double b) { return format_quantity(b, Dimension::bytes); };
  fmt::print("model {}: {} blocks, {} layers, input {} per sample, element type {} ({:g} bytes)\n\n", model.get_name(),
             model.blocks().size(), model.size(), model.input_shape().to_string(), dtype_table.name(*dtype), d);
  if (a.layers) {
    fmt::print("{:<5} {:<34} {:<15} {:<10} {:<14} {:>14} {:>12} {:>12}  {}\n", "#", "layer", "type", "tp", "output",
               "parameters", "fwd_flop", "stash", "kernels (forward)");
    for (std::size_t i = 0; i < model.size(); ++i) {
      const auto& l = model.layers()[i];
      std::string kernels;
      for (const auto& k : l.kernels)
        if (k.in_forward)
          kernels += (kernels.empty() ? "" : "; ") + k.shape_string();
      fmt::print("{:<5} {:<34} {:<15} {:<10} {:<14} {:14.0f} {:12.4g} {:>12}  {}\n", i, l.name,
                 models::layer_kind_table.name(l.kind), models::tp_role_table.name(l.tp), l.output.to_string(),
                 l.parameters, l.forward_flop(), bytes(model.owned_stash_bytes(i, *dtype)), kernels);
    }
  } else {
    fmt::print("{:<5} {:<26} {:>7} {:>14} {:>16} {:>16} {:>14} {:>14}\n", "#", "block", "layers", "parameters",
               "fwd_flop/sample", "bwd_flop/sample", "stash/sample", "sent_at_end");
    for (std::size_t b = 0; b < model.blocks().size(); ++b) {
      const auto& block = model.blocks()[b];
      double params = 0, fwd = 0, bwd = 0, stash = 0;
      for (std::size_t i = block.layers.begin; i < block.layers.end; ++i) {
        const auto& l = model.layers()[i];
        params += l.parameters;
        fwd += l.forward_flop();
        bwd += l.backward_flop();
        stash += model.owned_stash_bytes(i, *dtype);
      }
      const std::string sent =
          b + 1 < model.blocks().size() ? bytes(model.crossing_elements(block.layers.end) * d) : "-";
      fmt::print("{:<5} {:<26} {:7} {:14.0f} {:16.4g} {:16.4g} {:>14} {:>14}\n", b, block.name, block.layers.size(),
                 params, fwd, bwd, bytes(stash), sent);
    }
  }
  fmt::print("\ntotal parameters            {:.0f} ({})\n", model.parameter_count(),
             format_quantity(model.parameter_count(), Dimension::count));
  if (model.has(models::LayerKind::moe))
    fmt::print("active parameters/token     {:.0f} ({}; the router and top-k experts of each MoE layer)\n",
               model.active_parameter_count(), format_quantity(model.active_parameter_count(), Dimension::count));
  const double state = 2 * d + models::optimizer_bytes_per_parameter(models::Optimizer::adam, *dtype);
  fmt::print("parameter bytes             {}\n", bytes(model.parameter_count() * d));
  fmt::print("forward flop per sample     {}\n", format_quantity(model.forward_flop_per_sample(), Dimension::flop));
  fmt::print("backward flop per sample    {}\n", format_quantity(model.backward_flop_per_sample(), Dimension::flop));
  fmt::print("stashed activations/sample  {}\n", bytes(model.stashed_bytes_per_sample(*dtype)));
  fmt::print("training state (adam)       {} ({:g} bytes per parameter: weights, gradients, optimizer)\n",
             bytes(model.parameter_count() * state), state);
  return exit_ok;
}

// ---- bench: simulation, sweep and trace-import speed (experiments/Bench.hpp) -------------------

void print_bench(const experiments::BenchResult& r)
{
  const auto& s = r.scenario;
  auto bytes    = [](double b) { return format_quantity(b, Dimension::bytes); };
  fmt::print("scenario {} ({}): {}\n", s.name, experiments::bench_kind_table.name(s.kind), s.description);
  switch (s.kind) {
  case experiments::BenchKind::simulation:
    fmt::print("  GPUs                      {} ({} simulated devices)\n", r.gpus, r.run.devices);
    fmt::print("  simulated iteration       {:.6g} s\n", r.run.simulated_s);
    fmt::print("  wall time                 {:.3f} s (median of {})\n", r.run.wall_time_s, r.repeat);
    fmt::print("  peak memory (RSS)         {} (the resource guard estimated {})\n", bytes(r.run.max_rss_bytes),
               bytes(r.run.estimated_memory_bytes));
    fmt::print("  SimGrid activities        {} ({:.0f} per second; the guard estimated {:.0f})\n", r.run.activities,
               r.activities_per_s(), r.run.estimated_activities);
    if (r.bare) {
      fmt::print("  bare SimGrid DAG          {} activities on {} hosts in {:.3f} s ({:.0f} per second), {}\n",
                 r.bare->activities, r.bare->devices, r.bare->wall_time_s, r.bare_activities_per_s(),
                 bytes(r.bare->max_rss_bytes));
      fmt::print("  ddlsim / bare SimGrid     {:.2f}x wall time per activity\n",
                 r.bare_activities_per_s() / r.activities_per_s());
    }
    break;
  case experiments::BenchKind::sweep:
    fmt::print("  points                    {} ({} ok), -j {}\n", r.sweep.points, r.sweep.points_ok, r.sweep.jobs);
    fmt::print("  wall time                 {:.3f} s (median of {})\n", r.sweep.wall_time_s, r.repeat);
    fmt::print("  points per second         {:.1f}\n", r.points_per_s());
    fmt::print("  peak memory (RSS)         {} (the largest process)\n", bytes(r.sweep.max_rss_bytes));
    break;
  case experiments::BenchKind::trace_import:
    fmt::print("  input                     {}{}\n", bytes(static_cast<double>(r.import.input_bytes)),
               r.import.gzip ? ", gzip (" + bytes(static_cast<double>(r.import.json_bytes)) + " of JSON)"
                             : std::string(", not compressed"));
    fmt::print("  imported                  {} kernels, {} collectives\n", r.import.kernels, r.import.collectives);
    fmt::print("  wall time                 {:.3f} s (median of {})\n", r.import.wall_time_s, r.repeat);
    fmt::print("  import rate               {:.1f} MB/s of input", r.import_MB_per_s());
    if (r.import.gzip)
      fmt::print(" ({:.1f} MB/s of JSON)", r.json_MB_per_s());
    fmt::print("\n  peak memory (RSS)         {}\n", bytes(r.import.max_rss_bytes));
    break;
  }
}

struct BenchArgs {
  std::vector<std::string> names; // SCENARIO, or `import` and trace files
  std::optional<std::string> csv;
  std::optional<std::string> trace_size;
  int repeat = 1, jobs = 0;
  bool list = false, no_compare = false;
};

int cmd_bench(const BenchArgs& a)
{
  if (a.list) {
    for (const auto& s : experiments::bench_scenarios())
      fmt::print("{:<24} {:<11} {}\n", s.name, experiments::bench_kind_table.name(s.kind), s.description);
    return exit_ok;
  }
  const bool import_files = !a.names.empty() && a.names.front() == "import";
  const std::vector<std::string> names(a.names.begin() + (import_files ? 1 : 0), a.names.end());
  if (names.empty())
    throw UsageError{import_files ? "bench import needs trace files"
                                  : "bench needs a scenario name or experiment file (ddlsim bench --list shows them)"};
  if (!import_files && names.size() > 1)
    throw UsageError{"bench takes one scenario (ddlsim bench --list shows them)"};
  std::optional<std::uint64_t> trace_size;
  if (a.trace_size) {
    double bytes = 0;
    try {
      bytes = parse_quantity(*a.trace_size, Dimension::bytes);
    } catch (const UnitError& e) {
      throw UsageError{"--trace-size: " + std::string(e.what())};
    }
    if (!(bytes >= 1e3 && bytes <= 1e11))
      throw UsageError{"--trace-size expects 1kB to 100GB, not '" + *a.trace_size + "'"};
    trace_size = static_cast<std::uint64_t>(bytes);
  }
  std::vector<experiments::BenchScenario> scenarios;
  for (const auto& name : names)
    scenarios.push_back(import_files ? experiments::trace_file_scenario(name) : experiments::find_bench_scenario(name));
  // Each option belongs to one kind: say so rather than ignore it.
  const experiments::BenchKind kind = scenarios.front().kind;
  auto only_for                     = [&](bool given, const char* option, experiments::BenchKind k) {
    if (given && kind != k)
      throw UsageError{fmt::format("{} is for {} scenarios; {} is a {} scenario", option,
                                                       experiments::bench_kind_table.name(k), scenarios.front().name,
                                                       experiments::bench_kind_table.name(kind))};
  };
  only_for(a.no_compare, "--no-compare", experiments::BenchKind::simulation);
  only_for(a.jobs > 0, "--jobs", experiments::BenchKind::sweep);
  only_for(trace_size.has_value(), "--trace-size", experiments::BenchKind::trace_import);
  if (trace_size && import_files)
    throw UsageError{"--trace-size is for the synthetic import scenarios, not for trace files"};
  experiments::BenchOptions options;
  options.repeat          = a.repeat;
  options.compare         = !a.no_compare;
  options.jobs            = a.jobs > 0 ? a.jobs : 1;
  options.synthetic_bytes = trace_size.value_or(0);
  for (const auto& scenario : scenarios) {
    const experiments::BenchResult result = experiments::run_bench(scenario, options);
    print_bench(result);
    if (a.csv)
      experiments::append_bench_csv(*a.csv, result);
  }
  return exit_ok;
}

// ---- collective: nccl-tests' table from a simulation (experiments/CollectiveBench.hpp) ---------

struct CollectiveArgs {
  std::string cluster;
  std::optional<int> gpus;
  std::optional<std::string> op, log, calibration, algorithm, protocol;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M", dtype = "float", redop = "sum",
              fidelity = "auto", ignored;
  int factor = 1, root = 0;
};

int cmd_collective(const CollectiveArgs& a)
{
  experiments::CollectiveSweep sweep;
  sweep.dtype = a.dtype;
  sweep.redop = a.redop;
  sweep.root = a.root;
  auto size = [](const std::string& text, const char* what) {
    try {
      return experiments::parse_nccl_tests_size(text);
    } catch (const std::invalid_argument& e) {
      throw UsageError{fmt::format("{}: {}", what, e.what())};
    }
  };
  const double min_bytes = size(a.min_bytes, "--minbytes"), max_bytes = size(a.max_bytes, "--maxbytes"),
               step = size(a.step_bytes, "--stepbytes");
  if (a.algorithm) {
    const auto algorithm = sim::collective_algorithm_table.parse(*a.algorithm);
    if (!algorithm)
      throw UsageError{fmt::format("--algo '{}': expected {}", *a.algorithm, sim::collective_algorithm_table.names())};
    sweep.algorithm = *algorithm;
  }
  if (a.protocol) {
    sweep.protocol = sim::collective_protocol_table.parse(*a.protocol);
    if (!sweep.protocol)
      throw UsageError{fmt::format("--proto '{}': expected {}", *a.protocol, sim::collective_protocol_table.names())};
  }
  sweep.fidelity = a.fidelity == "flow"       ? experiments::CollectiveFidelityChoice::flow
                   : a.fidelity == "analytic" ? experiments::CollectiveFidelityChoice::analytic
                                              : experiments::CollectiveFidelityChoice::automatic;
  std::optional<std::string> op = a.op;
  std::optional<int> gpus = a.gpus;
  traces::TraceSet measured;
  if (a.log) {
    measured = traces::import_nccl_tests(*a.log);
    const auto& first = measured.collectives.front();
    if (!op)
      op = first.collective;
    if (!gpus && first.group_size > 0)
      gpus = first.group_size;
    if (!first.dtype.empty())
      sweep.dtype = first.dtype;
  }
  sweep.op = op.value_or("all_reduce");
  const sim::ClusterSpec whole = sim::load_cluster(a.cluster);
  sweep.gpus = gpus.value_or(whole.gpu_count());
  sweep.cluster_label = a.cluster;
  std::optional<calibration::CalibrationProfile> profile;
  if (a.calibration) {
    profile = calibration::load_profile(*a.calibration);
    sweep.profile = &*profile;
    sweep.profile_label = *a.calibration;
  }
  try {
    sweep.cluster = sim::first_gpus(whole, sweep.gpus);
    if (a.log) {
      const std::string logged = measured.collectives.front().collective;
      if (experiments::nccl_tests_program(sweep.op) != experiments::nccl_tests_program(logged))
        throw std::invalid_argument(fmt::format("--op {}: the log measured {}", sweep.op, logged));
      std::set<double> seen;
      for (const auto& r : measured.collectives)
        if (seen.insert(r.bytes).second)
          sweep.sizes.push_back(r.bytes);
    } else {
      sweep.sizes = experiments::nccl_tests_sizes(min_bytes, max_bytes, a.factor, a.factor > 1 ? 0 : step);
    }
    const auto rows = experiments::simulate_collective_sweep(sweep);
    if (a.log)
      experiments::print_comparison(std::cout, *a.log, sweep, experiments::compare_with_log(measured, sweep, rows));
    else
      experiments::print_nccl_tests(std::cout, sweep, rows);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  }
  return exit_ok;
}

// ---- calibrate ------------------------------------------------------------------------------

// calibrate fit: trace records -> a measured profile (calibration/ProfileFit.hpp).
struct CalibrateFitArgs {
  std::vector<std::string> files;
  std::string output, base;
  std::optional<std::string> name;
  std::string command_line;
  bool accept_poor_fit = false;
  bool host_only = false;
};

int cmd_calibrate_fit(const CalibrateFitArgs& a)
{
  traces::TraceSet records;
  for (const auto& f : a.files) {
    if (traces::is_gzip_file(f)) { // records kept compressed (calibration/measurements/*/records.jsonl.gz)
      std::istringstream text(traces::read_maybe_gzip(f));
      traces::append(records, traces::read_jsonl(text, f));
    } else {
      traces::append(records, traces::read_jsonl(f));
    }
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  const calibration::FitOptions options{.name    = a.name ? *a.name : std::filesystem::path(a.output).stem().string(),
                                        .base    = a.base,
                                        .sources = joined(a.files),
                                        .command = a.command_line,
                                        .date    = date,
                                        .accept_poor_fit = a.accept_poor_fit};
  const calibration::FitResult fit = a.host_only
                                         ? calibration::fit_host_profile(calibration::load_profile(a.base), records, options)
                                         : calibration::fit_profile(calibration::load_profile(a.base), records, options);
  for (const auto& note : fit.notes)
    fmt::print(stderr, "ddlsim: {}\n", note);
  const calibration::CalibrationProfile& profile = fit.profile;
  write_file_atomically(a.output, "the profile", [&](std::ostream& out) { calibration::write_profile(profile, out); });
  const auto host = std::count_if(profile.parameters.begin(), profile.parameters.end(),
                                  [](const auto& p) { return p.first.starts_with("host_"); });
  fmt::print(stderr, "ddlsim: wrote {} ({} fitted collectives, {} kernel tables, {} host parameters)\n", a.output,
             profile.collectives.size(), profile.kernel_tables.size(), host);
  return exit_ok;
}

struct CalibrateReportArgs {
  std::string profile;
};

int cmd_calibrate_report(const CalibrateReportArgs& a)
{
  const auto profile = calibration::load_profile(a.profile);
  fmt::print("profile {} ({}){}{}\n", profile.name,
             profile.kind == calibration::ProfileKind::measured ? "measured" : "analytic",
             profile.device.empty() ? "" : ", device ", profile.device);
  for (const auto& [k, v] : profile.provenance)
    fmt::print("  {:<20} {}\n", k, v);
  fmt::print("\nparameters:\n");
  for (const auto& [name, p] : profile.parameters)
    fmt::print("  {:<20} {:14.6g} {:<7} {}\n", name, p.value, p.unit, p.source);
  if (!profile.gemm_tiles.tiles.empty()) {
    std::string tiles;
    for (const auto& t : profile.gemm_tiles.tiles)
      tiles += fmt::format("{}{}x{}", tiles.empty() ? "" : ", ", t.m, t.n);
    fmt::print("\ngemm_tiles (shape-aware kernel costs, docs/kernels.md): {}\n  {}\n", tiles, profile.gemm_tiles.source);
  }
  if (!profile.kernel_tables.empty()) {
    fmt::print("\nkernel tables (log-log interpolation inside the measured range, roofline outside):\n");
    fmt::print("  {:<13} {:<5} {:>6} {:>12} {:>12} {:>14} {:>14} {:>8} {:>14}\n", "op", "dtype", "points", "min_work",
               "max_work", "held_out_med", "held_out_max", "shapes", "grid_held_out");
    for (const auto& t : profile.kernel_tables) {
      const bool measured   = t.held_out_error >= 0;
      const std::string med = measured ? fmt::format("{:.2f}%", 100 * t.held_out_error) : "-";
      const std::string max = measured ? fmt::format("{:.2f}%", 100 * t.max_held_out_error) : "-";
      const std::string grid =
          t.grid_held_out_error >= 0
              ? fmt::format("{:.2f}% (max {:.0f}%)", 100 * t.grid_held_out_error, 100 * t.max_grid_held_out_error)
              : "-";
      const char* unit = t.work_unit()[0] == 'f' ? "fl" : "B";
      fmt::print("  {:<13} {:<5} {:6} {:9.3g} {:<2} {:9.3g} {:<2} {:>14} {:>14} {:8} {:>14}\n", t.op,
                 t.dtype.empty() ? "any" : t.dtype, t.points.size(), t.points.front().work, unit, t.points.back().work,
                 unit, med, max, t.shapes.size(), grid);
    }
  }
  if (profile.collectives.empty()) {
    fmt::print("\nno fitted collectives\n");
    return exit_ok;
  }
  fmt::print("\ncollectives (t = alpha + bytes / bandwidth per size regime):\n");
  fmt::print("  {:<15} {:>5} {:>12} {:>12} {:>12} {:>14} {:>8} {:>7} {:>9}\n", "collective", "ranks", "min_bytes",
             "max_bytes", "alpha_s", "bandwidth_B/s", "R^2", "points", "max_err");
  for (const auto& c : profile.collectives) {
    for (const auto& r : c.regimes)
      fmt::print("  {:<15} {:5} {:12.0f} {:12.0f} {:12.4g} {:14.4g} {:8.5f} {:7} {:8.2f}%\n", c.collective,
                 c.group_size, r.min_bytes, r.max_bytes, r.alpha_s, r.bandwidth, r.r2, r.points,
                 100 * r.max_relative_error);
    if (c.held_out_error >= 0)
      fmt::print("  {:<15} held-out median error {:.2f}%\n", "", 100 * c.held_out_error);
    else
      fmt::print("  {:<15} held-out error not measured (fewer than 6 sizes)\n", "");
  }
  return exit_ok;
}

// calibrate collect: hands over to ddlsim-collect (calibration/collector/), which sits next to this
// binary when CUDA was found at build time; this binary itself links no CUDA library.
struct CalibrateCollectArgs {
  const CLI::App* app = nullptr; // its remaining() arguments are ddlsim-collect's own, passed through
};

int cmd_calibrate_collect(const CalibrateCollectArgs& a)
{
  std::error_code ec;
  const std::filesystem::path self      = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path collector = self.parent_path() / "ddlsim-collect";
  if (ec || !std::filesystem::exists(collector))
    throw Error(std::string("calibrate collect needs ddlsim-collect, which is built only with the CUDA toolkit (") +
                (config::have_cuda ? "this build found CUDA, but " + collector.string() + " is missing"
                                   : "this build found none: put nvcc on PATH and reconfigure, or build "
                                     "calibration/collector on its own with cmake") +
                ")");
  std::vector<std::string> args{collector.string()};
  for (const auto& arg : a.app->remaining())
    args.push_back(arg);
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execv(collector.c_str(), argv.data());
  throw Error("cannot run " + collector.string() + ": " + std::strerror(errno));
}

struct CalibrateImportArgs {
  std::vector<std::string> files;
  std::string output;
  std::vector<double> untraced_step_s;  ///< one per file, 0 for none
  std::string command_line;
};

// The host records of a PyTorch trace: their kinds, and the step's time without the profiler.
void complete_host_records(traces::TraceSet& set, const std::string& file, double untraced_step_s)
{
  calibration::classify_host_ops(set.host_ops);
  if (untraced_step_s > 0 && set.host_steps.empty())
    throw Error(file + ": --untraced-step-s given, but the file holds no training step (a PyTorch profiler trace "
                       "with CPU activities)");
  for (auto& step : set.host_steps)
    step.untraced_step_s = untraced_step_s;
}

std::string host_summary(const traces::TraceSet& set)
{
  if (set.host_steps.empty())
    return "";
  int forward = 0, backward = 0;
  for (const auto& r : set.host_ops)
    (r.pass == "backward" ? backward : forward) += r.count;
  const auto& s = set.host_steps.front();
  return fmt::format("; host: {} forward ops, {} backward nodes, host span {:.2f} ms, GPU busy {:.0f}% of {:.2f} ms",
                     forward, backward, s.host_span_s * 1e3, s.span_s > 0 ? 100 * s.gpu_busy_s / s.span_s : 0.0,
                     s.span_s * 1e3);
}

int cmd_calibrate_import(const CalibrateImportArgs& a)
{
  if (!a.untraced_step_s.empty() && a.untraced_step_s.size() != a.files.size())
    throw UsageError{fmt::format("--untraced-step-s takes one time per FILE, in order (0 for none): {} given for {} "
                                 "files",
                                 a.untraced_step_s.size(), a.files.size())};
  // Read everything first: a bad file means nothing is written.
  std::vector<traces::TraceSet> sets;
  for (std::size_t i = 0; i < a.files.size(); ++i) {
    sets.push_back(traces::import_trace(a.files[i]));
    complete_host_records(sets.back(), a.files[i], a.untraced_step_s.empty() ? 0.0 : a.untraced_step_s[i]);
    sets.back().provenance["import_command"] = a.command_line;
  }
  write_file_atomically(a.output, "the records", [&](std::ostream& out) {
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
    fmt::print(stderr, "{}: {} kernels, {} collectives{}{}; {} events skipped\n", a.files[i], set.kernels.size(),
               set.collectives.size(), summary.empty() ? "" : " (" + summary + ")", host_summary(set),
               set.skipped_total());
    for (const auto& [reason, n] : set.skipped)
      fmt::print(stderr, "  skipped {}: {}\n", n, reason);
  }
  fmt::print(stderr, "ddlsim: wrote {}\n", a.output);
  return exit_ok;
}

// ---- execute: every point simulated and executed (experiments/CrossCheck.hpp) ------------------

struct ExecuteArgs {
  std::string file, backend;
  std::optional<std::string> output, launcher, prepare;
  std::optional<int> warmup, iterations;  ///< unset: the backend's default (torch 2 and 3, else 1 and 5)
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
  options.backend = a.backend == "host"   ? experiments::Backend::host
                    : a.backend == "cuda" ? experiments::Backend::cuda
                                          : experiments::Backend::torch;
  const bool torch = options.backend == experiments::Backend::torch;
  options.warmup     = a.warmup.value_or(torch ? 2 : 1);  // torch: as ../shared/data/pytorch-h200/README.md times
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
    options.work_dir                        = *a.prepare;
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
             a.backend == "host" ? "the host" : torch ? "PyTorch" : "the GPUs",
             result.mean_abs_error_pct, result.compared);
  if (!result.profile_path.empty())
    fmt::print("host profile (measured in this run): {}\n", result.profile_path);
  return result.compared > 0 ? exit_ok : exit_bad_input;
}

// ---- export chakra: one point's task graph as Chakra ET files (experiments/ChakraWorkload.hpp) ----

struct ExportChakraArgs {
  std::string file, output;
  std::optional<int> point;
  std::vector<std::string> sets;
};

int cmd_export_chakra(const ExportChakraArgs& a)
{
  const auto exp    = experiments::Experiment::load(a.file, a.sets);
  const auto points = exp.points();
  if (!a.point && points.size() > 1)
    throw UsageError{fmt::format("{} has {} points: choose one with --point N (0..{})", a.file, points.size(),
                                 points.size() - 1)};
  const auto chosen = std::find_if(points.begin(), points.end(), [&](const auto& p) {
    return static_cast<int>(p.index) == a.point.value_or(static_cast<int>(p.index));
  });
  if (chosen == points.end())
    throw UsageError{fmt::format("--point {}: {} has no such point", *a.point, a.file)};
  if (!chosen->is_valid()) {
    print_diagnostics(chosen->problems);
    return exit_bad_input;
  }
  const experiments::ChakraExport written = experiments::write_chakra(*chosen, a.output);
  fmt::print("{}: point {} as {} Chakra ET files ({} nodes): {}.<rank>.et; process groups in {}\n", a.output,
             chosen->index, written.files.size(), written.nodes,
             (std::filesystem::path(a.output) / chosen->experiment).string(), written.comm_groups);
  return exit_ok;
}

// ---- profile gemm|attention: the shape-aware kernel model (calibration/KernelModel.hpp) ---------

struct ProfileKernelArgs {
  std::string profile, dtype = "bf16";
  std::vector<long long> dims;  // M N K, or HEADS SEQ HEAD_DIM
  long long batch = 1;
  bool causal = false, backward = false;
};

int cmd_profile_gemm(const ProfileKernelArgs& a)
{
  if (a.dims.size() != 3)
    throw UsageError{"profile gemm needs PROFILE M N K"};
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  const calibration::CalibrationProfile profile = calibration::load_profile(a.profile);
  auto us = [](double s) { return s * 1e6; };
  const calibration::GemmDims dims{.m = static_cast<double>(a.dims[0]), .n = static_cast<double>(a.dims[1]),
                                   .k = static_cast<double>(a.dims[2]), .batch = static_cast<double>(a.batch)};
  const calibration::GemmEstimate e = calibration::estimate_gemm(profile, dims, *dtype);
  fmt::print("gemm {} m={} n={} k={} batch={} on {}\n", a.dtype, a.dims[0], a.dims[1], a.dims[2], a.batch, profile.name);
  fmt::print("time_us {:.3f}\nflop_per_s {:.6g}\nefficiency {:.4f}\nbound {}\n", us(e.seconds), e.flop / e.seconds,
             e.efficiency, calibration::kernel_bound_name(e.bound));
  if (e.ctas > 0)
    fmt::print("tile {}x{}, split-K {}: {} CTAs in {} wave(s) on {:g} SMs; compute {:.3f} us, memory {:.3f} us{}\n",
               e.tile.m, e.tile.n, e.split_k, e.ctas, e.waves, profile.value("sm_count"), us(e.compute_s),
               us(e.memory_s), e.split_k > 1 ? fmt::format(", split-K reduction {:.3f} us", us(e.split_s)) : "");
  else if (!profile.gemm_tiles.tiles.empty())
    fmt::print("matrix-vector kernel (at most {:g} rows or columns): compute {:.3f} us, memory {:.3f} us\n",
               profile.value("gemv_max_rows"), us(e.compute_s), us(e.memory_s));
  else
    fmt::print("flat roofline (the profile lists no gemm_tiles): compute {:.3f} us, memory {:.3f} us\n",
               us(e.compute_s), us(e.memory_s));
  return exit_ok;
}

int cmd_profile_attention(const ProfileKernelArgs& a)
{
  if (a.dims.size() != 3)
    throw UsageError{"profile attention needs PROFILE HEADS SEQ HEAD_DIM"};
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  const calibration::CalibrationProfile profile = calibration::load_profile(a.profile);
  const std::string peak_name = "peak_flops_" + a.dtype;
  const double peak           = profile.find(peak_name) ? profile.value(peak_name) : 0.0;
  const calibration::AttentionDims dims{.heads    = static_cast<double>(a.dims[0]),
                                        .q        = static_cast<double>(a.dims[1]),
                                        .kv       = static_cast<double>(a.dims[1]),
                                        .head_dim = static_cast<double>(a.dims[2]),
                                        .causal   = a.causal,
                                        .backward = a.backward};
  const calibration::AttentionEstimate e = calibration::estimate_attention(profile, dims, *dtype);
  fmt::print("attention {} {} heads={} seq={} head_dim={}{} on {}\n", a.backward ? "backward" : "forward", a.dtype,
             a.dims[0], a.dims[1], a.dims[2], a.causal ? " causal" : "", profile.name);
  fmt::print("time_us {:.3f}\nflop_per_s {:.6g}\nefficiency {:.4f}\nbound {}\n", e.seconds * 1e6, e.efficiency * peak,
             e.efficiency, calibration::kernel_bound_name(e.bound));
  return exit_ok;
}

// ---- help -----------------------------------------------------------------------------------

struct HelpArgs {
  const CLI::App* root = nullptr;
  std::vector<std::string> topic;
};

int cmd_help(const HelpArgs& a)
{
  const CLI::App* app = a.root;
  std::string prefix; // "ddlsim search" for `help search grid`
  for (const auto& name : a.topic) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == name)
        sub = s;
    if (!sub)
      throw UsageError{"help: no command '" + name + "'"};
    prefix += (prefix.empty() ? "" : " ") + app->get_name();
    app = sub;
  }
  // CLI::App::help() prints the help of the subcommand that was parsed, which for the root is this
  // `help` command itself: the root's own text comes from its formatter.
  fmt::print("{}", a.topic.empty() ? app->get_formatter()->make_help(app, app->get_name(), CLI::AppFormatMode::Normal)
                                   : app->help(prefix));
  return exit_ok;
}

// ---- The commands: every subcommand of ddlsim, its options and its function ------------------

void define_commands(cli::CommandTable& table, const std::string& command_line)
{
  CLI::App& root = table.root();
  root.set_version_flag("--version",
                        fmt::format("ddlsim {} (git {}, SimGrid {}, CUDA toolkit {}, MPI {} at build time, {})",
                                    config::version, config::git_hash, config::simgrid_version,
                                    config::have_cuda ? "found" : "not found",
                                    config::have_mpi ? "found" : "not found", config::allocator),
                        "version, git commit and SimGrid version");
  root.footer("ddlsim COMMAND --help shows a command's options; the manual is README.md and docs/.\n"
              "exit codes: 0 ok, 1 bad input (file:line: key: message), 2 usage error");

  {
    auto c =
        table.add<RunArgs>(root, "run", "simulate every point of the experiment's sweep and write one CSV", cmd_run);
    auto& a = c.args;
    add_experiment(c.app, a.file);
    add_output(c.app, a.output, "CSV path (default: the file's output.csv, else results/<name>.csv)");
    cli::add_int(c.app, "-j,--jobs", a.options.jobs, 1, 1024,
                 "simulate N points at once, one process each (default 1)");
    add_sets(c.app, a.sets,
             "override a key, e.g. --set training.micro_batch=4 (repeatable); --set sweep.KEY=[v1,v2] replaces a "
             "sweep axis");
    add_columns(c.app, a.columns);
    c.app
        ->add_option("--trace-dir", a.options.evaluate.trace_dir,
                     "write a Chrome-trace timeline per point (open in Perfetto) and a per-device CSV next to it")
        ->type_name("DIR");
    c.app->add_flag("--quiet", a.quiet, "no summary on stderr, and no progress unless --progress says so");
    std::string progress_help = "progress on stderr (default auto; never under --quiet)";
    for (const auto& mode : cli::progress_mode_table.entries)
      progress_help += fmt::format("; {}: {}", mode.name, mode.help);
    c.app->add_option("--progress", a.progress, progress_help)
        ->check(
            [](const std::string& v) {
              return cli::progress_mode_table.parse(v)
                         ? std::string()
                         : "expects one of " + cli::progress_mode_table.names() + ", not '" + v + "'";
            },
            "", "")
        ->type_name("auto|always|never");
    c.app->add_flag("--plot", a.plot,
                    "also draw the experiment's figure (output.plot, a script of plots/) next to the CSV as .png, "
                    "with a python3 that has matplotlib");
    c.app->add_flag("--resume", a.resume,
                    "keep the rows of the CSV already at -o that belong to this sweep (same point, same "
                    "configuration) and simulate only the rest");
    c.app
        ->add_option("--shard", a.shard,
                     "only the points whose index mod N is I (0 <= I < N), for job arrays; join the parts with "
                     "`ddlsim merge`")
        ->type_name("I/N");
    c.app
        ->add_option_function<std::string>(
            "--point-timeout",
            [&a](const std::string& t) {
              char* end         = nullptr;
              a.point_timeout_s = std::strtod(t.c_str(), &end);
              if (end == t.c_str() || *end != '\0' || !(a.point_timeout_s > 0))
                throw CLI::ValidationError("--point-timeout needs a positive number of seconds, not '" + t + "'");
            },
            "kill a point still simulating after S seconds: an `error` row, and the sweep goes on (a crashing "
            "point is an `error` row too)")
        ->type_name("S");
    c.app->add_flag("--mpi", a.mpi,
                    "under mpirun: the ranks share the points, rank 0 writes the CSV (built when MPI is found: "
                    "libopenmpi-dev)");
    c.app->add_flag("--no-stream-chains{false}", a.options.evaluate.replay.chain_stream,
                    "a timer per stream task instead of one per run of a GPU's consecutive tasks (slower; the same "
                    "numbers: for checking the fast path)");
    c.app->add_option("--cfg", a.options.evaluate.replay.simgrid_config, "pass a setting to SimGrid (repeatable)")
        ->allow_extra_args(false)
        ->type_name("NAME:VALUE");
    c.app->add_option("--log", a.options.evaluate.replay.simgrid_log, "pass a log setting to SimGrid (repeatable)")
        ->allow_extra_args(false)
        ->type_name("SETTING");
  }
  {
    auto c = table.add<ValidateArgs>(
        root, "validate", "check the file and every point, memory included, without simulating", cmd_validate);
    c.app->footer("Prints every problem, and every point that does not fit in GPU memory (its stage, every term and "
                  "the largest); exits 1 on an out-of-memory point unless --allow-oom.");
    add_experiment(c.app, c.args.file);
    c.app->add_flag("--allow-oom", c.args.allow_oom, "report out-of-memory points but exit 0");
    add_sets(c.app, c.args.sets);
  }
  {
    auto c = table.add<MergeArgs>(root, "merge", "join the CSVs of a sharded sweep, in point order", cmd_merge);
    c.app->footer("A point present in two parts must agree; CSVs of other ddlsim versions are refused.");
    c.app->add_option("CSV", c.args.files, "the parts")->required()->type_name("...");
    c.app->add_option("-o,--output", c.args.output, "the merged CSV")->required()->type_name("OUT.csv");
    add_columns(c.app, c.args.columns);
  }
  {
    auto c = table.add<ReportArgs>(root, "report", "the best points of a result CSV as a readable table",
                                   cmd_report);
    c.app->footer("Ranks the ok rows by throughput and prints the best with their breakdown: iteration time, "
                  "samples/s, tokens/s per GPU, MFU, compute, bubble, exposed communication, memory per GPU of "
                  "its capacity, after the layout columns that differ between them (those equal are named once "
                  "above). docs/running.md");
    c.app->add_option("CSV", c.args.file, "a CSV that ddlsim run, execute or a search wrote")
        ->required()
        ->type_name("");
    cli::add_int(c.app, "--top", c.args.top, 1, 1 << 30, "rows shown (default 10)");
  }
  {
    CLI::App* search = root.add_subcommand("search", "find the best micro-batch, grid or parallel layout");
    search->require_subcommand(1);
    auto m = table.add<SearchMicrobatchArgs>(
        *search, "microbatch",
        "the best micro-batch size and count per mini-batch, and the largest trainable mini-batch",
        cmd_search_microbatch);
    m.app->footer("The memory-aware micro-batch size search: per mini-batch (doubling from the experiment's), the "
                  "fastest micro-batch size and count against GPipe's M = 4 x pp, and the largest trainable "
                  "mini-batch of each. docs/search.md");
    add_search_options(m.app, m.args, m.args.options.jobs, "every point tried (default results/NAME-microbatch.csv)");
    cli::add_int(m.app, "--max-batch", m.args.options.max_batch, 1, 1 << 30,
                 "the largest mini-batch tried (default 16 x the experiment's)");

    auto g = table.add<SearchGridArgs>(
        *search, "grid", "every pp x tp x dp shape of the cluster's GPUs, ranked by throughput", cmd_search_grid);
    g.app->footer("Every pp x tp (P_r) x dp (P_c) shape of the cluster's GPUs, ranked by throughput, with pure data "
                  "and pure model parallelism marked (the experiment's cp, zero and sequence_parallel stay: dp = GPUs "
                  "/ (pp tp cp)). docs/search.md");
    add_search_options(g.app, g.args, g.args.options.jobs, "every shape (default results/NAME-grid.csv)");
    g.app->add_flag_callback(
        "--no-pipeline", [&o = g.args.options] { o.pipeline = false; }, "only pp = 1: the P_r x P_c grid");

    auto p = table.add<SearchParallelArgs>(
        *search, "parallel", "every tp, pp, dp, cp, ep, ZeRO stage and micro-batch: screened, the best simulated",
        cmd_search_parallel);
    p.app->footer("Every tp x pp x dp x cp, ep (mixtures of experts), ZeRO stage and micro-batch of the cluster for the experiment's model and "
                  "global batch: those that fit in memory ranked by a closed form, the best simulated and ranked by "
                  "throughput. docs/search.md");
    add_search_options(p.app, p.args, p.args.options.jobs, "the simulated layouts (default results/NAME-parallel.csv)");
    cli::add_int(p.app, "--top", p.args.top, 1, 100000, "layouts simulated in full (default 16)");
    p.app->add_option("--zero", p.args.zero, "ZeRO stages tried, e.g. 1,3 (default 0,1,2,3)")->type_name("LIST");
    p.app->add_option("--ep", p.args.ep, "expert-parallel sizes tried, e.g. 1,8 (default: every one that fits)")
        ->type_name("LIST");
  }
  {
    auto c = table.add<ModelArgs>(root, "model", "a model's blocks (pipeline partition units) or layers, and totals",
                                  cmd_model);
    c.app->add_option("MODEL", c.args.name, "a zoo name or a model file")->type_name("");
    c.app->add_flag("--layers", c.args.layers, "one row per layer, with output shape and kernel shapes");
    c.app->add_option("--dtype", c.args.dtype, "element type for the byte columns (default bf16)")->type_name("DTYPE");
    c.app->add_flag("--list", c.args.list, "list the shipped model names");
  }
  {
    auto c = table.add<BenchArgs>(root, "bench", "how fast a simulation, a sweep or a trace import runs (bench --list)",
                                  cmd_bench);
    c.app->footer("SCENARIO is bench/*.yaml, a built-in one, or a path. By kind: simulation (one simulated "
                  "iteration's wall time, peak memory and activity rate, next to a bare SimGrid DAG of the same "
                  "size), sweep (a whole sweep's points per second at -j N), import (a synthetic Kineto trace through "
                  "the importer, MB per second). `bench import TRACE...`: the import rate of trace files (Kineto, "
                  "nccl-tests; gzip or not). docs/running.md");
    c.app->add_option("SCENARIO", c.args.names, "a scenario, or `import` and trace files")
        ->type_name("| import TRACE...");
    c.app->add_flag("--list", c.args.list, "list the scenarios and their kinds");
    cli::add_int(c.app, "--repeat", c.args.repeat, 1, 100, "median of N runs (default 1)");
    c.app
        ->add_option("-o,--output", c.args.csv,
                     "append the figures to a CSV (one row per scenario, units in the names)")
        ->type_name("FILE");
    c.app->add_flag("--no-compare", c.args.no_compare, "simulation: skip the bare SimGrid DAG");
    cli::add_int(c.app, "-j,--jobs", c.args.jobs, 1, 1024, "sweep: points simulated at once (default 1)");
    c.app
        ->add_option("--trace-size", c.args.trace_size,
                     "import: the synthetic trace's JSON size, e.g. 4MB (default 64MB)")
        ->type_name("BYTES");
  }
  {
    auto c = table.add<CollectiveArgs>(
        root, "collective", "one collective over a range of sizes, printed as nccl-tests prints it", cmd_collective);
    auto& a = c.args;
    c.app->footer("Size, count, type, redop, root, time, algbw, busbw, out-of-place then in-place (the same simulated "
                  "time), so that it stands beside an all_reduce_perf log; sizes and bus bandwidth as nccl-tests "
                  "defines them (all_to_all: count per peer, busbw = algbw (n-1)/n). --compare LOG simulates a real "
                  "log's sizes (text or -J JSON) and prints the error per size. docs/collectives.md");
    c.app->add_option("--cluster", a.cluster, "a shipped cluster or a cluster file")->required()->type_name("C");
    c.app
        ->add_option_function<std::string>(
            "-g,--gpus", [&a](const std::string& v) { a.gpus = cli::parse_int(v, "--gpus", 1, 1 << 24); },
            "ranks: the cluster's first N GPUs (default: all; with --compare, the log's)")
        ->type_name("N");
    c.app->add_option("--op", a.op,
                      "all_reduce (default), all_gather, reduce_scatter, broadcast, all_to_all, send_recv "
                      "(or the nccl-tests program's name)")
        ->type_name("OP");
    c.app->add_option("-b,--minbytes", a.min_bytes, "smallest size (default 32M; 8, 64K, 1G = 2^30, or 1GiB)")
        ->type_name("SIZE");
    c.app->add_option("-e,--maxbytes", a.max_bytes, "largest size (default 32M)")->type_name("SIZE");
    cli::add_int(c.app, "-f,--stepfactor", a.factor, 1, 1 << 20, "multiply the size by N (default: add -i)");
    c.app->add_option("-i,--stepbytes", a.step_bytes, "add SIZE (default 1M)")->type_name("SIZE");
    c.app->add_option("-d,--datatype,--dtype", a.dtype, "nccl-tests type: float (default), half, bfloat16, int8, ...")
        ->type_name("T");
    c.app->add_option("--redop", a.redop, "the reduction name printed (default sum)")->type_name("OP");
    cli::add_int(c.app, "-r,--root", a.root, 0, 1 << 24, "broadcast's root (default 0)");
    c.app
        ->add_option("--algo", a.algorithm,
                     "force NCCL's algorithm: ring, tree, double_tree, hierarchical, nvls, sharp, direct (all-to-all); "
                     "default auto")
        ->type_name("ALGO");
    c.app->add_option("--proto", a.protocol, "force NCCL's protocol: ll, ll128 or simple")->type_name("PROTO");
    c.app->add_option("--fidelity", a.fidelity, "flow, analytic or auto (default: flow up to 200,000 messages a size)")
        ->check(CLI::IsMember({"auto", "flow", "analytic"}))
        ->type_name("F");
    c.app->add_option("--calibration", a.calibration, "time it by the profile's measured curves where they match")
        ->type_name("PROFILE");
    c.app->add_option("--compare", a.log, "a real nccl-tests log: simulate its sizes and print the error per size")
        ->type_name("LOG");
    for (const char* ignored : {"-n,--iters", "-w,--warmup_iters", "-c,--check"})
      c.app->add_option(ignored, a.ignored, "accepted and ignored (a simulation needs no repetitions or checks)")
          ->type_name("N");
  }
  {
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
  {
    CLI::App* exporter = root.add_subcommand("export", "write a point in another tool's workload format");
    exporter->require_subcommand(1);
    auto c = table.add<ExportChakraArgs>(
        *exporter, "chakra", "one point as Chakra execution traces, one DIR/<name>.<rank>.et per GPU",
        cmd_export_chakra);
    c.app->footer("For ASTRA-sim and Chakra's tools (DIR/comm_groups.json: the process groups); import them back "
                  "with model: {chakra: DIR}. docs/chakra.md");
    add_experiment(c.app, c.args.file);
    c.app->add_option("-o,--output", c.args.output, "the folder of .et files")->required()->type_name("DIR");
    cli::add_int(c.app, "--point", c.args.point, 0, 1 << 30, "the sweep point (needed when the sweep has several)");
    add_sets(c.app, c.args.sets);
  }
  {
    CLI::App* profile = root.add_subcommand("profile", "a kernel's predicted time on a profile's GPU");
    profile->require_subcommand(1);
    auto dimensions = [](CLI::App* app, ProfileKernelArgs& a, const char* names) {
      app->add_option("PROFILE", a.profile, "a shipped profile or a file")->required()->type_name("");
      app->add_option("DIMS", a.dims, names)
          ->required()
          ->check(CLI::Range(1LL, 1LL << 40))
          ->type_name(names);
      app->add_option("--dtype", a.dtype, "element type (default bf16)")->type_name("DTYPE");
    };
    auto g = table.add<ProfileKernelArgs>(*profile, "gemm",
                                          "one GEMM C[M x N] = A[M x K] B[K x N]: time, flop/s, efficiency and why",
                                          cmd_profile_gemm);
    g.app->footer("Efficiency is the share of the dtype's dense peak; the why is the tile, split-K and waves over the "
                  "SMs, or the memory and launch floor. docs/kernels.md");
    dimensions(g.app, g.args, "M N K");
    cli::add_int(g.app, "--batch", g.args.batch, 1, 1LL << 40, "a batched GEMM of B such products (default 1)");
    auto at = table.add<ProfileKernelArgs>(
        *profile, "attention", "a fused attention kernel (FlashAttention): HEADS x SEQ queries against SEQ keys",
        cmd_profile_attention);
    at.app->footer("HEADS is micro-batch x heads, each of SEQ queries and keys of HEAD_DIM. docs/kernels.md");
    dimensions(at.app, at.args, "HEADS SEQ HEAD_DIM");
    at.app->add_flag("--causal", at.args.causal, "a causal mask (half the square)");
    at.app->add_flag("--backward", at.args.backward, "the backward kernel");
  }
  {
    CLI::App* calibrate = root.add_subcommand("calibrate", "collect, import and fit calibration profiles");
    calibrate->require_subcommand(1);
    auto collect = table.add<CalibrateCollectArgs>(
        *calibrate, "collect", "time the microbenchmarks on this machine's GPUs with CUPTI (ddlsim-collect)",
        cmd_calibrate_collect);
    collect.app->footer(
        "Times GEMMs, batched GEMMs, cuDNN convolutions, memory-bound kernels, copies and NCCL collectives; runs "
        "ddlsim-collect (built when CUDA is found) with these arguments:\n"
        "  --quick               a subset that takes minutes on one GPU\n"
        "  --only OP[,OP...]     gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d, copy_d2h, collective\n"
        "  --gpus N              GPUs for the collectives (default: all visible, at most 8)\n"
        "  --timing MODE         auto (CUPTI, CUDA events if CUPTI is unavailable), cupti, events\n"
        "  --plan                print the points and exit (no GPU needed)\n"
        "  -o, --output FILE     the JSON-lines file to write\n"
        "docs/calibration.md");
    collect.app->prefix_command();
    collect.args.app = collect.app;

    auto import = table.add<CalibrateImportArgs>(*calibrate, "import",
                                                 "PyTorch profiler traces and nccl-tests output -> calibration records",
                                                 cmd_calibrate_import);
    import.app->footer(
        "Reads PyTorch profiler (Kineto) traces and nccl-tests output (text or -J JSON), gzipped or not, "
        "and writes calibration records (kernels, collectives with their sizes; from a PyTorch trace of a "
        "training step, host records: each operator's host time by pass). docs/calibration.md");
    import.args.command_line = command_line;
    import.app->add_option("FILE", import.args.files, "the traces")->required()->type_name("...");
    import.app
        ->add_option("--untraced-step-s", import.args.untraced_step_s,
                     "the step's time without the profiler, one per FILE in order (0: none): corrects the host costs "
                     "for the profiler's own (calibrate fit)")
        ->check(CLI::NonNegativeNumber)
        ->type_name("SECONDS...");
    import.app->add_option("-o,--output", import.args.output, "the JSON-lines file to write")
        ->required()
        ->type_name("traces.jsonl");

    auto fit = table.add<CalibrateFitArgs>(*calibrate, "fit", "fit calibration records into a measured profile",
                                           cmd_calibrate_fit);
    fit.app->footer("Collectives as alpha-beta size regimes, microbenchmark ops and traced GEMMs and convolutions as "
                    "lookup tables, roofline and GEMM-model efficiencies; peaks and bandwidth come from --base; says "
                    "which kernel records carried no work, and why. docs/calibration.md");
    fit.args.command_line = command_line;
    fit.app->add_option("TRACES.jsonl", fit.args.files, "the calibration records")->required()->type_name("...");
    fit.app->add_option("--base", fit.args.base, "the profile the compute parameters come from")
        ->required()
        ->type_name("PROFILE");
    fit.app->add_option("-o,--output", fit.args.output, "the profile to write")->required()->type_name("profile.yaml");
    fit.app->add_option("--name", fit.args.name, "the profile's name (default: the file's)")->type_name("NAME");
    fit.app->add_flag("--accept-poor-fit", fit.args.accept_poor_fit,
                      "write the profile even when a fit's R^2 is below 0.9 (refused otherwise)");
    fit.app->add_flag("--host-only", fit.args.host_only,
                      "fit only what PyTorch traces say of the framework (host_* from their host records; "
                      "memory_efficiency_<access> and gemm_unaligned_efficiency from their own kernels, against "
                      "--base's tables) and keep the rest of --base as it is: its tables, collectives, parameters "
                      "and provenance");

    auto report = table.add<CalibrateReportArgs>(
        *calibrate, "report", "a profile's parameters, provenance and fit quality (R^2, errors)", cmd_calibrate_report);
    report.app->add_option("PROFILE", report.args.profile, "a shipped profile or a file")->required()->type_name("");
  }
  {
    auto c      = table.add<HelpArgs>(root, "help", "this text, or a command's (ddlsim help search grid)", cmd_help);
    c.args.root = &root;
    c.app->add_option("COMMAND", c.args.topic, "a command")->type_name("...");
  }
}

} // namespace

int main(int argc, char** argv)
{
  cli::CommandTable table("ddlsim",
                          "Simulates distributed deep-learning training on a SimGrid model of a GPU cluster.");
  define_commands(table, cli::CommandTable::command_line(argc, argv));
  return table.run(argc, argv);
}
