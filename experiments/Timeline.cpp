#include "experiments/Timeline.hpp"

#include "common/Error.hpp"
#include "common/Units.hpp"
#include "models/Memory.hpp"
#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"
#include "sim/Schedules.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

namespace ddlsim::experiments {
namespace {

// The tracks of a device, in the order they are numbered (thread ids).
enum Track { compute = 0, off_stream = 1, intra = 2, inter = 3 };
constexpr std::array<const char*, 4> track_names{"compute stream", "off-stream work", "intra-node links",
                                                 "inter-node links"};

const char* transfer_kind_name(sim::TransferKind kind)
{
  switch (kind) {
  case sim::TransferKind::activation: return "activation";
  case sim::TransferKind::push: return "push";
  case sim::TransferKind::pull: return "pull";
  case sim::TransferKind::context: return "context";
  }
  return "";
}

const char* collective_role_name(sim::CollectiveRole role)
{
  switch (role) {
  case sim::CollectiveRole::gradients: return "gradients";
  case sim::CollectiveRole::sync_batch_norm: return "sync_batch_norm";
  case sim::CollectiveRole::tensor_parallel: return "tensor_parallel";
  case sim::CollectiveRole::barrier: return "barrier";
  case sim::CollectiveRole::parameters: return "parameters";
  case sim::CollectiveRole::expert_dispatch: return "expert_dispatch";
  case sim::CollectiveRole::expert_combine: return "expert_combine";
  case sim::CollectiveRole::context: return "context";
  }
  return "";
}

// One slice of a task on one device's track; `member` orders a task's slices (sender before
// receiver, collective members in ring order).
struct Placement {
  sim::TaskId task;
  int member;
  int device;
  Track track;
  std::int64_t start_ns;
  std::int64_t end_ns;
  int lane = 0;
};

// Lanes of every (device, track): a slice goes to the first lane whose last slice has ended by its
// start. Slices are placed in start order, so no two slices of a lane overlap, and the number of
// lanes is the most slices open at once.
void assign_lanes(std::vector<Placement>& placements, int devices, std::vector<std::array<int, 4>>& lane_counts)
{
  std::vector<std::size_t> order(placements.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Placement& x = placements[a];
    const Placement& y = placements[b];
    return std::tie(x.start_ns, x.end_ns, x.task, x.member) < std::tie(y.start_ns, y.end_ns, y.task, y.member);
  });
  std::vector<std::array<std::vector<std::int64_t>, 4>> lane_ends(static_cast<std::size_t>(devices));
  for (std::size_t i : order) {
    Placement& p    = placements[i];
    auto& ends      = lane_ends[static_cast<std::size_t>(p.device)][p.track];
    const auto free = std::find_if(ends.begin(), ends.end(), [&](std::int64_t end) { return end <= p.start_ns; });
    p.lane          = static_cast<int>(free - ends.begin());
    if (free == ends.end())
      ends.push_back(p.end_ns);
    else
      *free = p.end_ns;
  }
  lane_counts.assign(static_cast<std::size_t>(devices), {});
  for (int d = 0; d < devices; ++d)
    for (int t = 0; t < 4; ++t)
      lane_counts[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)] =
          static_cast<int>(lane_ends[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)].size());
}

// (device, track) of each slice of task `id`: a compute task on its device's stream (or off it), a
// transfer on its sender and receiver, a collective on every member; inter-node when the transfer or
// the collective's group spans nodes.
std::vector<std::pair<int, Track>> slice_places(const sim::TaskGraph& graph, sim::TaskId id, int gpus_per_node)
{
  auto node_of = [&](int d) { return d / std::max(1, gpus_per_node); };
  std::vector<std::pair<int, Track>> where;
  switch (graph.kind(id)) {
  case sim::TaskKind::compute: {
    const auto& c = graph.compute(id);
    where.emplace_back(c.device, c.on_stream ? compute : off_stream);
    break;
  }
  case sim::TaskKind::transfer: {
    const auto& x     = graph.transfer(id);
    const Track track = node_of(x.src) == node_of(x.dst) ? intra : inter;
    where.emplace_back(x.src, track);
    where.emplace_back(x.dst, track);
    break;
  }
  case sim::TaskKind::collective: {
    const auto& c = graph.collective(id);
    bool spans    = false;
    for (int d : c.group)
      spans = spans || node_of(d) != node_of(c.group.front());
    for (int d : c.group)
      where.emplace_back(d, spans ? inter : intra);
    break;
  }
  }
  return where;
}

