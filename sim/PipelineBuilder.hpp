// The graph builder behind build_schedule (sim/Schedules.hpp), which checks the plan first.
// PipelineBuilder holds what the graph is built from: the members that run tasks (under a fold, the
// representatives), each device's stream (its last task and what its next one waits for), the
// communication streams of the reduction groups, and each pass's first and last task. build() runs
// every pipeline rank's program pass by pass (sim/PipelineBuilder.cpp), each pass step by step (one
// method per kind of step), then connects the passes across chunks, flushes the gradient reductions
// and steps the optimizer (those in sim/PipelineBuilderSteps.cpp).
#pragma once

#include "sim/PassSteps.hpp"
#include "sim/Schedules.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace ddlsim::sim {

/// The iteration's TaskGraph of a plan build_schedule has checked (call build_schedule, which checks).
TaskGraph build_pipeline(const PipelinePlan& plan);

/// Builds one iteration's graph from a checked plan (the file's head says how); build() once.
class PipelineBuilder {
public:
  explicit PipelineBuilder(const PipelinePlan& plan);
  TaskGraph build();

private:
  static constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

  // A pass's first and last task (what the activations and their gradients connect), what its
  // stream still waits for after the last (tp_async's reductions when they end the pass), and its
  // send once made (blocking sends, PipelinePlan::p2p: as the pass ends, or after the next one).
  struct Ends {
    TaskId first = no_task, last = no_task;
    std::vector<TaskId> waits{};
    TaskId sent = no_task;
    void push_back(TaskId id)
    {
      if (first == no_task)
        first = id;
      last = id;
    }
    TaskId front() const { return first; }
    TaskId back() const { return last; }
  };
  struct Program {
    std::vector<PipelinePass> order;
    std::vector<const std::vector<PassStep>*> steps; // per pass
    std::size_t warmup = 0;                          // warmup_forwards: the steady state's pairs follow
  };

  // Member q of chunk s: its device, whether it runs tasks, the members of a group that run any.
  int device(int s, int q) const { return device_of[static_cast<std::size_t>(s * members + q)]; }
  bool keep(int s, int q) const { return kept_of[static_cast<std::size_t>(s * members + q)] != 0; }
  bool keeps_any(int s, const std::vector<int>& group) const
  {
    return std::any_of(group.begin(), group.end(), [&](int q) { return keep(s, q); });
  }
  Ends& pass(int s, int q, int m, Phase phase)
  {
    const auto at = static_cast<std::size_t>(slot[static_cast<std::size_t>(s * members + q)]);
    return ids[((static_cast<std::size_t>(s) * kept + at) * static_cast<std::size_t>(m_count) +
                static_cast<std::size_t>(m)) *
                   2 +
               (phase == Phase::backward ? 1 : 0)];
  }
  int family_replica(int f, int index) const { return f == 0 ? index : (f - 1) + index * ep; }
  int family_shard(int f) const { return f == 0 ? shard : expert_shard; }
  int family_groups(int f) const { return f == 0 ? groups : expert_groups; }
  std::size_t chain_index(int s, int t, int f, int j) const
  {
    return static_cast<std::size_t>((((s % ranks) * tp + t) * families + f) * max_groups + j);
  }
  std::vector<int> reduce_group(int t, int j, int f = 0) const;
  std::vector<int> replicate_group(int t, int i, int f = 0) const;
  std::vector<int> expert_group(int t, int e) const;
  std::vector<int> dp_group(int t) const;
  const std::vector<int>& tp_group(int r) const { return tp_groups[static_cast<std::size_t>(r)]; }

  void check_stages() const;
  void index_members();
  void plan_programs();
  const std::vector<PassStep>& steps_for(int s, Phase phase, bool edge);

  TaskId add_group_collective(int s, const PipelinePass& p, const PassStep& step, const std::vector<int>& group,
                              const std::vector<int>* devices = nullptr, const std::vector<int>* running = nullptr,
                              bool blocking = true);
  void reduce_family(int s, int t, int f, const PipelinePass& p, const PassStep& step, std::vector<TaskId>& done);
  std::vector<TaskId> reduce_gradients(int s, int t, const PipelinePass& p, const PassStep& step);
  /// Task `id` (a compute task or a blocking collective) becomes member q's latest on its stream: it
  /// waits for what the stream still owes (pending_wait) and joins pass p's tasks.
  void join_stream(int s, int q, const PipelinePass& p, TaskId id);
  TaskId add_compute(int s, int q, const PipelinePass& p, std::size_t begin, std::size_t end, double share,
                     ComputePart part = ComputePart::whole);
  void after_pass(const Ends& from, TaskId to);
  TaskId send_of(int s, int q, int m, Phase phase);

