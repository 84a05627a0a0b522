// From a TaskGraph's compute tasks to seconds, through a cost model.
//
// Each compute task covers layers [layer_begin, layer_end) of the model for one micro-batch of b
// samples; its time is the sum, over those layers' kernels, of the cost model's time for each
// kernel (a per-kernel roofline prices a GEMM by its flop and a layer norm by its bytes):
//   forward   flop = b * forward_flop    bytes = (b * forward_sample_elements + forward_fixed_elements) * dtype
//   backward  flop = b * backward_flop   bytes = (b * backward_sample_elements + backward_fixed_elements) * dtype
//             (a GEMM's or convolution's backward is priced as two kernels of half that work each: the
//             data and the weight gradient)
//             plus, with recomputation, the forward of what is recomputed (everything, or the
//             recompute_cheap layers)
//   optimizer one fused fp32 kernel over the stage's parameters: 10 flop and
//             2 dtype + 2 (state + master) bytes per parameter
// A mixture of experts' experts layer runs on the token copies its experts keep (models::ExpertLoad:
// all of them when dropless); the busiest GPU's extra load under expert parallelism is the
// schedule's (ComputeTask::share).
#pragma once

#include "calibration/CostModel.hpp"
#include "calibration/Microbench.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace ddlsim::sim {

/// Whose step a point simulates (Framework.hpp, docs/frameworks.md).
enum class Framework : std::uint8_t { ideal, pytorch, pytorch_compile, megatron, megatron_2021 };

struct ComputeOptions {
  Dtype dtype = Dtype::bf16;
  models::Optimizer optimizer = models::Optimizer::adam;
  models::Recompute recompute = models::Recompute::none;
  int tp = 1;  ///< layers that tensor parallelism splits do 1/tp of their work on each GPU
  /// Megatron sequence parallelism: the replicated per-token layers (norms, dropout, adds) of a
  /// sequence model also do 1/tp of their work (on s/tp tokens)
  bool sequence_parallel = false;
  /// Context parallelism: each GPU computes s/cp tokens of every sample (GEMM rows / cp; the
  /// attention core's queries / cp against all keys, balanced over the causal mask by ring attention)
  int cp = 1;
  /// Expert parallelism: each GPU holds 1/ep of every experts layer's weights (reads them once per
  /// pass; with ep > experts each expert is split over ep / experts GPUs, its GEMMs ep / experts
  /// times taller and as many times narrower), on the same rows
  int ep = 1;
  /// Runs every kernel at this fraction of its rows (GEMM rows, batched-GEMM batch, convolution
  /// batch, at least 1; memory-bound kernels' per-sample bytes): a smaller step with the same
  /// layers, for executing a large model on a small machine (`ddlsim execute --scale`). Weights stay.
  double scale = 1;
  /// ideal: the simulator's own kernel list; pytorch: eager PyTorch's; pytorch-compile: torch.compile's;
  /// megatron, megatron-2021: Megatron's (Framework.hpp)
  Framework framework = Framework::ideal;
  /// pytorch-compile: the compiled graphs replayed as CUDA graphs (mode="reduce-overhead")
  bool cuda_graphs = false;
  /// Sharded data parallelism and its shard group: under pytorch and pytorch-compile, stages 2 and 3 are
  /// FSDP's (fully_shard), whose mixed precision replaces autocast (Framework.hpp: fsdp_params)
  ZeroStage zero = ZeroStage::none;
  int shard      = 1;
  int expert_shard = 1;     ///< the experts' shard group
  bool recomputing = false; ///< a forward rerun inside the backward (activation checkpointing)
};

/// Work of one kernel's forward or backward pass over `samples` samples.
calibration::KernelWork kernel_work(const models::Kernel& kernel, Phase phase, double samples, Dtype dtype);

/// Which pass of a layer kernel a launch is: a GEMM's or convolution's backward is two launches.
enum class LaunchPass : std::uint8_t { forward, backward_data, backward_weight, backward, optimizer };

