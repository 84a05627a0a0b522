#include "sim/Replay.hpp"

#include "common/Child.hpp"
#include "common/Error.hpp"
#include "sim/ActivitySlots.hpp"
#include "sim/Collectives.hpp"
#include "sim/CommOverlap.hpp"
#include "sim/Fold.hpp"
#include "sim/FoldedRoutes.hpp"
#include "sim/Platform.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <cstdio>
#include <cstring>
#include <sys/wait.h>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

using detail::FoldedRoutes;

// Drives one replay. Activities carry the slot of what they stand for in their user data
// (ActivitySlots.hpp); the global completion callback routes them back here.
class Replayer {
public:
  Replayer(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& seconds,
           const std::vector<sg4::Host*>& gpus, const detail::Platform& platform, std::unordered_map<TaskId, int> rail_set,
           const ReplayOptions& options, std::vector<int> representative)
      : graph_(graph), cluster_(cluster), seconds_(seconds), gpus_(gpus), options_(options), platform_(platform),
        rail_set_(std::move(rail_set)), remaining_(graph.size()), timings_(graph.size()), inside_(graph.size(), 0),
        fused_(graph.size(), 0), analytic_s_(graph.size(), -1.0), single_task_(static_cast<std::size_t>(graph.device_count()), 1),
        wall_start_(std::chrono::steady_clock::now()),
        overlap_(gpus, options.comm_compute_slowdown, std::move(representative))
  {
    // Where tasks queue on arrival (off the stream: parameter servers), the order in which equal
    // times are handled decides the queue's order: Execs everywhere then, as always.
    for (TaskId id = 0; id < graph.size(); ++id) {
      remaining_[id] = graph.dependency_count(id);
      if (graph.kind(id) == TaskKind::compute && !graph.compute(id).on_stream)
        std::fill(single_task_.begin(), single_task_.end(), 0);
    }
  }

  // Under a fold: the folded collectives, and the sender host of each (src, dst) route.
  void set_fold(const FoldedCollectives* folded, const FoldedRoutes* routes, const detail::FoldedPlatform* platform)
  {
    folded_ = folded;
    routes_ = routes;
    folded_platform_ = platform;
    if (folded->any_isolated()) {
      flows_on_.assign(static_cast<std::size_t>(routes->orbit_count), 0);
      apart_on_.assign(static_cast<std::size_t>(routes->orbit_count), 0);
      apart_holder_.assign(static_cast<std::size_t>(routes->orbit_count), 0);
    }
  }

  /// Under a fold with collectives run apart: the first time one met other traffic on its links
  /// (empty: never, and the replay is exact).
  const std::string& apart_violation() const { return violation_; }
  /// The collective run apart that met other traffic (with apart_violation() not empty).
  TaskId apart_violator() const { return violator_; }

  void start()
  {
    for (TaskId id = 0; id < graph_.size(); ++id)
      if (remaining_[id] == 0)
        ready_.push_back(id);
    drain_ready();
  }

  void on_completion(const sg4::Activity& activity)
  {
    const std::optional<Record> rec = records_.finish(activity);
    if (!rec)
      return;  // not one of ours
    if (rec->route >= 0)
      for (int o : routes_->route_orbits[static_cast<std::size_t>(rec->route)])
        --flows_on_[static_cast<std::size_t>(o)];
    report_progress();
    complete_message(rec->kind, rec->task, rec->member);
    drain_ready();
  }

  // The replay's result, once it has run (the timings move into it).
  ReplayResult take_result()
  {
    ReplayResult r;
    for (TaskId id = 0; id < graph_.size(); ++id) {
      if (timings_[id].end_s < 0)
        throw SimulationError("task " + std::to_string(id) + " (" + graph_.label(id) +
                              ") never ran: the task graph has a dependency cycle");
      r.makespan_s = std::max(r.makespan_s, timings_[id].end_s);
    }
    r.timings = std::move(timings_);
    r.activities = activities_;
    return r;
  }

private:
  struct Record {
    enum class Kind { task, message } kind = Kind::task;
    TaskId task = 0;
    std::uint32_t member = 0;  // the message's index for Kind::message
    int route = -1;            // a folded route counted in flows_on_ (collectives run apart)
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

