// The backend-neutral description of one training iteration: what every device computes, in which
// order, what it sends to whom, and which collectives it joins. The SimGrid replay simulates it;
// the real backends (later) execute the very same graph.
//
// Compute tasks run on their device's single compute stream in the order they were added (add_compute
// makes each depend on the previous one of its device). Compute tasks off the stream (on_stream =
// false) run one at a time on the device's second queue, in the order they become ready. Transfers
// and collectives run on their own and only occupy links. Any task starts when all its dependencies
// have finished (an off-stream task also waits for its queue).
//
//   TaskGraph g(2);
//   TaskId f0 = g.add_compute({.device = 0, .phase = Phase::forward, .stage = 0, .micro_batch = 0, .samples = 8});
//   TaskId t  = g.add_transfer({.src = 0, .dst = 1, .bytes = 1e6, .phase = Phase::forward, .stage = 0});
//   TaskId f1 = g.add_compute({.device = 1, .phase = Phase::forward, .stage = 1, .micro_batch = 0, .samples = 8});
//   g.add_dependency(f0, t);
//   g.add_dependency(t, f1);
#pragma once

#include "common/HugePages.hpp"

#include "common/EnumTable.hpp"

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ddlsim::sim {

using TaskId = std::uint32_t;

enum class TaskKind : std::uint8_t { compute, transfer, collective };
enum class Phase : std::uint8_t { forward, backward, optimizer };
enum class CollectiveKind : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, all_to_all };
/// automatic is resolved before simulation (resolve_collective in Collectives.hpp) into one of the
/// others, as NCCL's tuner chooses; the replay never sees it.
enum class CollectiveAlgorithm : std::uint8_t { ring, tree, hierarchical, double_tree, nvls, sharp, direct, automatic };
/// NCCL's protocols: what a step costs in latency and what share of the link bandwidth it gets.
enum class CollectiveProtocol : std::uint8_t { simple, ll128, ll };
enum class CollectiveFidelity : std::uint8_t { flow, analytic };
/// What a collective is for (timeline names and link-class accounting). expert_dispatch and
/// expert_combine: a mixture of experts' all-to-alls sending tokens to their experts and back (and
/// their backward passes, which move the gradients the other way).
enum class CollectiveRole : std::uint8_t {
  gradients,
  sync_batch_norm,
  tensor_parallel,
  barrier,
  parameters,
  expert_dispatch,
  expert_combine,
  context  ///< context parallelism's all-gather of K/V, reduce-scatter of dK/dV (cp_algorithm all_gather)
};

inline constexpr EnumTable<Phase, 3> phase_table{{{
    {"forward", Phase::forward, "forward pass of a micro-batch"},
    {"backward", Phase::backward, "backward pass of a micro-batch"},
    {"optimizer", Phase::optimizer, "weight update"},
}}};

inline constexpr EnumTable<CollectiveKind, 5> collective_kind_table{{{
    {"all_reduce", CollectiveKind::all_reduce, "every member ends with the sum of all buffers"},
    {"all_gather", CollectiveKind::all_gather, "every member ends with every member's shard"},
    {"reduce_scatter", CollectiveKind::reduce_scatter, "every member ends with its shard of the sum"},
    {"broadcast", CollectiveKind::broadcast, "every member ends with the first member's buffer"},
    {"all_to_all", CollectiveKind::all_to_all,
     "member i sends the j-th of its n blocks to member j (a mixture of experts' token dispatch and combine)"},
}}};

inline constexpr EnumTable<CollectiveAlgorithm, 8> collective_algorithm_table{{{
    {"ring", CollectiveAlgorithm::ring,
     "NCCL's ring: reduce-scatter then all-gather, 2(n-1) steps of S/n bytes, one ring per NIC (rail) across nodes"},
    {"tree", CollectiveAlgorithm::tree,
     "binary tree: pipelined reduce to the root, then pipelined broadcast (all-reduce only; others use ring)"},
    {"hierarchical", CollectiveAlgorithm::hierarchical,
     "intra-node reduce-scatter, inter-node ring all-reduce per shard, intra-node all-gather; all-to-all: "
     "intra-node all-to-all to the GPU of each destination's local rank, then one inter-node all-to-all per local rank"},
    {"double_tree", CollectiveAlgorithm::double_tree,
     "NCCL's tree: a chain in each node and two complementary binary trees over the nodes, half the data each "
     "(all-reduce only; others use ring)"},
    {"nvls", CollectiveAlgorithm::nvls,
     "NVLink SHARP: the node's NVSwitch reduces and multicasts (needs intra_node.nvls; one node; all-reduce, "
     "all-gather, reduce-scatter; else ring)"},
    {"sharp", CollectiveAlgorithm::sharp,
     "in-network reduction (NCCL CollNet): reduce-scatter in each node, the fabric's switches all-reduce each "
     "GPU's shard, all-gather in each node (needs fabric.sharp; all-reduce over whole nodes; else ring)"},
    {"direct", CollectiveAlgorithm::direct,
     "all-to-all: every member sends to every other at once (NCCL's grouped send/recv, over the rails across "
     "nodes); others use ring"},
    {"auto", CollectiveAlgorithm::automatic,
     "NCCL's tuner: the fastest of ring, double_tree, nvls and sharp with the LL, LL128 or Simple protocol for "
     "the operation, size and group; an all-to-all is direct, or hierarchical where it applies and is faster"},
}}};

