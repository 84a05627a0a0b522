#include "cli/CommandLine.hpp"

#include "common/Error.hpp"
#include "common/Suggest.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <set>
#include <sstream>

namespace ddlsim::cli {
namespace {

// The subcommand the arguments chose: the deepest one parsed.
const CLI::App* chosen(const CLI::App& root)
{
  const CLI::App* app = &root;
  for (auto subs = app->get_subcommands(); !subs.empty(); subs = app->get_subcommands())
    app = subs.front();
  return app;
}

// "ddlsim search grid"
std::string path_of(const CLI::App* app)
{
  std::string path;
  for (; app; app = app->get_parent())
    path = app->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

std::string joined(const std::vector<std::string>& names)
{
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App* app)
{
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// The message for an argument CLI11 did not expect: an unknown option gets the closest option of
// its command, an unknown command the closest command.
std::string unexpected(const CLI::App* app, const std::string& arg)
{
  const std::string where   = path_of(app).substr(std::string("ddlsim").size());
  const std::string command = where.empty() ? "ddlsim" : where.substr(1);
  if (arg.rfind('-', 0) == 0) {
    const std::string name = arg.substr(0, arg.find('='));
    std::vector<std::string> options;
    for (const CLI::Option* opt : app->get_options()) {
      for (const auto& l : opt->get_lnames())
        options.push_back("--" + l);
      for (const auto& s : opt->get_snames())
        options.push_back("-" + s);
    }
    return "unknown option for " + command + ": " + arg + did_you_mean(name, options);
  }
  const auto subs = subcommand_names(app);
  if (!subs.empty() && app->get_subcommands().empty())
    return "unknown command '" + (where.empty() ? arg : command + " " + arg) + "'" + did_you_mean(arg, subs) + " (" +
           command + " has: " + joined(subs) + ")";
  return "unexpected argument '" + arg + "' for " + command;
}

// The first word of argv that names no command where a command is due (`ddlsim frobnicate`,
// `ddlsim search foo`); empty when there is none.
std::string unknown_command(const CLI::App& root, int argc, char** argv)
{
  const CLI::App* app = &root;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind('-', 0) == 0)
      return "";
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == word)
        next = sub;
    if (!next)
      return subcommand_names(app).empty() ? "" : word;
    app = next;
  }
  return "";
}

} // namespace

long long parse_integer(const std::string& text, const std::string& what, long long min, long long max)
{
  try {
    std::size_t used  = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min && v <= max)
      return v;
  } catch (const std::exception&) {
  }
  throw UsageError{fmt::format("{} expects an integer in [{}, {}], not '{}'", what, min, max, text)};
}

CommandTable::CommandTable(const std::string& name, const std::string& description) : root_(description, name)
{
  root_.require_subcommand(1);
  // As before CLI11: a repeated single-value option takes its last value.
  root_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  root_.get_formatter()->column_width(32);
}

std::string CommandTable::command_line(int argc, char** argv)
{
  std::string out = "ddlsim";
  for (int i = 1; i < argc; ++i)
    out += std::string(" ") + argv[i];
  return out;
}

int CommandTable::run(int argc, char** argv)
{
  try {
    root_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)
      return root_.exit(e); // --help, --version: printed on stdout
    const CLI::App* app = chosen(root_);
    std::string message = e.what();
    if (const auto* extras = dynamic_cast<const CLI::ExtrasError*>(&e)) {
      (void)extras;
      // "The following arguments were not expected: x --trace-dri": an unknown option is the
      // mistake to report, the value after it only follows from it.
      const auto colon = message.find(": ");
      std::istringstream words(colon == std::string::npos ? message : message.substr(colon + 2));
      std::string first, word;
      while (words >> word)
        if (first.empty() || (word.rfind('-', 0) == 0 && first.rfind('-', 0) != 0))
          first = word;
      message = unexpected(app, first);
    } else if (message == "A subcommand is required") {
      const std::string command = path_of(app);
      if (const std::string word = unknown_command(root_, argc, argv); !word.empty())
        message = unexpected(app, word);
      else
        message = (command == "ddlsim" ? "missing command" : command.substr(7) + " needs a subcommand") +
                  std::string(": ") + joined(subcommand_names(app));
    }
    fmt::print(stderr, "ddlsim: {}\n(see '{} --help')\n", message, path_of(app));
    return exit_usage;
  }
  const CLI::App* app = chosen(root_);
  const auto action   = actions_.find(app);
  try {
    if (action == actions_.end())
      throw UsageError{path_of(app) + " needs a subcommand: " + joined(subcommand_names(app))};
    return action->second();
  } catch (const UsageError& e) {
    fmt::print(stderr, "ddlsim: {}\n(see '{} --help')\n", e.message, path_of(app));
    return exit_usage;
  } catch (const ConfigError& e) {
    print_diagnostics(e.diagnostics());
    return exit_bad_input;
  } catch (const Error& e) {
    fmt::print(stderr, "ddlsim: error: {}\n", e.what());
    return exit_bad_input;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddlsim: internal error: {}\n", e.what());
    return 3;
  }
}

void print_diagnostics(const std::vector<Diagnostic>& diagnostics)
{
  std::set<std::string> seen; // the same problem repeats in every sweep point
  for (const auto& d : diagnostics) {
    const std::string line = d.to_string();
    if (seen.insert(line).second)
      fmt::print(stderr, "error: {}\n", line);
  }
}

} // namespace ddlsim::cli
