// What the two GPU programs share without a GPU: the command-line scanner of ddlsim-collect and ddlsim-run-cuda
// (gpu/CommandLine.hpp, std-only), the one median (common/Statistics.hpp) and the element sizes of dtype names
// (common/Dtype.hpp) that the plan and the CUDA backend's memory plan use.
#include "common/Dtype.hpp"
#include "common/Statistics.hpp"
#include "gpu/CommandLine.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace ddlsim;

namespace {

// Scans `words` (the program's name first) as ddlsim-collect's loop does; returns "name=value" per option.
std::vector<std::string> scan(std::vector<std::string> words, bool* help = nullptr, std::string* command = nullptr)
{
  std::vector<char*> argv;
  for (std::string& w : words)
    argv.push_back(w.data());
  gpu::CommandLine line(static_cast<int>(argv.size()), argv.data());
  std::vector<std::string> out;
  while (line.next()) {
    if (line.is("--quick"))
      out.push_back("quick=" + std::to_string(line.flag()));
    else if (line.is("-o", "--output"))
      out.push_back("output=" + line.file_value());
    else if (line.is("--gpus"))
      out.push_back("gpus=" + line.value());
    else if (line.arg().rfind("-", 0) == 0)
      line.unknown_option();
    else
      out.push_back("file=" + line.arg());
  }
  if (help)
    *help = line.help();
  if (command)
    *command = line.command();
  return out;
}

std::string usage_error(std::vector<std::string> words)
{
  try {
    scan(std::move(words));
  } catch (const gpu::UsageError& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("the GPU programs' command line: values after a space or '=', flags, files, help")
{
  bool help = true;
  std::string command;
  CHECK(scan({"tool", "--gpus", "2", "--output=r.jsonl", "--quick", "w.json", "-o", "s.jsonl"}, &help, &command) ==
        std::vector<std::string>{"gpus=2", "output=r.jsonl", "quick=1", "file=w.json", "output=s.jsonl"});
  CHECK_FALSE(help);
  CHECK(command == "tool --gpus 2 --output=r.jsonl --quick w.json -o s.jsonl");
  // A value is taken as it is, even one that looks like an option.
  CHECK(scan({"tool", "-o", "--help"}) == std::vector<std::string>{"output=--help"});
  // -h and --help are the scanner's, wherever they stand.
  CHECK(scan({"tool", "w.json", "--help", "-h"}, &help) == std::vector<std::string>{"file=w.json"});
  CHECK(help);
}

TEST_CASE("the GPU programs' command line: each usage error as one line")
{
  CHECK(usage_error({"tool", "--gpus"}) == "--gpus needs a value");
  CHECK(usage_error({"tool", "-o", ""}) == "-o needs a file name");
  CHECK(usage_error({"tool", "--output="}) == "--output needs a file name");
  CHECK(usage_error({"tool", "--quick=1"}) == "--quick takes no value");
  CHECK(usage_error({"tool", "--help=1"}) == "--help takes no value");
  CHECK(usage_error({"tool", "--bogus=3"}) == "unknown option '--bogus'");
  CHECK(usage_error({"tool", "-o=x"}) == "unknown option '-o=x'"); // '=' belongs to long options only
  CHECK(usage_error({"tool", "-x", "--help"}) == "unknown option '-x'");
}

TEST_CASE("one median for every fit and measurement")
{
  CHECK(median({}) == 0.0);
  CHECK(median({3.0}) == 3.0);
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
}

TEST_CASE("element sizes of dtype names, as plan points and workloads carry them")
{
  CHECK(dtype_bytes("fp32") == 4.0);
  CHECK(dtype_bytes("tf32") == 4.0);
  CHECK(dtype_bytes("bf16") == 2.0);
  CHECK(dtype_bytes("fp16") == 2.0);
  CHECK(dtype_bytes("fp8") == 1.0);
  CHECK(dtype_bytes("") == 4.0); // a copy's point names none
  CHECK(dtype_bytes("int4") == 4.0);
}
