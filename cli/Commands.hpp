// The commands of `ddlsim`, one file a family, and what several of them share: the options they
// spell alike (the experiment file, --set, -o, --columns) and how they report on points and rows.
//
// Each family adds its subcommands, options and functions to the table (cli/CommandLine.hpp);
// main.cpp calls the add_* functions in the order `ddlsim --help` lists the commands:
//
//   cli::CommandTable table("ddlsim", "...");
//   cli::add_run_commands(table);     // run, validate, merge, report
//   cli::add_search_commands(table);  // search microbatch|grid|parallel
//   ...
//   return table.run(argc, argv);
//
// A command's function throws UsageError for a usage problem (exit 2) and ddlsim::Error for bad
// input (exit 1); only main() exits.
#pragma once

#include "cli/CommandLine.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/ResultRow.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::cli {

// ---- The command families (cli/<Family>Command.cpp) ------------------------------------------

void add_run_commands(CommandTable& table);       ///< run, validate, merge, report (RunCommand.cpp)
void add_search_commands(CommandTable& table);    ///< search microbatch|grid|parallel
void add_model_command(CommandTable& table);      ///< model
void add_bench_command(CommandTable& table);      ///< bench
void add_collective_command(CommandTable& table); ///< collective
void add_execute_command(CommandTable& table);    ///< execute
void add_export_commands(CommandTable& table);    ///< export chakra
void add_profile_commands(CommandTable& table);   ///< profile gemm|attention
/// calibrate collect|import|fit|report; `command_line` (CommandTable::command_line) is the records' and
/// profiles' provenance.
void add_calibrate_commands(CommandTable& table, const std::string& command_line);

// ---- Options several commands share ---------------------------------------------------------

/// The required positional EXPERIMENT.yaml.
void add_experiment(CLI::App* app, std::string& file);
/// --set KEY=VALUE, repeatable.
void add_sets(CLI::App* app, std::vector<std::string>& sets, const std::string& help = "as for run");
/// -o,--output FILE.
void add_output(CLI::App* app, std::optional<std::string>& output, const std::string& help);
/// --columns LIST: the CSV's columns (docs/csv.md); a bad list is a usage error naming --columns.
void add_columns(CLI::App* app, experiments::ColumnSelection& columns);

// ---- Points and rows ------------------------------------------------------------------------

/// "a, b, c"
template <typename Strings> std::string joined(const Strings& items)
{
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ", ") + i;
  return out;
}

/// True, after printing every point's problems, when no point can be simulated: that is bad
/// input, and nothing is written.
bool nothing_valid(const std::vector<experiments::PointConfig>& points);

/// The rows' statuses counted: "4 ok, 1 invalid".
std::string status_counts(const std::vector<experiments::ResultRow>& rows);

} // namespace ddlsim::cli