// Process of a device: pid 0 and tid 0 are Linux's swapper, which Perfetto treats apart.
int pid_of(int device) { return device + 1; }

// Lanes a track shows: the compute stream and both link classes at least one (named even when
// empty), off-stream work only where there is some.
int shown_lanes(const std::array<int, 4>& lanes, int track)
{
  return std::max(track == off_stream ? 0 : 1, lanes[static_cast<std::size_t>(track)]);
}

// Thread id of lane `lane` of a track: the tracks' lanes numbered one after the other from 1, the
// compute stream first.
int thread_id(const std::array<int, 4>& lanes, Track track, int lane)
{
  int tid = 1;
  for (int t = 0; t < track; ++t)
    tid += shown_lanes(lanes, t);
  return tid + lane;
}

// A counter's samples on one device: one per time (a later sample at the same time replaces the
// earlier), none that repeats the previous values.
class CounterSeries {
public:
  CounterSeries(int pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  void sample(std::int64_t ns, std::vector<std::pair<std::string, double>> values)
  {
    if (!samples_.empty() && samples_.back().first == ns) {
      samples_.back().second = std::move(values);
      if (samples_.size() >= 2 && samples_[samples_.size() - 2].second == samples_.back().second)
        samples_.pop_back();
      return;
    }
    if (!samples_.empty() && samples_.back().second == values)
      return;
    samples_.emplace_back(ns, std::move(values));
  }
  /// The samples inside [begin_ns, end_ns], the value held at begin_ns sampled there.
  void write_to(traces::ChromeTrace& trace, std::int64_t begin_ns = 0,
                std::int64_t end_ns = std::numeric_limits<std::int64_t>::max()) const
  {
    auto add = [&](std::int64_t ns, const auto& values) {
      trace.add_counter({.pid = pid_, .name = name_, .time_s = static_cast<double>(ns) * 1e-9, .values = values});
    };
    for (std::size_t i = 0; i < samples_.size() && samples_[i].first <= end_ns; ++i) {
      const bool next_inside = i + 1 < samples_.size() && samples_[i + 1].first <= begin_ns;
      if (!next_inside)
        add(std::max(samples_[i].first, begin_ns), samples_[i].second);
    }
  }

private:
  int pid_;
  std::string name_;
  std::vector<std::pair<std::int64_t, std::vector<std::pair<std::string, double>>>> samples_;
};

// The part of the run a timeline draws, in whole nanoseconds.
struct Window {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns   = std::numeric_limits<std::int64_t>::max();
};

// A task's slice (its track left to the caller): name, category and arguments.
traces::TraceEvent slice_of(const sim::TaskGraph& graph, sim::TaskId id, const sim::TaskTiming& timing)
{
  traces::TraceEvent e{.name     = graph.label(id),
                       .category = "",
                       .pid      = 0,
                       .tid      = 0,
                       .start_s  = timing.start_s,
                       .end_s    = timing.end_s,
                       .args     = {}};
  switch (graph.kind(id)) {
  case sim::TaskKind::compute: {
    const auto& c = graph.compute(id);
    e.category    = std::string(sim::phase_table.name(c.phase));
    e.args        = {{"layer_begin", static_cast<double>(c.layer_begin)},
                     {"layer_end", static_cast<double>(c.layer_end)},
                     {"samples", static_cast<double>(c.samples)}};
    if (c.share < 1)
      e.args.emplace_back("share", c.share);
    if (c.part != sim::ComputePart::whole)
      e.args.emplace_back("part", std::string(sim::compute_part_table.name(c.part)));
    break;
  }
  case sim::TaskKind::transfer: {
    const auto& x = graph.transfer(id);
    e.category    = "transfer";
    e.args        = {{"bytes", x.bytes},
                     {"from", static_cast<double>(x.src)},
                     {"to", static_cast<double>(x.dst)},
                     {"kind", std::string(transfer_kind_name(x.kind))}};
    break;
  }
  case sim::TaskKind::collective: {
    const auto& c = graph.collective(id);
    e.category    = "collective";
    e.args        = {{"bytes", c.bytes},
                     {"members", static_cast<double>(c.group.size())},
                     {"kind", std::string(sim::collective_kind_table.name(c.kind))},
                     {"role", std::string(collective_role_name(c.role))},
                     {"algorithm", std::string(sim::collective_algorithm_table.name(c.algorithm))},
                     {"fidelity", std::string(sim::collective_fidelity_table.name(c.fidelity))}};
    break;
  }
  }
  return e;
}

// Memory counters: a micro-batch enters a chunk with its first forward pass there and leaves it
// with the end of the backward pass that follows (walking each stream in order, so that a later
// iteration's pass of the same micro-batch, as a parameter-server worker's, counts again). The
// value is recomputed from the integer counts at every change, so that it returns exactly to the
// peak whenever the counts do.
void add_memory_counters(traces::ChromeTrace& trace, const sim::TaskGraph& graph,
                         const sim::Timings& timings, std::int64_t end_ns, const TimelineMemory& memory,
                         const std::function<bool(int)>& shown, Window window)
{
  if (memory.peak_bytes.size() != static_cast<std::size_t>(graph.device_count()))
    return;
  auto of_chunk = [](const auto& per_chunk, int chunk) {
    return chunk >= 0 && static_cast<std::size_t>(chunk) < per_chunk.size() ? per_chunk[static_cast<std::size_t>(chunk)]
                                                                            : 0;
  };
  struct Pass {
    bool held        = false;
    bool backward    = false;  // its backward has begun: it leaves at `end`
    std::int64_t end = 0;
  };
  for (int device = 0; device < graph.device_count(); ++device) {
    if (!shown(device))
      continue;
    std::map<int, int> held;                                 // chunk -> micro-batches in flight
    std::vector<std::tuple<std::int64_t, int, int>> changes;  // (time, +1 or -1, chunk)
    std::map<std::pair<int, int>, Pass> passes;              // (chunk, micro-batch)
    auto leave = [&](int chunk, Pass& p) {
      changes.emplace_back(p.end, -1, chunk);
      p = Pass{};
    };
    for (sim::TaskId id : graph.stream(device)) {
      const sim::ComputeTask& c = graph.compute(id);
      if (c.phase == sim::Phase::optimizer)
        continue;
      held.try_emplace(c.stage, 0);
      Pass& p = passes[{c.stage, c.micro_batch}];
      if (c.phase == sim::Phase::forward) {
        if (p.backward)
          leave(c.stage, p);
        if (!p.held)
          changes.emplace_back(traces::ChromeTrace::nanoseconds(timings[id].start_s), +1, c.stage);
        p.held = true;
      } else if (p.held) {
        p.backward = true;
        p.end      = std::max(p.end, traces::ChromeTrace::nanoseconds(timings[id].end_s));
      }
    }
    for (auto& [key, p] : passes)
      if (p.backward)
        leave(key.first, p);
    std::sort(changes.begin(), changes.end());  // at one time, leaving (-1) before entering

    auto value = [&] {
      double missing = 0;
      for (const auto& [chunk, count] : held)
        missing += (of_chunk(memory.peak_in_flight, chunk) - count) * of_chunk(memory.stash_bytes, chunk);
      return std::vector<std::pair<std::string, double>>{
          {"bytes", memory.peak_bytes[static_cast<std::size_t>(device)] - missing}};
    };
    CounterSeries series(pid_of(device), "memory");
    series.sample(0, value());
    for (std::size_t i = 0; i < changes.size();) {
      const std::int64_t ns = std::get<0>(changes[i]);
      for (; i < changes.size() && std::get<0>(changes[i]) == ns; ++i)
        held[std::get<2>(changes[i])] += std::get<1>(changes[i]);
      series.sample(ns, value());
    }
    series.sample(std::max<std::int64_t>(end_ns, 0), value());
    series.write_to(trace, window.begin_ns, window.end_ns);
  }
}

// A rate in steps: rate[i].second bytes/s from rate[i].first ns until the next step (the last
// one on forever).
using RateSteps = std::vector<std::pair<std::int64_t, double>>;

// What a link of `capacity` bytes/s sends, asked for `demand`: the demand while it fits, else the
// capacity, the excess queued and sent as soon as the link has room (a fluid queue). Bytes are kept
// (the output integrates to the demand's integral) and no step exceeds the capacity: the averages
// of concurrent tasks may, where the simulation shared the link among them in turn.
RateSteps served(const RateSteps& demand, double capacity)
{
  if (capacity <= 0)
    return demand;
  RateSteps out;
  double backlog = 0;  // bytes asked for and not yet sent
  for (std::size_t i = 0; i < demand.size(); ++i) {
    const auto [t, asked] = demand[i];
    const std::int64_t next = i + 1 < demand.size() ? demand[i + 1].first : std::numeric_limits<std::int64_t>::max();
    if (asked >= capacity) {
      out.emplace_back(t, capacity);
      backlog += (asked - capacity) * static_cast<double>(next - t) * 1e-9;
      continue;
    }
    if (backlog <= 0) {
      out.emplace_back(t, asked);
      continue;
    }
    // Drain at the room left, to the first whole nanosecond that sends the backlog.
    const double drain_ns = std::max(1.0, std::ceil(backlog / (capacity - asked) * 1e9));
    const bool drained = static_cast<double>(next - t) > drain_ns;
    const std::int64_t until = drained ? t + static_cast<std::int64_t>(drain_ns) : next;
    const double rate = std::min(capacity, asked + backlog / (static_cast<double>(until - t) * 1e-9));
    out.emplace_back(t, rate);
    if (drained) {
      out.emplace_back(until, asked);
      backlog = 0;
    } else {
      backlog = std::max(0.0, backlog - (rate - asked) * static_cast<double>(next - t) * 1e-9);
    }
  }
  return out;
}

// The "link send" counter of a GPU: both classes sampled at every step of either.
void write_link_series(traces::ChromeTrace& trace, int pid, const RateSteps& intra, const RateSteps& inter,
                       Window window)
{
  CounterSeries series(pid, "link send");
  std::size_t i = 0, j = 0;
  while (i < intra.size() || j < inter.size()) {
    const std::int64_t ns = std::min(i < intra.size() ? intra[i].first : std::numeric_limits<std::int64_t>::max(),
                                     j < inter.size() ? inter[j].first : std::numeric_limits<std::int64_t>::max());
    for (; i < intra.size() && intra[i].first == ns; ++i) {}
    for (; j < inter.size() && inter[j].first == ns; ++j) {}
    series.sample(ns, {{"intra_node_Bps", intra[i - 1].second}, {"inter_node_Bps", inter[j - 1].second}});
  }
  series.write_to(trace, window.begin_ns, window.end_ns);
}

// Link counters: each sending task's rate per link class while it runs (its bytes over its
// duration, per GPU of the device), summed per device at every change, through the GPU's link of
// that class (served: its NVLink/PCIe link to the node switch, its NIC).
void add_link_counters(traces::ChromeTrace& trace, const sim::TaskGraph& graph,
                       const sim::Timings& timings, const sim::ClusterSpec& cluster,
                       const std::function<bool(int)>& shown, Window window)
{
  using traces::ChromeTrace;
  const int devices = graph.device_count();
  auto node_of      = [&](int d) { return cluster.node_of(d); };
  struct Rate {
    double intra = 0;
    double inter = 0;
  };
  std::vector<std::vector<std::tuple<std::int64_t, bool, sim::TaskId, Rate>>> changes(
      static_cast<std::size_t>(devices));
  auto add_rate = [&](sim::TaskId id, int device, Rate bytes) {
    const std::int64_t start = ChromeTrace::nanoseconds(timings[id].start_s);
    const std::int64_t end   = ChromeTrace::nanoseconds(timings[id].end_s);
    if (end <= start || (bytes.intra <= 0 && bytes.inter <= 0))
      return;
    const double seconds = static_cast<double>(end - start) * 1e-9;
    const Rate rate{bytes.intra / seconds, bytes.inter / seconds};
    changes[static_cast<std::size_t>(device)].emplace_back(start, true, id, rate);
    changes[static_cast<std::size_t>(device)].emplace_back(end, false, id, rate);
  };
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) == sim::TaskKind::transfer) {
      const auto& x    = graph.transfer(id);
      const bool local = node_of(x.src) == node_of(x.dst);
      add_rate(id, x.src, {local ? x.bytes : 0.0, local ? 0.0 : x.bytes});
    } else if (graph.kind(id) == sim::TaskKind::collective) {
      std::map<int, Rate> sent;
      sim::for_each_send(graph.collective(id), cluster.gpus_per_node, [&](int src, int dst, double bytes) {
        (node_of(src) == node_of(dst) ? sent[src].intra : sent[src].inter) += bytes;
      });
      for (const auto& [device, bytes] : sent)
        if (shown(device))
          add_rate(id, device, bytes);
    }
  }
  for (int device = 0; device < devices; ++device) {
    if (!shown(device))
      continue;
    auto& list = changes[static_cast<std::size_t>(device)];
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    std::map<sim::TaskId, Rate> active;
    RateSteps intra{{0, 0.0}}, inter{{0, 0.0}};  // what the tasks ask of each link class
    for (std::size_t i = 0; i < list.size();) {
      const std::int64_t ns = std::get<0>(list[i]);
      for (; i < list.size() && std::get<0>(list[i]) == ns; ++i) {
        if (std::get<1>(list[i]))
          active[std::get<2>(list[i])] = std::get<3>(list[i]);
        else
          active.erase(std::get<2>(list[i]));
      }
      Rate sum;
      for (const auto& [id, r] : active) {
        sum.intra += r.intra;
        sum.inter += r.inter;
      }
      intra.emplace_back(ns, sum.intra);
      inter.emplace_back(ns, sum.inter);
    }
    write_link_series(trace, pid_of(device), served(intra, cluster.intra_node.bandwidth),
                      served(inter, cluster.nic.bandwidth), window);
  }
}

}  // namespace

