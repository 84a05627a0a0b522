// Parameter servers against a closed form and against each other:
//   BSP, 2 workers, 1 dedicated server, compute t_c, update t_u, G bytes each way over links of
//   bandwidth B and latency a: both pushes share the server's link, both updates share its GPU,
//   both pulls share its link, so each of the N iterations takes t_c + 2(a + 2G/B) + 2 t_u;
//   SSP with staleness 0 gives BSP's time; async is never slower than BSP, and with a straggler
//   strictly faster; the staleness observed stays 0 under BSP and within s under SSP.
// One engine per process.
#include "sim/ParameterServer.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2e-6, B = 50e9, G = 100e6;
constexpr double t_c = 4e-3;  // one worker's forward + backward of the iteration
constexpr double t_u = 1e-3;  // one server's update of one push

struct Run {
  ReplayResult result;
  StalenessStats staleness;
};

Run run(int workers, int iterations, Consistency consistency, int staleness, double straggler_speed = 1.0)
{
  PsPlan plan;
  plan.workers = workers;
  plan.servers = 1;
  plan.server_devices = {workers};
  plan.devices = workers + 1;
  plan.iterations = iterations;
  plan.layers = {0, 1};
  plan.gradient_bytes = G;
  plan.consistency = consistency;
  plan.staleness = staleness;
  const PsGraph g = build_parameter_server(plan);
  std::vector<double> seconds(g.graph.size(), 0.0);
  for (TaskId id = 0; id < g.graph.size(); ++id)
    if (g.graph.kind(id) == TaskKind::compute)
      seconds[id] = g.graph.compute(id).phase == Phase::optimizer ? t_u : t_c / 2;
  ClusterSpec c;
  c.name = "ps";
  c.gpus_per_node = workers + 1;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = B, .latency = a};
  c.speed.assign(static_cast<std::size_t>(workers + 1), 1.0);
  c.speed[0] = straggler_speed;
  Run r;
  r.result = replay(g.graph, c, seconds);
  r.staleness = observed_staleness(plan, g, r.result.timings);
  return r;
}
}  // namespace

TEST_CASE("BSP parameter server: N (t_c + 2(a + 2G/B) + 2 t_u)")
{
  const int n = 5;
  const Run r = run(2, n, Consistency::bsp, 0);
  CHECK(r.result.makespan_s == doctest::Approx(n * (t_c + 2 * (a + 2 * G / B) + 2 * t_u)).epsilon(1e-9));
  CHECK(r.staleness.max == 0);
}

// With a straggler at half speed, BSP: worker 0 computes in 2 t_c; worker 1's push went earlier,
// alone on the link; worker 0's push is alone too (a + G/B), then its update (t_u), then both pulls
// share the server's link. SSP with staleness 0 must give the same (one engine per process: both
// are compared with this closed form).
constexpr double straggler_iteration = 2 * t_c + (a + G / B) + t_u + (a + 2 * G / B);

TEST_CASE("SSP with staleness 0 equals BSP, with a straggler")
{
  const int n = 4;
  const Run r = run(2, n, Consistency::ssp, 0, 0.5);
  CHECK(r.result.makespan_s == doctest::Approx(n * straggler_iteration).epsilon(1e-9));
  CHECK(r.staleness.max == 0);
}

TEST_CASE("BSP with a straggler matches the same closed form")
{
  const int n = 4;
  const Run r = run(2, n, Consistency::bsp, 0, 0.5);
  CHECK(r.result.makespan_s == doctest::Approx(n * straggler_iteration).epsilon(1e-9));
}

TEST_CASE("async with a straggler: the fast worker runs ahead")
{
  const int n = 6;
  const Run r = run(2, n, Consistency::async, 0, 0.5);
  // Async finishes when the straggler does, and the straggler never waits for the fast worker:
  // at most BSP's time (the closed form above).
  CHECK(r.result.makespan_s <= n * straggler_iteration * (1 + 1e-9));
  CHECK(r.staleness.max >= 1);
}

TEST_CASE("SSP with staleness 2 bounds the staleness a worker sees")
{
  const Run r = run(2, 8, Consistency::ssp, 2, 0.5);
  CHECK(r.staleness.max <= 2);
  CHECK(r.staleness.max >= 1);
}
