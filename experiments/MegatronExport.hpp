// A simulated point as the launch arguments of the framework that would run it (`ddlsim export
// megatron`): Megatron-LM's pretrain_gpt.py flags for the parallel sizes, batch, sequence, model,
// precision, recomputation, sharding and overlap options the point was simulated with.
//
//   const MegatronLaunch launch = megatron_launch(point);
//   if (!launch.problems.empty()) ...          // what Megatron-LM cannot run as simulated, by key
//   fmt::print("{}", launch.text());           // torchrun ... pretrain_gpt.py \ and one flag a line
#pragma once

#include "experiments/LaunchShape.hpp"

#include <string>
#include <vector>

namespace ddlsim::experiments {

struct MegatronArgument {
  std::string flag;  ///< as Megatron-LM spells it: --tensor-model-parallel-size
  std::string value; ///< empty for a switch
};

/// The nodes, notes and problems (what Megatron-LM cannot run as simulated, by key), and the arguments.
struct MegatronLaunch : LaunchShape {
  std::vector<MegatronArgument> arguments;
  /// The command: notes as `# ` lines, then torchrun over the nodes and one argument per line.
  std::string text() const;
};

/// The Megatron-LM launch of `point` (a transformer from the gpt or llama generator).
MegatronLaunch megatron_launch(const PointConfig& point);

} // namespace ddlsim::experiments
