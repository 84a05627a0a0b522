#include "common/YamlReader.hpp"

#include <algorithm>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ddlsim {

int yaml_line(const YAML::Node& node)
{
  if (!node.IsDefined())
    return 0;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

void Diagnostics::error(const YAML::Node& where, const std::string& key, std::string message, int fallback_line)
{
  int line = yaml_line(where);
  error_at_line(line > 0 ? line : fallback_line, key, std::move(message));
}

void Diagnostics::error_at_line(int line, const std::string& key, std::string message)
{
  // The most specific origin override wins: "parallelism.pp" before "parallelism".
  for (auto it = origins_.rbegin(); it != origins_.rend(); ++it) {
    const std::string& prefix = it->first;
    if (key == prefix || (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
                          key[prefix.size()] == '.')) {
      push_unique({it->second, 0, key, std::move(message)});
      return;
    }
  }
  push_unique({file_, line, key, std::move(message)});
}

void Diagnostics::push_unique(Diagnostic d)
{
  // The same entry read twice (a repeated layer) must not report the same problem twice.
  for (const Diagnostic& e : list_)
    if (e.file == d.file && e.line == d.line && e.key == d.key && e.message == d.message)
      return;
  list_.push_back(std::move(d));
}

void Diagnostics::set_origin(const std::string& key, std::string origin) { origins_[key] = std::move(origin); }

void Diagnostics::append(const std::vector<Diagnostic>& more) { list_.insert(list_.end(), more.begin(), more.end()); }

void Diagnostics::throw_if_any() const
{
  if (!list_.empty())
    throw ConfigError(list_);
}

std::string read_text_file(const std::string& path)
{
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path, 0, "", "cannot read file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path, 0, "", std::string("cannot open file: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw ConfigError(path, 0, "", "cannot read file");
  return text.str();
}

YAML::Node load_yaml_string(const std::string& text, const std::string& label)
{
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // e.msg is the message without yaml-cpp's own "yaml-cpp: error at line..." prefix.
    throw ConfigError(label, e.mark.is_null() ? 0 : e.mark.line + 1, "", "YAML syntax error: " + e.msg);
  }
}

YAML::Node load_yaml_file(const std::string& path) { return load_yaml_string(read_text_file(path), path); }

YamlMap::YamlMap(const YAML::Node& node, std::string path, Diagnostics& diags)
    : node_(node), path_(std::move(path)), diags_(&diags)
{
  if (!node.IsMap()) {
    if (!node.IsNull() && node.IsDefined())
      diags.error(node, path_.empty() ? std::string("<document>") : path_, "expected a mapping of key: value pairs");
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      diags.error(it->first, path_, "keys must be plain names");
      continue;
    }
    const std::string& key = it->first.Scalar();
    if (!entries_.emplace(key, std::make_pair(it->first, it->second)).second)
      diags.error(it->first, key_path(key), "duplicate key");
  }
}

bool YamlMap::has(const std::string& key) const { return entries_.count(key) != 0; }

std::string YamlMap::key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

YAML::Node YamlMap::node(const std::string& key)
{
  if (std::find(asked_.begin(), asked_.end(), key) == asked_.end())
    asked_.push_back(key);
  auto it = entries_.find(key);
  if (it == entries_.end())
    return YAML::Node(YAML::NodeType::Undefined);
  used_.insert(key);
  return it->second.second;
}

void YamlMap::report(const std::string& key, std::string message)
{
  auto it = entries_.find(key);
  if (it != entries_.end())
    diags_->error(it->second.second, key_path(key), std::move(message), yaml_line(it->second.first));
  else
    diags_->error(node_, key_path(key), std::move(message));
}

std::optional<std::string> YamlMap::scalar(const std::string& key)
{
  YAML::Node value = node(key);
  if (!value.IsDefined())
    return std::nullopt;
  if (!value.IsScalar()) {
    report(key, "expected a single value, not a " + std::string(value.IsMap() ? "mapping" : value.IsSequence() ? "list" : "null"));
    return std::nullopt;
  }
  return value.Scalar();
}

std::optional<std::string> YamlMap::string(const std::string& key) { return scalar(key); }

std::string YamlMap::string(const std::string& key, const std::string& fallback)
{
  return scalar(key).value_or(fallback);
}

