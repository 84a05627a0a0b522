#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>
#include <stdexcept>
#include <tuple>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {
PipelinePlan plan(int k, int dp, int m)
{
  PipelinePlan p;
  p.dp = dp;
  p.micro_batches = m;
  p.micro_batch_size = 2;
  for (int s = 0; s < k; ++s)
  {
    StagePlan& stage = p.stages.emplace_back();
    stage.layers = {static_cast<std::size_t>(s), static_cast<std::size_t>(s + 1)};
    stage.activation_bytes = 1000;
    stage.gradient_bytes = 5000;
  }
  return p;
}
}  // namespace

TEST_CASE("GPipe streams: all forwards, then backwards in reverse, then the optimizer")
{
  const int k = 3, dp = 2, m = 4;
  TaskGraph g = build_schedule(plan(k, dp, m));
  REQUIRE(g.device_count() == k * dp);
  std::size_t computes = 0, transfers = 0, collectives = 0;
  for (TaskId id = 0; id < g.size(); ++id) {
    computes += g.kind(id) == TaskKind::compute;
    transfers += g.kind(id) == TaskKind::transfer;
    collectives += g.kind(id) == TaskKind::collective;
  }
  CHECK(computes == static_cast<std::size_t>(k * dp * (2 * m + 1)));
  CHECK(transfers == static_cast<std::size_t>(2 * (k - 1) * dp * m));  // activations down, gradients up
  CHECK(collectives == static_cast<std::size_t>(k));                    // one all-reduce per stage

  const auto& stream = g.stream(3);  // stage 1, replica 1
  REQUIRE(stream.size() == static_cast<std::size_t>(2 * m + 1));
  for (int i = 0; i < m; ++i) {
    CHECK(g.compute(stream[static_cast<std::size_t>(i)]).phase == Phase::forward);
    CHECK(g.compute(stream[static_cast<std::size_t>(i)]).micro_batch == i);
    CHECK(g.compute(stream[static_cast<std::size_t>(m + i)]).phase == Phase::backward);
    CHECK(g.compute(stream[static_cast<std::size_t>(m + i)]).micro_batch == m - 1 - i);
  }
  CHECK(g.compute(stream.back()).phase == Phase::optimizer);
  for (TaskId id : stream)
    CHECK(g.compute(id).stage == 1);
}

TEST_CASE("device placement keeps the replicas of a stage together")
{
  TaskGraph g = build_schedule(plan(2, 4, 2));
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective) {
      const auto& c = g.collective(id);
      CHECK(c.group == std::vector<int>{4 * c.stage, 4 * c.stage + 1, 4 * c.stage + 2, 4 * c.stage + 3});
      CHECK(c.bytes == 5000);
    } else if (g.kind(id) == TaskKind::transfer) {
      CHECK(g.transfer(id).bytes == 2000);  // 1000 bytes per sample x micro-batch of 2
      CHECK(std::abs(g.transfer(id).src - g.transfer(id).dst) == 4);
    }
}

TEST_CASE("pure data parallelism has no transfers and no all-reduce for dp = 1")
{
  TaskGraph g = build_schedule(plan(1, 1, 3));
  CHECK(g.size() == 7);
  CHECK_THROWS(build_schedule(plan(0, 1, 1)));
  CHECK_THROWS(TaskGraph(0));
  TaskGraph t(2);
  CHECK_THROWS(t.add_transfer({.src = 0, .dst = 0, .bytes = 1}));
  CHECK_THROWS(t.add_compute({.device = 2}));
}

