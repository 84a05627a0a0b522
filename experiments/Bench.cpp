#include "experiments/Bench.hpp"

#include "common/Child.hpp"

#include "common/DataPath.hpp"
#include "common/Error.hpp"
#include "experiments/RowSpool.hpp"
#include "experiments/SweepRunner.hpp"
#include "sim/BareDag.hpp"
#include "traces/Gzip.hpp"
#include "traces/NcclTestsImporter.hpp"
#include "traces/SyntheticKineto.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace ddlsim::experiments {
namespace {

constexpr char separator = '\x1f';

// The built-in import scenarios: a synthetic trace of this many bytes of JSON, plain and gzipped.
constexpr std::uint64_t synthetic_trace_bytes = 64'000'000;

std::vector<std::string> fields(const std::string& text)
{
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, separator);)
    out.push_back(field);
  return out;
}

// A child's failure, sent as "error<sep>trace|other<sep>message", thrown again in the parent.
std::string child_error(const std::exception& e)
{
  const bool trace = dynamic_cast<const TraceError*>(&e) != nullptr;
  return std::string("error") + separator + (trace ? "trace" : "other") + separator + e.what();
}

void rethrow_child_error(const std::vector<std::string>& f)
{
  if (f.size() < 3 || f[0] != "error")
    return;
  if (f[1] == "trace")
    throw TraceError(f[2]);
  throw Error(f[2]);
}

// Runs `work` (which returns a line of text) in a child; returns that text, its wall time and peak
// RSS (the largest of the child and the children it waited for).
template <typename Work> BenchMeasurement in_child(Work work, std::string& text)
{
  const auto start = std::chrono::steady_clock::now();
  ChildOutput out = run_in_child([&]() -> std::string {
    try {
      return work();
    } catch (const std::exception& e) {
      return child_error(e);
    }
  });
  BenchMeasurement m;
  m.wall_time_s   = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.max_rss_bytes = static_cast<double>(out.usage.ru_maxrss) * 1024.0; // Linux reports kilobytes
  text            = std::move(out.text);
  if (!WIFEXITED(out.status) || text.empty())
    throw Error("the benchmark child died without a result");
  return m;
}

// A child's reply: "ok" and `values`, separated.
template <typename... Values> std::string reply(const Values&... values)
{
  std::ostringstream out;
  out.precision(17);
  out << "ok";
  ((out << separator << values), ...);
  return out.str();
}

// Runs `work` (which returns reply(...)) in a child; returns the reply's `count` values, and in `m`
// the child's wall time and peak memory. Throws the child's error, or Error naming `what`.
template <typename Work>
std::vector<std::string> child_reply(Work work, std::size_t count, const std::string& what, BenchMeasurement& m)
{
  std::string text;
  m                          = in_child(work, text);
  std::vector<std::string> f = fields(text);
  rethrow_child_error(f);
  if (f.size() != count + 1 || f[0] != "ok")
    throw Error(what + " sent no result: " + text);
  f.erase(f.begin());
  return f;
}

// The run with the median wall time of `repeat` runs of `measure`; `spread_pct` gets the largest
// minus the smallest wall time, in percent of the median.
template <typename Measure> auto median_of(int repeat, double& spread_pct, Measure measure)
{
  std::vector<decltype(measure())> runs;
  for (int i = 0; i < std::max(1, repeat); ++i)
    runs.push_back(measure());
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.wall_time_s < b.wall_time_s; });
  const auto& median = runs[runs.size() / 2];
  spread_pct =
      median.wall_time_s > 0 ? 100 * (runs.back().wall_time_s - runs.front().wall_time_s) / median.wall_time_s : 0;
  return median;
}

