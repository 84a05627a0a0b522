#include "gpu/CommandLine.hpp"

namespace ddlsim::gpu {

CommandLine::CommandLine(int argc, char** argv) : argv_(argv, argv + argc)
{
  for (std::size_t i = 0; i < argv_.size(); ++i)
    command_ += (i > 0 ? " " : "") + argv_[i];
}

bool CommandLine::next()
{
  for (;;) {
    if (next_ >= argv_.size())
      return false;
    arg_ = argv_[next_++];
    inline_value_.reset();
    if (arg_.rfind("--", 0) == 0) {
      if (const std::size_t eq = arg_.find('='); eq != std::string::npos) {
        inline_value_ = arg_.substr(eq + 1);
        arg_          = arg_.substr(0, eq);
      }
    }
    if (!is("-h", "--help"))
      return true;
    help_ = flag();
  }
}

std::string CommandLine::value()
{
  if (inline_value_)
    return *inline_value_;
  if (next_ >= argv_.size())
    throw UsageError(arg_ + " needs a value");
  return argv_[next_++];
}

std::string CommandLine::file_value()
{
  std::string v = value();
  if (v.empty())
    throw UsageError(arg_ + " needs a file name");
  return v;
}

bool CommandLine::flag() const
{
  if (inline_value_)
    throw UsageError(arg_ + " takes no value");
  return true;
}

void CommandLine::unknown_option() const
{
  throw UsageError("unknown option '" + arg_ + "'");
}

} // namespace ddlsim::gpu