TEST_CASE("1F1B streams: warm-up forwards, one forward one backward, then the drain")
{
  const int k = 4, m = 6;
  PipelinePlan p = plan(k, 1, m);
  p.schedule = ScheduleKind::one_f_one_b;
  TaskGraph g = build_schedule(p);
  for (int s = 0; s < k; ++s) {
    CAPTURE(s);
    std::string order;
    int in_flight = 0, peak = 0;
    for (TaskId id : g.stream(s)) {
      const auto& c = g.compute(id);
      if (c.phase == Phase::optimizer)
        continue;
      order += (c.phase == Phase::forward ? "F" : "B") + std::to_string(c.micro_batch) + " ";
      in_flight += c.phase == Phase::forward ? 1 : -1;
      peak = std::max(peak, in_flight);
    }
    CHECK(peak == in_flight_micro_batches(ScheduleKind::one_f_one_b, k, s, m));
    if (s == 0)
      CHECK(order == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
    if (s == k - 1)
      CHECK(order == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  }
}

TEST_CASE("synchronized batch norm splits passes around blocking all-reduces across the replicas")
{
  const int dp = 2, m = 3;
  PipelinePlan p = plan(1, dp, m);
  p.stages[0].layers = {0, 10};
  p.stages[0].sync_points = {{.layer = 4, .bytes = 512}, {.layer = 10, .bytes = 256}};
  TaskGraph g = build_schedule(p);
  std::size_t syncs = 0;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective && g.collective(id).micro_batch >= 0) {
      ++syncs;
      CHECK(g.collective(id).group == std::vector<int>{0, 1});
    }
  CHECK(syncs == static_cast<std::size_t>(2 * 2 * m));  // two points, forward and backward, each micro-batch
  // Forward of a micro-batch: layers [0,4), all-reduce, [4,10), all-reduce (the backward starts with it).
  const auto& stream = g.stream(0);
  CHECK(g.compute(stream[0]).layer_begin == 0);
  CHECK(g.compute(stream[0]).layer_end == 4);
  CHECK(g.compute(stream[1]).layer_begin == 4);
  CHECK(g.compute(stream[1]).layer_end == 10);
  // The second segment waits for the first all-reduce.
  bool waits = false;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective && g.collective(id).micro_batch == 0 && g.collective(id).bytes == 512 &&
        g.collective(id).phase == Phase::forward)
      for (TaskId next : g.successors(id))
        waits = waits || next == stream[1];
  CHECK(waits);
  // Without replicas there is nothing to synchronize.
  PipelinePlan single = p;
  single.dp = 1;
  TaskGraph g1 = build_schedule(single);
  for (TaskId id = 0; id < g1.size(); ++id)
    CHECK(g1.kind(id) != TaskKind::collective);
}

TEST_CASE("interleaved order: every chunk and micro-batch once per phase, chunks in model order")
{
  const int k = 4, v = 2, m = 8;
  for (int rank = 0; rank < k; ++rank) {
    CAPTURE(rank);
    const auto order = stream_order(ScheduleKind::interleaved, k, v, rank, m);
    REQUIRE(order.size() == static_cast<std::size_t>(2 * v * m));
    std::map<std::tuple<int, int, int>, int> position;  // (phase, chunk, micro-batch) -> index
    for (std::size_t i = 0; i < order.size(); ++i) {
      CHECK(order[i].chunk % k == rank);
      CHECK(position.emplace(std::make_tuple(static_cast<int>(order[i].phase), order[i].chunk, order[i].micro_batch),
                             static_cast<int>(i))
                .second);
    }
    for (int c = rank; c < k * v; c += k)
      for (int mb = 0; mb < m; ++mb) {
        const int f = position.at({0, c, mb});
        const int b = position.at({1, c, mb});
        CHECK(f < b);
        if (c + k < k * v)  // this rank's later chunk runs the same micro-batch's forward later
          CHECK(f < position.at({0, c + k, mb}));
      }
    // Megatron's warm-up: (K - rank - 1) x 2 + (v - 1) x K forwards before the first backward.
    std::size_t warmup = 0;
    while (order[warmup].phase == Phase::forward)
      ++warmup;
    CHECK(warmup == static_cast<std::size_t>((k - rank - 1) * 2 + (v - 1) * k + 1));
  }
  CHECK(in_flight_per_chunk(ScheduleKind::one_f_one_b, 4, 1, 0, 8) == std::vector<int>{4});
  CHECK(in_flight_per_chunk(ScheduleKind::gpipe, 4, 1, 3, 8) == std::vector<int>{8});
  CHECK_THROWS_AS(stream_order(ScheduleKind::interleaved, 4, 2, 0, 6), std::invalid_argument);

  PipelinePlan p = plan(3, 1, 8);
  p.schedule = ScheduleKind::interleaved;
  p.virtual_stages = 2;
  CHECK_THROWS_AS(build_schedule(p), std::invalid_argument);  // 3 chunks cannot be split 2 per device
  p.schedule = ScheduleKind::one_f_one_b;
  p.virtual_stages = 1;
  p.stages.push_back(p.stages.back());
  p.virtual_stages = 2;
  CHECK_THROWS_AS(build_schedule(p), std::invalid_argument);  // chunks need the interleaved schedule
  p = plan(8, 1, 8);
  p.schedule = ScheduleKind::interleaved;
  p.virtual_stages = 2;
  const TaskGraph g = build_schedule(p);
  CHECK(g.device_count() == 4);
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::transfer) {  // chunk c on rank c mod 4 sends to chunk c + 1
      const auto& t = g.transfer(id);
      CHECK(t.dst == (t.src + (t.phase == Phase::forward ? 1 : 3)) % 4);
    }
}

