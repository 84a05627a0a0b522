// ddlsim run, validate, merge and report: a sweep simulated into one CSV, checked without simulating,
// joined from its shards, and read back as a table.
#include "cli/Commands.hpp"
#include "cli/MpiSweep.hpp"
#include "cli/Plot.hpp"
#include "cli/Progress.hpp"
#include "common/Error.hpp"
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Report.hpp"
#include "experiments/RowSpool.hpp"
#include "experiments/SweepRunner.hpp"
#include "experiments/TimelineView.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace ddlsim::cli {

namespace {

std::string axis_text(const experiments::Experiment& exp, std::size_t index)
{
  std::string text;
  for (const auto& [key, value] : exp.axis_values(index))
    text += (text.empty() ? "" : ", ") + key + "=" + value;
  return text;
}

// ---- validate -------------------------------------------------------------------------------

struct ValidateArgs {
  std::string file;
  std::vector<std::string> sets;
  bool allow_oom = false;
};

int cmd_validate(const ValidateArgs& a)
{
  const auto exp = experiments::Experiment::load(a.file, a.sets);
  std::vector<Diagnostic> first_problems; // of the first invalid point
  const experiments::SweepCheck check =
      experiments::check_sweep(exp, [&](const experiments::PointConfig& p, const experiments::MemoryVerdict* oom) {
        if (oom) {
          fmt::print(stderr, "oom point {} ({}): {}\n", p.index, axis_text(exp, p.index), oom->message);
          return;
        }
        if (first_problems.empty())
          first_problems = p.problems;
        for (const auto& d : p.problems)
          fmt::print(stderr, "invalid point {} ({}): {}\n", p.index, axis_text(exp, p.index), d.to_string());
      });
  fmt::print("{}: {} point(s), {} valid ({} of them out of memory), {} invalid\n", a.file, check.points, check.valid,
             check.oom, check.points - check.valid);
  if (check.valid == 0) {
    if (check.points == 1)
      print_diagnostics(first_problems);
    return exit_bad_input;
  }
  return check.oom > 0 && !a.allow_oom ? exit_bad_input : exit_ok;
}

// ---- run ------------------------------------------------------------------------------------

// With --resume, the rows of an earlier run's CSV by point (experiments::point_key; the first row
// of a point when there are several); empty without.
std::unordered_map<std::string, experiments::ResultRow> previous_rows(const std::string& csv, bool resume)
{
  std::unordered_map<std::string, experiments::ResultRow> rows;
  if (!resume || !std::filesystem::exists(csv))
    return rows;
  auto table = experiments::read_csv_table(csv);
  experiments::require_identity_columns(csv, table, "--resume matches rows to points by it");
  for (auto& row : table.rows)
    rows.emplace(experiments::point_key(row), std::move(row));
  return rows;
}

struct RunArgs {
  std::string file;
  std::optional<std::string> output;
  std::vector<std::string> sets;
  experiments::SweepOptions options;
  experiments::ColumnSelection columns;
  bool quiet = false, resume = false, mpi = false, plot = false;
  std::optional<std::string> shard;
  double point_timeout_s = 0;
  std::optional<std::string> progress; ///< --progress; by default auto, never under --quiet
  std::string trace_ranks, trace_window, trace_counters, trace_format; ///< experiments/TimelineView.hpp
};

int cmd_run(const RunArgs& a)
{
  experiments::SweepOptions options = a.options;
  options.evaluate.trace_view = experiments::parse_timeline_view(a.trace_ranks, a.trace_window, a.trace_counters);
  experiments::parse_timeline_format(a.trace_format, options.evaluate.trace_view);
  int shard_index = 0, shard_count = 1;
  if (a.shard) {
    const auto slash = a.shard->find('/');
    if (slash == std::string::npos)
      throw UsageError{"--shard expects I/N, e.g. --shard 0/4"};
    shard_count = cli::parse_int(a.shard->substr(slash + 1), "--shard N", 1, 1 << 20);
    shard_index = cli::parse_int(a.shard->substr(0, slash), "--shard I", 0, shard_count - 1);
  }
  options.point_timeout_s = a.point_timeout_s;

  const auto exp  = experiments::Experiment::load(a.file, a.sets);
  const auto list = exp.point_list(); // the points are built one at a time where they run
  if (list.valid_count() == 0) {
    for (std::size_t i : list.index)
      print_diagnostics(exp.point(i).problems);
    return exit_bad_input;
  }
  const std::string csv = a.output ? *a.output : exp.output_csv().value_or("results/" + exp.get_name() + ".csv");

  const std::optional<cli::ProgressStyle> style =
      cli::progress_style(a.progress, a.quiet ? cli::ProgressMode::never : cli::ProgressMode::automatic);
  const bool show_progress                      = style.has_value();
  std::optional<cli::ProgressLine> progress; // over this rank's points (set once they are known)
  if (show_progress)
    options.on_progress = [&](std::size_t done, std::size_t) { progress->sweep(done); };
  // Under MPI each rank takes every size-th point of the shard, and rank 0 writes the CSV.
  cli::MpiWorld world;
  if (a.mpi)
    world = cli::mpi_start();
  // This shard's points (by position in `list`); with --resume, the rows the CSV already holds for
  // them are kept. Rows go to a spool on disk, so memory does not grow with the sweep.
  experiments::RowSpool rows;              // by position in `list`
  experiments::PointList todo;             // this rank's points to simulate
  std::vector<std::size_t> todo_position;  // into `list`
  std::vector<std::size_t> todo_elsewhere; // under MPI: points other ranks simulate
  std::size_t to_simulate = 0;
  const std::unordered_map<std::string, experiments::ResultRow> previous = previous_rows(csv, a.resume);
  for (std::size_t i = 0; i < list.index.size(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(shard_count)) != shard_index)
      continue;
    if (!previous.empty()) {
      const auto kept = previous.find(experiments::point_key(experiments::describe_point(exp.point(list.index[i]))));
      if (kept != previous.end()) {
        rows.add(i, kept->second);
        continue;
      }
    }
    // Every rank counts the same points to simulate, so they agree on who takes which.
    if (static_cast<int>(to_simulate++ % static_cast<std::size_t>(world.size)) == world.rank) {
      todo.index.push_back(list.index[i]);
      todo.valid.push_back(list.valid[i]);
      todo_position.push_back(i);
    } else {
      todo_elsewhere.push_back(i);
    }
  }
  const std::size_t kept = rows.size();
  std::map<std::size_t, std::string> mine; // under MPI: this rank's rows, serialized for rank 0
  // The CSV is rewritten atomically as rows arrive, so that a killed sweep leaves a valid file of what
  // it finished, for --resume: every checkpoint_s seconds, and never more than 5% of the time.
  const char* every         = std::getenv("DDLSIM_CHECKPOINT_SECONDS");
  const double checkpoint_s = every ? std::atof(every) : 2.0;
  double next_checkpoint_s  = checkpoint_s;
  auto last_write           = std::chrono::steady_clock::now();
  options.on_row            = [&](std::size_t k, const experiments::ResultRow& row) {
    if (a.mpi)
      mine[todo_position[k]] = row.serialize();
    else
      rows.add(todo_position[k], row);
    if (progress)
      progress->finished(todo_position[k]);
    const auto now = std::chrono::steady_clock::now();
    if (!a.mpi && std::chrono::duration<double>(now - last_write).count() >= next_checkpoint_s) {
      rows.write_csv(csv, a.columns);
      last_write           = std::chrono::steady_clock::now();
      const double write_s = std::chrono::duration<double>(last_write - now).count();
      next_checkpoint_s    = std::max(checkpoint_s, 20 * write_s);
    }
  };
  if (!todo.index.empty()) {
    progress.emplace(stderr, todo.index.size(), style.value_or(cli::ProgressStyle::terminal),
                     cli::progress_setting("DDLSIM_PROGRESS_AFTER_SECONDS", 2.0),
                     cli::progress_setting("DDLSIM_PROGRESS_INTERVAL_SECONDS", 5.0));
    experiments::PointProgressCallback on_point;
    if (show_progress)
      on_point = [&](std::size_t k, const experiments::PointProgress& p) { progress->point(todo_position[k], p); };
    experiments::run_sweep(experiments::point_source(exp, todo), options, on_point);
  }
  if (a.mpi) {
    const auto gathered = cli::mpi_gather(mine, world);
    cli::mpi_stop();
    if (world.rank != 0)
      return exit_ok; // rank 0 writes the CSV
    for (const auto& [i, text] : gathered)
      if (auto row = experiments::ResultRow::deserialize(text); row && !rows.contains(i))
        rows.add(i, *row);
    for (std::size_t i : todo_elsewhere)
      if (!rows.contains(i))
        throw Error("MPI: no row came back for point " + std::to_string(i));
  }
  rows.write_csv(csv, a.columns);

