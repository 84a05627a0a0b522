#include "sim/ParameterServer.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace ddlsim::sim {
namespace {
// A push or pull: a transfer, or, when the server shares the worker's GPU, a zero-time join.
TaskId add_exchange(TaskGraph& g, const TransferTask& t)
{
  if (t.src == t.dst)
    return g.add_collective({.group = {t.src}, .bytes = 0, .stage = t.stage, .micro_batch = t.micro_batch,
                             .role = CollectiveRole::barrier});
  return g.add_transfer(t);
}

// Index of (iteration k, worker w, server j) in PsGraph::updates and PsGraph::pulls.
std::size_t slot(const PsPlan& plan, int k, int w, int j)
{
  return static_cast<std::size_t>((k * plan.workers + w) * plan.servers + j);
}

// When the last pull (iteration K - 1) of worker w from server j ended.
double last_pull_end(const PsPlan& plan, const PsGraph& g, const Timings& timings, int w, int j)
{
  return timings[g.pulls[slot(plan, plan.iterations - 1, w, j)]].end_s;
}
}  // namespace

PsGraph build_parameter_server(const PsPlan& plan)
{
  const int W = plan.workers, S = plan.servers, K = plan.iterations;
  if (W < 1 || S < 1 || K < 1 || plan.micro_batches < 1 || plan.micro_batch_size < 1 || plan.staleness < 0 ||
      static_cast<int>(plan.server_devices.size()) != S || plan.devices < W)
    throw std::invalid_argument("a parameter-server plan needs >= 1 worker, server, iteration and micro-batch");
  for (int d : plan.server_devices)
    if (d < 0 || d >= plan.devices)
      throw std::invalid_argument("server device outside the cluster");
  PsGraph out;
  out.graph = TaskGraph(plan.devices);
  TaskGraph& g = out.graph;
  out.updates.assign(static_cast<std::size_t>(K * W * S), 0);
  out.pulls.assign(static_cast<std::size_t>(K * W * S), 0);
  const double shard = 1.0 / S;
  const auto begin = static_cast<std::uint32_t>(plan.layers.begin);
  const auto end = static_cast<std::uint32_t>(plan.layers.end);

  for (int k = 0; k < K; ++k) {
    // Workers: M forwards and backwards (gradient accumulation), then one push per shard.
    std::vector<std::vector<TaskId>> pushes(static_cast<std::size_t>(W));
    for (int w = 0; w < W; ++w) {
      TaskId first = 0;
      TaskId last = 0;
      for (int m = 0; m < plan.micro_batches; ++m)
        for (Phase phase : {Phase::forward, Phase::backward}) {
          last = g.add_compute({.device = w, .phase = phase, .stage = w, .micro_batch = m,
                                .samples = plan.micro_batch_size, .layer_begin = begin, .layer_end = end});
          if (m == 0 && phase == Phase::forward)
            first = last;
        }
      if (k > 0)  // the next iteration reads the pulled weights
        for (int j = 0; j < S; ++j)
          g.add_dependency(out.pulls[slot(plan, k - 1, w, j)], first);
      for (int j = 0; j < S; ++j) {
        const TaskId push = add_exchange(g, {.src = w, .dst = plan.server_devices[static_cast<std::size_t>(j)],
                                            .bytes = plan.gradient_bytes * shard, .phase = Phase::backward,
                                            .stage = w, .micro_batch = k, .kind = TransferKind::push, .server = j});
        g.add_dependency(last, push);
        pushes[static_cast<std::size_t>(w)].push_back(push);
      }
    }
    // Servers apply the pushes one at a time as they arrive: off the stream, on the server GPU's
    // arrival queue, so that an early push never waits for a late one of the same iteration.
    for (int w = 0; w < W; ++w)
      for (int j = 0; j < S; ++j) {
        const TaskId update = g.add_compute({.device = plan.server_devices[static_cast<std::size_t>(j)],
                                             .phase = Phase::optimizer, .stage = j, .micro_batch = k, .samples = 0,
                                             .layer_begin = begin, .layer_end = end, .share = shard,
                                             .on_stream = false});
        g.add_dependency(pushes[static_cast<std::size_t>(w)][static_cast<std::size_t>(j)], update);
        out.updates[slot(plan, k, w, j)] = update;
      }
    // Pulls: what each waits for is the consistency model.
    for (int j = 0; j < S; ++j) {
      TaskId barrier = 0;
      if (plan.consistency == Consistency::bsp) {
        // One join per server and iteration: every worker's update of k is in.
        barrier = g.add_collective({.group = {plan.server_devices[static_cast<std::size_t>(j)]}, .bytes = 0, .stage = j,
                                    .micro_batch = k, .role = CollectiveRole::barrier});
        for (int w = 0; w < W; ++w)
          g.add_dependency(out.updates[slot(plan, k, w, j)], barrier);
      }
      for (int w = 0; w < W; ++w) {
        const TaskId pull = add_exchange(g, {.src = plan.server_devices[static_cast<std::size_t>(j)], .dst = w,
                                            .bytes = plan.gradient_bytes * shard, .phase = Phase::forward,
                                            .stage = w, .micro_batch = k, .kind = TransferKind::pull, .server = j});
        g.add_dependency(out.updates[slot(plan, k, w, j)], pull);  // its own update, in every model
        if (plan.consistency == Consistency::bsp) {
          g.add_dependency(barrier, pull);
        } else if (plan.consistency == Consistency::ssp && k - plan.staleness >= 0) {
          for (int other = 0; other < W; ++other)
            if (other != w || plan.staleness > 0)
              g.add_dependency(out.updates[slot(plan, k - plan.staleness, other, j)], pull);
        }
        out.pulls[slot(plan, k, w, j)] = pull;
      }
    }
  }
  return out;
}

