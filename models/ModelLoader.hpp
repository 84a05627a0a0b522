// Model files: a generator with its sizes, or a plain list of layers.
//
//   name: gpt2-xl                      # generator form
//   gpt: {layers: 48, hidden: 1600, heads: 25, seq: 1024, vocab: 50257}
//
//   name: toy-mlp                      # layer-list form
//   layers:
//     - {name: fc1, type: linear, in: 1024, out: 4096}
//     - {name: blk, type: custom, parameters: 1M, forward_flop: 2GFlop, output_elements: 4096, repeat: 4}
//
// The same mapping can stand inline under `model:` in an experiment file.
#pragma once

#include "common/YamlReader.hpp"
#include "models/Model.hpp"

#include <filesystem>
#include <string>

namespace ddlsim::models {

/// Reads a model description from `map` (a model file's root or an experiment's inline `model:`),
/// recording every problem in the map's Diagnostics. The result is unusable when diagnostics were added.
Model parse_model(YamlMap& map);

/// Loads a model file. Throws ConfigError (file:line: key: message) on any problem.
Model load_model_file(const std::filesystem::path& path);

/// Loads a shipped model by name (models/zoo/NAME.yaml) or a model file by path.
/// Throws ConfigError when the name is unknown, listing the shipped names.
Model load_model(const std::string& name_or_path);

}  // namespace ddlsim::models
