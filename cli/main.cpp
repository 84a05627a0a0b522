// ddlsim: the command-line front end. A thin layer over the libraries: it parses arguments
// (CLI11, through cli/CommandLine.hpp), calls them, prints, and is the only place that chooses an
// exit code: 0 success, 1 bad input (the message names file:line and key), 2 usage error.
//
// The commands live one family a file (cli/RunCommand.cpp, cli/SearchCommand.cpp, ...; cli/Commands.hpp
// lists them); this file adds them to the table in the order of `ddlsim --help`, with --version and
// `help`, and runs the one given.
#include "cli/CommandLine.hpp"
#include "cli/Commands.hpp"
#include "ddlsim/config.hpp"
#include "ddlsim/git_hash.hpp"

#include <fmt/core.h>

#include <string>
#include <vector>

namespace {

using namespace ddlsim;
using cli::exit_ok;
using cli::UsageError;

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

// ---- The commands: every subcommand of ddlsim, in the order of its help ---------------------

void define_commands(cli::CommandTable& table, const std::string& command_line)
{
  CLI::App& root = table.root();
  root.set_version_flag("--version",
                        fmt::format("ddlsim {} (git {}, SimGrid {}, CUDA toolkit {}, MPI {} at build time, {})",
                                    config::version, config::git_hash, config::simgrid_version,
                                    config::have_cuda ? "found" : "not found", config::have_mpi ? "found" : "not found",
                                    config::allocator),
                        "version, git commit and SimGrid version");
  root.footer("ddlsim COMMAND --help shows a command's options; the manual is README.md and docs/.\n"
              "exit codes: 0 ok, 1 bad input (file:line: key: message), 2 usage error");

  cli::add_run_commands(table); // run, validate, merge, report
  cli::add_search_commands(table);
  cli::add_model_command(table);
  cli::add_bench_command(table);
  cli::add_collective_command(table);
  cli::add_execute_command(table);
  cli::add_export_commands(table);
  cli::add_profile_commands(table);
  cli::add_calibrate_commands(table, command_line);
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
