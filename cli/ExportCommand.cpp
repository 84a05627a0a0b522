// ddlsim export chakra: one point's task graph as Chakra ET files (experiments/ChakraWorkload.hpp);
// ddlsim export megatron: its Megatron-LM launch arguments (experiments/MegatronExport.hpp);
// ddlsim export torchtitan: its torchtitan job configuration (experiments/TorchtitanExport.hpp).
#include "cli/Commands.hpp"
#include "cli/Progress.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/DocumentKeys.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/MegatronExport.hpp"
#include "experiments/TorchtitanExport.hpp"

#include <yaml-cpp/yaml.h>

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::cli {

namespace {

struct ExportChakraArgs {
  std::string file, output;
  std::optional<int> point;
  std::vector<std::string> sets;
  std::optional<std::string> progress; ///< --progress, by default auto
  bool rank_map = false;
};

// The point --point names (or the only one); a usage error when the sweep has several and none is named.
experiments::PointConfig chosen_point(const std::string& file, const std::vector<std::string>& sets, std::optional<int> point)
{
  const auto exp    = experiments::Experiment::load(file, sets);
  const auto points = exp.points();
  if (!point && points.size() > 1)
    throw UsageError{
        fmt::format("{} has {} points: choose one with --point N (0..{})", file, points.size(), points.size() - 1)};
  const auto chosen = std::find_if(points.begin(), points.end(), [&](const auto& p) {
    return static_cast<int>(p.index) == point.value_or(static_cast<int>(p.index));
  });
  if (chosen == points.end())
    throw UsageError{fmt::format("--point {}: {} has no such point", *point, file)};
  return *chosen;
}

int cmd_export_chakra(const ExportChakraArgs& a)
{
  const auto chosen = chosen_point(a.file, a.sets, a.point);
  if (!chosen.is_valid()) {
    print_diagnostics(chosen.problems);
    return exit_bad_input;
  }
  // Files are written rank by rank: the progress counts them.
  const std::optional<cli::ProgressStyle> style = cli::progress_style(a.progress, cli::ProgressMode::automatic);
  std::optional<cli::ProgressLine> progress;
  experiments::ChakraExportOptions options;
  options.rank_map = a.rank_map;
  options.on_rank  = [&](int done, int ranks) {
    if (!style)
      return;
    if (!progress)
      progress.emplace(stderr, static_cast<std::size_t>(ranks), *style, 0.0,
                       cli::progress_setting("DDLSIM_PROGRESS_INTERVAL_SECONDS", 5.0));
    progress->sweep(static_cast<std::size_t>(done));
  };
  const experiments::ChakraExport written = experiments::write_chakra(chosen, a.output, options);
  const std::string prefix                = (std::filesystem::path(a.output) / chosen.experiment).string();
  if (written.rank_map.empty())
    fmt::print("{}: point {} as {} Chakra ET files ({} nodes): {}.<rank>.et; process groups in {}\n", a.output,
               chosen.index, written.files.size(), written.nodes, prefix, written.comm_groups);
  else
    fmt::print("{}: point {} as {} templates for {} ranks ({} nodes): {}.t<K>.et bound by {}; process groups in {}\n",
               a.output, chosen.index, written.files.size(), written.ranks, written.nodes, prefix, written.rank_map,
               written.comm_groups);
  return exit_ok;
}

// What the framework cannot run as simulated, each at its key's line in the file (the key as written
// there, or its sweep axis): exit code 1, nothing on stdout.
int refuse(const std::string& file, std::vector<Diagnostic> problems)
{
  const YAML::Node doc = YAML::LoadFile(file);
  for (Diagnostic& d : problems) {
    d.file = file;
    for (const std::string& key : {d.key, "sweep." + d.key})
      if (const YAML::Node n = experiments::find_path(doc, key); n && d.line == 0)
        d.line = n.Mark().line + 1;
  }
  print_diagnostics(problems);
  return exit_bad_input;
}

struct ExportFrameworkArgs {
  std::string file;
  std::optional<int> point;
  std::vector<std::string> sets;
};

int cmd_export_megatron(const ExportFrameworkArgs& a)
{
  const auto chosen = chosen_point(a.file, a.sets, a.point);
  if (!chosen.is_valid()) {
    print_diagnostics(chosen.problems);
    return exit_bad_input;
  }
  experiments::MegatronLaunch launch = experiments::megatron_launch(chosen);
  if (!launch.problems.empty())
    return refuse(a.file, launch.problems);
  fmt::print("# ddlsim export megatron {} --point {}: {} on {}\n{}", a.file, chosen.index, chosen.model_label,
             chosen.cluster_label, launch.text());
  return exit_ok;
}

int cmd_export_torchtitan(const ExportFrameworkArgs& a)
{
  const auto chosen = chosen_point(a.file, a.sets, a.point);
  if (!chosen.is_valid()) {
    print_diagnostics(chosen.problems);
    return exit_bad_input;
  }
  const experiments::TorchtitanJob job = experiments::torchtitan_job(chosen);
  if (!job.problems.empty())
    return refuse(a.file, job.problems);
  fmt::print("# ddlsim export torchtitan {} --point {}: {} on {}\n{}", a.file, chosen.index, chosen.model_label,
             chosen.cluster_label, job.text());
  return exit_ok;
}

} // namespace

void add_export_commands(CommandTable& table)
{
  CLI::App& root     = table.root();
  CLI::App* exporter = root.add_subcommand("export", "write a point in another tool's workload format");
  exporter->require_subcommand(1);
  auto c = table.add<ExportChakraArgs>(
      *exporter, "chakra", "one point as Chakra execution traces, one DIR/<name>.<rank>.et per GPU", cmd_export_chakra);
  c.app->footer("For ASTRA-sim and Chakra's tools (DIR/comm_groups.json: the process groups); import them back "
                "with model: {chakra: DIR}. docs/chakra.md");
  add_experiment(c.app, c.args.file);
  c.app->add_option("-o,--output", c.args.output, "the folder of .et files")->required()->type_name("DIR");
  cli::add_progress_option(c.app, c.args.progress, "default auto: the files written so far");
  c.app->add_flag("--rank-map", c.args.rank_map,
                  "alike ranks written once: templates bound by DIR/rank_map.json (ddlsim reads it; ASTRA-sim needs "
                  "a file per rank, which exporting that workload again writes)");
  cli::add_int(c.app, "--point", c.args.point, 0, 1 << 30, "the sweep point (needed when the sweep has several)");
  add_sets(c.app, c.args.sets);

  auto m = table.add<ExportFrameworkArgs>(*exporter, "megatron",
                                         "one point as Megatron-LM's launch command (pretrain_gpt.py and its arguments)",
                                         cmd_export_megatron);
  m.app->footer("The parallel sizes, batch, sequence, model, precision, recomputation, sharding and overlap options the "
                "point was simulated with; what Megatron-LM cannot run as simulated is refused by key. docs/export.md");
  add_experiment(m.app, m.args.file);
  cli::add_int(m.app, "--point", m.args.point, 0, 1 << 30, "the sweep point (needed when the sweep has several)");
  add_sets(m.app, m.args.sets);

  auto t = table.add<ExportFrameworkArgs>(*exporter, "torchtitan",
                                         "one point as torchtitan's job configuration (TOML for torchtitan.train)",
                                         cmd_export_torchtitan);
  t.app->footer("The flavor, parallel degrees, pipeline chunks as ddlsim cut them, batch, sequence, precision and "
                "activation checkpointing the point was simulated with; what torchtitan cannot run as simulated is "
                "refused by key. docs/export.md");
  add_experiment(t.app, t.args.file);
  cli::add_int(t.app, "--point", t.args.point, 0, 1 << 30, "the sweep point (needed when the sweep has several)");
  add_sets(t.app, t.args.sets);
}

} // namespace ddlsim::cli