namespace {
// Bytes and counts of a graph's collectives by kind and role.
struct Volumes {
  std::map<std::pair<CollectiveKind, CollectiveRole>, int> count;
  std::map<std::pair<CollectiveKind, CollectiveRole>, double> bytes;
};
Volumes volumes(const TaskGraph& g)
{
  Volumes v;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::collective) {
      const auto& c = g.collective(id);
      v.count[{c.kind, c.role}] += 1;
      v.bytes[{c.kind, c.role}] += c.bytes;
    }
  return v;
}
}  // namespace

TEST_CASE("ZeRO stages move the collective volumes the frameworks move")
{
  // One stage of two layers (units of 3000 and 2000 bytes of parameters), 4 replicas, M = 3.
  const double G = 5000;
  const int M = 3;
  auto zero_plan = [&](int stage) {
    PipelinePlan p = plan(1, 4, M);
    p.stages[0].layers = {0, 2};
    p.stages[0].units = {{.begin = 0, .end = 1, .bytes = 3000}, {.begin = 1, .end = 2, .bytes = 2000}};
    p.zero             = zero_stage(stage);
    p.shard = 4;
    return p;
  };
  const auto AR = std::make_pair(CollectiveKind::all_reduce, CollectiveRole::gradients);
  const auto RS = std::make_pair(CollectiveKind::reduce_scatter, CollectiveRole::gradients);
  const auto AG = std::make_pair(CollectiveKind::all_gather, CollectiveRole::parameters);
  // Stage 0 (DDP): one all-reduce of the gradients.
  Volumes v = volumes(build_schedule(zero_plan(0)));
  CHECK(v.count[AR] == 1);
  CHECK(v.bytes[AR] == G);
  CHECK(v.count.size() == 1);
  // Stage 1 (distributed optimizer): reduce-scatter once, all-gather the parameters after the step.
  v = volumes(build_schedule(zero_plan(1)));
  CHECK(v.bytes[RS] == G);
  CHECK(v.bytes[AG] == G);
  CHECK(v.count[AR] == 0);
  // Stage 2: the gradients of every micro-batch reduce-scattered; one gather after the step.
  v = volumes(build_schedule(zero_plan(2)));
  CHECK(v.bytes[RS] == M * G);
  CHECK(v.bytes[AG] == G);
  // Stage 3: each unit gathered before every forward and backward, reduce-scattered after every
  // backward; nothing after the step.
  v = volumes(build_schedule(zero_plan(3)));
  CHECK(v.bytes[AG] == 2 * M * G);
  CHECK(v.count[AG] == 2 * M * 2);
  CHECK(v.bytes[RS] == M * G);
  // Every replica steps the optimizer on its quarter of the parameters.
  const TaskGraph g = build_schedule(zero_plan(1));
  int steps = 0;
  for (TaskId id = 0; id < g.size(); ++id)
    if (g.kind(id) == TaskKind::compute && g.compute(id).phase == Phase::optimizer) {
      ++steps;
      CHECK(g.compute(id).share == 0.25);
    }
  CHECK(steps == 4);
  // Hybrid sharding (shard inside groups of 2, replicate across the 2 groups): a reduce-scatter in
  // each group, then each half all-reduced across the groups.
  PipelinePlan hybrid = zero_plan(1);
  hybrid.shard = 2;
  v = volumes(build_schedule(hybrid));
  CHECK(v.count[RS] == 2);
  CHECK(v.bytes[RS] == 2 * G);
  CHECK(v.count[AR] == 2);
  CHECK(v.bytes[AR] == 2 * G / 2);
  hybrid.shard = 3;
  CHECK_THROWS_AS(build_schedule(hybrid), std::invalid_argument);
}