// A fresh folder under the system's temporary folder (TMPDIR), removed with the object.
class ScratchDir {
public:
  ScratchDir()
  {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddlsim-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error("cannot create a temporary folder from " + pattern);
    path_ = pattern;
  }
  ~ScratchDir()
  {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&)            = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

BenchScenario scenario(std::string name, BenchKind kind, std::string description)
{
  BenchScenario s;
  s.name        = std::move(name);
  s.kind        = kind;
  s.description = std::move(description);
  return s;
}

std::string synthetic_description(std::uint64_t bytes, bool gzip)
{
  return fmt::format("synthetic PyTorch profiler trace of an 8-GPU job, {:.4g} MB of JSON{}", static_cast<double>(bytes) / 1e6,
                     gzip ? ", gzipped" : "");
}

std::vector<BenchScenario> import_scenarios()
{
  std::vector<BenchScenario> out;
  for (const bool gzip : {false, true}) {
    out.push_back(scenario(gzip ? "import-kineto-gz" : "import-kineto", BenchKind::trace_import,
                           synthetic_description(synthetic_trace_bytes, gzip)));
    out.back().synthetic_bytes = synthetic_trace_bytes;
    out.back().synthetic_gzip  = gzip;
  }
  return out;
}

BenchScenario experiment_scenario(const std::filesystem::path& path)
{
  const Experiment exp = Experiment::load(path.string());
  BenchScenario s =
      scenario(exp.get_name(), exp.point_count() > 1 ? BenchKind::sweep : BenchKind::simulation, exp.get_description());
  s.experiment_file = path.string();
  return s;
}

std::string cell(double value)
{
  return format_number(value);
}
std::string cell(std::uint64_t value)
{
  return std::to_string(value);
}

} // namespace

std::vector<BenchScenario> bench_scenarios()
{
  std::vector<BenchScenario> all;
  for (const auto& name : shipped_names("bench"))
    all.push_back(experiment_scenario(resolve_input_or_throw(name, "bench", "benchmark")));
  for (auto& s : import_scenarios())
    all.push_back(std::move(s));
  std::stable_sort(all.begin(), all.end(),
                   [](const BenchScenario& a, const BenchScenario& b) { return a.kind < b.kind; });
  return all;
}

BenchScenario find_bench_scenario(const std::string& name_or_path)
{
  for (auto& s : import_scenarios())
    if (s.name == name_or_path)
      return s;
  if (auto path = resolve_input(name_or_path, "bench", {}))
    return experiment_scenario(*path);
  std::string names;
  for (const auto& s : bench_scenarios())
    names += (names.empty() ? "" : ", ") + s.name;
  throw ConfigError("<command line>", 0, "benchmark",
                    "unknown benchmark '" + name_or_path + "' (shipped: " + names + "; or give a path to a YAML file)");
}

BenchScenario trace_file_scenario(const std::string& path)
{
  BenchScenario s =
      scenario(std::filesystem::path(path).filename().string(), BenchKind::trace_import, "trace file " + path);
  s.trace_file = path;
  return s;
}

int folded_factor(const std::string& collective_fidelity)
{
  const std::size_t at = collective_fidelity.find("fold=");
  if (at == std::string::npos)
    return 1;
  const std::size_t end = collective_fidelity.find_first_of(" ;", at);
  const std::string fold = collective_fidelity.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
  int factor = 1;
  std::size_t i = 0;
  while (i + 2 < fold.size() && (fold.compare(i, 2, "tp") == 0 || fold.compare(i, 2, "dp") == 0)) {
    std::size_t digits = i + 2;
    while (digits < fold.size() && fold[digits] >= '0' && fold[digits] <= '9')
      ++digits;
    if (digits == i + 2)
      break;
    factor *= std::stoi(fold.substr(i + 2, digits - i - 2));
    i = digits + (digits < fold.size() && fold[digits] == 'x' ? 1 : 0);
  }
  return factor;
}

