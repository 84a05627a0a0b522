// The torch execution backend's input: one point as sim/backends/torch/run_point.py runs it.
//
// `ddlsim execute --backend torch` writes, per point, the zoo model's layers as ddlsim built them
// (models/Model.hpp) with what PyTorch needs to build the same modules, the training settings and the
// data-parallel degree, as JSON (format ddlsim-torch-point-1). run_point.py builds torch.nn modules
// from it (sim/backends/torch/build_model.py), checks that they hold model.parameter_count()
// parameters, and times real training steps. What a Layer does not store is recovered from its
// kernels: a linear layer's bias from its parameter count, a convolution from its ConvShape, a
// pooling window from its flop per output element, an activation from its flop per element and what
// it keeps, an embedding's vocabulary from the LM head tied to it.
//
//   TorchPoint p{.label = "gpt point 0", .global_batch = 64, .micro_batch = 8, .dp = 1};
//   std::ofstream out("point-0.json");
//   write_torch_point(model, p, out);   // throws ExecutionError for a layer torch cannot build
#pragma once

#include "common/Dtype.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"

#include <ostream>
#include <string>

namespace ddlsim::backends {

struct TorchPoint {
  std::string label;             ///< "EXPERIMENT point N", for messages
  long long global_batch = 1;    ///< samples per iteration, all ranks together
  int micro_batch = 1;           ///< samples per micro-batch
  Dtype dtype = Dtype::fp32;     ///< autocast dtype over fp32 weights (bf16, fp16), or fp32/tf32
  models::Optimizer optimizer = models::Optimizer::adam;
  int dp = 1;                    ///< ranks (DDP)
  double dp_bucket_bytes = 0;    ///< DDP bucket size; 0: one all-reduce after backward
  int warmup = 2;                ///< untimed steps
  int iterations = 3;            ///< timed steps
  std::string trace;             ///< where the profiler trace of one step goes; empty: none
  bool compile     = false;      ///< the model under torch.compile (framework pytorch-compile)
  bool cuda_graphs = false;      ///< compiled with mode="reduce-overhead" (CUDA graphs)
  /// Micro-batches per rank and iteration: global_batch / (micro_batch x dp).
  long long micro_batches() const { return global_batch / (static_cast<long long>(micro_batch) * dp); }
};

/// Writes the point (format ddlsim-torch-point-1). Throws ExecutionError naming the layer when the model
/// has a layer the torch backend does not build (mixtures of experts, custom layers), or a micro-batch
/// count that is not whole.
void write_torch_point(const models::Model& model, const TorchPoint& point, std::ostream& out);

}  // namespace ddlsim::backends
