// NCCL's algorithms on the flow-level network against closed forms written here from the algorithms'
// definitions (latency a inside a node, a_n between nodes, bandwidth B per GPU link, B_n per NIC,
// buffer S, n members, m per node on N nodes, K chunks), and the analytic fidelity against the same:
//   ring over channels across nodes   2(n-1)(a_n + S/(n C B_n))  when the C NICs bind
//   ring broadcast, pipelined chain   (n-2+K)(a + S/(K B))
//   nvls all-reduce, one node         (K+1)(a/2 + S (m+1)/(m K min(B, B_nvls/m)))
//   sharp all-reduce                  2(m-1)(a + S/(mB)) + (K+1)(a_n/2 + S/(m K B_n))
//   double_tree, N nodes of one GPU   2 (a_n + S/(2 B_n)) for N = 2
//   binary tree at n members          2 (D + K - 1)(a + 2S/(KB)) with a sibling pair at depth D,
//                                     2 (D a + (2D-1) S/(KB) + (K-1)(a + 2S/(KB))) for n = 2^D
//   fat-tree ring through an oversubscribed uplink U = nodes_per_leaf B_n / o: 2(n-1)(a_n + S/(n U))
// One engine per process (doctest_discover_tests runs each TEST_CASE alone).
#include "calibration/Profile.hpp"
#include "experiments/Evaluate.hpp"
#include "sim/Collectives.hpp"
#include "sim/Replay.hpp"
#include "tests/sim/TestClusters.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

using namespace ddlsim::sim;

namespace {
constexpr double a = 1.3e-6;  // s
constexpr double B = 90e9;    // B/s

ClusterSpec nodes(int count, int gpus_per_node, int nics, double nic_bandwidth)
{
  return testing::test_nodes(count, gpus_per_node, B, a, nics, nic_bandwidth);  // a_n = 4a
}

std::vector<int> iota(int n)
{
  std::vector<int> g;
  for (int i = 0; i < n; ++i)
    g.push_back(i);
  return g;
}

// The collective alone: its flow-level time, after checking that the closed form says the same.
double flow_time(const CollectiveTask& c, const ClusterSpec& cluster, double tolerance = 1e-9)
{
  TaskGraph g(cluster.gpu_count());
  g.add_collective(c);
  const double flow = replay(g, cluster, std::vector<double>(g.size(), 0.0)).makespan_s;
  CHECK(analytic_seconds(c, cluster) == doctest::Approx(flow).epsilon(tolerance));
  return flow;
}
}  // namespace

TEST_CASE("a ring over 4 channels across 2 nodes uses all 4 NICs: 4x a one-NIC ring's bandwidth")
{
  const double S = 96e6, n = 8, Bn = B / 4, an = 4 * a;
  const ClusterSpec c = nodes(2, 4, 4, Bn);
  CollectiveTask ring{.group = iota(8), .bytes = S};
  REQUIRE(rail_channels(ring, c) == 4);
  ring.channels = 4;
  CHECK(flow_time(ring, c) == doctest::Approx(2 * (n - 1) * (an + S / (n * 4 * Bn))).epsilon(1e-9));
}

TEST_CASE("a ring over one channel across 2 nodes is paced by one NIC")
{
  const double S = 96e6, n = 8, Bn = B / 4, an = 4 * a;
  const CollectiveTask ring{.group = iota(8), .bytes = S};
  CHECK(flow_time(ring, nodes(2, 4, 4, Bn)) == doctest::Approx(2 * (n - 1) * (an + S / (n * Bn))).epsilon(1e-9));
}

TEST_CASE("ring broadcast is a pipelined chain: (n-2+K)(a + S/(KB))")
{
  const double S = 20.0 * 1024 * 1024, n = 6;
  const CollectiveTask bcast{.kind = CollectiveKind::broadcast, .group = iota(6), .bytes = S};
  const double K = tree_chunks(S);
  REQUIRE(K == 5);
  CHECK(flow_time(bcast, nodes(1, 6, 1, B)) == doctest::Approx((n - 2 + K) * (a + S / (K * B))).epsilon(1e-9));
}

TEST_CASE("NVLS all-reduce in one node: (K+1)(a/2 + S(m+1)/(mK min(B, B_nvls/m)))")
{
  const double S = 12.0 * 1024 * 1024, m = 4;
  ClusterSpec c = nodes(1, 4, 1, B);
  c.nvls_bandwidth = 2 * B;  // the switch binds: 4 GPUs get B/2 each
  const CollectiveTask nvls{.algorithm = CollectiveAlgorithm::nvls, .group = iota(4), .bytes = S};
  const double K = tree_chunks(S);
  REQUIRE(K == 3);
  CHECK(flow_time(nvls, c) == doctest::Approx((K + 1) * (a / 2 + S * (m + 1) / (m * K * (2 * B / m)))).epsilon(1e-9));
}

TEST_CASE("NVLS falls back to ring on a cluster without it, and the replay refuses it unresolved")
{
  const CollectiveTask nvls{.algorithm = CollectiveAlgorithm::nvls, .group = iota(4), .bytes = 1e6};
  const ClusterSpec c = nodes(1, 4, 1, B);
  CHECK(effective_algorithm(nvls, c) == CollectiveAlgorithm::ring);
  CollectiveTask resolved = nvls;
  resolve_collective(resolved, c);
  CHECK(resolved.algorithm == CollectiveAlgorithm::ring);
  TaskGraph g(4);
  g.add_collective(nvls);
  CHECK_THROWS_AS(replay(g, c, std::vector<double>(g.size(), 0.0)), ddlsim::SimulationError);
}