BenchMeasurement measure_point(const PointConfig& point, const EvaluateOptions& options)
{
  std::string text;
  BenchMeasurement m = in_child([&] { return evaluate_point(point, options).serialize(); }, text);
  rethrow_child_error(fields(text));
  const auto row = ResultRow::deserialize(text);
  if (!row)
    throw Error("the benchmark child sent no result: " + text);
  m.status  = row->get("status");
  m.message = row->get("message");
  if (!row->get("sim_activities").empty())
    m.activities = std::stoull(row->get("sim_activities"));
  m.simulated_s            = row->number("iteration_time_s").value_or(m.simulated_s);
  m.estimated_activities   = row->number("sim_activities_estimate").value_or(m.estimated_activities);
  m.estimated_memory_bytes = row->number("sim_memory_estimate_bytes").value_or(m.estimated_memory_bytes);
  // Simulated devices: GPUs over the fold the replay kept (collective_fidelity's "fold=tp8xdp128
  // (...)"; a fold that fell back while simulating keeps fewer symmetries than plan_fold's).
  m.devices = point.parallelism.gpus() / folded_factor(row->get("collective_fidelity"));
  return m;
}

BenchMeasurement measure_bare_dag(std::uint64_t activities, int hosts)
{
  BenchMeasurement m;
  const auto f = child_reply(
      [&] {
        const sim::BareDagResult r = sim::run_bare_dag(activities, hosts);
        return reply(r.activities, r.makespan_s);
      },
      2, "the bare SimGrid DAG", m);
  m.status      = "ok";
  m.activities  = std::stoull(f[0]);
  m.simulated_s = std::stod(f[1]);
  m.devices     = hosts;
  return m;
}

SweepMeasurement measure_sweep(const std::string& experiment_file, int jobs)
{
  BenchMeasurement m;
  const ScratchDir scratch;
  const auto f = child_reply(
      [&] {
        // What `ddlsim run` does without its options: check the points, build each where it is
        // simulated, spool the rows, write the CSV.
        const Experiment exp = Experiment::load(experiment_file);
        const PointList list = exp.point_list();
        SweepOptions options;
        options.jobs   = jobs;
        RowSpool rows;
        std::size_t ok = 0;
        options.on_row = [&](std::size_t k, const ResultRow& row) {
          ok += row.is_ok() ? 1 : 0;
          rows.add(k, row);
        };
        run_sweep(point_source(exp, list), options);
        rows.write_csv((scratch.path() / "sweep.csv").string());
        return reply(list.index.size(), ok);
      },
      2, "the benchmark sweep", m);
  return {.wall_time_s   = m.wall_time_s,
          .max_rss_bytes = m.max_rss_bytes,
          .points        = std::stoull(f[0]),
          .points_ok     = std::stoull(f[1]),
          .jobs          = jobs};
}

SweepMeasurement measure_validate(const std::string& experiment_file)
{
  BenchMeasurement m;
  const auto f = child_reply(
      [&] {
        const SweepCheck check = check_sweep(Experiment::load(experiment_file)); // `ddlsim validate`
        return reply(check.points, check.valid);
      },
      2, "the benchmark validate", m);
  return {.wall_time_s   = m.wall_time_s,
          .max_rss_bytes = m.max_rss_bytes,
          .points        = std::stoull(f[0]),
          .points_ok     = std::stoull(f[1]),
          .jobs          = 1};
}

ImportMeasurement measure_import(const std::string& path)
{
  BenchMeasurement m;
  const auto f = child_reply(
      [&] {
        const auto start           = std::chrono::steady_clock::now();
        const traces::TraceSet set = traces::import_trace(path);
        const double seconds       = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // The uncompressed size, outside the timed part: a gzip file read again.
        const std::uintmax_t json_bytes =
            traces::is_gzip_file(path) ? traces::read_maybe_gzip(path).size() : std::filesystem::file_size(path);
        return reply(seconds, set.kernels.size(), set.collectives.size(), json_bytes);
      },
      4, "the benchmark import", m);
  ImportMeasurement r;
  r.wall_time_s   = std::stod(f[0]);
  r.max_rss_bytes = m.max_rss_bytes;
  r.input_bytes   = std::filesystem::file_size(path);
  r.json_bytes    = std::stoull(f[3]);
  r.gzip          = traces::is_gzip_file(path);
  r.kernels       = std::stoull(f[1]);
  r.collectives   = std::stoull(f[2]);
  return r;
}

