// Model files: a generator with its sizes, or a list of layers.
//
// Generator form: one of the keys gpt, llama, bert, resnet, vgg, alexnet, amoebanet, mlp with its
// sizes (see Zoo.hpp for what each builds):
//
//   name: gpt3-175b
//   gpt: {layers: 96, hidden: 12288, heads: 96, seq: 2048, vocab: 50257}   # attention: eager | flash
//
//   name: llama3-8b
//   llama: {layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, seq: 8192, vocab: 128256}
//          # ffn: swiglu | gelu, norm: rms_norm | layer_norm, positions: rope | learned,
//          # tied_embeddings: false, bias: false, dropout: false, attention: flash | eager
//
//   name: resnet50-gn
//   resnet: {depth: 50, image: 224, classes: 1000, normalization: group_norm, groups: 32}
//
// Layer-list form: the input shape and the layers; shapes are inferred from each layer's inputs.
// `inputs` names the layers a layer reads (default: the layer listed before it, or the model input
// for the first), so branches and skip connections can be written in any order; layers are put in
// topological order. `block` groups consecutive layers into one pipeline partition unit (default:
// each layer is its own block); `repeat: N` chains N copies of a layer; `tp` sets how tensor
// parallelism splits a layer (see TpRole; default by type).
//
//   name: tiny-resnet
//   input: {channels: 3, height: 32, width: 32}      # or {tokens: 128, features: 512}
//   layers:
//     - {name: conv1, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
//     - {name: bn1, type: batch_norm}
//     - {name: relu1, type: activation, function: relu}
//     - {name: conv2, type: conv2d, out_channels: 16, kernel: 3, padding: 1, block: res1}
//     - {name: add1, type: add, inputs: [relu1, conv2], block: res1}
//     - {name: pool, type: pooling, mode: avg, global: true}
//     - {name: fc, type: linear, out: 10}
//     - {name: loss, type: softmax_loss}
//
// The same mapping can stand inline under `model:` in an experiment file.
#pragma once

#include "common/YamlReader.hpp"
#include "models/Model.hpp"

#include "models/ModelBuilder.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace ddlsim::models {

/// What a run sets on the model it loads (an experiment's `training.seq` and `training.attention`):
/// they override the transformer generators' own `seq` and `attention`; other models ignore them.
struct ModelOptions {
  int seq = 0;  ///< tokens per sample; 0 keeps the model's own
  std::optional<AttentionKind> attention = {};
  /// A mixture of experts' routing as the run sets it (training.load_imbalance, capacity_factor),
  /// replacing the model's `moe:` values; unset keeps them. A load imbalance outside [1, experts]
  /// is the caller's to report at its own key: the model keeps its own.
  std::optional<double> load_imbalance = {};
  std::optional<double> capacity_factor = {};
};

/// Reads a model description from `map` (a model file's root or an experiment's inline `model:`),
/// recording every problem in the map's Diagnostics. The result is unusable when diagnostics were added.
Model parse_model(YamlMap& map, const ModelOptions& options = {});

/// Loads a model file. Throws ConfigError (file:line: key: message) on any problem.
Model load_model_file(const std::filesystem::path& path, const ModelOptions& options = {});

/// Loads a shipped model by name (models/zoo/NAME.yaml) or a model file by path.
/// Throws ConfigError when the name is unknown, listing the shipped names.
Model load_model(const std::string& name_or_path, const ModelOptions& options = {});

}  // namespace ddlsim::models
