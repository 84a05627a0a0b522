#include "common/DataPath.hpp"

#include "common/Error.hpp"
#include "common/Suggest.hpp"
#include "ddlsim/config.hpp"

#include <algorithm>
#include <cstdlib>

namespace fs = std::filesystem;

namespace ddlsim {

fs::path data_dir()
{
  if (const char* env = std::getenv("DDLSIM_DATA_DIR"); env != nullptr && *env != '\0')
    return fs::path(env);
  return fs::path(config::data_dir);
}

bool looks_like_path(const std::string& text)
{
  auto ends = [&](const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return text.find('/') != std::string::npos || ends(".yaml") || ends(".yml");
}

std::optional<fs::path> resolve_input(const std::string& name_or_path, const std::string& shipped_subdir,
                                      const fs::path& relative_to)
{
  if (looks_like_path(name_or_path)) {
    fs::path p(name_or_path);
    if (p.is_absolute())
      return p;
    std::error_code ec;
    if (!relative_to.empty() && fs::exists(relative_to / p, ec))
      return relative_to / p;
    if (fs::exists(p, ec))
      return p;
    return relative_to.empty() ? p : relative_to / p;
  }
  fs::path shipped = data_dir() / shipped_subdir / (name_or_path + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(shipped, ec))
    return shipped;
  return std::nullopt;
}

std::vector<std::string> shipped_names(const std::string& shipped_subdir)
{
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir() / shipped_subdir, ec))
    if (entry.path().extension() == ".yaml")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string shipped_names_text(const std::string& shipped_subdir)
{
  std::string text;
  for (const auto& name : shipped_names(shipped_subdir))
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

fs::path resolve_input_or_throw(const std::string& name_or_path, const std::string& shipped_subdir,
                                const std::string& key)
{
  if (auto path = resolve_input(name_or_path, shipped_subdir, {}))
    return *path;
  throw ConfigError("<command line>", 0, key,
                    "unknown " + key + " '" + name_or_path + "'" + did_you_mean(name_or_path, shipped_names(shipped_subdir)) +
                        " (shipped: " + shipped_names_text(shipped_subdir) +
                        "; or give a path to a YAML file)");
}

}  // namespace ddlsim
