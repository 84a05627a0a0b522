// ddlsim bench: how fast a simulation, a sweep or a trace import runs (experiments/Bench.hpp).
#include "cli/Commands.hpp"
#include "common/Units.hpp"
#include "experiments/Bench.hpp"

#include <fmt/core.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::cli {

namespace {

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
    fmt::print("  validate                  {:.3f} s, {} peak ({} of the points valid)\n", r.validate.wall_time_s,
               bytes(r.validate.max_rss_bytes), r.validate.points_ok);
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

} // namespace

void add_bench_command(CommandTable& table)
{
  CLI::App& root = table.root();
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
  c.app->add_option("-o,--output", c.args.csv, "append the figures to a CSV (one row per scenario, units in the names)")
      ->type_name("FILE");
  c.app->add_flag("--no-compare", c.args.no_compare, "simulation: skip the bare SimGrid DAG");
  cli::add_int(c.app, "-j,--jobs", c.args.jobs, 1, 1024, "sweep: points simulated at once (default 1)");
  c.app
      ->add_option("--trace-size", c.args.trace_size,
                   "import: the synthetic trace's JSON size, e.g. 4MB (default 64MB)")
      ->type_name("BYTES");
}

} // namespace ddlsim::cli