  if (!a.quiet) {
    std::string line = fmt::format("ddlsim: wrote {} row(s) ({}) to {}", rows.size(), rows.status_summary(), csv);
    if (kept > 0)
      line += fmt::format("; {} kept from the earlier run", kept);
    if (shard_count > 1)
      line += fmt::format("; shard {}/{} of {} points", shard_index, shard_count, list.index.size());
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

void add_run(CommandTable& table)
{
  CLI::App& root = table.root();
  auto c = table.add<RunArgs>(root, "run", "simulate every point of the experiment's sweep and write one CSV", cmd_run);
  auto& a = c.args;
  add_experiment(c.app, a.file);
  add_output(c.app, a.output, "CSV path (default: the file's output.csv, else results/<name>.csv)");
  cli::add_int(c.app, "-j,--jobs", a.options.jobs, 1, 1024, "simulate N points at once, one process each (default 1)");
  add_sets(c.app, a.sets,
           "override a key, e.g. --set training.micro_batch=4 (repeatable); --set sweep.KEY=[v1,v2] replaces a "
           "sweep axis");
  add_columns(c.app, a.columns);
  CLI::Option* trace_dir =
      c.app
          ->add_option("--trace-dir", a.options.evaluate.trace_dir,
                       "write a Chrome-trace timeline per point (open in Perfetto) and a per-device CSV next to it")
          ->type_name("DIR");
  // What the timeline draws (experiments/TimelineView.hpp): each option checked alone at parse time
  // (a usage error), the three read together by cmd_run.
  struct ViewOption {
    const char* name;
    std::string* value;
    const char* help;
    const char* type;
  };
  const std::array<ViewOption, 3> view_options{{
      {"--trace-ranks", &a.trace_ranks,
       "GPUs the timeline draws: auto (every GPU up to ~50 MB, else the fold's representatives or replica 0), all, "
       "replica0, or ranks and ranges such as 0-7,64",
       "auto|all|replica0|LIST"},
      {"--trace-window", &a.trace_window,
       "draw only the tasks that overlap T0:T1 (seconds, or with a unit: 200ms:1.5s; either side may be left out)",
       "T0:T1"},
      {"--trace-counters", &a.trace_counters, "the timeline's per-GPU counters (default all)", "all|memory|links|none"},
  }};
  for (std::size_t i = 0; i < view_options.size(); ++i) {
    auto check = [i](const std::string& v) {
      try {
        experiments::parse_timeline_view(i == 0 ? v : "", i == 1 ? v : "", i == 2 ? v : "");
        return std::string();
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    };
    c.app->add_option(view_options[i].name, *view_options[i].value, view_options[i].help)
        ->check(check, "", "")
        ->needs(trace_dir)
        ->type_name(view_options[i].type);
  }
  c.app
      ->add_option("--trace-format", a.trace_format,
                   "the timeline's file: json (Chrome's format, the default), perfetto (Perfetto's protobuf, "
                   ".perfetto-trace: smaller, faster to open) or both")
      ->check(
          [](const std::string& v) {
            try {
              experiments::TimelineView view;
              experiments::parse_timeline_format(v, view);
              return std::string();
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          "", "")
      ->needs(trace_dir)
      ->type_name("json|perfetto|both");
  c.app->add_flag("--quiet", a.quiet, "no summary on stderr, and no progress unless --progress says so");
  cli::add_progress_option(c.app, a.progress, "default auto; never under --quiet");
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

} // namespace

void add_run_commands(CommandTable& table)
{
  CLI::App& root = table.root();
  add_run(table);
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
    auto c = table.add<ReportArgs>(root, "report", "the best points of a result CSV as a readable table", cmd_report);
    c.app->footer("Ranks the ok rows by throughput and prints the best with their breakdown: iteration time, "
                  "samples/s, tokens/s per GPU, MFU, compute, bubble, exposed communication, memory per GPU of "
                  "its capacity, after the layout columns that differ between them (those equal are named once "
                  "above). docs/running.md");
    c.app->add_option("CSV", c.args.file, "a CSV that ddlsim run, execute or a search wrote")
        ->required()
        ->type_name("");
    cli::add_int(c.app, "--top", c.args.top, 1, 1 << 30, "rows shown (default 10)");
  }
}

} // namespace ddlsim::cli
