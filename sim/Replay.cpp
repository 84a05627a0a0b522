#include "sim/Replay.hpp"

#include "common/Error.hpp"
#include "sim/Collectives.hpp"
#include "sim/CommOverlap.hpp"
#include "sim/Platform.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

// Drives one replay. Activities carry the index of a Record in their user data; the global
// completion callback routes them back here.
class Replayer {
public:
  Replayer(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& seconds,
           const detail::Platform& platform, std::unordered_map<TaskId, int> rail_set, double comm_compute_slowdown)
      : graph_(graph), cluster_(cluster), seconds_(seconds), gpus_(platform.gpus), platform_(platform),
        rail_set_(std::move(rail_set)),
        remaining_(graph.size()), timings_(graph.size()), queues_(static_cast<std::size_t>(graph.device_count())),
        overlap_(platform.gpus, comm_compute_slowdown)
  {
    for (TaskId id = 0; id < graph.size(); ++id)
      remaining_[id] = graph.dependency_count(id);
  }

  void start()
  {
    for (TaskId id = 0; id < graph_.size(); ++id)
      if (remaining_[id] == 0)
        ready_.push_back(id);
    drain_ready();
  }

  void on_completion(const sg4::Activity& activity)
  {
    auto tag = reinterpret_cast<std::uintptr_t>(activity.get_data<void>());
    if (tag == 0)
      return;  // not one of ours
    Record rec = records_[tag - 1];
    free_records_.push_back(tag - 1);
    // Keep the last references for a while: SimGrid still uses the activity after this callback.
    graveyard_.push_back(std::move(records_[tag - 1].activity));
    if (graveyard_.size() > 4096)
      graveyard_.pop_front();
    complete_message(rec.kind, rec.task, rec.member);
    drain_ready();
  }

  ReplayResult result() const
  {
    ReplayResult r;
    for (TaskId id = 0; id < graph_.size(); ++id) {
      if (timings_[id].end_s < 0)
        throw SimulationError("task " + std::to_string(id) + " (" + graph_.label(id) +
                              ") never ran: the task graph has a dependency cycle");
      r.makespan_s = std::max(r.makespan_s, timings_[id].end_s);
    }
    r.timings = timings_;
    r.activities = activities_;
    return r;
  }

private:
  struct Record {
    enum class Kind { task, message } kind;
    TaskId task;
    std::uint32_t member;  // the message's index for Kind::message
    sg4::ActivityPtr activity;
  };
  // A device's arrival queue (off-stream compute): the task that holds it, and those waiting in the
  // order they became ready.
  struct ArrivalQueue {
    bool busy = false;
    TaskId holder = 0;
    std::deque<TaskId> waiting;
  };
  // A collective in flight at flow fidelity: its messages and how many waits each still has.
  struct Run {
    std::vector<Message> messages;
    std::vector<std::uint32_t> waiting;
    std::vector<std::vector<std::uint32_t>> successors;
    std::size_t remaining = 0;
  };

  static double now() { return sg4::Engine::get_clock(); }

  void drain_ready()
  {
    while (!ready_.empty()) {
      TaskId id = ready_.front();
      ready_.pop_front();
      launch(id);
    }
  }

