#include "sim/ParameterServer.hpp"

#include <algorithm>
#include <limits>
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
  auto index = [&](int k, int w, int j) { return static_cast<std::size_t>((k * W + w) * S + j); };
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
          g.add_dependency(out.pulls[index(k - 1, w, j)], first);
      for (int j = 0; j < S; ++j) {
        const TaskId push = add_exchange(g, {.src = w, .dst = plan.server_devices[static_cast<std::size_t>(j)],
                                            .bytes = plan.gradient_bytes * shard, .phase = Phase::backward,
                                            .stage = w, .micro_batch = k, .kind = TransferKind::push, .server = j});
        g.add_dependency(last, push);
        pushes[static_cast<std::size_t>(w)].push_back(push);
      }
    }
    // Servers apply every push as it arrives: updates are not ordered on a stream, and updates that
    // overlap share the server's GPU (SimGrid shares a host between concurrent Execs).
    for (int w = 0; w < W; ++w)
      for (int j = 0; j < S; ++j) {
        const TaskId update = g.add_compute({.device = plan.server_devices[static_cast<std::size_t>(j)],
                                             .phase = Phase::optimizer, .stage = j, .micro_batch = k, .samples = 0,
                                             .layer_begin = begin, .layer_end = end, .share = shard,
                                             .on_stream = false});
        g.add_dependency(pushes[static_cast<std::size_t>(w)][static_cast<std::size_t>(j)], update);
        out.updates[index(k, w, j)] = update;
      }
    // Pulls: what each waits for is the consistency model.
    for (int j = 0; j < S; ++j) {
      TaskId barrier = 0;
      if (plan.consistency == Consistency::bsp) {
        // One join per server and iteration: every worker's update of k is in.
        barrier = g.add_collective({.group = {plan.server_devices[static_cast<std::size_t>(j)]}, .bytes = 0, .stage = j,
                                    .micro_batch = k, .role = CollectiveRole::barrier});
        for (int w = 0; w < W; ++w)
          g.add_dependency(out.updates[index(k, w, j)], barrier);
      }
      for (int w = 0; w < W; ++w) {
        const TaskId pull = add_exchange(g, {.src = plan.server_devices[static_cast<std::size_t>(j)], .dst = w,
                                            .bytes = plan.gradient_bytes * shard, .phase = Phase::forward,
                                            .stage = w, .micro_batch = k, .kind = TransferKind::pull, .server = j});
        g.add_dependency(out.updates[index(k, w, j)], pull);  // its own update, in every model
        if (plan.consistency == Consistency::bsp) {
          g.add_dependency(barrier, pull);
        } else if (plan.consistency == Consistency::ssp && k - plan.staleness >= 0) {
          for (int other = 0; other < W; ++other)
            if (other != w || plan.staleness > 0)
              g.add_dependency(out.updates[index(k - plan.staleness, other, j)], pull);
        }
        out.pulls[index(k, w, j)] = pull;
      }
    }
  }
  return out;
}

StalenessStats observed_staleness(const PsPlan& plan, const PsGraph& g, const std::vector<TaskTiming>& timings)
{
  const int W = plan.workers, S = plan.servers, K = plan.iterations;
  auto index = [&](int k, int w, int j) { return static_cast<std::size_t>((k * W + w) * S + j); };
  StalenessStats stats;
  double sum = 0;
  std::size_t count = 0;
  for (int k = 0; k < K; ++k)
    for (int w = 0; w < W; ++w)
      for (int j = 0; j < S; ++j) {
        const double pulled = timings[g.pulls[index(k, w, j)]].start_s;
        int staleness = 0;
        for (int other = 0; other < W; ++other) {
          if (other == w)
            continue;
          int newest = -1;  // newest iteration of `other` applied on server j before the pull
          for (int i = 0; i < K; ++i)
            if (timings[g.updates[index(i, other, j)]].end_s <= pulled)
              newest = i;
          staleness = std::max(staleness, std::max(0, k - newest));
        }
        stats.max = std::max(stats.max, static_cast<double>(staleness));
        sum += staleness;
        ++count;
      }
  stats.mean = count > 0 ? sum / static_cast<double>(count) : 0.0;
  return stats;
}

}  // namespace ddlsim::sim