TimelineMemory pipeline_timeline_memory(const PointConfig& point, const PointPlan& plan, const sim::TaskGraph& graph)
{
  const auto& par = point.parallelism;
  const int pp    = par.pp;
  const int m     = plan.pipeline.micro_batches;
  const models::StageMemoryModel model(point.model, memory_options(point), point.training.micro_batch);
  TimelineMemory out;
  for (std::size_t c = 0; c < plan.stage_blocks.size(); ++c) {
    const int rank = static_cast<int>(c) % pp;
    out.stash_bytes.push_back(model.stage(plan.stage_blocks[c], 1).activations -
                              model.stage(plan.stage_blocks[c], 0).activations);
    out.peak_in_flight.push_back(
        par.virtual_stages > 1
            ? sim::in_flight_per_chunk(par.schedule, pp, par.virtual_stages, rank, m)[c / static_cast<std::size_t>(pp)]
            : sim::in_flight_micro_batches(par.schedule, pp, rank, m));
  }
  const int per_rank = std::max(1, graph.device_count() / pp);
  for (int d = 0; d < graph.device_count(); ++d)
    out.peak_bytes.push_back(plan.stage_memory[static_cast<std::size_t>(std::min(d / per_rank, pp - 1))].total());
  return out;
}

TimelineMemory parameter_server_timeline_memory(const PointConfig& point, const sim::TaskGraph& graph)
{
  // The terms of parameter_server_memory (Plan.cpp), per GPU; tests/cli/test_cli_timeline.py
  // checks that the largest is the CSV's peak_memory_bytes.
  const auto& ps    = *point.parallelism.ps;
  const int workers = point.parallelism.dp;
  const Dtype dtype = point.training.dtype;
  const models::StageMemoryModel model(point.model,
                                       {.dtype         = dtype,
                                        .optimizer     = point.training.optimizer,
                                        .recompute     = point.training.recompute,
                                        .reserve_bytes = point.training.memory_reserve},
                                       point.training.micro_batch);
  const models::StageRange all{0, point.model.blocks().size()};
  models::MemoryBreakdown worker = model.stage(all, point.micro_batches());
  worker.optimizer_state         = 0;  // on the servers
  const double shard             = point.model.parameter_count() / ps.servers *
                       (dtype_bytes(dtype) + models::optimizer_bytes_per_parameter(point.training.optimizer, dtype));
  TimelineMemory out;
  out.peak_bytes.assign(static_cast<std::size_t>(graph.device_count()), 0.0);
  for (int w = 0; w < workers; ++w) {
    out.peak_bytes[static_cast<std::size_t>(w)] = worker.total();
    out.stash_bytes.push_back(model.stage(all, 1).activations - model.stage(all, 0).activations);
    out.peak_in_flight.push_back(point.micro_batches());
  }
  for (int j = 0; j < ps.servers; ++j) {
    const int gpu = ps.server_gpu(j, workers);
    if (gpu < graph.device_count())
      out.peak_bytes[static_cast<std::size_t>(gpu)] =
          shard + point.training.memory_reserve + (gpu < workers ? worker.total() : 0.0);
  }
  return out;
}

