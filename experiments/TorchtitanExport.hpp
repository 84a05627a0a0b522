// A simulated point as torchtitan's job configuration (`ddlsim export torchtitan`): the TOML file
// `torchrun ... -m torchtitan.train --job.config_file FILE` reads, with the model flavor, the
// parallel degrees, the pipeline's model chunks as ddlsim cut them, batch, sequence, precision and
// activation checkpointing the point was simulated with. Keys as torchtitan's JobConfig spells them
// (torchtitan/config/job_config.py at 6404b932421f, the TOML era of its configuration).
//
//   const TorchtitanJob job = torchtitan_job(point);
//   if (!job.problems.empty()) ...        // what torchtitan cannot run as simulated, by key
//   fmt::print("{}", job.text());         // `# ` notes, the torchrun line, then [job], [model], ...
#pragma once

#include "experiments/LaunchShape.hpp"

#include <string>
#include <vector>

namespace ddlsim::experiments {

struct TomlEntry {
  std::string key;
  std::string value; ///< a TOML literal: 8, true, "1F1B", [["tok_embeddings", "layers.0"]]
};

struct TomlTable {
  std::string name; ///< [parallelism]
  std::vector<TomlEntry> entries;
};

/// The nodes, notes and problems (what torchtitan cannot run as simulated, by key), and the tables.
struct TorchtitanJob : LaunchShape {
  std::vector<TomlTable> tables;
  /// The file: notes as `# ` lines, the torchrun command as a comment, then every table.
  std::string text() const;
};

/// The torchtitan job of `point`: a Llama 3 from the llama generator whose dimensions are one of
/// torchtitan's llama3 flavors (8B, 70B, 405B).
TorchtitanJob torchtitan_job(const PointConfig& point);

} // namespace ddlsim::experiments
