// Parameter servers against closed forms. One engine per process: every TEST_CASE replays once and
// is compared with a formula, never with another replay.
//
// Communication-bound (gradients of G bytes each way over links of bandwidth B and latency a,
// compute t_c, one server's update of one push t_u, one dedicated server):
//   BSP, 2 workers: both pushes share the server's link, both updates queue on its GPU, both
//   pulls share its link: each of the N iterations takes t_c + 2(a + 2G/B) + 2 t_u; SSP with
//   staleness 0 gives BSP's time, also with a straggler; the staleness observed stays 0 under BSP
//   and within s under SSP.
//   Async, 2 workers, one iteration: the server applies the pushes one at a time, so the first
//   worker's pull starts t_u after the pushes and the second's t_u later; as t_u < G/B the
//   server's link stays busy from the first pull's start until both pulls' 2G bytes are through:
//   t_c + 2(a + 2G/B) + t_u (updates sharing the GPU would both end after 2 t_u: one t_u more).
//
// Compute-bound (tiny gradients, tiny updates: the communication and update time of an iteration,
// at most 2(a + n g/B) + n t_u' with all n workers contending, is 0.2% of t_c), n = 4 workers each
// doing K iterations of b samples, worker 0 at speed 0.5; throughput X = sum_w K b / T_w
// (ParameterServer.hpp), T_w when worker w's last pull ends, i.e. when it may start iteration K:
//   no straggler, any model:  T_w = K t_c                    X_0 = n b / t_c
//   async: nobody waits:      T_w = K t_c, T_0 = 2K t_c      X / X_0 = (n - 1 + 1/2) / n
//   BSP: everyone waits every iteration for the straggler: T_w = 2K t_c   X / X_0 = 1/2
//   SSP(s): the straggler never waits (T_0 = 2K t_c). A fast worker may start iteration k once its
//     own k - 1 is done and the straggler's k - s - 1 is applied, at 2(k - s) t_c: iteration K at
//     max(K, 2(K - s)) t_c, so for K > 2s, T_w = 2(K - s) t_c and
//     X / X_0 = ((n - 1) K / (2(K - s)) + 1/2) / n,
//     between BSP's 1/2 and async's, falling to 1/2 as K grows (s = 2: 0.625 at K = 8, 0.525 at 32).
// Ratios are checked within 1% (relative), against communication and updates worth 0.2%.
#include "sim/ParameterServer.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2e-6, B = 50e9, G = 100e6;
constexpr double t_c = 4e-3;  // one worker's forward + backward of the iteration at speed 1
constexpr double t_u = 1e-3;  // one server's update of one push

// The compute-bound setting.
constexpr int n = 4;
constexpr int b = 8;              // samples per worker and iteration
constexpr double tiny_g = 1e3;    // bytes
constexpr double tiny_u = 1e-6;   // s
constexpr double X_0 = n * b / t_c;  // straggler-free throughput, samples/s
constexpr double tolerance = 0.01;

constexpr double ssp_ratio(int s, int K) { return ((n - 1) * K / (2.0 * (K - s)) + 0.5) / n; }

// x within `tolerance` of `expected`, relative (doctest's default scale would add an absolute term).
doctest::Approx within(double expected) { return doctest::Approx(expected).epsilon(tolerance).scale(0); }

struct Setup {
  int workers = 2;
  int iterations = 1;
  Consistency consistency = Consistency::bsp;
  int staleness = 0;
  double straggler_speed = 1.0;  // worker 0's
  double gradient_bytes = G;
  double update_s = t_u;
};

struct Run {
  PsPlan plan;
  ReplayResult result;
  StalenessStats staleness;
  PsThroughput throughput;
  std::vector<DeviceStats> own_runs;  // ps_device_stats
};

Run run(const Setup& s)
{
  Run r;
  PsPlan& plan = r.plan;
  plan.workers = s.workers;
  plan.servers = 1;
  plan.server_devices = {s.workers};
  plan.devices = s.workers + 1;
  plan.iterations = s.iterations;
  plan.micro_batch_size = b;
  plan.layers = {0, 1};
  plan.gradient_bytes = s.gradient_bytes;
  plan.consistency = s.consistency;
  plan.staleness = s.staleness;
  const PsGraph g = build_parameter_server(plan);
  std::vector<double> seconds(g.graph.size(), 0.0);
  for (TaskId id = 0; id < g.graph.size(); ++id)
    if (g.graph.kind(id) == TaskKind::compute)
      seconds[id] = g.graph.compute(id).phase == Phase::optimizer ? s.update_s : t_c / 2;
  ClusterSpec c;
  c.name = "ps";
  c.gpus_per_node = s.workers + 1;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = B, .latency = a};
  c.speed.assign(static_cast<std::size_t>(s.workers + 1), 1.0);
  c.speed[0] = s.straggler_speed;
  r.result = replay(g.graph, c, seconds);
  r.staleness = observed_staleness(plan, g, r.result.timings);
  r.throughput = ps_throughput(plan, g, r.result.timings);
  r.own_runs = ps_device_stats(plan, g, r.result.timings, r.result.devices, r.throughput);
  return r;
}

Setup compute_bound(Consistency consistency, int iterations, double straggler_speed, int staleness = 0)
{
  return {.workers = n, .iterations = iterations, .consistency = consistency, .staleness = staleness,
          .straggler_speed = straggler_speed, .gradient_bytes = tiny_g, .update_s = tiny_u};
}
}  // namespace