traces::ChromeTrace build_timeline(const sim::TaskGraph& graph, const sim::Timings& timings,
                                   double makespan_s, const sim::ClusterSpec& cluster, const TimelineMemory& memory,
                                   const sim::Fold* fold, const TimelineScope& scope)
{
  using traces::ChromeTrace;
  const int devices = graph.device_count();
  auto node_of      = [&](int d) { return cluster.node_of(d); };
  std::vector<bool> drawn(static_cast<std::size_t>(devices), scope.gpus.empty());
  for (int d = 0; d < devices && d < static_cast<int>(scope.gpus.size()); ++d)
    if (scope.gpus[static_cast<std::size_t>(d)])
      drawn[static_cast<std::size_t>(fold != nullptr ? fold->representative(d) : d)] = true;
  const std::function<bool(int)> shown = [&](int d) {
    return (fold == nullptr || fold->is_representative(d)) && drawn[static_cast<std::size_t>(d)];
  };
  const Window window{ChromeTrace::nanoseconds(scope.view.begin_s),
                      std::isinf(scope.view.end_s) ? std::numeric_limits<std::int64_t>::max()
                                                   : ChromeTrace::nanoseconds(scope.view.end_s)};

  // Every slice: where it goes.
  std::vector<Placement> placements;
  std::vector<std::size_t> first_placement(graph.size() + 1, 0);
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    first_placement[id] = placements.size();
    const std::int64_t start = ChromeTrace::nanoseconds(timings[id].start_s);
    const std::int64_t end   = ChromeTrace::nanoseconds(timings[id].end_s);
    if (end < window.begin_ns || start > window.end_ns)
      continue;  // outside the window
    int member = 0;
    for (const auto& [device, track] : slice_places(graph, id, cluster.gpus_per_node))
      if (shown(device))
        placements.push_back(Placement{id, member++, device, track, start, end});
  }
  first_placement[graph.size()] = placements.size();
  std::vector<std::array<int, 4>> lanes;
  assign_lanes(placements, devices, lanes);

  ChromeTrace trace;
  for (int d = 0; d < devices; ++d) {
    if (!shown(d))
      continue;
    const std::string process = "gpu" + std::to_string(d) + " (node " + std::to_string(node_of(d)) + ")" +
                                (fold != nullptr ? ", 1 of " + std::to_string(fold->order()) + " alike" : "");
    const auto& l             = lanes[static_cast<std::size_t>(d)];
    for (Track t : {compute, off_stream, intra, inter})
      for (int lane = 0; lane < shown_lanes(l, t); ++lane)
        trace.set_track_name(pid_of(d), thread_id(l, t, lane), process,
                             track_names[t] + (lane > 0 ? " #" + std::to_string(lane + 1) : std::string()));
  }
  auto tid_of = [&](const Placement& p) {
    return thread_id(lanes[static_cast<std::size_t>(p.device)], p.track, p.lane);
  };

  // Slices, and the flows that join a task's slices.
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    traces::TraceEvent e    = slice_of(graph, id, timings[id]);
    const std::size_t begin = first_placement[id];
    const std::size_t end   = first_placement[id + 1];
    for (std::size_t i = begin; i < end; ++i) {
      e.pid = pid_of(placements[i].device);
      e.tid = tid_of(placements[i]);
      trace.add(e);
    }
    // Flow events at n evenly spaced whole nanoseconds strictly inside the task's interval.
    const auto n            = static_cast<std::int64_t>(end - begin);
    const std::int64_t span = begin == end ? 0 : placements[begin].end_ns - placements[begin].start_ns;
    if (graph.kind(id) == sim::TaskKind::compute || n < 2 || span < n + 1)
      continue;
    for (std::int64_t k = 0; k < n; ++k) {
      const Placement& p    = placements[begin + static_cast<std::size_t>(k)];
      const std::int64_t at = p.start_ns + (k + 1) * span / (n + 1);
      trace.add_flow({.phase    = k == 0       ? traces::FlowPhase::start
                                  : k + 1 == n ? traces::FlowPhase::end
                                               : traces::FlowPhase::step,
                      .id       = id,
                      .pid      = pid_of(p.device),
                      .tid      = tid_of(p),
                      .time_s   = static_cast<double>(at) * 1e-9,
                      .name     = e.category,
                      .category = e.category});
    }
  }

  if (scope.view.memory_counters)
    add_memory_counters(trace, graph, timings, ChromeTrace::nanoseconds(makespan_s), memory, shown, window);
  if (scope.view.link_counters) {
    add_link_counters(trace, graph, timings, cluster, shown, window);
    trace.add_metadata("intra_node_link_Bps", cluster.intra_node.bandwidth);  // the link counters' ceilings
    trace.add_metadata("inter_node_link_Bps", cluster.nic.bandwidth);
  }
  return trace;
}