  void run_pass(const PipelinePass& p, const std::vector<PassStep>& steps);
  void tp_overlap_step(int s, const PipelinePass& p, const PassStep& step);
  void tp_async_step(int s, const PipelinePass& p, const PassStep& step);
  void gather_step(int s, const PipelinePass& p, const PassStep& step, bool& chunk_gathers_dispatched);
  void cp_all_gather_step(int s, const PipelinePass& p, const PassStep& step);
  void ring_step(int s, const PipelinePass& p, const PassStep& step);
  void compute_step(int s, const PipelinePass& p, const PassStep& step);
  /// Blocking sends (PipelinePlan::p2p): once pass i of `program` ends, the sends the device's next
  /// task waits for (made now; a paired forward's, once the backward after it ends).
  void wait_for_sends(const Program& program, std::size_t i);
  void connect_passes();
  void flush_reductions();
  void step_optimizers();

  const PipelinePlan& plan;
  const int k;
  const int m_count;
  const int dp;
  const int tp;
  const int cp;
  const int shard;   ///< replicas per reduction group
  const int members; ///< GPUs per stage: member q = r * tp + t
  const int chunks;
  // Families of replicas that hold the same weights: 0 the dense ones (every replica); 1 + e, with
  // expert parallelism, the experts of ep rank e (replicas e, e + ep, ...). A family's reductions run
  // in groups of `shard` (expert_shard) of its replicas, hybrid sharding across the groups.
  const int ep;
  const int families;
  const int expert_replicas;
  const int expert_shard;
  const int groups;
  const int expert_groups;
  const int max_groups;
  const int ranks;
  TaskGraph g;

  // Member q of chunk s: its device, and whether it runs tasks (under a fold, only representatives
  // run tasks, and only collectives with one of them exist). Looked up, not recomputed: the graph
  // asks for them a few times per task.
  std::vector<int> device_of;
  std::vector<char> kept_of;
  // Per chunk: the replicas with a representative among their tensor ranks, and the tensor ranks
  // with one among their replicas (the tensor-parallel and data-parallel groups that exist).
  std::vector<std::vector<int>> kept_replicas;
  std::vector<std::vector<int>> kept_ranks;
  std::vector<std::vector<int>> kept_members; // members q that run tasks
  // The tasks of each pass of the members that run tasks: ids[((s * kept + at) * M + m) * 2 +
  // phase], `at` the member's place among its chunk's kept members (slot).
  std::size_t kept = 0;
  std::vector<int> slot;
  std::vector<Ends> ids;
  // Per replica, its tensor-parallel group's members (built once: one per collective is many); per
  // chunk and replica, the group's devices and its members that run tasks.
  std::vector<std::vector<int>> tp_groups;
  std::vector<std::vector<int>> tp_devices;
  std::vector<std::vector<int>> tp_kept;

  // The last task of each device in program order: compute on its stream, or a blocking collective.
  std::vector<TaskId> last;
  // Gradient reductions of each chunk and tensor rank (not blocking; the optimizer waits for them).
  std::vector<std::vector<TaskId>> bucket_tasks;
  // The experts' gradients of each chunk and tensor rank, reduced after every backward (ZeRO 2, 3).
  std::vector<std::vector<TaskId>> expert_bucket_tasks;
  // One communication stream per reduction group: its reductions and the ZeRO 1-2 parameter gathers
  // after the step run one after another, and so do the gathers in the forward (ZeRO 3,
  // overlap_param_gather) on a stream of their own. The model chunks of one
  // pipeline rank share their devices' groups (one communicator per data-parallel group, as in
  // Megatron-LM), so their collectives queue on one stream rather than share the links unpriced.
  // Keyed by (pipeline rank, tensor rank, family, group): chain_index.
  std::vector<TaskId> reduce_chain;
  std::vector<TaskId> gather_chain;
  // ZeRO-3: per device, the gathers the next compute task waits for, and the program position when
  // the previous gather was issued (a gather waits for the compute two units back: one prefetch).
  std::vector<std::vector<TaskId>> pending_gather;
  std::vector<TaskId> at_previous_gather;
  // ZeRO 1-2 with overlap_param_gather: per device, the program position when the previous chunk's
  // gathers were dispatched, and what the current chunk's wait for.
  std::vector<TaskId> at_chunk_gather;
  std::vector<TaskId> chunk_gather_wait;
  // Ring attention's backward: the dK/dV returning to a device, which its next compute waits for.
  std::vector<TaskId> pending_ring;
  // tp_async: per device, the reductions issued beside the weight gradient's GEMM, which its stream
  // waits for before its next task (compute, blocking collective, or the pass's send); and blocking
  // pipeline sends (PipelinePlan::p2p), likewise.
  std::vector<std::vector<TaskId>> pending_wait;
  // A pass's steps depend only on its chunk, its phase and whether it is the chunk's first forward or
  // last backward (its edge): computed once each (steps_for). Every rank's program in order, with
  // each pass's steps.
  std::vector<std::vector<PassStep>> steps_of;
  std::vector<Program> programs;
  // The flush's gradient reductions of each chunk and tensor rank (dense, experts').
  std::vector<std::vector<TaskId>> reduced_of;
  std::vector<std::vector<TaskId>> expert_reduced_of;
};

} // namespace ddlsim::sim
