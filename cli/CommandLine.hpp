// The command line of `ddlsim`, on CLI11: a table of subcommands, each with its own arguments
// struct and function, strict parsing (unknown options and arguments are errors, with the closest
// valid name), generated help per subcommand, and the exit codes:
//   0 ok, 1 bad input (ddlsim::Error, ConfigError naming file:line: key), 2 usage error.
//
// Adding a subcommand is one block in its family's add_* function (cli/Commands.hpp lists them; a
// new family is a cli/<Family>Command.cpp that main.cpp calls):
//
//   struct GreetArgs { std::string name; int times = 1; };
//   int cmd_greet(const GreetArgs& a) { ... return exit_ok; }
//   ...
//   auto greet = table.add<GreetArgs>(table.root(), "greet", "say hello NAME, TIMES times", cmd_greet);
//   greet.app->add_option("name", greet.args.name, "who")->required()->type_name("NAME");
//   add_int(greet.app, "-n,--times", greet.args.times, 1, 100, "how often (default 1)");
//
// Nested commands (`ddlsim search grid`) are added under their parent's CLI::App; a parent with no
// function of its own needs one of its subcommands. Functions throw UsageError for usage problems
// found after parsing (options that contradict each other); the table turns it into exit 2.
#pragma once

#include "common/Error.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ddlsim::cli {

inline constexpr int exit_ok        = 0;
inline constexpr int exit_bad_input = 1;
inline constexpr int exit_usage     = 2;

/// A usage problem found after parsing: exit 2, with a pointer to the command's --help.
struct UsageError {
  std::string message;
};

/// `text` as an integer in [min, max]; throws UsageError "WHAT expects an integer in [min, max], not 'text'".
long long parse_integer(const std::string& text, const std::string& what, long long min, long long max);
inline int parse_int(const std::string& text, const std::string& what, int min, int max)
{
  return static_cast<int>(parse_integer(text, what, min, max));
}

/// An integer option checked as parse_integer does (the message names the option's long name).
template <typename Int>
CLI::Option* add_int(CLI::App* app, const std::string& names, Int& target, long long min, long long max,
                     const std::string& help)
{
  const std::string what = names.substr(names.rfind(',') + 1);
  auto set               = [&target, what, min, max](const std::string& text) {
    try {
      target = static_cast<Int>(parse_integer(text, what, min, max));
    } catch (const UsageError& e) {
      throw CLI::ValidationError(e.message);
    }
  };
  return app->add_option_function<std::string>(names, set, help)->type_name("N");
}

/// Prints each diagnostic once, as "error: file:line: key: message", on stderr.
void print_diagnostics(const std::vector<Diagnostic>& diagnostics);

/// The subcommands and what each runs.
class CommandTable {
public:
  template <typename Args> struct Command {
    CLI::App* app; ///< add the command's options here
    Args& args;    ///< ... bound to these fields
  };

  CommandTable(const std::string& name, const std::string& description);

  CLI::App& root() { return root_; }

  /// A subcommand `name` of `parent` that calls `run(args)` when it is the one given.
  template <typename Args>
  Command<Args> add(CLI::App& parent, const std::string& name, const std::string& help, int (*function)(const Args&))
  {
    auto args     = std::make_shared<Args>();
    CLI::App* app = parent.add_subcommand(name, help);
    actions_[app] = [args, function] { return function(*args); };
    return {app, *args};
  }

  /// Parses argv and runs the subcommand given; returns the exit code. Prints every message
  /// (errors on stderr, help on stdout). Only main() calls it.
  int run(int argc, char** argv);

  /// "ddlsim" followed by the arguments as given, for provenance.
  static std::string command_line(int argc, char** argv);

private:
  CLI::App root_;
  std::map<const CLI::App*, std::function<int()>> actions_;
};

} // namespace ddlsim::cli
