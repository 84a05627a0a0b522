// Compute slowed by the communication it overlaps (sim/CommOverlap.hpp), against the closed form:
// a compute task of C seconds on a GPU whose transfer or collective runs for D of them (D < C)
// progresses at 1 / (1 + s) during the overlap, so it ends at C + D s / (1 + s). Compute on GPUs the
// communication does not involve, and every task without a slowdown, keep their times. One engine
// per process.
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {
constexpr double a    = 2e-6;  // s
constexpr double B    = 100e9; // B/s
constexpr double S    = 200e6; // bytes: a transfer of a + S / B = 2.002 ms
constexpr double C    = 5e-3;  // s of compute
constexpr double slow = 0.25;  // compute takes 25% longer while communication runs

ClusterSpec node(int gpus, std::vector<double> speed = {})
{
  ClusterSpec c;
  c.name          = "test";
  c.gpus_per_node = gpus;
  c.gpu_memory    = 1e12;
  c.intra_node    = {.bandwidth = B, .latency = a};
  c.speed         = std::move(speed);
  return c;
}

ReplayOptions slowed(double slowdown)
{
  ReplayOptions options;
  options.comm_compute_slowdown = slowdown;
  return options;
}

TaskId compute(TaskGraph& g, int device)
{
  return g.add_compute({.device = device, .phase = Phase::forward, .stage = 0, .micro_batch = 0, .samples = 1});
}

// Compute on GPUs 0, 1 and 2 from time 0, and a transfer of S bytes from GPU 0 to GPU 1.
ReplayResult overlapped(double slowdown, std::vector<double> speed = {})
{
  TaskGraph g(3);
  compute(g, 0);
  compute(g, 1);
  compute(g, 2);
  g.add_transfer({.src = 0, .dst = 1, .bytes = S});
  return replay(g, node(3, std::move(speed)), {C, C, C, 0.0}, slowed(slowdown));
}
} // namespace

TEST_CASE("compute overlapping a transfer of its GPU ends at C + D s / (1 + s)")
{
  const ReplayResult r = overlapped(slow);
  const double D       = a + S / B;
  CHECK(r.timings[3].end_s == doctest::Approx(D).epsilon(1e-9));                         // the transfer keeps its time
  CHECK(r.timings[0].end_s == doctest::Approx(C + D * slow / (1 + slow)).epsilon(1e-9)); // sender
  CHECK(r.timings[1].end_s == doctest::Approx(C + D * slow / (1 + slow)).epsilon(1e-9)); // receiver
  CHECK(r.timings[2].end_s == doctest::Approx(C).epsilon(1e-12));                        // not involved
}

TEST_CASE("without a slowdown the overlap costs nothing")
{
  const ReplayResult r = overlapped(0.0);
  CHECK(r.timings[0].end_s == doctest::Approx(C).epsilon(1e-12));
  CHECK(r.timings[1].end_s == doctest::Approx(C).epsilon(1e-12));
}

TEST_CASE("the slowdown scales a straggler's own speed")
{
  // GPU 1 at half speed: 2C of compute, of which D overlapped: 2C + D s / (1 + s).
  const ReplayResult r = overlapped(slow, {1.0, 0.5, 1.0});
  const double D       = a + S / B;
  CHECK(r.timings[1].end_s == doctest::Approx(2 * C + D * slow / (1 + slow)).epsilon(1e-9));
}

TEST_CASE("a collective slows every member's compute, and nothing after it ends")
{
  // An analytic ring all-reduce over GPUs 0-3 from time 0, compute on each of the 4 GPUs, and compute
  // on GPU 0 again after the collective: only the overlapped part is slowed.
  TaskGraph g(5);
  std::vector<TaskId> first;
  for (int d = 0; d < 5; ++d)
    first.push_back(compute(g, d));
  const TaskId ar    = g.add_collective({.algorithm = CollectiveAlgorithm::ring,
                                         .fidelity  = CollectiveFidelity::analytic,
                                         .group     = {0, 1, 2, 3},
                                         .bytes     = S});
  const TaskId after = compute(g, 0); // on GPU 0's stream, after its first compute
  std::vector<double> seconds(g.size(), 0.0);
  for (TaskId t : first)
    seconds[t] = C;
  seconds[after]       = C;
  const ReplayResult r = replay(g, node(5), seconds, slowed(slow));
  const double D       = 2 * 3 * a + 2.0 * 3 / 4 * S / B; // ring all-reduce: 2(n-1) a + 2 (n-1)/n S/B
  CHECK(r.timings[ar].end_s == doctest::Approx(D).epsilon(1e-9));
  const double end_first = C + D * slow / (1 + slow);
  for (int d = 0; d < 4; ++d)
    CHECK(r.timings[first[static_cast<std::size_t>(d)]].end_s == doctest::Approx(end_first).epsilon(1e-9));
  CHECK(r.timings[first[4]].end_s == doctest::Approx(C).epsilon(1e-12));
  CHECK(r.timings[after].end_s == doctest::Approx(end_first + C).epsilon(1e-9));
}

TEST_CASE("a flow-level collective slows its members' compute too")
{
  // A flow ring all-reduce over GPUs 0 and 1 (no latency: 2 steps of S/2 bytes each way, S / B in
  // all), with compute on both GPUs from time 0.
  TaskGraph g(2);
  const TaskId c0 = compute(g, 0);
  compute(g, 1);
  const TaskId ar = g.add_collective(
      {.algorithm = CollectiveAlgorithm::ring, .fidelity = CollectiveFidelity::flow, .group = {0, 1}, .bytes = S});
  ClusterSpec c        = node(2);
  c.intra_node.latency = 0;
  const ReplayResult r = replay(g, c, {C, C, 0.0}, slowed(slow));
  const double D       = S / B;
  CHECK(r.timings[ar].end_s == doctest::Approx(D).epsilon(1e-9));
  CHECK(r.timings[c0].end_s == doctest::Approx(C + D * slow / (1 + slow)).epsilon(1e-9));
}

TEST_CASE("consecutive compute tasks run as one timer, each ending where its own timer would")
{
  // GPU 0 runs C1 then C2 (one stream chain, sim/CommOverlap.hpp run_chain) while its transfer of D
  // runs from time 0, past the first task's end: the first is slowed throughout, C1 (1 + s); the
  // second until D, then at full speed: C1 + C2 + D s / (1 + s) in all.
  constexpr double C1 = 1e-3;
  TaskGraph g(2);
  const TaskId first  = compute(g, 0);
  const TaskId second = compute(g, 0);  // on GPU 0's stream, after the first
  const TaskId x      = g.add_transfer({.src = 0, .dst = 1, .bytes = S});
  const ReplayResult r = replay(g, node(2), {C1, C, 0.0}, slowed(slow));
  const double D       = a + S / B;
  REQUIRE(D > C1 * (1 + slow));
  CHECK(r.timings[x].end_s == doctest::Approx(D).epsilon(1e-9));
  CHECK(r.timings[first].end_s == doctest::Approx(C1 * (1 + slow)).epsilon(1e-12));
  CHECK(r.timings[second].start_s == r.timings[first].end_s);
  CHECK(r.timings[second].end_s == doctest::Approx(C1 + C + D * slow / (1 + slow)).epsilon(1e-9));
  CHECK(r.activities == 3);  // two compute tasks and the transfer's Comm
}
