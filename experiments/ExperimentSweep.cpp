// Experiment's sweep: the axes' values (zip groups included), the `where:` constraint, and each
// point's YAML document (the file, the --set overrides, the point's axis values), built so that a
// point costs the same however long the sweep is; the list of points a sweep keeps.
#include "experiments/Experiment.hpp"

#include "experiments/DocumentKeys.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>

namespace ddlsim::experiments {
namespace {

// The value each axis takes at point `index` of the sweep (the first axis varies slowest).
template <typename Axes> std::vector<std::size_t> axis_positions(const Axes& axes, std::size_t index)
{
  std::size_t stride = 1;
  for (const auto& axis : axes)
    stride *= axis.size;
  std::vector<std::size_t> at;
  for (const auto& axis : axes) {
    stride /= axis.size;
    at.push_back((index / stride) % axis.size);
  }
  return at;
}

} // namespace

// A point's document is built from the file without its sweep block (its lines blanked, so that
// every other key keeps its line number) and its axis values, each parsed alone from a snippet that
// starts on the value's own line: a point then costs the same however long the sweep's lists are.
// Where the file is not a plain block mapping with a sweep block that defines no anchor, or a swept
// value is a mapping or a list (whose dump would move its parts' lines), each point parses the whole
// file again instead (document_for).
void Experiment::prepare_point_documents(const YAML::Node& base)
{
  const YAML::Node file = YAML::Load(text_);
  if (!file.IsMap() || file.Style() != YAML::EmitterStyle::Block || !file["sweep"].IsDefined())
    return;
  int from = -1;
  std::vector<int> key_lines;
  for (auto it = file.begin(); it != file.end(); ++it) {
    key_lines.push_back(it->first.Mark().line);
    if (it->first.Scalar() == "sweep") {
      if (it->first.Mark().column != 0)
        return;
      from = it->first.Mark().line;
    }
  }
  int to = std::numeric_limits<int>::max(); // the next top-level key's line, or the end
  for (int line : key_lines)
    if (line > from)
      to = std::min(to, line);
  std::string text;
  std::size_t start = 0;
  for (int line = 0; start <= text_.size(); ++line) {
    const std::size_t end = std::min(text_.find('\n', start), text_.size());
    const std::string_view content(text_.data() + start, end - start);
    if (line >= from && line < to) {
      if (content.find('&') != std::string_view::npos)
        return; // an anchor in the sweep block may be used elsewhere
    } else {
      text += content;
    }
    if (end == text_.size())
      break;
    text += '\n';
    start = end + 1;
  }
  std::vector<std::vector<std::vector<std::string>>> snippets;
  const YAML::Node sweep = base["sweep"];
  for (const auto& axis : axes_) {
    auto& keys = snippets.emplace_back();
    for (std::size_t k = 0; k < axis.keys.size(); ++k) {
      auto& values          = keys.emplace_back();
      const YAML::Node list = axis_list(sweep, axis, k);
      for (std::size_t i = 0; i < axis.size; ++i) {
        if (!list[i].IsScalar() && !list[i].IsNull())
          return; // a mapping or list: its dump would not keep the lines of its parts
        const YAML::Mark mark = list[i].Mark();
        values.push_back(std::string(mark.is_null() ? 0 : static_cast<std::size_t>(mark.line), '\n') +
                         YAML::Dump(list[i]));
      }
    }
  }
  point_text_    = std::move(text);
  axis_snippets_ = std::move(snippets);
}

// sweep.zip: one mapping of keys to equal-length lists (one axis), or a list of such mappings.
void Experiment::load_zip(const YAML::Node& zip, Diagnostics& diags, int line)
{
  auto group = [&](const YAML::Node& mapping, int index, bool single) {
    const std::string where = single ? "sweep.zip" : "sweep.zip[" + std::to_string(index) + "]";
    if (!mapping.IsMap() || mapping.size() == 0) {
      diags.error(mapping, where, "expected a mapping of dotted.key: [values] whose lists have one length", line);
      return;
    }
    Axis axis{{}, 0, index, single};
    for (auto it = mapping.begin(); it != mapping.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(axis.keys.begin(), axis.keys.end(), key) != axis.keys.end()) {
        diags.error(it->first, where + "." + key, "duplicate key");
        return;
      }
      if (!valid_key(key) || key == "name" || key.rfind("sweep", 0) == 0 || key.rfind("output", 0) == 0 || key == "where") {
        diags.error(it->first, where + "." + key, "cannot sweep over '" + key + "'");
        return;
      }
      if (!it->second.IsSequence() || it->second.size() == 0) {
        diags.error(it->second, where + "." + key, "expected a non-empty list of values", yaml_line(it->first));
        return;
      }
      if (axis.size != 0 && it->second.size() != axis.size) {
        diags.error(it->second, where + "." + key,
                    "has " + std::to_string(it->second.size()) + " values; the group's first list has " +
                        std::to_string(axis.size) + " (zipped values move together)",
                    yaml_line(it->first));
        return;
      }
      axis.size = it->second.size();
      axis.keys.push_back(key);
    }
    axes_.push_back(std::move(axis));
  };
  if (zip.IsMap()) {
    group(zip, 0, true);
  } else if (zip.IsSequence() && zip.size() > 0) {
    for (std::size_t g = 0; g < zip.size(); ++g)
      group(zip[g], static_cast<int>(g), false);
  } else {
    diags.error(zip, "sweep.zip", "expected a mapping of keys to equal-length lists, or a list of such mappings", line);
  }
}

