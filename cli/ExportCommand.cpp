// ddlsim export chakra: one point's task graph as Chakra ET files (experiments/ChakraWorkload.hpp).
#include "cli/Commands.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/Experiment.hpp"

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
};

int cmd_export_chakra(const ExportChakraArgs& a)
{
  const auto exp    = experiments::Experiment::load(a.file, a.sets);
  const auto points = exp.points();
  if (!a.point && points.size() > 1)
    throw UsageError{
        fmt::format("{} has {} points: choose one with --point N (0..{})", a.file, points.size(), points.size() - 1)};
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
  cli::add_int(c.app, "--point", c.args.point, 0, 1 << 30, "the sweep point (needed when the sweep has several)");
  add_sets(c.app, c.args.sets);
}

} // namespace ddlsim::cli
