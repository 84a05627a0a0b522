#include "sim/Replay.hpp"

#include "common/Error.hpp"
#include "sim/Platform.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <chrono>
#include <deque>
#include <functional>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

// Drives one replay. Activities carry the index of a Record in their user data; the global
// completion callback routes them back here.
class Replayer {
public:
  Replayer(const TaskGraph& graph, const ClusterSpec& cluster, const std::vector<double>& seconds,
           const detail::Platform& platform)
      : graph_(graph), cluster_(cluster), seconds_(seconds), gpus_(platform.gpus),
        remaining_(graph.size()), timings_(graph.size()), rings_(graph.size())
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
    if (rec.kind == Record::Kind::ring_step)
      ring_step_done(rec.task, rec.member);
    else
      finish(rec.task);
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
    enum class Kind { task, ring_step } kind;
    TaskId task;
    std::uint32_t member;
    sg4::ActivityPtr activity;
  };
  struct Ring {
    std::vector<int> sent;      // steps each member has finished sending
    std::vector<int> received;  // steps each member has received from its predecessor
    std::vector<bool> busy;     // a send of this member is in flight
    std::vector<bool> done;     // sent and received every step
    int steps = 0;
    int done_members = 0;
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
    timings_[id].start_s = now();
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
      send(t.src, t.dst, t.bytes, Record::Kind::task, id, 0);
      return;
    }
    case TaskKind::collective: {
      const auto& c = graph_.collective(id);
      const auto n = c.group.size();
      if (n < 2) {
        finish(id);
        return;
      }
      Ring& ring = rings_[id];
      ring.steps = 2 * static_cast<int>(n - 1);
      ring.sent.assign(n, 0);
      ring.received.assign(n, 0);
      ring.busy.assign(n, false);
      ring.done.assign(n, false);
      for (std::uint32_t i = 0; i < n; ++i)
        advance_ring(id, i);
      return;
    }
    }
  }

  // A message: the route's latency as a timer, then the bytes as a Comm (skipped when empty).
  void send(int src, int dst, double bytes, Record::Kind kind, TaskId task, std::uint32_t member)
  {
    const double latency = cluster_.latency(src, dst);
    auto transmit = [this, src, dst, bytes, kind, task, member] {
      if (bytes <= 0) {
        complete_message(kind, task, member);
        return;
      }
      sg4::CommPtr comm = sg4::Comm::sendto_init(gpus_[static_cast<std::size_t>(src)], gpus_[static_cast<std::size_t>(dst)]);
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
    if (kind == Record::Kind::ring_step)
      ring_step_done(task, member);
    else
      finish(task);
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

  // Ring member i sends step k to member i+1 once it finished sending step k-1 and has received step k-1.
  void advance_ring(TaskId id, std::uint32_t i)
  {
    Ring& ring = rings_[id];
    const int k = ring.sent[i];
    if (ring.busy[i] || k >= ring.steps || ring.received[i] < k)
      return;
    const auto& c = graph_.collective(id);
    const auto n = static_cast<std::uint32_t>(c.group.size());
    ring.busy[i] = true;
    send(c.group[i], c.group[(i + 1) % n], c.bytes / n, Record::Kind::ring_step, id, i);
  }

  void ring_step_done(TaskId id, std::uint32_t i)
  {
    Ring& ring = rings_[id];
    const auto n = static_cast<std::uint32_t>(ring.sent.size());
    const std::uint32_t next = (i + 1) % n;
    ring.busy[i] = false;
    ++ring.sent[i];
    ++ring.received[next];
    for (std::uint32_t m : {i, next})
      if (!ring.done[m] && ring.sent[m] == ring.steps && ring.received[m] == ring.steps) {
        ring.done[m] = true;
        ++ring.done_members;
      }
    if (ring.done_members == static_cast<int>(n)) {
      finish(id);
      return;
    }
    advance_ring(id, i);
    advance_ring(id, next);
  }

  void finish(TaskId id)
  {
    timings_[id].end_s = now();
    for (TaskId succ : graph_.successors(id))
      if (--remaining_[succ] == 0)
        ready_.push_back(succ);
  }

  const TaskGraph& graph_;
  const ClusterSpec& cluster_;
  const std::vector<double>& seconds_;
  const std::vector<sg4::Host*>& gpus_;
  std::vector<std::uint32_t> remaining_;
  std::vector<TaskTiming> timings_;
  std::vector<Ring> rings_;  // by task id; only collectives use theirs
  std::deque<TaskId> ready_;
  std::vector<Record> records_;
  std::vector<std::size_t> free_records_;
  std::deque<sg4::ActivityPtr> graveyard_;
  std::uint64_t activities_ = 0;
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

  const detail::Platform platform = detail::build_platform(cluster);
  Replayer replayer(graph, cluster, compute_seconds, platform);
  sg4::Activity::on_completion_cb([&replayer](const sg4::Activity& a) { replayer.on_completion(a); });
  replayer.start();
  engine.run();

  ReplayResult result = replayer.result();
  result.devices = device_stats(graph, result.timings, result.makespan_s);
  result.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace ddlsim::sim