void write_timeline(const PointConfig& point, const sim::TaskGraph& graph, const sim::ReplayResult& result,
                    const sim::ClusterSpec& cluster, const TimelineMemory& memory, const std::string& dir,
                    const sim::Fold* fold, const TimelineScope& scope)
{
  const traces::ChromeTrace trace =
      build_timeline(graph, result.timings, result.makespan_s, cluster, memory, fold, scope);
  std::filesystem::create_directories(dir);
  const std::string stem = dir + "/" + point.experiment + "_" + std::to_string(point.index);
  auto write             = [&](const std::string& path, auto&& how) {
    std::ofstream out(path, std::ios::binary);
    how(out);
    if (!out)
      throw Error("cannot write timeline " + path);
  };
  if (scope.view.json_file)
    write(stem + ".json", [&](std::ostream& out) { trace.write(out); });
  if (scope.view.perfetto_file)
    write(stem + ".perfetto-trace", [&](std::ostream& out) { trace.write_perfetto(out); });
}

std::vector<double> timeline_slices(const sim::TaskGraph& graph)
{
  std::vector<double> slices(static_cast<std::size_t>(graph.device_count()), 0.0);
  for (sim::TaskId id = 0; id < graph.size(); ++id)
    for (const auto& [device, track] : slice_places(graph, id, 1))  // the track is not needed here
      if (device >= 0 && device < graph.device_count())
        slices[static_cast<std::size_t>(device)] += 1;
  return slices;
}