YAML::Node Experiment::axis_list(const YAML::Node& sweep, const Axis& axis, std::size_t key) const
{
  if (axis.zip < 0)
    return sweep[axis.keys[key]];
  const YAML::Node zip = sweep["zip"];
  return axis.zip_mapping ? zip[axis.keys[key]] : zip[static_cast<std::size_t>(axis.zip)][axis.keys[key]];
}

bool Experiment::accepts(const PointConfig& p) const
{
  if (!where_)
    return true;
  const double gpus = p.cluster.gpu_count();
  const std::map<std::string, double> values{
      {"pp", p.parallelism.pp},
      {"dp", p.parallelism.dp},
      {"tp", p.parallelism.tp},
      {"cp", p.parallelism.cp},
      {"zero", zero_level(p.parallelism.zero)},
      {"zero_group", p.parallelism.zero_group},
      {"ep", p.parallelism.ep},
      {"seq", p.model.input_shape().tokens},
      {"gpus", gpus},
      {"nodes", p.cluster.nodes},
      {"gpus_per_node", p.cluster.gpus_per_node},
      {"micro_batch", p.training.micro_batch},
      {"global_batch", static_cast<double>(p.training.global_batch)},
      {"num_micro_batches", static_cast<double>(p.training.global_batch) /
                                (static_cast<double>(p.training.micro_batch) * std::max(1, p.parallelism.dp))},
      {"sequence_parallel", p.parallelism.sequence_parallel ? 1.0 : 0.0},
      {"virtual_stages", p.parallelism.virtual_stages},
  };
  try {
    return where_->accepts(values);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(file_, 0, "where", std::string(e.what()) + " (point " + std::to_string(p.index) + ")");
  }
}

std::size_t Experiment::point_count() const
{
  std::size_t n = 1;
  for (const auto& axis : axes_)
    n *= axis.size;
  return n;
}

std::vector<std::pair<std::string, std::string>> Experiment::axis_values(std::size_t index) const
{
  Diagnostics ignored(file_);
  YAML::Node doc = document_for(std::numeric_limits<std::size_t>::max(), ignored);
  std::vector<std::pair<std::string, std::string>> values;
  const std::vector<std::size_t> at = axis_positions(axes_, index);
  for (std::size_t a = 0; a < axes_.size(); ++a)
    for (std::size_t k = 0; k < axes_[a].keys.size(); ++k) {
      const YAML::Node v = axis_list(doc["sweep"], axes_[a], k)[at[a]];
      values.emplace_back(axes_[a].keys[k], v.IsScalar() ? v.Scalar() : YAML::Dump(v));
    }
  return values;
}