/// One kernel a compute task launches: its work, which the cost model prices, and its real shape,
/// which an execution backend (sim/backends/) runs. The simulator and the backends share this list,
/// so what is executed is what was priced.
///   gemm          C[m x n] = A[m x k] B[k x n], `gemm.batch` times (batched_gemm); m counts the
///                 micro-batch's rows (samples x the layer's m); the backward-data launch is the GEMM
///                 (m, k, n), the backward-weight one (k, n, m), each half the layer's backward work
///   conv2d        `conv` at `conv_batch` samples; backward data and weight, half the work each
///   pointwise, gather, custom, optimizer
///                 memory-bound: `work.bytes` moved
struct KernelLaunch {
  models::KernelKind kind = models::KernelKind::pointwise;
  LaunchPass pass = LaunchPass::forward;
  calibration::KernelWork work;
  models::GemmShape gemm;
  models::ConvShape conv;
  int conv_batch = 0;
  const models::Layer* layer = nullptr;  ///< nullptr for the optimizer step
  /// pytorch-compile: launched eagerly after the compiled graph (AccumulateGrad), not by its wrapper
  bool outside_graph = false;
};

/// The microbenchmark point that runs one launch (pointwise for every memory-bound kernel).
calibration::BenchPoint launch_point(const KernelLaunch& launch);

/// The share of a layer's work one of `tp` GPUs runs: 1/tp when the layer divides over tensor
/// parallelism, or with `sequence_parallel` for a per-token replicated layer; 1 otherwise.
double tp_share(const models::Layer& layer, int tp, bool sequence_parallel);

/// Launches of one layer's forward or backward pass over `samples` samples, on one of `tp` GPUs
/// (work x tp_share; the shapes stay the whole layer's) and one of `cp` GPUs sharing each sequence (rows / cp).
std::vector<KernelLaunch> layer_launches(const models::Layer& layer, Phase phase, int samples, Dtype dtype, int tp = 1,
                                         double scale = 1, bool sequence_parallel = false, int cp = 1, int ep = 1);

/// The maximal runs [first, last) of layers in [begin, end) whose forward `recompute` reruns in the
/// backward (models::reruns_forward), in layer order: what an activation-checkpointed PyTorch backward
/// runs forward again, kernels and host operators both. Per-op checkpointing (selective_op) reruns
/// every operator of a checkpointed block (models::op_checkpointed), some without their kernels
/// (op_checkpoint_reruns, sim/Framework.hpp): a run per block.
std::vector<std::pair<std::size_t, std::size_t>> recomputed_runs(const models::Model& model, std::size_t begin,
                                                                 std::size_t end, models::Recompute recompute);

/// The forward launches of the share `rerun` (0 to 1) of `layer`'s work a per-op checkpointed backward
/// runs again (models::op_checkpoint_kept): all of them at 1, none at 0; in between a linear's GEMM
/// narrowed to the output features of the matmuls it recomputes (whole features: 1,024 of Llama 3
/// 8B's 6,144 for wk).
std::vector<KernelLaunch> rerun_launches(const models::Layer& layer, double rerun, int samples,
                                         const ComputeOptions& options);

/// Launches of layers [begin, end) in `phase` for `samples` samples: recomputation included in
/// backward; Phase::optimizer gives the one fused update of the parameters those layers hold.
std::vector<KernelLaunch> range_launches(const models::Model& model, std::size_t begin, std::size_t end, Phase phase,
                                         int samples, const ComputeOptions& options);

/// Seconds of one layer's forward or backward pass (no recomputation), summed over its kernels,
/// on one of `tp` GPUs sharing it (each kernel's flop and bytes / tp when the layer divides).
double layer_seconds(const models::Layer& layer, Phase phase, int samples, Dtype dtype,
                     const calibration::CostModel& cost, int tp = 1);

/// Seconds of layers [begin, end) in `phase` for `samples` samples, recomputation included in backward.
/// Phase::optimizer gives the fused update of the parameters those layers hold (tied copies included).
/// `part`: all of it, or the backward's weight-gradient GEMMs, or the rest (in_part).
double range_seconds(const models::Model& model, std::size_t begin, std::size_t end, Phase phase, int samples,
                     const ComputeOptions& options, const calibration::CostModel& cost,
                     ComputePart part = ComputePart::whole);

/// Whether `launch` belongs to `part` of its compute task: the weight-gradient part is the backward's
/// weight-gradient GEMMs (LaunchPass::backward_weight), the input-gradient part every other launch.
bool in_part(const KernelLaunch& launch, ComputePart part);

/// Seconds of every task of `graph` (0 for transfers and collectives, whose time the replay finds).
/// Identical tasks (same layers, phase, micro-batch size, share and part) are costed once.
std::vector<double> compute_durations(const TaskGraph& graph, const models::Model& model,
                                      const calibration::CostModel& cost, const ComputeOptions& options);

}  // namespace ddlsim::sim
