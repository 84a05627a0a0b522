#include "experiments/DocumentKeys.hpp"

#include <sstream>

namespace ddlsim::experiments {

std::vector<std::string> split_key(const std::string& key)
{
  std::vector<std::string> parts;
  std::stringstream in(key);
  for (std::string part; std::getline(in, part, '.');)
    parts.push_back(part);
  return parts;
}

bool valid_key(const std::string& key)
{
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    return false;
  return key.find_first_of(" \t=[]{}") == std::string::npos;
}

// Sets the dotted `key` of `doc` to `value`, creating missing mappings (whose origin is then `origin`).
void set_path(YAML::Node doc, const std::string& key, const YAML::Node& value, Diagnostics& diags,
              const std::string& origin)
{
  auto parts = split_key(key);
  YAML::Node cur = doc;
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    YAML::Node child = cur[parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      if (!origin.empty())
        diags.set_origin(walked, origin);
    } else if (!child.IsMap()) {
      diags.error(child, walked, "cannot set '" + key + "': '" + walked + "' is not a mapping here");
      return;
    }
    YAML::Node next = cur[parts[i]];
    cur.reset(next);  // rebind, do not assign: assignment would overwrite the node
  }
  cur[parts.back()] = value;
}

// Const walk to a dotted key's node (undefined when absent).
YAML::Node find_path(const YAML::Node& doc, const std::string& key)
{
  YAML::Node cur = doc;
  for (const auto& part : split_key(key)) {
    if (!cur.IsMap())
      return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& const_cur = cur;
    YAML::Node next = const_cur[part];
    if (!next.IsDefined())
      return next;
    cur.reset(next);
  }
  return cur;
}


// Takes `key` out of the zip groups of `sweep` (sweep.zip: one mapping, or a list of them), dropping
// a group it leaves empty: the other keys of its group still vary together.
void unzip_key(YAML::Node sweep, const std::string& key)
{
  YAML::Node zip = sweep["zip"];
  if (zip.IsMap()) {
    zip.remove(key);
    if (zip.size() == 0)
      sweep.remove("zip");
    return;
  }
  if (!zip.IsSequence())
    return;
  YAML::Node kept(YAML::NodeType::Sequence);
  for (YAML::Node group : zip) {
    if (group.IsMap())
      group.remove(key);
    if (!group.IsMap() || group.size() > 0)
      kept.push_back(group);
  }
  if (kept.size() == 0)
    sweep.remove("zip");
  else
    sweep["zip"] = kept;
}

}  // namespace ddlsim::experiments
