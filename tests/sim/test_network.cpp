// The flow-level network against alpha-beta closed forms (latency a, bandwidth B):
//   one transfer of S bytes                 a + S/B
//   two transfers sharing the sender's link a + 2S/B each (fair sharing)
//   ring all-reduce over n GPUs             2(n-1) a + 2(n-1)/n S/B
// The expected values come from these formulas, not from the simulator. One engine per process.
#include "common/Error.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {
constexpr double a = 1.7e-6;   // s
constexpr double B = 123e9;    // B/s
constexpr double S = 256e6;    // bytes

ClusterSpec node(int gpus, double latency)
{
  ClusterSpec c;
  c.name = "test";
  c.gpus_per_node = gpus;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = B, .latency = latency};
  return c;
}

ClusterSpec two_nodes(int gpus_per_node, int nics)
{
  ClusterSpec c = node(gpus_per_node, a);
  c.nodes = 2;
  c.nics_per_node = nics;
  c.nic = {.bandwidth = B, .latency = 0.6 * a};
  c.fabric_latency = 0.4 * a;  // nic + fabric = a between nodes
  return c;
}

ReplayResult run(const TaskGraph& g, const ClusterSpec& c) { return replay(g, c, std::vector<double>(g.size(), 0.0)); }
}  // namespace

TEST_CASE("one transfer takes a + S/B")
{
  TaskGraph g(2);
  g.add_transfer({.src = 0, .dst = 1, .bytes = S});
  CHECK(run(g, node(2, a)).makespan_s == doctest::Approx(a + S / B).epsilon(1e-9));
}

TEST_CASE("two transfers sharing one link take twice as long as one")
{
  TaskGraph g(3);
  TaskId t1 = g.add_transfer({.src = 0, .dst = 1, .bytes = S});
  TaskId t2 = g.add_transfer({.src = 0, .dst = 2, .bytes = S});
  auto r = run(g, node(3, 0.0));
  CHECK(r.timings[t1].end_s == doctest::Approx(2 * S / B).epsilon(1e-9));
  CHECK(r.timings[t2].end_s == doctest::Approx(2 * S / B).epsilon(1e-9));
}

TEST_CASE("transfers on disjoint links do not slow each other")
{
  TaskGraph g(4);
  g.add_transfer({.src = 0, .dst = 1, .bytes = S});
  g.add_transfer({.src = 2, .dst = 3, .bytes = S});
  g.add_transfer({.src = 1, .dst = 0, .bytes = S});  // the reverse direction of a split-duplex link
  CHECK(run(g, node(4, 0.0)).makespan_s == doctest::Approx(S / B).epsilon(1e-9));
}

TEST_CASE("two GPUs sharing one NIC split its bandwidth")
{
  TaskGraph g(4);
  g.add_transfer({.src = 0, .dst = 2, .bytes = S});
  g.add_transfer({.src = 1, .dst = 3, .bytes = S});
  CHECK(run(g, two_nodes(2, 1)).makespan_s == doctest::Approx(a + 2 * S / B).epsilon(1e-9));
}

TEST_CASE("ring all-reduce inside a node matches 2(n-1)a + 2(n-1)/n S/B")
{
  const int n = 8;
  TaskGraph g(n);
  g.add_collective({.group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S});
  auto r = run(g, node(n, a));
  CHECK(r.makespan_s == doctest::Approx(2 * (n - 1) * a + 2.0 * (n - 1) / n * S / B).epsilon(1e-9));
  CHECK(r.activities == static_cast<std::uint64_t>(2 * (n - 1) * n));  // one Comm per member and step
}

TEST_CASE("ring all-reduce across two nodes with one NIC per GPU matches the closed form")
{
  const int n = 8;
  TaskGraph g(n);
  g.add_collective({.group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S});
  CHECK(run(g, two_nodes(4, 4)).makespan_s == doctest::Approx(2 * (n - 1) * a + 2.0 * (n - 1) / n * S / B).epsilon(1e-9));
}

TEST_CASE("a second replay in one process is refused")
{
  TaskGraph g(2);
  g.add_transfer({.src = 0, .dst = 1, .bytes = 1});
  run(g, node(2, a));
  CHECK_THROWS_AS(run(g, node(2, a)), SimulationError);
}

TEST_CASE("a dependency cycle is reported, not hung")
{
  TaskGraph g(2);
  TaskId x = g.add_transfer({.src = 0, .dst = 1, .bytes = 1});
  TaskId y = g.add_transfer({.src = 1, .dst = 0, .bytes = 1});
  g.add_dependency(x, y);
  g.add_dependency(y, x);
  CHECK_THROWS_AS(run(g, node(2, a)), SimulationError);
}

namespace {
// Four single-GPU nodes in two leaves of two; each leaf's uplink carries 2 x B / oversubscription.
ClusterSpec fat_tree(double oversubscription)
{
  ClusterSpec c = node(1, a);
  c.nodes = 4;
  c.nics_per_node = 1;
  c.nic = {.bandwidth = B, .latency = 0.6 * a};
  c.fabric_latency = 0.4 * a;
  c.topology = FabricTopology::fat_tree;
  c.nodes_per_leaf = 2;
  c.oversubscription = oversubscription;
  return c;
}
}  // namespace

TEST_CASE("fat tree: two flows between leaves share an oversubscribed uplink")
{
  // Uplink = 2 x B / 2 = B, shared by two flows: each gets B/2. Inside a leaf only the NICs count.
  TaskGraph g(4);
  g.add_transfer({.src = 0, .dst = 2, .bytes = S});
  g.add_transfer({.src = 1, .dst = 3, .bytes = S});
  const ReplayResult r = run(g, fat_tree(2));
  CHECK(r.timings[0].end_s == doctest::Approx(a + 2 * S / B).epsilon(1e-9));
  CHECK(r.timings[1].end_s == doctest::Approx(a + 2 * S / B).epsilon(1e-9));
}

TEST_CASE("fat tree with full bisection: flows between leaves run at NIC speed")
{
  TaskGraph g(4);
  g.add_transfer({.src = 0, .dst = 2, .bytes = S});
  g.add_transfer({.src = 1, .dst = 3, .bytes = S});
  g.add_transfer({.src = 3, .dst = 1, .bytes = S});  // the reverse direction does not interfere
  const ReplayResult r = run(g, fat_tree(1));
  for (TaskId id = 0; id < 3; ++id)
    CHECK(r.timings[id].end_s == doctest::Approx(a + S / B).epsilon(1e-9));
}

TEST_CASE("a straggler at half speed takes twice as long")
{
  ClusterSpec c = node(2, a);
  c.speed = {1.0, 0.5};
  TaskGraph g(2);
  g.add_compute({.device = 0, .phase = Phase::forward, .stage = 0, .micro_batch = 0, .samples = 1});
  g.add_compute({.device = 1, .phase = Phase::forward, .stage = 0, .micro_batch = 0, .samples = 1});
  const ReplayResult r = replay(g, c, {3e-3, 3e-3});
  CHECK(r.timings[0].end_s == doctest::Approx(3e-3).epsilon(1e-9));
  CHECK(r.timings[1].end_s == doctest::Approx(6e-3).epsilon(1e-9));
}