PsThroughput ps_throughput(const PsPlan& plan, const PsGraph& g, const Timings& timings)
{
  const int W = plan.workers, S = plan.servers, K = plan.iterations;
  PsThroughput x;
  x.worker_time_s.assign(static_cast<std::size_t>(W), 0.0);
  const double samples = static_cast<double>(plan.micro_batches) * plan.micro_batch_size;  // b
  for (int w = 0; w < W; ++w) {
    double& t = x.worker_time_s[static_cast<std::size_t>(w)];
    for (int j = 0; j < S; ++j)
      t = std::max(t, last_pull_end(plan, g, timings, w, j));
    if (t > 0)
      x.samples_per_s += K * samples / t;
  }
  x.iteration_time_s = x.samples_per_s > 0 ? W * samples / x.samples_per_s : 0.0;
  return x;
}

std::vector<DeviceStats> ps_device_stats(const PsPlan& plan, const PsGraph& g, const Timings& timings,
                                         const std::vector<DeviceStats>& devices, const PsThroughput& x)
{
  const int W = plan.workers, S = plan.servers, K = plan.iterations;
  std::vector<double> run(devices.size(), 0.0);  // each GPU's own run
  for (int w = 0; w < W; ++w)
    run[static_cast<std::size_t>(w)] = x.worker_time_s[static_cast<std::size_t>(w)];
  for (int j = 0; j < S; ++j) {
    double& r = run[static_cast<std::size_t>(plan.server_devices[static_cast<std::size_t>(j)])];
    for (int w = 0; w < W; ++w)
      r = std::max(r, last_pull_end(plan, g, timings, w, j));
  }
  const double target = K * x.iteration_time_s;
  std::vector<DeviceStats> out = devices;
  for (std::size_t d = 0; d < out.size(); ++d) {
    DeviceStats& s = out[d];
    if (run[d] <= 0)  // none of the plan's tasks: the whole replay (all idle)
      run[d] = s.compute_s + s.exposed_comm_s + s.idle_s;
    if (run[d] <= 0)
      continue;
    const double f = target / run[d];
    s.idle_s = std::max(0.0, run[d] - s.compute_s - s.exposed_comm_s) * f;
    s.compute_s *= f;
    s.exposed_comm_s *= f;
  }
  return out;
}

StalenessStats observed_staleness(const PsPlan& plan, const PsGraph& g, const Timings& timings)
{
  const int W = plan.workers, S = plan.servers, K = plan.iterations;
  // A worker's updates on one server end in iteration order (update k+1 needs the pull after update
  // k), so the newest iteration of `other` that server has applied by time t is the number of its
  // updates ended by t, minus one. Per server, one pass over the updates and pulls in time order
  // keeps those counts and their minimum: O(K W S log(K W)) rather than comparing every pull with
  // every update (K^2 W^2 S comparisons: 7e10 for 65,536 workers over 4 iterations).
  StalenessStats stats;
  double sum = 0;
  std::size_t count = 0;
  struct Event {
    double time;
    bool pull;  // updates first at equal times: an update ending as the pull starts is applied
    int iteration;
    int worker;
  };
  for (int j = 0; j < S; ++j) {
    std::vector<Event> events;
    events.reserve(static_cast<std::size_t>(2 * K * W));
    for (int k = 0; k < K; ++k)
      for (int w = 0; w < W; ++w) {
        events.push_back({timings[g.updates[slot(plan, k, w, j)]].end_s, false, k, w});
        events.push_back({timings[g.pulls[slot(plan, k, w, j)]].start_s, true, k, w});
      }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.time != b.time ? a.time < b.time : (a.pull != b.pull ? !a.pull : a.worker < b.worker);
    });
    std::vector<int> applied(static_cast<std::size_t>(W), 0);  // updates of each worker ended so far
    std::multiset<int> counts(applied.begin(), applied.end());
    for (const Event& e : events) {
      int& mine = applied[static_cast<std::size_t>(e.worker)];
      if (!e.pull) {
        counts.erase(counts.find(mine));
        counts.insert(++mine);
        continue;
      }
      // The least advanced other worker: the smallest count, unless that is this worker's alone.
      int staleness = 0;
      if (W > 1) {
        auto least = counts.begin();
        if (*least == mine && counts.count(mine) == 1)
          ++least;
        staleness = std::max(0, e.iteration - (*least - 1));
      }
      stats.max = std::max(stats.max, static_cast<double>(staleness));
      sum += staleness;
      ++count;
    }
  }
  stats.mean = count > 0 ? sum / static_cast<double>(count) : 0.0;
  return stats;
}

}  // namespace ddlsim::sim