// The point's document: the file, then the overrides, then (unless index is max) the axis values.

YAML::Node Experiment::document_for(std::size_t index, Diagnostics& diags) const
{
  if (!point_text_.empty() && index != std::numeric_limits<std::size_t>::max()) {
    YAML::Node doc = YAML::Load(point_text_); // the file without its sweep (prepare_point_documents)
    for (const auto& o : overrides_) {
      const bool axis = o.key.rfind("sweep.", 0) == 0;
      diags.set_origin(axis ? o.key.substr(6) : o.key, o.origin);
      if (!axis && o.key != "sweep") // the sweep's overrides are in axes_ and the snippets already
        set_path(doc, o.key, YAML::Load(o.value), diags, o.origin);
    }
    const std::vector<std::size_t> at = axis_positions(axes_, index);
    for (std::size_t a = 0; a < axes_.size(); ++a)
      for (std::size_t k = 0; k < axes_[a].keys.size(); ++k)
        set_path(doc, axes_[a].keys[k], YAML::Load(axis_snippets_[a][k][at[a]]), diags, "");
    doc.remove("where");
    return doc;
  }
  YAML::Node doc = YAML::Load(text_);
  for (const auto& o : overrides_) {
    YAML::Node value = YAML::Load(o.value);
    if (o.key.rfind("sweep.", 0) == 0) {
      const std::string axis = o.key.substr(6);
      doc["sweep"][axis] = value;
      diags.set_origin(axis, o.origin);
      continue;
    }
    diags.set_origin(o.key, o.origin);
    set_path(doc, o.key, value, diags, o.origin);
    if (doc["sweep"].IsMap() && doc["sweep"][o.key].IsDefined())
      doc["sweep"].remove(o.key);  // --set fixes a swept key to one value
    if (doc["sweep"].IsMap() && doc["sweep"]["zip"].IsDefined())
      unzip_key(doc["sweep"], o.key);  // and takes a zipped key out of its group
  }
  if (index == std::numeric_limits<std::size_t>::max())
    return doc;
  const YAML::Node sweep            = doc["sweep"];
  const std::vector<std::size_t> at = axis_positions(axes_, index);
  for (std::size_t a = 0; a < axes_.size(); ++a)
    for (std::size_t k = 0; k < axes_[a].keys.size(); ++k)
      set_path(doc, axes_[a].keys[k], axis_list(sweep, axes_[a], k)[at[a]], diags, "");
  doc.remove("sweep");
  doc.remove("where");
  return doc;
}

void Experiment::scan_points(const std::function<void(PointConfig&&)>& keep) const
{
  std::size_t kept = 0;
  std::vector<Diagnostic> problems;
  for (std::size_t i = 0; i < point_count(); ++i) {
    try {
      PointConfig p = point(i);
      if (accepts(p)) { // `where:` leaves rejected points out: no row
        ++kept;
        keep(std::move(p));
      }
    } catch (const ConfigError& e) {
      problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
    }
  }
  if (!problems.empty())
    throw ConfigError(problems);
  if (kept == 0)
    throw ConfigError(file_, 0, "where",
                      "the constraint '" + where() + "' leaves none of the " + std::to_string(point_count()) + " points");
}

std::vector<PointConfig> Experiment::points() const
{
  std::vector<PointConfig> points;
  scan_points([&](PointConfig&& p) { points.push_back(std::move(p)); });
  return points;
}

PointList Experiment::point_list() const
{
  PointList list;
  scan_points([&](PointConfig&& p) {
    list.index.push_back(p.index);
    list.valid.push_back(p.is_valid());
  });
  return list;
}

}  // namespace ddlsim::experiments
