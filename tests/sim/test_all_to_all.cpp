// The all-to-all on the flow-level network against its closed forms (latency a, bandwidth B,
// buffer S per member, n members), which the simulator does not compute:
//   direct, one switch, uniform                   a + (n-1) S / (n B)
//   direct, one switch, busiest member at w x the mean (dispatch)  a + w (n-1) S / (n B)
//   direct, N nodes of m, one NIC per GPU         max(a + (m-1) S/(n B), a_n + (N-1) m S/(n B_n))
//   hierarchical, N nodes of m                    a + (m-1) S/(m B) + a_n + (N-1) S/(N B_n)
// and analytic fidelity as one timer of the same form. One engine per process.
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

namespace {
constexpr double a = 2.3e-6;  // s
constexpr double B = 97e9;    // B/s

ClusterSpec nodes(int count, int gpus_per_node)
{
  ClusterSpec c;
  c.name = "test";
  c.nodes = count;
  c.gpus_per_node = gpus_per_node;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = B, .latency = a};
  c.nics_per_node = gpus_per_node;
  c.nic = {.bandwidth = B / 4, .latency = 3 * a};
  c.fabric_latency = a;
  return c;
}

ReplayResult run(const CollectiveTask& task, const ClusterSpec& c)
{
  TaskGraph g(c.nodes * c.gpus_per_node);
  g.add_collective(task);
  return replay(g, c, std::vector<double>(g.size(), 0.0));
}

CollectiveTask all_to_all(std::vector<int> group, double bytes)
{
  return {.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::direct, .group = std::move(group),
          .bytes = bytes};
}
}  // namespace

TEST_CASE("a uniform all-to-all over 8 GPUs on one switch takes a + (n-1) S/(nB)")
{
  const double S = 96e6, n = 8;
  const ReplayResult r = run(all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S), nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + (n - 1) * S / (n * B)).epsilon(1e-9));
  CHECK(r.activities == 8 * 7);
}

TEST_CASE("an all-to-all whose busiest member receives twice the mean takes twice the bandwidth term")
{
  const double S = 96e6, n = 8, w = 2;
  CollectiveTask c = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  c.member_load.assign(8, (n - w) / (n - 1));  // the others share the rest: the same bytes in all
  c.member_load[3] = w;
  const ReplayResult r = run(c, nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + w * (n - 1) * S / (n * B)).epsilon(1e-9));
}

TEST_CASE("a combine whose busiest member sends twice the mean takes twice the bandwidth term")
{
  const double S = 96e6, n = 8, w = 2;
  CollectiveTask c = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  c.member_load.assign(8, (n - w) / (n - 1));
  c.member_load[0] = w;
  c.load_at_source = true;
  CHECK(run(c, nodes(1, 8)).makespan_s == doctest::Approx(a + w * (n - 1) * S / (n * B)).epsilon(1e-9));
}

TEST_CASE("a direct all-to-all over 2 nodes of 4 is bound by the NICs: a_n + (N-1) m S/(n B_n)")
{
  const double S = 96e6, n = 8, m = 4, N = 2;
  const ClusterSpec c = nodes(2, 4);
  const CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  const double inter = 3 * a + a + (N - 1) * m * S / (n * (B / 4));
  REQUIRE(inter > a + (m - 1) * S / (n * B));
  const ReplayResult r = run(task, c);
  CHECK(r.makespan_s == doctest::Approx(inter).epsilon(1e-9));
  CHECK(r.makespan_s == doctest::Approx(analytic_seconds(task, c)).epsilon(1e-9));
}

TEST_CASE("a hierarchical all-to-all over 2 nodes of 4 takes a + (m-1) S/(mB) + a_n + (N-1) S/(N B_n)")
{
  const double S = 96e6, m = 4, N = 2;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.algorithm = CollectiveAlgorithm::hierarchical;
  const ReplayResult r = run(task, nodes(2, 4));
  CHECK(r.makespan_s ==
        doctest::Approx(a + (m - 1) * S / (m * B) + 4 * a + (N - 1) * S / (N * (B / 4))).epsilon(1e-9));
  CHECK(r.activities == 2 * 4 * 3 + 4 * 2 * 1);
}

TEST_CASE("an analytic all-to-all is one timer of its closed form")
{
  const double S = 96e6, n = 8;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  task.fidelity = CollectiveFidelity::analytic;
  const ReplayResult r = run(task, nodes(1, 8));
  CHECK(r.makespan_s == doctest::Approx(a + (n - 1) * S / (n * B)).epsilon(1e-12));
  CHECK(r.activities == 0);
}

TEST_CASE("a calibrated flow-level all-to-all takes the measured alpha + S/bandwidth")
{
  const double S = 96e6, alpha = 17e-6, bandwidth = 41e9;
  CollectiveTask task = all_to_all({0, 1, 2, 3, 4, 5, 6, 7}, S);
  const ClusterSpec c = nodes(1, 8);
  calibrate_collective(task, c, alpha, S / bandwidth);
  CHECK(run(task, c).makespan_s == doctest::Approx(alpha + S / bandwidth).epsilon(1e-6));
}
