#include "common/Error.hpp"

namespace ddlsim {
namespace {
std::string join(const std::vector<Diagnostic>& diagnostics)
{
  std::string text;
  for (const auto& d : diagnostics) {
    if (!text.empty())
      text += '\n';
    text += d.to_string();
  }
  return text;
}
}  // namespace

std::string Diagnostic::to_string() const
{
  std::string text = file.empty() ? std::string("<input>") : file;
  if (line > 0)
    text += ":" + std::to_string(line);
  text += ": ";
  if (!key.empty())
    text += key + ": ";
  return text + message;
}

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : Error(join(diagnostics)), diagnostics_(std::move(diagnostics))
{
}

ConfigError::ConfigError(std::string file, int line, std::string key, std::string message)
    : ConfigError(std::vector<Diagnostic>{{std::move(file), line, std::move(key), std::move(message)}})
{
}

}  // namespace ddlsim