inline constexpr EnumTable<CollectiveProtocol, 3> collective_protocol_table{{{
    {"simple", CollectiveProtocol::simple, "NCCL Simple: full bandwidth, the highest latency per step"},
    {"ll128", CollectiveProtocol::ll128, "NCCL LL128: 120 of 128 bytes are data, lower latency"},
    {"ll", CollectiveProtocol::ll, "NCCL LL: 4 of 8 bytes are data, the lowest latency"},
}}};

inline constexpr EnumTable<CollectiveFidelity, 2> collective_fidelity_table{{{
    {"flow", CollectiveFidelity::flow, "point-to-point messages that contend on links with all other traffic"},
    {"analytic", CollectiveFidelity::analytic, "the algorithm's alpha-beta closed form as one timer; no contention"},
}}};

/// Which part of its layers' work a compute task runs: all of it, or (a column-parallel layer's
/// backward split in two, PipelinePlan::tp_backward_overlap) its weight-gradient GEMMs, or the rest
/// (the input-gradient GEMMs, the memory-bound kernels and any recomputed forward).
enum class ComputePart : std::uint8_t { whole, input_gradient, weight_gradient };

inline constexpr EnumTable<ComputePart, 3> compute_part_table{{{
    {"whole", ComputePart::whole, "all of the layers' work in the phase"},
    {"input_gradient", ComputePart::input_gradient,
     "the backward but for its weight-gradient GEMMs: input-gradient GEMMs, memory-bound kernels, recomputation"},
    {"weight_gradient", ComputePart::weight_gradient, "the backward's weight-gradient GEMMs"},
}}};

struct ComputeTask {
  int device = 0;
  Phase phase = Phase::forward;
  int stage = 0;
  int micro_batch = 0;           ///< -1 for the optimizer step
  int samples = 0;               ///< samples in the micro-batch
  std::uint32_t layer_begin = 0; ///< layers [layer_begin, layer_end) of the model
  std::uint32_t layer_end = 0;
  double share = 1;              ///< fraction of that work (a parameter server's shard of the update)
  ComputePart part          = ComputePart::whole;
  /// false: not on the device's stream but on its arrival queue: such tasks run one at a time in
  /// the order they become ready, beside the stream (sharing the GPU with it): a parameter server
  /// applying pushes in arrival order
  bool on_stream = true;
};

/// activation: pipeline activations and their gradients; push/pull: parameter-server traffic;
/// context: a ring-attention step passing K/V blocks (and their gradients) inside a cp group.
enum class TransferKind : std::uint8_t { activation, push, pull, context };

struct TransferTask {
  int src = 0;
  int dst = 0;
  double bytes = 0;
  Phase phase = Phase::forward;  ///< activations (forward) or their gradients (backward)
  int stage = 0;                 ///< sending stage (push/pull: the worker)
  int micro_batch = 0;           ///< (push/pull: the iteration)
  TransferKind kind = TransferKind::activation;  ///< pipeline activations, or a parameter-server push/pull
  int server = 0;                ///< push/pull: the server shard
  /// Set from a measured send/recv curve (experiments: apply_measured_transfers): the latency in
  /// seconds instead of the route's (-1: the route's), and a factor on the bandwidth it gets.
  double latency_s = -1;
  double bandwidth_factor = 1;
};