std::string YamlMap::required_string(const std::string& key)
{
  if (!has(key)) {
    diags_->error(node_, key_path(key), "missing required key");
    return {};
  }
  return scalar(key).value_or(std::string{});
}

namespace {
const char* bound_text(Bound bound)
{
  return bound == Bound::positive ? "must be greater than 0" : "must not be negative";
}
bool violates(double v, Bound bound)
{
  return (bound == Bound::positive && !(v > 0)) || (bound == Bound::non_negative && !(v >= 0));
}
}  // namespace

std::optional<double> YamlMap::quantity(const std::string& key, Dimension dimension, Bound bound)
{
  auto text = scalar(key);
  if (!text)
    return std::nullopt;
  if (const auto bare = bare_number(*text); bare && *bare != 0 && needs_unit(dimension)) {
    report(key, "'" + *text + "' has no unit: a " + std::string(dimension_name(dimension)) +
                    " needs one (did you mean " + unit_hint(*text, dimension) + "?)");
    return std::nullopt;
  }
  try {
    double v = parse_quantity(*text, dimension);
    if (violates(v, bound)) {
      report(key, "'" + *text + "' " + bound_text(bound));
      return std::nullopt;
    }
    return v;
  } catch (const UnitError& e) {
    report(key, e.what());
    return std::nullopt;
  }
}

double YamlMap::quantity(const std::string& key, Dimension dimension, double fallback, Bound bound)
{
  return quantity(key, dimension, bound).value_or(fallback);
}

double YamlMap::required_quantity(const std::string& key, Dimension dimension, Bound bound)
{
  if (!has(key)) {
    diags_->error(node_, key_path(key), "missing required key");
    return 0.0;
  }
  return quantity(key, dimension, bound).value_or(0.0);
}

std::optional<long long> YamlMap::integer(const std::string& key, long long min, long long max)
{
  auto text = scalar(key);
  if (!text)
    return std::nullopt;
  double v = 0;
  try {
    v = parse_quantity(*text, Dimension::count);
  } catch (const UnitError&) {
    report(key, "'" + *text + "' is not an integer");
    return std::nullopt;
  }
  if (v != std::floor(v)) {
    report(key, "'" + *text + "' is not an integer");
    return std::nullopt;
  }
  if (v < static_cast<double>(min) || v > static_cast<double>(max)) {
    report(key, "'" + *text + "' is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return std::nullopt;
  }
  return static_cast<long long>(v);
}

long long YamlMap::integer(const std::string& key, long long fallback, long long min, long long max)
{
  return integer(key, min, max).value_or(fallback);
}

long long YamlMap::required_integer(const std::string& key, long long min, long long max)
{
  if (!has(key)) {
    diags_->error(node_, key_path(key), "missing required key");
    return min;
  }
  return integer(key, min, max).value_or(min);
}

std::optional<std::vector<long long>> YamlMap::integer_list(const std::string& key, long long min, long long max)
{
  const YAML::Node list = node(key);
  if (!list.IsSequence() || list.size() == 0)
    return std::nullopt;
  std::vector<long long> values;
  for (const auto& item : list) {
    try {
      const long long v = item.as<long long>();
      if (v < min || v > max)
        return std::nullopt;
      values.push_back(v);
    } catch (const YAML::Exception&) {
      return std::nullopt;
    }
  }
  return values;
}

bool YamlMap::boolean(const std::string& key, bool fallback)
{
  auto text = scalar(key);
  if (!text)
    return fallback;
  if (*text == "true" || *text == "yes" || *text == "on")
    return true;
  if (*text == "false" || *text == "no" || *text == "off")
    return false;
  report(key, "'" + *text + "' is not a boolean (true or false)");
  return fallback;
}

std::optional<YamlMap> YamlMap::map(const std::string& key)
{
  YAML::Node value = node(key);
  if (!value.IsDefined())
    return std::nullopt;
  if (!value.IsMap()) {
    report(key, "expected a mapping of key: value pairs");
    return std::nullopt;
  }
  return YamlMap(value, key_path(key), *diags_);
}

void YamlMap::check_unknown_keys()
{
  for (const auto& [key, nodes] : entries_)
    if (!used_.count(key))
      diags_->error(nodes.first, key_path(key), "unknown key" + did_you_mean(key, asked_),
                    yaml_line(nodes.second));  // a swept key has no mark of its own
}

}  // namespace ddlsim
