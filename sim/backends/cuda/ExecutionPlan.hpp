// How the CUDA backend lays a workload onto GPUs, streams and host threads: the bookkeeping of a run, worked out
// once before any GPU is touched, with nothing but the C++ standard library.
//
//   devices      simulated device d runs on GPU d, or on GPU d % visible GPUs when the workload has more devices
//                than there are GPUs and mapping is allowed; each simulated device has its own streams (compute,
//                transfer, collective) on its GPU, and one host thread per GPU issues the tasks of its devices
//   ranks        several processes (--mpi, one per machine), each seeing G GPUs: GPU g (= device g, no mapping)
//                belongs to rank g / G and is its CUDA device g % G. Every rank plans the whole workload alike
//                (the communicators' order, the signals' numbers) and runs the GPUs of its own rank
//   compute      a task's launches, in order, on its device's compute stream; the distinct launches of a GPU are
//                prepared once (launch_index) and share the GPU's operand buffers
//   transfer     issued on the source device's transfer stream: src's send buffer -> dst's receive buffer. Between
//                ranks: ncclSend on src's NCCL stream, ncclRecv on dst's, over the "world" communicator of every
//                device; both are NCCL work in workload order, as collectives are
//   collective   NCCL, one communicator per distinct group, when the members sit on distinct GPUs: each member's
//                thread issues its call on its GPU's stream of that communicator. Every communicator has a stream of
//                its own on each member GPU (data-parallel gradients, ZeRO's gathers, transfers between ranks), so
//                that they overlap compute and each other as the simulator's schedule lets them; each GPU issues
//                its calls in workload order, the same order on every GPU, so communicators cannot deadlock one
//                another. When members share a
//                GPU (NCCL holds one rank per GPU), the ring's traffic is emulated: each member, once every member
//                has reached the collective (its "ready" signal), copies (n-1)/n x bytes from its ring
//                predecessor's send buffer into its receive buffer, twice for all_reduce (reduce-scatter, then
//                all-gather), on its collective stream
//   signals      every task ends in a signal per issuing device: a CUDA event its thread records and a flag that
//                threads of other GPUs wait on before they wait on the event (waiting on an event not yet recorded
//                is a no-op in CUDA). A task waits for the signals of its `after` tasks; for a collective, its own
//                member's signal when the waiting device is a member, else every member's. Across ranks no thread
//                can wait for another's signal: a task waits for a transfer between ranks through the receive's
//                signal on dst, for a collective through its members on the waiting device's rank, and a
//                dependency on other work of another rank is dropped (counted in unenforced_waits)
//
//   memory       per simulated device, four regions (weights, gradients, optimizer state, activations) of the sizes
//                the workload's memory model gives (Workload::memory; without it, each region as large as its
//                largest operand), and every launch's operands placed in them (placement): a GEMM's or
//                convolution's weights in the weights region, the weight gradient it writes in the gradients
//                region, the optimizer step's state and parameters in theirs, activations in the activations
//                region; each region filled in launch order and from its start again when full, so that
//                consecutive launches read and write different memory, as in training, instead of one buffer that
//                stays in L2
//
//   ExecutionPlan plan = plan_execution(workload, {.visible_gpus = 2, .map_devices = true});
//   for (int s : plan.waits[task][0]) ... plan.signals[s].gpu ...
//   ExecutionPlan mine = plan_execution(workload, {.visible_gpus = 4, .ranks = 2, .rank = 1});   // GPUs 4 .. 7
#pragma once

#include "calibration/Microbench.hpp"
#include "sim/backends/Workload.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::backends::cuda {

struct MappingOptions {
  int visible_gpus = 0;     ///< GPUs this process sees; with several ranks, each rank sees as many
  bool map_devices = false; ///< run more simulated devices than GPUs, device d on GPU d % visible_gpus
  int ranks        = 1;     ///< processes of a multi-machine run, each driving visible_gpus GPUs
  int rank         = 0;     ///< this process's, 0 .. ranks - 1
};

/// The stream work goes to: one of a simulated device's own, or its GPU's NCCL stream.
enum class Lane { compute, transfer, collective, nccl };

/// A point in a task's progress that other work waits for: recorded by one thread on one stream.
struct PlannedSignal {
  int task          = 0;
  int device        = 0; ///< the simulated device whose stream records it
  Lane lane         = Lane::compute;
  int communicator  = -1;    ///< Lane::nccl: the communicator whose stream on the GPU records it
  int gpu           = 0;     ///< its device's GPU, whose host thread records it
  bool cross_thread = false; ///< a thread of another GPU waits for it
};

struct PlannedCollective {
  bool nccl        = false; ///< NCCL (members on distinct GPUs) or emulated with copies
  int communicator = -1;    ///< NCCL: index into ExecutionPlan::communicators
  /// NCCL: elements of each rank's larger buffer (bytes / element, rounded; all_gather and reduce_scatter: up to a
  /// multiple of the group size, as nccl-tests sizes them); the smaller buffer holds count / n.
  std::size_t count      = 0;
  std::size_t copy_bytes = 0; ///< emulated: bytes of one copy, (n-1)/n x bytes; all_reduce makes two
  std::vector<int> done;      ///< per member (group order): the member's part finished
  std::vector<int> ready;     ///< emulated, per member: the member reached the collective
};

struct PlannedTransfer {
  bool nccl    = false; ///< between ranks: ncclSend on src, ncclRecv on dst, over the world communicator
  int received = -1;    ///< nccl: dst's signal, recorded on its GPU's NCCL stream once the data is in
};

/// Where a launch's operand lives: one of a simulated device's memory regions.
enum class Region { weights, gradients, optimizer, activations };
inline constexpr std::size_t region_count = 4;
/// "weights", "gradients", "optimizer", "activations".
const char* region_name(Region region);