TEST_CASE("BSP parameter server: N (t_c + 2(a + 2G/B) + 2 t_u)")
{
  const int N = 5;
  const Run r = run({.iterations = N});
  const double iteration = t_c + 2 * (a + 2 * G / B) + 2 * t_u;
  CHECK(r.result.makespan_s == doctest::Approx(N * iteration).epsilon(1e-9));
  CHECK(r.throughput.iteration_time_s == doctest::Approx(iteration).epsilon(1e-9));
  CHECK(r.throughput.samples_per_s == doctest::Approx(2 * b / iteration).epsilon(1e-9));
  CHECK(r.staleness.max == 0);
}

// With a straggler at half speed, BSP: worker 0 computes in 2 t_c; worker 1's push went earlier,
// alone on the link; worker 0's push is alone too (a + G/B), then its update (t_u), then both pulls
// share the server's link. SSP with staleness 0 must give the same (one engine per process: both
// are compared with this closed form).
constexpr double straggler_iteration = 2 * t_c + (a + G / B) + t_u + (a + 2 * G / B);

TEST_CASE("SSP with staleness 0 equals BSP with a straggler")
{
  const int N = 4;
  const Run r = run({.iterations = N, .consistency = Consistency::ssp, .straggler_speed = 0.5});
  CHECK(r.result.makespan_s == doctest::Approx(N * straggler_iteration).epsilon(1e-9));
  CHECK(r.staleness.max == 0);
}

TEST_CASE("BSP with a straggler matches the same closed form")
{
  const int N = 4;
  const Run r = run({.iterations = N, .straggler_speed = 0.5});
  CHECK(r.result.makespan_s == doctest::Approx(N * straggler_iteration).epsilon(1e-9));
}

TEST_CASE("a server applies the pushes one at a time in arrival order (async: one iteration)")
{
  static_assert(t_u < G / B, "the closed form needs the second pull to start before the first ends");
  const Run r = run({.consistency = Consistency::async});
  CHECK(r.result.makespan_s == doctest::Approx(t_c + 2 * (a + 2 * G / B) + t_u).epsilon(1e-9));
}

TEST_CASE("compute-bound without a straggler: async gives n b / t_c")
{
  const Run r = run(compute_bound(Consistency::async, 8, 1.0));
  CHECK(r.throughput.samples_per_s == within(X_0));
  CHECK(r.throughput.samples_per_s < X_0);  // communication and updates cost a little
}

TEST_CASE("compute-bound without a straggler: BSP gives n b / t_c")
{
  const Run r = run(compute_bound(Consistency::bsp, 8, 1.0));
  CHECK(r.throughput.samples_per_s == within(X_0));
}

TEST_CASE("compute-bound with a straggler at speed 0.5: async gives (n - 1/2)/n of the straggler-free throughput")
{
  const int K = 8;
  const Run r = run(compute_bound(Consistency::async, K, 0.5));
  CHECK(r.throughput.samples_per_s / X_0 == within((n - 1 + 0.5) / n));
  CHECK(r.throughput.iteration_time_s == doctest::Approx(n * b / r.throughput.samples_per_s).epsilon(1e-12));
  // Fast workers run at their own pace: K t_c, not the straggler's 2K t_c.
  CHECK(r.throughput.worker_time_s[1] == within(K * t_c));
  CHECK(r.throughput.worker_time_s[0] == within(2 * K * t_c));
  CHECK(r.staleness.max >= 1);
  // Over each GPU's own run a fast worker is hardly ever idle, and every GPU's compute, exposed
  // communication and idle time make up the K iterations of iteration_time_s.
  const double run_s = K * r.throughput.iteration_time_s;
  CHECK(r.own_runs[1].idle_s < 0.01 * run_s);
  for (const DeviceStats& d : r.own_runs)
    CHECK(d.compute_s + d.exposed_comm_s + d.idle_s == doctest::Approx(run_s).epsilon(1e-9));
}

TEST_CASE("compute-bound with a straggler at speed 0.5: BSP gives half the straggler-free throughput")
{
  const Run r = run(compute_bound(Consistency::bsp, 8, 0.5));
  CHECK(r.throughput.samples_per_s / X_0 == within(0.5));
  CHECK(r.staleness.max == 0);
}

TEST_CASE("compute-bound with a straggler at speed 0.5: SSP(2) over 8 iterations lies between BSP and async")
{
  const int s = 2, K = 8;
  const Run r = run(compute_bound(Consistency::ssp, K, 0.5, s));
  const double ratio = r.throughput.samples_per_s / X_0;
  for (double t : r.throughput.worker_time_s) MESSAGE((t / t_c));
  CHECK(ratio == within(ssp_ratio(s, K)));
  CHECK(ratio > 0.5 * (1 + 2 * tolerance));
  CHECK(ratio < (n - 0.5) / n * (1 - 2 * tolerance));
  CHECK(r.throughput.worker_time_s[1] == within(2 * (K - s) * t_c));
  CHECK(r.staleness.max <= s);
}

TEST_CASE("compute-bound with a straggler at speed 0.5: SSP(2) over 32 iterations comes closer to BSP")
{
  const int s = 2, K = 32;
  static_assert(ssp_ratio(2, 32) < ssp_ratio(2, 8) - 0.05, "more iterations: nearer BSP's 1/2");
  const Run r = run(compute_bound(Consistency::ssp, K, 0.5, s));
  const double ratio = r.throughput.samples_per_s / X_0;
  CHECK(ratio == within(ssp_ratio(s, K)));
  CHECK(ratio > 0.5 * (1 + 2 * tolerance));
  CHECK(r.staleness.max <= s);
}

TEST_CASE("SSP with staleness 2 bounds the staleness a worker sees")
{
  const Run r = run({.iterations = 8, .consistency = Consistency::ssp, .staleness = 2, .straggler_speed = 0.5});
  CHECK(r.staleness.max <= 2);
  CHECK(r.staleness.max >= 1);
}
