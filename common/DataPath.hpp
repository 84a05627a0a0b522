// Finding input files: a shipped name ("gpt2-xl", "dgx-h100x2", "h100-sxm") or a path.
//
//   resolve_input("gpt2-xl", "models/zoo", exp_dir)       -> <data>/models/zoo/gpt2-xl.yaml
//   resolve_input("my/model.yaml", "models/zoo", exp_dir) -> exp_dir/my/model.yaml if it exists, else ./my/model.yaml
//
// The data root is DDLSIM_DATA_DIR from the environment, else the source tree ddlsim was built from.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim {

/// Root of the shipped data files.
std::filesystem::path data_dir();

/// True when `text` is meant as a path rather than a shipped name (contains '/' or ends in .yaml/.yml).
bool looks_like_path(const std::string& text);

/// Resolves a shipped name or a path; nullopt when a shipped name does not exist. Paths are returned
/// even when missing (opening them reports the error), preferring `relative_to` for relative paths.
std::optional<std::filesystem::path> resolve_input(const std::string& name_or_path, const std::string& shipped_subdir,
                                                   const std::filesystem::path& relative_to);

/// Names of the shipped files in `shipped_subdir` (without .yaml), sorted.
std::vector<std::string> shipped_names(const std::string& shipped_subdir);

/// The shipped names as one line, "a, b, c", for error messages.
std::string shipped_names_text(const std::string& shipped_subdir);

/// resolve_input, or a ConfigError naming `key` (e.g. "model") and listing the shipped names.
std::filesystem::path resolve_input_or_throw(const std::string& name_or_path, const std::string& shipped_subdir,
                                             const std::string& key);

}  // namespace ddlsim