  void launch(TaskId id)
  {
    if (graph_.kind(id) == TaskKind::compute && !graph_.compute(id).on_stream) {
      ArrivalQueue& q = queues_[static_cast<std::size_t>(graph_.compute(id).device)];
      if (q.busy && q.holder != id) {
        q.waiting.push_back(id);
        return;
      }
      q.busy = true;
      q.holder = id;
    }
    timings_[id].start_s = now();
    overlap_.begin(graph_, id);  // communication slows its GPUs' compute (no-op for compute tasks)
    switch (graph_.kind(id)) {
    case TaskKind::compute: {
      const double s = seconds_[id];
      if (s <= 0) {
        finish(id);
        return;
      }
      sg4::ExecPtr exec = sg4::Exec::init();
      exec->set_flops_amount(s * detail::work_per_second);
      exec->set_host(gpus_[static_cast<std::size_t>(graph_.compute(id).device)]);
      track(exec, Record::Kind::task, id, 0);
      exec->start();
      return;
    }
    case TaskKind::transfer: {
      const auto& t = graph_.transfer(id);
      send(t.src, t.dst, t.bytes / t.bandwidth_factor, Record::Kind::task, id, 0, t.latency_s);
      return;
    }
    case TaskKind::collective: {
      const auto& c = graph_.collective(id);
      if (c.fidelity == CollectiveFidelity::analytic) {
        const double duration = analytic_duration(c);
        auto done = [this, id] {
          finish(id);
          drain_ready();
        };
        if (overlap_.blocks_stream(c))
          overlap_.run_blocking(id, c, duration, done);  // stream work: slowed like compute (CommOverlap.hpp)
        else
          simgrid::kernel::timer::Timer::set(now() + duration, done);
        return;
      }
      Run run;
      run.messages = decompose(c, cluster_.gpus_per_node);
      if (run.messages.empty()) {
        finish(id);
        return;
      }
      const std::size_t n = run.messages.size();
      run.waiting.resize(n);
      run.successors.resize(n);
      run.remaining = n;
      for (std::uint32_t m = 0; m < n; ++m) {
        run.waiting[m] = static_cast<std::uint32_t>(run.messages[m].after.size());
        for (std::uint32_t before : run.messages[m].after)
          run.successors[before].push_back(m);
      }
      Run& stored = runs_.emplace(id, std::move(run)).first->second;
      std::vector<std::uint32_t> first;
      for (std::uint32_t m = 0; m < n; ++m)
        if (stored.waiting[m] == 0)
          first.push_back(m);
      if (c.base_latency_s > 0) {  // the protocol's fixed latency (kernel launch, setup) before the first step
        simgrid::kernel::timer::Timer::set(now() + c.base_latency_s, [this, id, first] {
          for (std::uint32_t m : first)
            send_message(id, m);
          drain_ready();
        });
        return;
      }
      for (std::uint32_t m : first)
        send_message(id, m);
      return;
    }
    }
  }

  void send_message(TaskId id, std::uint32_t m)
  {
    const Message& msg = runs_.at(id).messages[m];
    if (msg.src == -1 && msg.dst == -1) {  // a join: nothing to send
      message_done(id, m);
      return;
    }
    const CollectiveTask& c = graph_.collective(id);
    // The step's latency (protocol, calibration or route), and the protocol's or the measured
    // bandwidth as a factor on the payload (CM02 gives a flow bytes / (bandwidth x factor) seconds
    // alone on its links).
    send(msg.src, msg.dst, msg.bytes / c.bandwidth_factor, Record::Kind::message, id, m,
         message_latency(c, cluster_, msg.src, msg.dst), msg.rails ? rail_set_.at(id) : -1);
  }

  void message_done(TaskId id, std::uint32_t m)
  {
    Run& run = runs_.at(id);
    --run.remaining;
    std::vector<std::uint32_t> next;
    for (std::uint32_t succ : run.successors[m])
      if (--run.waiting[succ] == 0)
        next.push_back(succ);
    if (run.remaining == 0) {
      runs_.erase(id);
      finish(id);
      return;
    }
    for (std::uint32_t succ : next)
      send_message(id, succ);
  }

  // A message: the route's latency (or `latency_s` when >= 0) as a timer, then the bytes as a Comm
  // (skipped when empty).
  // With `rail_set` >= 0, the message goes between the two nodes' rails hosts of that NIC set.
  void send(int src, int dst, double bytes, Record::Kind kind, TaskId task, std::uint32_t member, double latency_s = -1,
            int rail_set = -1)
  {
    const double latency = latency_s >= 0 ? latency_s : cluster_.latency(src, dst);
    auto transmit = [this, src, dst, bytes, kind, task, member, rail_set] {
      if (bytes <= 0) {
        complete_message(kind, task, member);
        return;
      }
      sg4::CommPtr comm = rail_set >= 0 ? sg4::Comm::sendto_init(rails(src, rail_set), rails(dst, rail_set))
                                        : sg4::Comm::sendto_init(host(src), host(dst));
      comm->set_payload_size(static_cast<std::uint64_t>(bytes + 0.5));
      track(comm, kind, task, member);
      comm->start();
    };
    if (latency > 0)
      simgrid::kernel::timer::Timer::set(now() + latency, [this, transmit] {
        transmit();
        drain_ready();
      });
    else
      transmit();
  }