double BenchResult::activities_per_s() const
{
  return static_cast<double>(run.activities) / run.wall_time_s;
}
double BenchResult::bare_activities_per_s() const
{
  return bare ? static_cast<double>(bare->activities) / bare->wall_time_s : 0.0;
}
double BenchResult::points_per_s() const
{
  return static_cast<double>(sweep.points) / sweep.wall_time_s;
}
double BenchResult::import_MB_per_s() const
{
  return static_cast<double>(import.input_bytes) / 1e6 / import.wall_time_s;
}
double BenchResult::json_MB_per_s() const
{
  return static_cast<double>(import.json_bytes) / 1e6 / import.wall_time_s;
}

BenchResult run_bench(const BenchScenario& scenario, const BenchOptions& options)
{
  BenchResult r;
  r.scenario = scenario;
  r.repeat   = std::max(1, options.repeat);
  switch (scenario.kind) {
  case BenchKind::simulation: {
    const PointConfig point = Experiment::load(scenario.experiment_file).point(0);
    if (!point.is_valid())
      throw ConfigError(point.problems);
    r.gpus = point.parallelism.gpus();
    r.run  = median_of(r.repeat, r.wall_time_spread_pct, [&] { return measure_point(point, {}); });
    if (r.run.status != "ok")
      throw Error("benchmark point ended with status " + r.run.status + ": " + r.run.message);
    if (options.compare && r.run.devices >= 2)
      r.bare = median_of(r.repeat, r.bare_wall_time_spread_pct,
                         [&] { return measure_bare_dag(r.run.activities, r.run.devices); });
    break;
  }
  case BenchKind::sweep: {
    const int jobs = std::max(1, options.jobs);
    r.sweep =
        median_of(r.repeat, r.wall_time_spread_pct, [&] { return measure_sweep(scenario.experiment_file, jobs); });
    double spread = 0;
    r.validate    = median_of(r.repeat, spread, [&] { return measure_validate(scenario.experiment_file); });
    break;
  }
  case BenchKind::trace_import: {
    if (!scenario.trace_file.empty()) {
      r.import = median_of(r.repeat, r.wall_time_spread_pct, [&] { return measure_import(scenario.trace_file); });
      break;
    }
    if (options.synthetic_bytes) {
      r.scenario.synthetic_bytes = options.synthetic_bytes;
      r.scenario.description     = synthetic_description(options.synthetic_bytes, scenario.synthetic_gzip);
    }
    const ScratchDir dir;
    const std::string path = (dir.path() / (scenario.synthetic_gzip ? "synthetic.json.gz" : "synthetic.json")).string();
    traces::write_synthetic_kineto(path, r.scenario.synthetic_bytes, scenario.synthetic_gzip);
    r.import = median_of(r.repeat, r.wall_time_spread_pct, [&] { return measure_import(path); });
    break;
  }
  }
  return r;
}

const std::vector<std::string>& bench_csv_columns()
{
  static const std::vector<std::string> columns{
      // simulation (the columns of earlier versions, in their order, with `kind` second)
      "scenario", "kind", "gpus", "devices", "simulated_iteration_s", "wall_time_s", "max_rss_bytes", "activities",
      "activities_per_s", "bare_wall_time_s", "bare_activities_per_s", "overhead_ratio", "repeat",
      // every kind: how far apart the repeats' wall times were
      "wall_time_spread_pct", "bare_wall_time_spread_pct",
      // sweep
      "jobs", "points", "points_ok", "points_per_s",
      // import
      "input_bytes", "json_bytes", "gzip", "kernels", "collectives", "import_MB_per_s", "json_MB_per_s",
      // simulation: the resource guard's estimates (experiments/Resources.hpp) beside the measured
      "estimated_activities", "estimated_memory_bytes",
      // sweep: `ddlsim validate` of the same file (every point checked, none simulated)
      "validate_wall_time_s", "validate_max_rss_bytes"};
  return columns;
}