TEST_CASE("SHARP all-reduce over 2 nodes of 2 GPUs: in-node rings around one in-network reduction")
{
  const double S = 64e6, m = 2, Bn = B / 8, an = 4 * a;
  ClusterSpec c = nodes(2, 2, 2, Bn);
  c.sharp = true;
  const CollectiveTask sharp{.algorithm = CollectiveAlgorithm::sharp, .group = iota(4), .bytes = S};
  const double K = tree_chunks(S / m);
  REQUIRE(K == 8);
  const double expected = 2 * (m - 1) * (a + S / (m * B)) + (K + 1) * (an / 2 + S / (m * K * Bn));
  CHECK(flow_time(sharp, c) == doctest::Approx(expected).epsilon(1e-9));
}

TEST_CASE("NCCL's double binary tree over 2 single-GPU nodes: each tree carries half, 2(a_n + S/(2B_n))")
{
  const double S = 6e6, Bn = B / 4, an = 4 * a;
  const CollectiveTask tree{.algorithm = CollectiveAlgorithm::double_tree, .group = {0, 1}, .bytes = S};
  REQUIRE(tree_chunks(S / 2) == 1);
  CHECK(flow_time(tree, nodes(2, 1, 1, Bn)) == doctest::Approx(2 * (an + S / (2 * Bn))).epsilon(1e-9));
}

TEST_CASE("NCCL's double tree over 4 nodes of 4 GPUs: the closed form stays within 15% of the flows")
{
  // Chains of 4 inside the nodes, two trees of depth 2 over the nodes, over the rails (4 NICs), with
  // NCCL's Simple step latencies: the closed form takes every hop at its steady-state load.
  const ClusterSpec c = nodes(4, 4, 4, B / 4);
  CollectiveTask tree{.algorithm = CollectiveAlgorithm::double_tree, .group = iota(16), .bytes = 6e6};
  resolve_collective(tree, c, CollectiveProtocol::simple);
  REQUIRE(tree.algorithm == CollectiveAlgorithm::double_tree);
  REQUIRE(tree.channels == 4);
  flow_time(tree, c, 0.15);
}

TEST_CASE("a ring across leaves of a 4:1 oversubscribed fat tree is paced by the uplinks (closed form = flows)")
{
  // Four single-GPU nodes, leaves of two: uplink U = 2 B_n / 4. Ring 0-1-2-3: hops 1->2 and 3->0
  // cross the leaves, one flow per uplink and direction.
  const double S = 80e6, n = 4, Bn = B / 2, an = 4 * a;
  ClusterSpec c = nodes(4, 1, 1, Bn);
  c.topology = FabricTopology::fat_tree;
  c.nodes_per_leaf = 2;
  c.oversubscription = 4;
  const double U = 2 * Bn / 4;
  REQUIRE(c.leaf_uplink_bandwidth() == doctest::Approx(U));
  const CollectiveTask ring{.group = iota(4), .bytes = S};
  CHECK(flow_time(ring, c) == doctest::Approx(2 * (n - 1) * (an + S / (n * U))).epsilon(1e-9));
  // Without oversubscription the NICs bind again.
  c.oversubscription = 1;
  CHECK(analytic_seconds(ring, c) == doctest::Approx(2 * (n - 1) * (an + S / (n * Bn))).epsilon(1e-9));
}

TEST_CASE("a pipeline transfer timed by a measured send/recv curve of its spread takes alpha + S/bandwidth")
{
  // Made-up curves: inside a node 7 us + S / 130 GB/s, across nodes 21 us + S / 37 GB/s.
  ddlsim::calibration::CalibrationProfile profile;
  for (auto [nodes, alpha, bw] : {std::tuple{1, 7e-6, 130e9}, std::tuple{2, 21e-6, 37e9}}) {
    ddlsim::calibration::CollectiveCurve c{.collective = "send_recv", .group_size = 8, .nodes = nodes, .source = "t",
                                           .held_out_error = -1, .regimes = {}};
    c.regimes.push_back({.alpha_s = alpha, .bandwidth = bw, .min_bytes = 0, .max_bytes = 1e12, .points = 3, .r2 = 1,
                         .max_relative_error = 0});
    profile.collectives.push_back(c);
  }
  const double S = 50e6;
  const ClusterSpec c = nodes(2, 2, 2, B / 4);
  TransferTask inside{.src = 0, .dst = 1, .bytes = S}, across{.src = 1, .dst = 2, .bytes = S};
  REQUIRE(ddlsim::experiments::apply_measured_transfer(inside, c, profile));
  REQUIRE(ddlsim::experiments::apply_measured_transfer(across, c, profile));
  TaskGraph g(4);
  const TaskId a = g.add_transfer(inside), b = g.add_transfer(across);
  const ReplayResult r = replay(g, c, std::vector<double>(g.size(), 0.0));
  CHECK(r.timings[a].end_s == doctest::Approx(7e-6 + S / 130e9).epsilon(1e-9));
  CHECK(r.timings[b].end_s == doctest::Approx(21e-6 + S / 37e9).epsilon(1e-9));
}
