// What several commands share (cli/Commands.hpp).
#include "cli/Commands.hpp"

#include "experiments/RowSpool.hpp"

#include "common/Error.hpp"

#include <map>

namespace ddlsim::cli {

void add_experiment(CLI::App* app, std::string& file)
{
  app->add_option("EXPERIMENT.yaml", file, "the experiment file")->required()->type_name("");
}

void add_sets(CLI::App* app, std::vector<std::string>& sets, const std::string& help)
{
  app->add_option("--set", sets, help)->allow_extra_args(false)->type_name("KEY=VALUE");
}

void add_output(CLI::App* app, std::optional<std::string>& output, const std::string& help)
{
  app->add_option("-o,--output", output, help)->type_name("FILE");
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

bool nothing_valid(const std::vector<experiments::PointConfig>& points)
{
  for (const auto& p : points)
    if (p.is_valid())
      return false;
  for (const auto& p : points)
    print_diagnostics(p.problems);
  return true;
}

std::string status_counts(const std::vector<experiments::ResultRow>& rows)
{
  std::map<std::string, std::size_t> counts;
  for (const auto& r : rows)
    ++counts[r.get("status")];
  return experiments::status_summary(counts);
}

} // namespace ddlsim::cli
