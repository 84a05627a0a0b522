// Dotted keys ("parallelism.tp") in an experiment's YAML document: how --set, sweeps and zip groups
// name the place a value goes.
//
//   set_path(doc, "training.micro_batch", YAML::Load("4"), diags, "--set training.micro_batch=4");
//   YAML::Node tp = find_path(doc, "parallelism.tp");   // undefined when absent
//   unzip_key(doc["sweep"], "parallelism.dp");          // --set pins a zipped key
#pragma once

#include "common/YamlReader.hpp"

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace ddlsim::experiments {

/// "a.b.c" -> {"a", "b", "c"}.
std::vector<std::string> split_key(const std::string& key);

/// A non-empty dotted key without empty parts, blanks or YAML flow characters.
bool valid_key(const std::string& key);

/// Sets the dotted `key` of `doc` to `value`, creating missing mappings (whose origin is then
/// `origin`); a part that is not a mapping is reported to `diags`.
void set_path(YAML::Node doc, const std::string& key, const YAML::Node& value, Diagnostics& diags,
              const std::string& origin);

/// The node at a dotted key (undefined when absent), without changing `doc`.
YAML::Node find_path(const YAML::Node& doc, const std::string& key);

/// Takes `key` out of the zip groups of `sweep` (sweep.zip: one mapping, or a list of them),
/// dropping a group it leaves empty: the other keys of its group still vary together.
void unzip_key(YAML::Node sweep, const std::string& key);

}  // namespace ddlsim::experiments
