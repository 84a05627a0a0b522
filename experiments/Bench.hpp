// Speed benchmarks (`ddlsim bench`), of three kinds:
//
//   simulation  how long one simulated point takes and how much memory it needs, next to a bare
//               SimGrid workload of the same size (sim/BareDag.hpp), so that ddlsim's overhead over
//               SimGrid is a measured ratio. Scenarios: bench/*.yaml files with one point.
//   sweep       how many points per second a whole sweep runs at -j N (run_sweep: one forked process
//               per point). Scenarios: bench/*.yaml files with a sweep.
//   import      how many MB per second the trace importer (traces::import_trace, as `calibrate
//               import` runs it) reads. Scenarios: built in, on a synthetic Kineto trace written to
//               a temporary folder (traces/SyntheticKineto.hpp), plain or gzipped; or any trace file.
//
// Each measurement runs in a forked child (SimGrid's engine is a per-process singleton); its wall
// time and peak resident memory are the child's own (for a sweep, the largest of the sweep's
// processes). A scenario is measured `repeat` times and the run with the median wall time reported.
//
//   BenchResult r = run_bench(find_bench_scenario("gpt3-175b-1024"), {.repeat = 3});
//   append_bench_csv("results/bench.csv", r);
#pragma once

#include "common/EnumTable.hpp"
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

enum class BenchKind { simulation, sweep, trace_import };

inline constexpr EnumTable<BenchKind, 3> bench_kind_table{{{
    {"simulation", BenchKind::simulation, "one training iteration, against a bare SimGrid DAG of the same size"},
    {"sweep", BenchKind::sweep, "every point of a sweep, one forked process each, at -j N: points per second"},
    {"import", BenchKind::trace_import, "a trace through the importer of `calibrate import`: MB per second"},
}}};

struct BenchScenario {
  std::string name;
  BenchKind kind = BenchKind::simulation;
  std::string description;
  std::string experiment_file;           ///< simulation and sweep: the experiment
  std::string trace_file;                ///< import: the trace; empty for a synthetic one
  std::uint64_t synthetic_bytes = 0;     ///< import without a file: the synthetic trace's JSON bytes
  bool synthetic_gzip           = false; ///< import without a file: gzip the synthetic trace
};

/// The shipped scenarios: bench/*.yaml (simulation when the file has one point, sweep otherwise)
/// and the built-in import ones, by kind then name.
std::vector<BenchScenario> bench_scenarios();

/// A shipped scenario by name, or an experiment file by path (its kind from its point count).
/// Throws ConfigError listing the shipped names when `name_or_path` is neither.
BenchScenario find_bench_scenario(const std::string& name_or_path);

/// An import scenario for a trace file of the user's (named after the file).
BenchScenario trace_file_scenario(const std::string& path);

struct BenchOptions {
  int repeat                    = 1;    ///< median of this many runs
  bool compare                  = true; ///< simulation: also time the bare SimGrid DAG
  int jobs                      = 1;    ///< sweep: points simulated at once
  std::uint64_t synthetic_bytes = 0;    ///< import: the synthetic trace's size instead of the scenario's (0: keep)
};

struct BenchMeasurement {
  double wall_time_s       = 0; ///< the child's whole run (model, plan, platform, replay)
  double max_rss_bytes     = 0; ///< the child's peak resident memory
  std::uint64_t activities = 0; ///< SimGrid activities
  double estimated_activities = 0;    ///< the resource guard's estimate of them (Resources.hpp)
  double estimated_memory_bytes = 0;  ///< the guard's estimate of max_rss_bytes
  int devices              = 0; ///< simulated devices (hosts)
  double simulated_s       = 0; ///< simulated iteration time (0 for the bare DAG: its own makespan)
  std::string status;           ///< the point's status ("ok", "oom", ...)
  std::string message;
};

struct SweepMeasurement {
  double wall_time_s    = 0; ///< from loading the file to the CSV written (measure_sweep)
  double max_rss_bytes  = 0; ///< the largest of the sweep's processes
  std::size_t points    = 0; ///< points simulated (or found invalid)
  std::size_t points_ok = 0; ///< of which status "ok"
  int jobs              = 1;
};