TEST_CASE("ZeRO-3 gathers are prefetched: a unit's gather waits for the compute two units back, not the last")
{
  PipelinePlan p = plan(1, 2, 1);
  p.stages[0].layers = {0, 3};
  p.stages[0].units = {{.begin = 0, .end = 1, .bytes = 10}, {.begin = 1, .end = 2, .bytes = 10}, {.begin = 2, .end = 3, .bytes = 10}};
  p.zero             = ZeroStage::parameters;
  p.shard = 2;
  const TaskGraph g = build_schedule(p);
  // Device 0's forward: gather u0, F(u0), gather u1, F(u1), gather u2, F(u2). The gather of u2 must not
  // wait for F(u1) (it runs while u1 computes) but for F(u0).
  std::vector<TaskId> gathers, forwards;
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == TaskKind::collective && g.collective(id).role == CollectiveRole::parameters &&
        g.collective(id).phase == Phase::forward)
      gathers.push_back(id);
    if (g.kind(id) == TaskKind::compute && g.compute(id).device == 0 && g.compute(id).phase == Phase::forward)
      forwards.push_back(id);
  }
  REQUIRE(gathers.size() == 3);
  REQUIRE(forwards.size() == 3);
  auto waits_for = [&](TaskId before, TaskId after) {
    const auto& s = g.successors(before);
    return std::find(s.begin(), s.end(), after) != s.end();
  };
  for (int u = 0; u < 3; ++u)
    CHECK(waits_for(gathers[static_cast<std::size_t>(u)], forwards[static_cast<std::size_t>(u)]));
  CHECK(waits_for(forwards[0], gathers[2]));
  CHECK_FALSE(waits_for(forwards[1], gathers[2]));
  CHECK(waits_for(gathers[1], gathers[2]));  // one gather stream
}

