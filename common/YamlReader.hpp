// Reading YAML input files with precise error messages.
//
// Parsing happens once into plain structs; every problem is recorded with the file, 1-based line
// and dotted key (never just the first one), and keys nobody asked for are reported as unknown.
//
//   Diagnostics diags("exp.yaml");
//   YAML::Node root = load_yaml_file("exp.yaml");
//   YamlMap top(root, "", diags);
//   std::string name = top.required_string("name");
//   if (auto training = top.map("training"))
//     double mb = training->integer("micro_batch", 1, 1, 1 << 20);
//   top.check_unknown_keys();
//   diags.throw_if_any();   // ConfigError listing "exp.yaml:7: training.micro_batch: must be >= 1", ...
#pragma once

#include "common/EnumTable.hpp"
#include "common/Suggest.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim {

/// Problems found in one input document. The file name is the default origin; keys overridden from
/// elsewhere (a `--set` on the command line) can be given their own origin.
class Diagnostics {
public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}

  /// Records a problem at `where` (its line is used when yaml-cpp knows it, else `fallback_line`).
  void error(const YAML::Node& where, const std::string& key, std::string message, int fallback_line = 0);
  void error_at_line(int line, const std::string& key, std::string message);
  /// Keys equal to or below `key` are reported as coming from `origin` (e.g. "--set pp=2").
  void set_origin(const std::string& key, std::string origin);
  void append(const std::vector<Diagnostic>& more);

  bool empty() const { return list_.empty(); }
  const std::vector<Diagnostic>& list() const { return list_; }
  const std::string& file() const { return file_; }
  /// Throws ConfigError with every recorded problem, if any.
  void throw_if_any() const;

private:
  void push_unique(Diagnostic d);
  std::string file_;
  std::vector<Diagnostic> list_;
  std::map<std::string, std::string> origins_;
};

/// Loads a YAML file. Throws ConfigError naming the file (and the line of a syntax error).
YAML::Node load_yaml_file(const std::string& path);
/// Parses YAML text; `label` stands for the file name in error messages.
YAML::Node load_yaml_string(const std::string& text, const std::string& label);
/// Reads a whole file into a string. Throws ConfigError when it cannot be read.
std::string read_text_file(const std::string& path);
/// 1-based line of a node, or 0 when yaml-cpp does not know it.
int yaml_line(const YAML::Node& node);

enum class Bound { any, non_negative, positive };

/// A YAML mapping being read. Every accessor marks its key as known; check_unknown_keys() then
/// reports the rest. Accessors never throw on bad input: they record a diagnostic and return the
/// fallback, so that one pass reports every problem.
class YamlMap {
public:
  /// `path` is the dotted key of this map ("" for the document root, "training", ...).
  YamlMap(const YAML::Node& node, std::string path, Diagnostics& diags);

  bool has(const std::string& key) const;
  /// The value node of `key` (marks the key as known) or an undefined node.
  YAML::Node node(const std::string& key);
  /// Dotted key of a child: key_path("pp") == "parallelism.pp".
  std::string key_path(const std::string& key) const;

  std::optional<std::string> string(const std::string& key);
  std::string string(const std::string& key, const std::string& fallback);
  std::string required_string(const std::string& key);

  std::optional<double> quantity(const std::string& key, Dimension dimension, Bound bound = Bound::positive);
  double quantity(const std::string& key, Dimension dimension, double fallback, Bound bound = Bound::positive);
  double required_quantity(const std::string& key, Dimension dimension, Bound bound = Bound::positive);

  std::optional<long long> integer(const std::string& key, long long min, long long max);
  long long integer(const std::string& key, long long fallback, long long min, long long max);
  long long required_integer(const std::string& key, long long min, long long max);

  bool boolean(const std::string& key, bool fallback);

  /// A non-empty list of integers in [min, max] under `key` (marking the key as known); nullopt
  /// when absent or not such a list. Reports nothing: the caller says what it expected.
  std::optional<std::vector<long long>> integer_list(const std::string& key, long long min, long long max);

  template <typename E, std::size_t N> E choice(const std::string& key, const EnumTable<E, N>& table, E fallback)
  {
    auto text = string(key);
    if (!text)
      return fallback;
    if (auto value = table.parse(*text))
      return *value;
    std::vector<std::string> names;
    for (const auto& e : table.entries)
      names.emplace_back(e.name);
    report(key, "unknown value '" + *text + "'" + did_you_mean(*text, names) + " (expected one of: " + table.names() + ")");
    return fallback;
  }

  /// Nested mapping under `key`; nullopt (and a diagnostic if present but not a map) otherwise.
  std::optional<YamlMap> map(const std::string& key);

  /// Reports every key of this map that no accessor asked for.
  void check_unknown_keys();
  /// Records a problem about `key` of this map, at the key's line when present.
  void report(const std::string& key, std::string message);

  const YAML::Node& yaml() const { return node_; }
  const std::string& path() const { return path_; }
  Diagnostics& diagnostics() { return *diags_; }
  int line() const { return yaml_line(node_); }

private:
  std::optional<std::string> scalar(const std::string& key);

  YAML::Node node_;
  std::string path_;
  Diagnostics* diags_;
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> entries_;  // key -> (key node, value node)
  std::set<std::string> used_;
  std::vector<std::string> asked_;  // every key an accessor asked for, present or not (for "did you mean")
};

/// Loads a YAML file and reads its root mapping with `parse(YamlMap&)`; throws ConfigError with every
/// problem `parse` recorded. The loaders of models, clusters and profiles are all this shape.
template <typename Parse> auto parse_yaml_file(const std::string& path, Parse parse)
{
  Diagnostics diags(path);
  YAML::Node root = load_yaml_file(path);
  YamlMap map(root, "", diags);
  auto value = parse(map);
  diags.throw_if_any();
  return value;
}

}  // namespace ddlsim