  void complete_message(Record::Kind kind, TaskId task, std::uint32_t member)
  {
    if (kind == Record::Kind::message)
      message_done(task, member);
    else
      finish(task);
  }

  // A closed form costs O(members) with link bookkeeping; an iteration repeats the same few
  // collectives thousands of times: each distinct one is computed once.
  double analytic_duration(const CollectiveTask& c)
  {
    auto key = std::make_tuple(c.kind, c.algorithm, c.protocol, c.channels, c.bytes, c.base_latency_s, c.hop_latency_s,
                               c.bandwidth_factor, c.intra_step_latency_s, c.inter_step_latency_s, c.group,
                               c.member_load, c.load_at_source);
    auto it = analytic_cache_.find(key);
    if (it == analytic_cache_.end())
      it = analytic_cache_.emplace(std::move(key), analytic_seconds(c, cluster_)).first;
    return it->second;
  }

  // The host of a message endpoint: a GPU, or a switch that reduces (Collectives.hpp).
  sg4::Host* host(int endpoint) const
  {
    if (endpoint >= 0)
      return gpus_[static_cast<std::size_t>(endpoint)];
    sg4::Host* h = nullptr;
    if (endpoint == fabric_switch_endpoint)
      h = platform_.fabric_switch;
    else if (is_switch_endpoint(endpoint) &&
             static_cast<std::size_t>(node_of_switch_endpoint(endpoint)) < platform_.node_switches.size())
      h = platform_.node_switches[static_cast<std::size_t>(node_of_switch_endpoint(endpoint))];
    if (h == nullptr)
      throw SimulationError("a collective reduces in a switch that cluster '" + cluster_.name +
                            "' does not have (nvls needs intra_node.nvls, sharp needs fabric.sharp)");
    return h;
  }

  sg4::Host* rails(int gpu, int set) const
  {
    return platform_.rails.at(static_cast<std::size_t>(cluster_.node_of(gpu))).at(static_cast<std::size_t>(set));
  }

  template <typename Ptr> void track(const Ptr& activity, Record::Kind kind, TaskId task, std::uint32_t member)
  {
    std::size_t slot;
    if (!free_records_.empty()) {
      slot = free_records_.back();
      free_records_.pop_back();
      records_[slot] = {kind, task, member, activity};
    } else {
      slot = records_.size();
      records_.push_back({kind, task, member, activity});
    }
    activity->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot + 1)));
    ++activities_;
  }

  void finish(TaskId id)
  {
    timings_[id].end_s = now();
    overlap_.end(graph_, id);
    if (graph_.kind(id) == TaskKind::compute && !graph_.compute(id).on_stream) {
      // Hand the queue to the task that has waited longest: it launches before anything readied now.
      ArrivalQueue& q = queues_[static_cast<std::size_t>(graph_.compute(id).device)];
      q.busy = !q.waiting.empty();
      if (q.busy) {
        q.holder = q.waiting.front();
        q.waiting.pop_front();
        ready_.push_front(q.holder);
      }
    }
    for (TaskId succ : graph_.successors(id))
      if (--remaining_[succ] == 0)
        ready_.push_back(succ);
  }

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  const std::vector<double>& seconds_;
  const std::vector<sg4::Host*>& gpus_;
  const detail::Platform& platform_;
  std::unordered_map<TaskId, int> rail_set_;  // collectives with channels across nodes: their NIC set
  std::map<std::tuple<CollectiveKind, CollectiveAlgorithm, CollectiveProtocol, int, double, double, double, double, double,
                      double, std::vector<int>, std::vector<double>, bool>,
           double>
      analytic_cache_;
  std::vector<std::uint32_t> remaining_;
  std::vector<TaskTiming> timings_;
  std::vector<ArrivalQueue> queues_;      // per device
  std::unordered_map<TaskId, Run> runs_;  // collectives in flight
  std::deque<TaskId> ready_;
  std::vector<Record> records_;
  std::vector<std::size_t> free_records_;
  std::deque<sg4::ActivityPtr> graveyard_;
  std::uint64_t activities_ = 0;
  detail::CommOverlap overlap_;
};