struct OperandPlace {
  Region region      = Region::activations;
  std::size_t offset = 0; ///< bytes from the region's start, a multiple of 256
  std::size_t bytes  = 0;
};

/// One simulated device's memory on its GPU.
struct DeviceMemoryPlan {
  std::array<std::size_t, region_count> region_bytes{0, 0, 0, 0}; ///< allocated, by Region
  bool from_model = false;    ///< sizes from the workload's memory model (else from the largest operands)
  std::vector<Region> grown;  ///< regions the model made smaller than an operand, grown to it
  double simulated_bytes = 0; ///< the memory model's total for the device (its peak_memory_bytes), 0 if unknown
  std::size_t total() const { return region_bytes[0] + region_bytes[1] + region_bytes[2] + region_bytes[3]; }
};

struct ExecutionPlan {
  int gpus          = 0;                    ///< GPUs used over all ranks: GPUs 0 .. gpus-1
  int ranks         = 1;                    ///< processes; each runs its own GPUs, one host thread each
  int rank          = 0;                    ///< this process's
  int gpus_per_rank = 0;                    ///< rank r has GPUs [r gpus_per_rank, (r+1) gpus_per_rank)
  bool mapped       = false;                ///< some GPU runs several simulated devices
  std::vector<int> gpu_of;                  ///< per simulated device
  std::vector<std::vector<int>> devices_of; ///< per GPU: its simulated devices, ascending
  double element_bytes = 4;                 ///< collectives' element: the workload's dtype (fp16, bf16: 2; else 4)

  std::vector<PlannedSignal> signals;
  std::vector<int> task_signal;               ///< per task: compute and transfer (its src's) tasks' signal; -1 for
                                              ///< collectives
  std::vector<PlannedCollective> collectives; ///< per task; meaningful for collectives only
  std::vector<PlannedTransfer> transfers;     ///< per task; meaningful for transfers only
  /// waits[task][slot]: the signals the task's work on one device waits for, without repeats. Slot 0 for compute
  /// (on its device) and transfers (on src); slot k for a collective's member k.
  std::vector<std::vector<std::vector<int>>> waits;

  /// Distinct NCCL groups, in the order of their first collective, then the world communicator when there is one:
  /// simulated devices in rank (ring) order.
  std::vector<std::vector<int>> communicators;
  int world_communicator = -1; ///< every device in order, for transfers between ranks; -1 when there are none

  /// Per GPU: the distinct compute launches of its devices, and launch_index[task][l], the index of a compute
  /// task's launch l among its GPU's; first_use[gpu][i] = (task, launch) where launch i first appears.
  std::vector<std::vector<calibration::BenchPoint>> launches;
  std::vector<std::vector<int>> launch_index;
  std::vector<std::vector<std::pair<int, int>>> first_use;

  /// Per simulated device: its regions. placement[task][launch][operand] for compute tasks (operands in OpBuffers
  /// order: gemm A, B, C; conv2d x, w, y; pointwise x, -, y), empty for the others.
  std::vector<DeviceMemoryPlan> memory;
  std::vector<std::vector<std::array<OperandPlace, 3>>> placement;
  /// Per GPU: the communicators it has a stream for (it is a member), ascending.
  std::vector<std::vector<int>> nccl_streams;

  std::vector<std::size_t> comm_bytes;         ///< per GPU: size of its send buffer and of its receive buffer
  std::vector<std::pair<int, int>> peer_pairs; ///< GPU pairs (a < b) of one rank that copy to or from each other
  int emulated_collectives = 0;
  int rank_transfers       = 0; ///< transfers between ranks
  int unenforced_waits     = 0; ///< dependencies on another rank's work that no transfer or collective carries

  int rank_of(int gpu) const { return gpu / gpus_per_rank; }
  bool is_local(int gpu) const { return rank_of(gpu) == rank; }
  int first_local_gpu() const { return rank * gpus_per_rank; }
  /// A GPU of this rank as CUDA numbers it in this process.
  int cuda_device(int gpu) const { return gpu - first_local_gpu(); }
};

/// Plans `workload` on `options.visible_gpus` GPUs, or on options.ranks x visible_gpus GPUs as rank options.rank.
/// Throws ExecutionError when the workload has more devices than there are GPUs and mapping is not allowed, or no
/// GPU at all; with several ranks, unless the workload has exactly ranks x visible_gpus devices and no mapping.
ExecutionPlan plan_execution(const Workload& workload, const MappingOptions& options);

/// Why `--cuda-graph` cannot replay this plan, or "" when it can: the timed iterations replay one graph captured
/// from one compute stream, so the plan must hold one simulated device on one GPU of one rank, compute tasks only,
/// and at least one warm-up iteration must come first (the libraries make their memory then, not in the capture).
std::string cuda_graph_refusal(const Workload& workload, const ExecutionPlan& plan, int warmup);

/// Which region each operand of a compute launch (BenchPoint::operand_bytes order) belongs to in a task of
/// `phase`: a GEMM's B (nn, nt) or a convolution's filters are weights, unless the launch writes them (tn, the
/// weight gradient; bwd_filter): then gradients; batched GEMMs (attention) work on activations only; the optimizer
/// step's pointwise kernel streams the optimizer state (moments, master weights) in and out; everything else is
/// activations.
std::array<Region, 3> launch_operand_regions(const calibration::BenchPoint& launch, const std::string& phase);

/// "task 12 (compute on device 1)", "task 3 (transfer of 4194304 B from device 0 to device 1)",
/// "task 9 (all_reduce of 1e+08 B over devices 0,1)": how errors name a task.
std::string describe_task(const Workload& workload, int task);

} // namespace ddlsim::backends::cuda