std::map<std::string, std::string> bench_csv_row(const BenchResult& r)
{
  std::map<std::string, std::string> row;
  row["scenario"]             = r.scenario.name;
  row["kind"]                 = bench_kind_table.name(r.scenario.kind);
  row["repeat"]               = std::to_string(r.repeat);
  row["wall_time_spread_pct"] = cell(r.wall_time_spread_pct);
  switch (r.scenario.kind) {
  case BenchKind::simulation:
    row["wall_time_s"]           = cell(r.run.wall_time_s);
    row["gpus"]                  = std::to_string(r.gpus);
    row["devices"]               = std::to_string(r.run.devices);
    row["simulated_iteration_s"] = cell(r.run.simulated_s);
    row["max_rss_bytes"]         = cell(static_cast<std::uint64_t>(r.run.max_rss_bytes));
    row["activities"]            = cell(r.run.activities);
    row["activities_per_s"]      = cell(static_cast<std::uint64_t>(r.activities_per_s()));
    row["estimated_activities"]  = cell(static_cast<std::uint64_t>(r.run.estimated_activities));
    row["estimated_memory_bytes"] = cell(static_cast<std::uint64_t>(r.run.estimated_memory_bytes));
    if (r.bare) {
      row["bare_wall_time_s"]          = cell(r.bare->wall_time_s);
      row["bare_activities_per_s"]     = cell(r.bare_activities_per_s());
      row["overhead_ratio"]            = cell(r.bare_activities_per_s() / r.activities_per_s());
      row["bare_wall_time_spread_pct"] = cell(r.bare_wall_time_spread_pct);
    }
    break;
  case BenchKind::sweep:
    row["wall_time_s"]   = cell(r.sweep.wall_time_s);
    row["max_rss_bytes"] = cell(static_cast<std::uint64_t>(r.sweep.max_rss_bytes));
    row["jobs"]          = std::to_string(r.sweep.jobs);
    row["points"]        = cell(static_cast<std::uint64_t>(r.sweep.points));
    row["points_ok"]     = cell(static_cast<std::uint64_t>(r.sweep.points_ok));
    row["points_per_s"]  = cell(r.points_per_s());
    row["validate_wall_time_s"]   = cell(r.validate.wall_time_s);
    row["validate_max_rss_bytes"] = cell(static_cast<std::uint64_t>(r.validate.max_rss_bytes));
    break;
  case BenchKind::trace_import:
    row["wall_time_s"]     = cell(r.import.wall_time_s);
    row["max_rss_bytes"]   = cell(static_cast<std::uint64_t>(r.import.max_rss_bytes));
    row["input_bytes"]     = cell(r.import.input_bytes);
    row["json_bytes"]      = cell(r.import.json_bytes);
    row["gzip"]            = r.import.gzip ? "yes" : "no";
    row["kernels"]         = cell(static_cast<std::uint64_t>(r.import.kernels));
    row["collectives"]     = cell(static_cast<std::uint64_t>(r.import.collectives));
    row["import_MB_per_s"] = cell(r.import_MB_per_s());
    row["json_MB_per_s"]   = cell(r.json_MB_per_s());
    break;
  }
  return row;
}

void append_bench_csv(const std::string& path, const BenchResult& result)
{
  std::string header;
  for (const auto& c : bench_csv_columns())
    header += (header.empty() ? "" : ",") + c;
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0;
  if (!fresh) {
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    if (first != header)
      throw Error(path + ": its header is not this version's bench columns (remove it, or write to another file)");
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty())
    std::filesystem::create_directories(parent);
  std::ofstream out(path, std::ios::app);
  if (fresh)
    out << header << '\n';
  const auto row = bench_csv_row(result);
  std::string line;
  for (const auto& c : bench_csv_columns()) {
    const auto it = row.find(c);
    line += (line.empty() ? "" : ",") + (it == row.end() ? std::string() : csv_escape(it->second));
  }
  out << line << '\n';
  if (!out)
    throw Error("cannot write " + path);
}

} // namespace ddlsim::experiments