bool engine_used = false;

}  // namespace

ReplayResult replay(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& compute_seconds,
                    const ReplayOptions& options)
{
  if (engine_used)
    throw SimulationError("replay() was already called in this process: SimGrid's engine is a per-process "
                          "singleton, fork one process per simulation");
  if (graph.device_count() > cluster.gpu_count())
    throw SimulationError("the task graph needs " + std::to_string(graph.device_count()) + " GPUs but cluster '" +
                          cluster.name + "' has " + std::to_string(cluster.gpu_count()));
  if (compute_seconds.size() != graph.size())
    throw SimulationError("compute_seconds must hold one entry per task");
  for (TaskId id = 0; id < graph.size(); ++id)
    if (graph.kind(id) == TaskKind::collective && graph.collective(id).fidelity == CollectiveFidelity::flow &&
        effective_algorithm(graph.collective(id), cluster) != effective_algorithm(graph.collective(id), cluster.gpus_per_node))
      throw SimulationError("collective " + graph.label(id) + " reduces in a switch that cluster '" + cluster.name +
                            "' does not have (nvls needs intra_node.nvls, sharp needs fabric.sharp): resolve it first");
  engine_used = true;
  const auto wall_start = std::chrono::steady_clock::now();

  xbt_log_control_set("root.thres:critical");
  for (const auto& setting : options.simgrid_log)
    xbt_log_control_set(setting.c_str());
  int argc = 1;
  char program[] = "ddlsim";
  char* argv[] = {program, nullptr};
  sg4::Engine engine(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");     // no TCP/Ethernet latency and bandwidth factors
  sg4::Engine::set_config("network/crosstraffic:0");  // acknowledgements do not load the reverse link
  sg4::Engine::set_config("network/TCP-gamma:0");     // no TCP window cap on fast links
  for (const auto& setting : options.simgrid_config)
    sg4::Engine::set_config(setting);

  // The NIC sets that collectives spread their channels over (Collectives.hpp: rail_nics).
  std::vector<std::vector<int>> rail_sets;
  std::unordered_map<TaskId, int> rail_set;
  for (TaskId id = 0; id < graph.size(); ++id)
    if (graph.kind(id) == TaskKind::collective && graph.collective(id).channels > 1 &&
        graph.collective(id).kind != CollectiveKind::all_to_all) {  // PXN sends from GPUs, not the rails
      const std::vector<int> nics = rail_nics(graph.collective(id), cluster);
      if (nics.empty())
        continue;
      auto it = std::find(rail_sets.begin(), rail_sets.end(), nics);
      rail_set[id] = static_cast<int>(it - rail_sets.begin());
      if (it == rail_sets.end())
        rail_sets.push_back(nics);
    }
  const detail::Platform platform = detail::build_platform(cluster, rail_sets, options.comm_compute_slowdown);
  Replayer replayer(graph, cluster, compute_seconds, platform, std::move(rail_set), options.comm_compute_slowdown);
  sg4::Activity::on_completion_cb([&replayer](const sg4::Activity& a) { replayer.on_completion(a); });
  replayer.start();
  engine.run();

  ReplayResult result = replayer.result();
  result.devices = device_stats(graph, result.timings, result.makespan_s, cluster.gpus_per_node);
  result.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace ddlsim::sim