struct CollectiveTask {
  CollectiveKind kind = CollectiveKind::all_reduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  CollectiveFidelity fidelity = CollectiveFidelity::flow;
  std::vector<int> group;  ///< devices, in ring order
  /// Full buffer size on each member (all-gather: the gathered result; all-to-all: the send buffer,
  /// of which each member gets bytes / n, as nccl-tests' alltoall size)
  double bytes = 0;
  int stage = 0;
  int micro_batch = -1;    ///< the micro-batch it serves (batch norm, tensor parallelism); -1 for gradients
  Phase phase = Phase::backward;
  CollectiveRole role = CollectiveRole::gradients;
  /// Set by resolve_collective (Collectives.hpp): NCCL's protocol (the latency of each step and the
  /// share of the bandwidth), the rings or trees it runs in parallel (one per NIC of a node across
  /// nodes; an all-to-all: more than 1 when NCCL's PXN sends through the destination's rail), and
  /// its fixed launch latency in seconds.
  CollectiveProtocol protocol = CollectiveProtocol::simple;
  int channels = 1;
  double base_latency_s = 0;
  /// NCCL's latency of one step inside a node and between nodes, in seconds (-1: the route's own
  /// latency, as for a point-to-point transfer).
  double intra_step_latency_s = -1;
  double inter_step_latency_s = -1;
  /// Set from a measured curve (calibrate_collective in Collectives.hpp): each message's latency in
  /// seconds instead of its route's (-1: the route's), and a factor on the bandwidth its messages get
  /// (1: the links' own; resolve_collective sets the protocol's share here).
  double hop_latency_s = -1;
  double bandwidth_factor = 1;
  /// all_to_all: each member's share of the exchange over the mean, in group order (empty: all 1,
  /// uniform). Member i sends member j bytes / n x member_load[j] (a dispatch: a busy expert's GPU
  /// receives more), or x member_load[i] with load_at_source (a combine: it sends more back).
  std::vector<double> member_load = {};
  bool load_at_source = false;
};

class TaskGraph {
public:
  explicit TaskGraph(int devices);

  /// Appends a compute task to its device's stream (it depends on the previous task of that stream),
  /// unless task.on_stream is false.
  TaskId add_compute(const ComputeTask& task);
  TaskId add_transfer(const TransferTask& task);
  TaskId add_collective(CollectiveTask task);
  /// Room for this many tasks in all and of each kind (a graph builder that knows its size saves the
  /// moves of growing); adding more is fine.
  void reserve(std::size_t tasks, std::size_t computes, std::size_t transfers, std::size_t collectives);
  /// `after` starts only once `before` has finished. Throws std::invalid_argument on unknown ids or a self-loop.
  void add_dependency(TaskId before, TaskId after);

  int device_count() const { return devices_; }
  std::size_t size() const { return nodes_.size(); }
  TaskKind kind(TaskId id) const { return nodes_[id].kind; }
  const ComputeTask& compute(TaskId id) const { return computes_[nodes_[id].index]; }
  const TransferTask& transfer(TaskId id) const { return transfers_[nodes_[id].index]; }
  TransferTask& transfer(TaskId id) { return transfers_[nodes_[id].index]; }
  const CollectiveTask& collective(TaskId id) const { return collectives_[nodes_[id].index]; }
  CollectiveTask& collective(TaskId id) { return collectives_[nodes_[id].index]; }
  /// Tasks that wait for `id` (most tasks have one to three: kept inline, no allocation).
  using Successors = boost::container::small_vector<TaskId, 3>;
  const Successors& successors(TaskId id) const { return successors_[id]; }
  std::uint32_t dependency_count(TaskId id) const { return nodes_[id].dependencies; }
  /// Compute tasks of one device, in stream order.
  const std::vector<TaskId>& stream(int device) const { return streams_[static_cast<std::size_t>(device)]; }

  /// Short label for timelines and logs, e.g. "F s1 mb3", "send s1->s2 mb3", "allreduce s0".
  std::string label(TaskId id) const;

private:
  struct Node {
    TaskKind kind;
    std::uint32_t index;         // into computes_, transfers_ or collectives_
    std::uint32_t dependencies;  // number of predecessors
  };
  TaskId add_node(TaskKind kind, std::size_t index);

  int devices_;
  // The graph's large arrays (a GPT-3 175B iteration on 1,024 GPUs: a quarter of a million tasks) in huge pages.
  HugePageVector<Node> nodes_;
  HugePageVector<Successors> successors_;
  HugePageVector<ComputeTask> computes_;
  HugePageVector<TransferTask> transfers_;
  HugePageVector<CollectiveTask> collectives_;
  std::vector<std::vector<TaskId>> streams_;
};

}  // namespace ddlsim::sim