  // A progress report at most every progress_interval_s of host time (the clock read every 64 events).
  void report_progress()
  {
    if (!options_.on_progress || ++events_ % 64 != 0)
      return;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    if (wall < next_report_s_)
      return;
    next_report_s_ = wall + options_.progress_interval_s;
    options_.on_progress({.simulated_s = now(), .activities = activities_, .wall_s = wall,
                          .estimated_activities = options_.estimated_activities});
  }

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
      ArrivalQueue& q = queues_[graph_.compute(id).device];
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
      const int device = graph_.compute(id).device;
      if (!options_.host_start_s.empty()) {
        run_issued(id, device);
        return;
      }
      if (s <= 0) {
        finish(id);
        return;
      }
      if (single_task_[static_cast<std::size_t>(device)] != 0) {
        run_chain(id);
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
        const double duration = analytic_duration(id);
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
      if (folded_ != nullptr && folded_->isolated(id))
        enter_apart(id, +1);
      Run run;
      if (folded_ != nullptr) {
        run.messages = folded_->messages(id);
        const int offset = folded_->offset(id);
        for (Message& m : run.messages) {
          m.src = shift_endpoint(m.src, offset, cluster_.gpus_per_node);
          m.dst = shift_endpoint(m.dst, offset, cluster_.gpus_per_node);
        }
      } else {
        run.messages = decompose(c, cluster_.gpus_per_node);
      }
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

  // A compute task fed by its host (ReplayOptions::host_start_s): it starts once it is ready and its
  // first kernel is issued, and ends after its own time or once its last kernel is issued and run.
  void run_issued(TaskId id, int device)
  {
    const double start = std::max(now(), options_.host_start_s[id]);
    const double end = std::max(start + seconds_[id] / cluster_.speed_of(device), options_.host_end_s[id]);
    ++activities_;
    simgrid::kernel::timer::Timer::set(end, [this, id, start, end] {
      report_progress();
      timings_[id].start_s = start;
      finish(id, end);
      drain_ready();
    });
  }

  // How long task n takes where a chain on `device` may hold it: a compute task of the device's
  // stream, or an analytic collective (a timer; with a compute slowdown, only stream work of this
  // device alone: a tensor-parallel one whose group is folded onto it); negative where it may not.
  double chain_duration(TaskId n, int device)
  {
    if (graph_.kind(n) == TaskKind::compute) {
      const ComputeTask& c = graph_.compute(n);
      return c.device == device && c.on_stream ? std::max(0.0, seconds_[n]) / cluster_.speed_of(device) : -1;
    }
    if (graph_.kind(n) != TaskKind::collective || graph_.collective(n).fidelity != CollectiveFidelity::analytic)
      return -1;
    const CollectiveTask& c = graph_.collective(n);
    const int rep = overlap_.representative(device);
    if (options_.comm_compute_slowdown > 0 &&
        (!overlap_.blocks_stream(c) ||
         !std::all_of(c.group.begin(), c.group.end(), [&](int d) { return overlap_.representative(d) == rep; })))
      return -1;
    return analytic_duration(n);
  }

  // A compute task as a timer (alone on its GPU an Exec takes seconds / speed), and after it, in the
  // same timer, the tasks that follow it on its own: each task whose every predecessor is in the
  // chain, where every other successor of the chain's last task waits for it too, so that nothing
  // outside the chain starts at the times inside it. Each task's times are those its own timer
  // would give (start + duration, in the same order of additions); the timer fires at the last end.
  // With a compute slowdown the chain is stream work that follows the GPU's power state
  // (CommOverlap::run_chain), each part timed as its own timer would be. ReplayOptions::chain_stream
  // false: every chain holds one task.
  void run_chain(TaskId first)
  {
    const int device = graph_.compute(first).device;
    std::vector<TaskId> chain{first};
    std::vector<double> parts{seconds_[first] / cluster_.speed_of(device)};
    std::vector<TaskId> touched;
    auto enter = [&](TaskId m) {
      for (TaskId n : graph_.successors(m)) {
        if (inside_[n]++ == 0)
          touched.push_back(n);
      }
    };
    enter(first);
    while (options_.chain_stream) {
      const auto& next_of = graph_.successors(chain.back());
      TaskId next = 0;
      double duration = -1;
      for (TaskId n : next_of) {
        if (fused_[n] != 0 || inside_[n] != graph_.dependency_count(n))
          continue;
        duration = chain_duration(n, device);
        if (duration >= 0) {
          next = n;
          break;
        }
      }
      if (duration < 0)
        break;
      const auto& after = graph_.successors(next);
      const bool others_wait = std::all_of(next_of.begin(), next_of.end(), [&](TaskId n) {
        return n == next || std::find(after.begin(), after.end(), n) != after.end();
      });
      if (!others_wait)
        break;
      chain.push_back(next);
      parts.push_back(duration);
      enter(next);
    }
    for (TaskId n : touched)
      inside_[n] = 0;
    for (TaskId m : chain) {
      fused_[m] = 1;
      if (graph_.kind(m) == TaskKind::compute && seconds_[m] > 0)
        ++activities_;
    }
    const double start = now();
    if (options_.comm_compute_slowdown > 0) {
      overlap_.run_chain(first, device, std::move(parts),
                         [this, chain = std::move(chain), start](const std::vector<double>& part_ends) {
                           end_chain(chain, start, part_ends);
                         });
      return;
    }
    std::vector<double> ends;  // each part from the previous one's end
    for (double part : parts)
      ends.push_back((ends.empty() ? start : ends.back()) + part);
    const double fire = ends.back();
    simgrid::kernel::timer::Timer::set(fire, [this, chain = std::move(chain), ends = std::move(ends), start] {
      end_chain(chain, start, ends);
    });
  }

  // A chain's timer fired: each task ran from the previous one's end (the first from `start`) to its own.
  void end_chain(const std::vector<TaskId>& chain, double start, const std::vector<double>& ends)
  {
    report_progress();
    double begin = start;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      timings_[chain[i]].start_s = begin;
      finish(chain[i], ends[i]);
      begin = ends[i];
    }
    drain_ready();
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
      sg4::CommPtr comm;
      int counted = -1;
      if (routes_ != nullptr) {  // folded: the sender host of the route's quotient links, to the sink
        int route = 0;
        if (kind == Record::Kind::message && folded_->isolated(task)) {
          route = routes_->apart_route_of(folded_->folded(task).apart, src, dst, rail_set);
        } else {
          route = routes_->route_of(src, dst, rail_set);
          if (!flows_on_.empty()) {
            counted = route;
            for (int o : routes_->route_orbits[static_cast<std::size_t>(route)])
              if (++flows_on_[static_cast<std::size_t>(o)] == 1 && apart_on_[static_cast<std::size_t>(o)] > 0)
                met_traffic(apart_holder_[static_cast<std::size_t>(o)], task);
          }
        }
        comm = sg4::Comm::sendto_init(folded_platform_->senders[static_cast<std::size_t>(route)], folded_platform_->sink);
      } else if (rail_set >= 0)
        comm = sg4::Comm::sendto_init(rails(src, rail_set), rails(dst, rail_set));
      else
        comm = sg4::Comm::sendto_init(host(src), host(dst));
      comm->set_payload_size(static_cast<std::uint64_t>(bytes + 0.5));
      track(comm, kind, task, member, counted);
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
  // collectives thousands of times: each distinct one is computed once (found by its hash, then
  // compared field by field), and each task's is kept (a chain asks again).
  double analytic_duration(TaskId id)
  {
    double& known = analytic_s_[id];
    if (known >= 0)
      return known;
    const CollectiveTask& c = graph_.collective(id);
    auto fields = [](const CollectiveTask& x) {
      return std::tie(x.kind, x.algorithm, x.protocol, x.channels, x.bytes, x.base_latency_s, x.hop_latency_s,
                      x.bandwidth_factor, x.intra_step_latency_s, x.inter_step_latency_s, x.group, x.member_load,
                      x.load_at_source);
    };
    const std::optional<std::size_t> earlier = analytic_known_.find(
        c, [this](std::size_t task) -> const CollectiveTask& { return graph_.collective(static_cast<TaskId>(task)); },
        [&](const CollectiveTask& a, const CollectiveTask& b) { return fields(a) == fields(b); });
    if (earlier)
      return known = analytic_s_[*earlier];
    known = analytic_seconds(c, cluster_);
    analytic_known_.add(id);
    return known;
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

  void track(sg4::ActivityPtr activity, Record::Kind kind, TaskId task, std::uint32_t member, int route = -1)
  {
    records_.track(std::move(activity), {kind, task, member, route});
    ++activities_;
  }

  // A collective that runs apart starts (+1) or ends (-1): its links' orbits are its own while it
  // runs; other traffic on them, or another such collective, breaks the premise of running apart.
  void enter_apart(TaskId id, int step)
  {
    for (int o : routes_->apart_orbits.at({folded_->shape(id), folded_->offset(id)})) {
      const auto at = static_cast<std::size_t>(o);
      if (step > 0) {
        if (apart_on_[at] > 0)
          met_traffic(id, apart_holder_[at]);
        else if (flows_on_[at] > 0)
          met_traffic(id, id);
        apart_holder_[at] = id;
      }
      apart_on_[at] += step;
    }
  }

  // Collective `apart` (run apart) met `other` on its links (itself: flows already there when it
  // started). The first time is kept, with the collective to blame (apart_violator).
  void met_traffic(TaskId apart, TaskId other)
  {
    if (!violation_.empty())
      return;
    char at[32];
    std::snprintf(at, sizeof at, "%.9g", now());
    violation_ = folded_->folded(apart).why + "; run apart, it met other traffic on its links (" +
                 (other == apart ? "flows already there when it started" : graph_.label(other)) + " at " + at + " s)";
    violator_ = apart;
  }

  void finish(TaskId id, double end_s = -1)
  {
    if (!apart_on_.empty() && graph_.kind(id) == TaskKind::collective && folded_->isolated(id))
      enter_apart(id, -1);
    timings_[id].end_s = end_s >= 0 ? end_s : now();
    overlap_.end(graph_, id);
    if (graph_.kind(id) == TaskKind::compute && !graph_.compute(id).on_stream) {
      // Hand the queue to the task that has waited longest: it launches before anything readied now.
      ArrivalQueue& q = queues_[graph_.compute(id).device];
      q.busy = !q.waiting.empty();
      if (q.busy) {
        q.holder = q.waiting.front();
        q.waiting.pop_front();
        ready_.push_front(q.holder);
      }
    }
    for (TaskId succ : graph_.successors(id))
      if (--remaining_[succ] == 0 && fused_[succ] == 0)  // a chain runs its own tasks
        ready_.push_back(succ);
  }

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  const std::vector<double>& seconds_;
  const std::vector<sg4::Host*>& gpus_;
  const ReplayOptions& options_;
  const FoldedCollectives* folded_ = nullptr;
  const FoldedRoutes* routes_ = nullptr;
  const detail::FoldedPlatform* folded_platform_ = nullptr;
  const detail::Platform& platform_;
  std::unordered_map<TaskId, int> rail_set_;  // collectives with channels across nodes: their NIC set
  RepeatedCollectives analytic_known_;  // tasks whose closed form was computed (slot: the task)
  HugePageVector<std::uint32_t> remaining_;  // per task, as the arrays below (common/HugePages.hpp)
  Timings timings_;
  HugePageVector<std::uint32_t> inside_;  // while a chain forms: its members that each task waits for
  HugePageVector<char> fused_;            // tasks a chain has taken
  HugePageVector<double> analytic_s_;     // per task: its closed form's seconds once known (-1: not yet)
  std::map<int, ArrivalQueue> queues_;    // per device with off-stream tasks
  std::unordered_map<TaskId, Run> runs_;  // collectives in flight
  std::vector<int> flows_on_;  // with collectives run apart: per link orbit, the flows on it
  std::vector<int> apart_on_;  // and the collectives run apart that hold it
  std::vector<TaskId> apart_holder_;  // the last of them to take it
  std::string violation_;
  TaskId violator_ = 0;
  std::deque<TaskId> ready_;
  detail::ActivitySlots<Record> records_{4096};  // activities in flight; the last 4096 finished kept
  std::uint64_t activities_ = 0;
  std::vector<char> single_task_;  // per device: compute as timers (no task queues on arrival)
  std::chrono::steady_clock::time_point wall_start_;
  std::uint64_t events_ = 0;
  double next_report_s_ = 0;
  detail::CommOverlap overlap_;
};

bool engine_used = false;

}  // namespace

namespace {

// The engine's part of replay(): builds the platform, replays, gathers the statistics. `violation`
// gets apart_violation() of the run.
ReplayResult simulate(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& compute_seconds,
                      const ReplayOptions& options, const Fold* fold, std::vector<std::vector<int>>& rail_sets,
                      std::unordered_map<TaskId, int>& rail_set, std::optional<FoldedCollectives>& folded,
                      std::optional<FoldedRoutes>& routes, std::string& violation)
{
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

  detail::Platform platform;
  detail::FoldedPlatform folded_platform;
  std::vector<int> representative;  // per device, under a fold: whose state it shares (CommOverlap)
  if (fold != nullptr) {
    folded_platform = detail::build_folded_platform(cluster, fold->representatives(), routes->links, routes->routes,
                                                    options.comm_compute_slowdown);
    for (int d = 0; d < graph.device_count(); ++d)
      representative.push_back(fold->representative(d));
  } else {
    platform = detail::build_platform(cluster, rail_sets, options.comm_compute_slowdown);
  }
  Replayer replayer(graph, cluster, compute_seconds, fold != nullptr ? folded_platform.gpus : platform.gpus, platform,
                    std::move(rail_set), options, std::move(representative));
  if (fold != nullptr)
    replayer.set_fold(&*folded, &*routes, &folded_platform);
  sg4::Activity::on_completion_cb([&replayer](const sg4::Activity& a) { replayer.on_completion(a); });
  replayer.start();
  engine.run();

  ReplayResult result = replayer.take_result();
  violation = replayer.apart_violation();
  if (!violation.empty())
    violation = std::to_string(replayer.apart_violator()) + '\n' + violation;
  result.devices = fold != nullptr
                       ? device_stats(graph, result.timings, result.makespan_s, cluster.gpus_per_node, *fold, *folded)
                       : device_stats(graph, result.timings, result.makespan_s, cluster.gpus_per_node);
  result.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

template <typename T> void put(std::string& out, const T& value)
{
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T> T take(const std::string& in, std::size_t& at)
{
  if (at + sizeof(T) > in.size())
    throw SimulationError("the replay's child sent a truncated result");
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  at += sizeof value;
  return value;
}

// A folded replay with collectives run apart finds out only while it runs whether they met other
// traffic; SimGrid's engine cannot be made twice in a process, so that such a replay runs in a child
// process, and the caller can replay again, unfolded, in this one (FoldError).
ReplayResult simulate_in_child(const TaskGraph& graph, const ClusterSpec& cluster,
                               const std::vector<double>& compute_seconds, const ReplayOptions& options,
                               const Fold* fold, std::vector<std::vector<int>>& rail_sets,
                               std::unordered_map<TaskId, int>& rail_set, std::optional<FoldedCollectives>& folded,
                               std::optional<FoldedRoutes>& routes)
{
  const ChildOutput child = run_in_child([&]() -> std::string {
    std::string out;
    try {
      std::string violation;
      const ReplayResult r = simulate(graph, cluster, compute_seconds, options, fold, rail_sets, rail_set, folded,
                                      routes, violation);
      if (!violation.empty())
        return "v" + violation;
      out = "o";
      put(out, r.makespan_s);
      put(out, r.activities);
      put(out, r.wall_time_s);
      put(out, static_cast<std::uint64_t>(r.timings.size()));
      out.append(reinterpret_cast<const char*>(r.timings.data()), r.timings.size() * sizeof(TaskTiming));
      put(out, static_cast<std::uint64_t>(r.devices.size()));
      out.append(reinterpret_cast<const char*>(r.devices.data()), r.devices.size() * sizeof(DeviceStats));
    } catch (const std::exception& e) {
      out = std::string("e") + e.what();
    }
    return out;
  });
  const std::string& in = child.text;
  const int status = child.status;
  if (in.empty() || !WIFEXITED(status))
    throw SimulationError("the replay's child died without a result");
  if (in[0] == 'e')
    throw SimulationError(in.substr(1));
  if (in[0] == 'v') {
    // "v<task>\n<why>": drop the generators that keep the group of the collective that met other
    // traffic (those that do not, K, still fold).
    const std::size_t line = in.find('\n');
    const auto id = static_cast<TaskId>(std::stoul(in.substr(1, line - 1)));
    const std::vector<int>& apart = folded->folded(id).apart;
    std::vector<std::string> keep;
    for (std::size_t g = 0; g < fold->generators().size(); ++g)
      if (std::find(apart.begin(), apart.end(), static_cast<int>(g)) == apart.end())
        keep.push_back(fold->generators()[g].name);
    throw FoldError(in.substr(line + 1), keep);
  }
  ReplayResult r;
  std::size_t at = 1;
  r.makespan_s = take<double>(in, at);
  r.activities = take<std::uint64_t>(in, at);
  r.wall_time_s = take<double>(in, at);
  r.timings.resize(take<std::uint64_t>(in, at));
  if (at + r.timings.size() * sizeof(TaskTiming) > in.size())
    throw SimulationError("the replay's child sent a truncated result");
  std::memcpy(r.timings.data(), in.data() + at, r.timings.size() * sizeof(TaskTiming));
  at += r.timings.size() * sizeof(TaskTiming);
  r.devices.resize(take<std::uint64_t>(in, at));
  if (at + r.devices.size() * sizeof(DeviceStats) > in.size())
    throw SimulationError("the replay's child sent a truncated result");
  std::memcpy(r.devices.data(), in.data() + at, r.devices.size() * sizeof(DeviceStats));
  return r;
}

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
  const Fold* fold = options.fold != nullptr && !options.fold->trivial() ? options.fold : nullptr;
  if (fold != nullptr && fold->devices() != graph.device_count())
    throw SimulationError("the fold must act on the graph's devices");
  // Every collective in one pass (a pass over the graph's collectives costs a fair share of a short
  // replay): those at flow level must have the switch they reduce in, and the NIC sets that
  // collectives spread their channels over are gathered (Collectives.hpp: rail_nics).
  std::vector<std::vector<int>> rail_sets;
  std::unordered_map<TaskId, int> rail_set;
  for (TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != TaskKind::collective)
      continue;
    const CollectiveTask& c = graph.collective(id);
    if (c.fidelity == CollectiveFidelity::flow &&
        effective_algorithm(c, cluster) != effective_algorithm(c, cluster.gpus_per_node))
      throw SimulationError("collective " + graph.label(id) + " reduces in a switch that cluster '" + cluster.name +
                            "' does not have (nvls needs intra_node.nvls, sharp needs fabric.sharp): resolve it first");
    if (c.channels > 1 && c.kind != CollectiveKind::all_to_all) {  // PXN sends from GPUs, not the rails
      const std::vector<int> nics = rail_nics(c, cluster);
      if (nics.empty())
        continue;
      auto it = std::find(rail_sets.begin(), rail_sets.end(), nics);
      rail_set[id] = static_cast<int>(it - rail_sets.begin());
      if (it == rail_sets.end())
        rail_sets.push_back(nics);
    }
  }
  // Folding every collective may refuse the fold (FoldError): before the engine exists, so that the
  // caller can try again with fewer symmetries.
  std::optional<FoldedCollectives> folded;
  std::optional<FoldedRoutes> routes;
  if (fold != nullptr) {
    folded.emplace(graph, cluster.gpus_per_node, *fold);
    routes.emplace(graph, cluster, *fold, *folded, rail_sets, rail_set);
  }
  if (folded && folded->any_isolated())
    return simulate_in_child(graph, cluster, compute_seconds, options, fold, rail_sets, rail_set, folded, routes);
  std::string violation;
  return simulate(graph, cluster, compute_seconds, options, fold, rail_sets, rail_set, folded, routes, violation);
}

}  // namespace ddlsim::sim