TimelineChoice choose_timeline(const PointConfig& point, const TimelineView& view, const sim::TaskGraph& graph,
                               const sim::Fold* fold)
{
  const int gpus    = std::min(point.parallelism.gpus(), graph.device_count());
  const int order   = fold != nullptr ? fold->order() : 1;
  const auto counts = timeline_slices(graph);
  auto rep          = [&](int d) { return fold != nullptr ? fold->representative(d) : d; };
  auto slices_of    = [&](const std::vector<bool>& drawn) {  // drawn whole: each GPU as its representative
    double n = 0;
    for (int d = 0; d < gpus; ++d)
      n += drawn[static_cast<std::size_t>(d)] ? counts[static_cast<std::size_t>(rep(d))] : 0.0;
    return n;
  };
  double reps = 0;
  for (int d = 0; d < gpus; ++d)
    reps += fold == nullptr || fold->is_representative(d) ? counts[static_cast<std::size_t>(d)] : 0.0;
  const double whole        = reps * order;
  const bool too_many_tasks = fold != nullptr && static_cast<double>(graph.size()) * order > full_timeline_tasks;

  TimelineChoice out;
  out.scope.view = view;
  switch (view.ranks.kind) {
  case TraceRanks::Kind::automatic: {
    if (whole <= timeline_budget_slices)
      break;
    const std::string size = "the whole timeline holds about " + format_count(whole) + " slices, over " +
                             format_count(timeline_budget_slices) + " (~50 MB); --trace-ranks draws others";
    if (fold != nullptr && reps <= timeline_budget_slices) {
      out.folded = true;
      out.note   = "timeline: the fold's representatives only (" + size + ")";
      return out;
    }
    out.scope.gpus = drawn_ranks({.kind = TraceRanks::Kind::replica0, .ranges = {}}, point.parallelism, gpus);
    out.folded     = too_many_tasks;
    const double drawn = slices_of(out.scope.gpus);
    const bool every   = std::all_of(out.scope.gpus.begin(), out.scope.gpus.end(), [](bool b) { return b; });
    out.note = std::string(every ? "timeline: every GPU, as replica 0 (" : "timeline: data-parallel replica 0's GPUs only (") +
               size + ")" +
               (drawn > timeline_budget_slices
                    ? "; they alone hold about " + format_count(drawn) + " slices: --trace-window narrows it"
                    : "");
    return out;
  }
  case TraceRanks::Kind::all: break;
  case TraceRanks::Kind::replica0:
  case TraceRanks::Kind::list:
    out.scope.gpus = drawn_ranks(view.ranks, point.parallelism, gpus);
    if (std::none_of(out.scope.gpus.begin(), out.scope.gpus.end(), [](bool b) { return b; })) {
      out.draw = false;
      out.note = "timeline: --trace-ranks names none of this point's " + std::to_string(gpus) + " GPUs; not written";
      return out;
    }
    break;
  }
  if (too_many_tasks) {
    out.folded = true;
    out.note   = "timeline: representatives of the GPUs asked for (the whole graph has about " +
               format_count(static_cast<double>(graph.size()) * order) + " tasks, over " +
               format_count(full_timeline_tasks) + ")";
  }
  return out;
}

}  // namespace ddlsim::experiments
