// The command-line scanner of ddlsim-collect and ddlsim-run-cuda (std-only): long options with their value as the
// next argument or after '=' (`--gpus 2`, `--gpus=2`), short `-o` (value as the next argument only), flags that
// refuse a value, positional arguments, `-h` / `--help` (the scanner's own: help()), and the whole command line for
// the records' provenance. What each option means stays with its program; a malformed command line throws
// UsageError, which main() prints as one line and turns into exit status 2.
//
//   CommandLine line(argc, argv);
//   options.command = line.command();                  // "ddlsim-collect --quick -o r.jsonl"
//   while (line.next()) {
//     if (line.is("--quick"))
//       quick = line.flag();                           // "--quick=1": UsageError "--quick takes no value"
//     else if (line.is("-o", "--output"))
//       output = line.file_value();                    // "-o" last: "-o needs a value"; "-o ''": "needs a file name"
//     else if (line.arg().rfind("-", 0) == 0)
//       line.unknown_option();                         // "unknown option '--bogus'"
//     else
//       files.push_back(line.arg());
//   }
//   if (line.help()) ...                               // -h or --help was among them: print the usage
#pragma once

#include "common/Error.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::gpu {

/// A command line that cannot be run as given; what() is the line to print (without the program's name).
class UsageError : public Error {
public:
  using Error::Error;
};

class CommandLine {
public:
  CommandLine(int argc, char** argv);

  /// argv joined by single spaces, for the provenance.
  const std::string& command() const { return command_; }

  /// Steps to the next argument (the first one after the program's name), past -h and --help, which it notes;
  /// false after the last. Throws UsageError ("--help takes no value") for "--help=...".
  bool next();
  /// Whether -h or --help was among the arguments scanned so far.
  bool help() const { return help_; }

  /// The current argument; for "--name=value", "--name".
  const std::string& arg() const { return arg_; }
  bool is(std::string_view name) const { return arg_ == name; }
  bool is(std::string_view short_name, std::string_view long_name) const { return is(short_name) || is(long_name); }

  /// The current option's value: after its '=', else the next argument (consumed). Throws UsageError
  /// ("<option> needs a value") after the last argument.
  std::string value();
  /// As value(), and not empty: throws UsageError ("<option> needs a file name") for "".
  std::string file_value();
  /// True, for an option that is a flag; throws UsageError ("<option> takes no value") when it came with '='.
  bool flag() const;
  /// Throws UsageError ("unknown option '<option>'").
  [[noreturn]] void unknown_option() const;

private:
  std::vector<std::string> argv_;
  std::string command_;
  std::size_t next_ = 1;
  std::string arg_;
  std::optional<std::string> inline_value_; // --name=value
  bool help_ = false;
};

} // namespace ddlsim::gpu
