// What the framework exports (`ddlsim export megatron`, `export torchtitan`) share: the nodes a
// point's GPUs fill, the notes on what differs from the simulated step, and the refusals at the keys
// the framework cannot run as simulated.
#pragma once

#include "experiments/Experiment.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace ddlsim::experiments {

struct LaunchShape {
  int nodes = 1, gpus_per_node = 1;
  std::vector<std::string> notes;   ///< what differs from the simulated step, printed as comments
  std::vector<Diagnostic> problems; ///< what the framework cannot run as simulated (key, message)
};

/// torchrun's --nnodes and --nproc-per-node for the point's GPUs (a partial last node rounds up,
/// with a note saying so).
inline LaunchShape launch_shape(const PointConfig& point)
{
  LaunchShape s;
  s.gpus_per_node = std::min(point.cluster.gpus_per_node, point.parallelism.gpus());
  s.nodes         = (point.parallelism.gpus() + s.gpus_per_node - 1) / s.gpus_per_node;
  if (s.gpus_per_node * s.nodes != point.parallelism.gpus())
    s.notes.push_back(std::to_string(point.parallelism.gpus()) + " GPUs do not fill whole nodes of " +
                      std::to_string(point.cluster.gpus_per_node) + ": launch them with your scheduler");
  return s;
}

/// A problem at `key` (file and line filled in by the command, which knows the file).
inline void add_problem(std::vector<Diagnostic>& problems, std::string key, std::string message)
{
  Diagnostic d;
  d.key     = std::move(key);
  d.message = std::move(message);
  problems.push_back(std::move(d));
}

} // namespace ddlsim::experiments