struct ImportMeasurement {
  double wall_time_s        = 0; ///< traces::import_trace alone (read, gunzip, parse, import)
  double max_rss_bytes      = 0; ///< the importing child's peak resident memory
  std::uint64_t input_bytes = 0; ///< the file's size on disk
  std::uint64_t json_bytes  = 0; ///< its size uncompressed (= input_bytes when not gzipped)
  bool gzip                 = false;
  std::size_t kernels       = 0; ///< kernel records imported
  std::size_t collectives   = 0; ///< collective records imported
};

/// The devices folded into one by the fold a row's collective_fidelity names ("...;fold=tp8xdp128
/// (...)": 1,024; "fold=tp8 (...)": 8; none, off or no fold: 1).
int folded_factor(const std::string& collective_fidelity);

/// Simulates `point` in a child process. Throws ddlsim::Error when the child cannot be started or
/// dies without a result.
BenchMeasurement measure_point(const PointConfig& point, const EvaluateOptions& options);

/// Runs the bare SimGrid DAG with `activities` activities on `hosts` hosts in a child process.
BenchMeasurement measure_bare_dag(std::uint64_t activities, int hosts);

/// Runs the sweep of an experiment file as `ddlsim run` does (its points checked, each built where it
/// is simulated, rows spooled, the CSV written to a scratch folder), with `jobs` processes at once,
/// from a child process. Throws ddlsim::Error as measure_point does.
SweepMeasurement measure_sweep(const std::string& experiment_file, int jobs);

/// Checks every point of an experiment file as `ddlsim validate` does (check_sweep), from a child
/// process. Throws ddlsim::Error as measure_point does.
SweepMeasurement measure_validate(const std::string& experiment_file);

/// Imports the trace at `path` in a child process. Throws TraceError when the file is not a trace
/// (the importer's message), ddlsim::Error as measure_point does.
ImportMeasurement measure_import(const std::string& path);

/// One scenario's figures: the run with the median wall time of `repeat`, of its kind's measurement.
struct BenchResult {
  BenchScenario scenario;
  int repeat                       = 1;
  double wall_time_spread_pct      = 0; ///< the repeats' largest minus smallest wall time, % of the median
  double bare_wall_time_spread_pct = 0; ///< the same for the bare SimGrid DAG
  int gpus                         = 0; ///< simulation: the point's GPUs
  BenchMeasurement run;                 ///< simulation
  std::optional<BenchMeasurement> bare; ///< simulation, when compared (2 or more devices)
  SweepMeasurement sweep;               ///< sweep
  SweepMeasurement validate;            ///< sweep: `ddlsim validate` of its file (points_ok: the valid ones)
  ImportMeasurement import;             ///< import

  double activities_per_s() const;      ///< simulation
  double bare_activities_per_s() const; ///< simulation with a bare DAG
  double points_per_s() const;          ///< sweep
  double import_MB_per_s() const;       ///< import: input bytes (as on disk) per second, MB = 10^6 bytes
  double json_MB_per_s() const;         ///< import: uncompressed JSON bytes per second
};

/// Measures `scenario`. Throws ConfigError for a bad experiment file, ddlsim::Error when the point
/// does not end "ok" or a child dies, TraceError for a bad trace.
BenchResult run_bench(const BenchScenario& scenario, const BenchOptions& options);

/// The bench CSV's columns, in order: every kind writes every column and leaves empty the ones
/// that are not its own. Units are in the names (wall_time_s, max_rss_bytes, import_MB_per_s).
const std::vector<std::string>& bench_csv_columns();

/// `result` as cells, by column name.
std::map<std::string, std::string> bench_csv_row(const BenchResult& result);

/// Appends `result` to the CSV at `path`, with the header first when the file is new (folders are
/// created). Throws ddlsim::Error when it cannot be written, or when the file's header is not
/// bench_csv_columns() (a CSV of something else, or of an older ddlsim).
void append_bench_csv(const std::string& path, const BenchResult& result);

} // namespace ddlsim::experiments