TEST_CASE("ring attention: cp chunks per attention layer and cp - 1 K/V steps around each cp group")
{
  // 2 data ranks x cp 4 = 8 replicas; layer 1 is the attention layer, 1000 bytes of K/V per sample.
  const int cp = 4, M = 2;
  PipelinePlan p = plan(1, 8, M);
  p.cp = cp;
  p.stages[0].layers = {0, 3};
  p.stages[0].rings = {{.layer = 1, .kv_bytes_per_sample = 1000}};
  const TaskGraph g = build_schedule(p);
  int forward_steps = 0, backward_steps = 0, returns = 0, chunks = 0;
  auto waits_for = [&](TaskId before, TaskId after) {
    const auto& s = g.successors(before);
    return std::find(s.begin(), s.end(), after) != s.end();
  };
  for (TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == TaskKind::transfer) {
      const auto& x = g.transfer(id);
      CHECK(x.kind == TransferKind::context);
      CHECK(x.dst / cp == x.src / cp);       // inside one cp group
      CHECK(x.dst == (x.src / cp) * cp + (x.src % cp + 1) % cp);  // to the next rank of the ring
      // A step carries 1/cp of the sequence's K/V (micro-batch of 2): forward K and V; backward K, V
      // and the dK/dV accumulated so far; then the dK/dV alone return home (step cp).
      if (x.phase == Phase::forward) {
        ++forward_steps;
        CHECK(x.bytes == 1000.0 * 2 / cp);
      } else if (x.server < cp) {
        ++backward_steps;
        CHECK(x.bytes == 2 * 1000.0 * 2 / cp);
      } else {
        ++returns;
        CHECK(x.bytes == 1000.0 * 2 / cp);
      }
      // Backward steps wait for the sender's chunk before them (it updated the dK/dV they carry).
      if (x.phase == Phase::backward) {
        bool after_chunk = false;
        for (TaskId c = 0; c < g.size(); ++c)
          if (g.kind(c) == TaskKind::compute && g.compute(c).device == x.src && g.compute(c).layer_begin == 1 &&
              g.compute(c).phase == Phase::backward && waits_for(c, id))
            after_chunk = true;
        CHECK(after_chunk);
      }
    }
    if (g.kind(id) == TaskKind::compute && g.compute(id).layer_begin == 1 && g.compute(id).layer_end == 2) {
      ++chunks;
      CHECK(g.compute(id).share == 0.25);
    }
  }
  CHECK(forward_steps == 8 * (cp - 1) * M);
  CHECK(backward_steps == 8 * (cp - 1) * M);
  CHECK(returns == 8 * M);
  CHECK(chunks == 8 * cp * M * 2);
  p.cp = 3;
  CHECK_THROWS_AS(build_schedule(p), std::invalid_argument);
}

TEST_CASE("ring attention recomputed: the backward reruns the forward's ring, cp - 1 more K/V blocks")
{
  // Full recomputation reruns the attention layer's forward, ring included, in its backward (the
  // checkpointed forward's K/V pass again: Transformer Engine's AttnFuncWithCPAndKVP2P under
  // Megatron's CheckpointFunction). Per GPU and micro-batch, in blocks of 1/cp of the K/V: forward
  // cp - 1; backward 2 (cp - 1) + 1 (K/V with dK/dV, then dK/dV home); recomputed 3 (cp - 1) + 1.
  const int cp = 4, M = 2;
  const double kv = 1000, block = kv * 2 / cp;  // micro-batch of 2
  for (const bool recomputed : {false, true}) {
    CAPTURE(recomputed);
    PipelinePlan p = plan(1, 8, M);
    p.cp = cp;
    p.stages[0].layers = {0, 3};
    p.stages[0].rings = {{.layer = 1, .kv_bytes_per_sample = kv, .recomputed = recomputed}};
    const TaskGraph g = build_schedule(p);
    double forward = 0, backward = 0;
    int transfers = 0, chunks = 0;
    for (TaskId id = 0; id < g.size(); ++id) {
      if (g.kind(id) == TaskKind::transfer) {
        ++transfers;
        const auto& x = g.transfer(id);
        (x.phase == Phase::forward ? forward : backward) += x.bytes;
        if (x.phase == Phase::backward)
          CHECK(x.bytes == (x.server < cp ? (recomputed ? 3 : 2) : 1) * block);
      }
      if (g.kind(id) == TaskKind::compute && g.compute(id).layer_begin == 1 && g.compute(id).layer_end == 2)
        ++chunks;
    }
    const double per_gpu = 8.0 * M;  // GPUs x micro-batches
    CHECK(forward == per_gpu * (cp - 1) * block);
    CHECK(backward == per_gpu * ((recomputed ? 3 : 2) * (cp - 1) + 1) * block);
    // The same tasks either way: the recomputed forward's K/V ride on the backward's steps, and its
    // compute is in the backward's chunks (OpCosts), so the resource guard's count does not change.
    CHECK(transfers == 8 * M * (2 * (cp - 1) + 1));
    CHECK(chunks == 8 * cp * M * 2);
  }
}
