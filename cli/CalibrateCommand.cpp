// ddlsim calibrate collect|import|fit|report: measured profiles from microbenchmarks and traces
// (calibration/, docs/calibration.md).
#include "calibration/HostFit.hpp"
#include "calibration/Profile.hpp"
#include "calibration/ProfileFit.hpp"
#include "cli/Commands.hpp"
#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "ddlsim/config.hpp"
#include "traces/Gzip.hpp"
#include "traces/NcclTestsImporter.hpp"
#include "traces/TraceRecords.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace ddlsim::cli {

namespace {

// calibrate fit: trace records -> a measured profile (calibration/ProfileFit.hpp).
struct CalibrateFitArgs {
  std::vector<std::string> files;
  std::string output, base;
  std::optional<std::string> name;
  std::string command_line;
  bool accept_poor_fit = false;
  bool host_only       = false;
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
  const calibration::FitResult fit =
      a.host_only ? calibration::fit_host_profile(calibration::load_profile(a.base), records, options)
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
    fmt::print("\ngemm_tiles (shape-aware kernel costs, docs/kernels.md): {}\n  {}\n", tiles,
               profile.gemm_tiles.source);
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
  std::vector<double> untraced_step_s; ///< one per file, 0 for none
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

} // namespace

void add_calibrate_commands(CommandTable& table, const std::string& command_line)
{
  CLI::App& root      = table.root();
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
  import.app->footer("Reads PyTorch profiler (Kineto) traces and nccl-tests output (text or -J JSON), gzipped or not, "
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

} // namespace ddlsim::cli
