// Collective decompositions: message counts, the bytes each member sends, dependencies that point
// backwards, and the fallbacks to ring.
#include "sim/Collectives.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace ddlsim::sim;

namespace {
std::map<int, double> sent(const std::vector<Message>& messages)
{
  std::map<int, double> bytes;
  for (const auto& m : messages)
    if (m.src >= 0)
      bytes[m.src] += m.bytes;
  return bytes;
}

bool waits_point_backwards(const std::vector<Message>& messages)
{
  for (std::size_t i = 0; i < messages.size(); ++i)
    for (auto before : messages[i].after)
      if (before >= i)
        return false;
  return true;
}
}  // namespace

TEST_CASE("ring collectives: every member sends (n-1)/n of the buffer per pass")
{
  const double S = 1200;
  const CollectiveTask ar{.group = {3, 5, 7, 9}, .bytes = S};
  const auto messages = decompose(ar, 8);
  CHECK(messages.size() == 2 * 3 * 4);
  CHECK(waits_point_backwards(messages));
  for (const auto& [member, bytes] : sent(messages))
    CHECK(bytes == doctest::Approx(2.0 * 3 / 4 * S));
  CollectiveTask ag = ar;
  ag.kind = CollectiveKind::all_gather;
  CHECK(decompose(ag, 8).size() == 3 * 4);
  for (const auto& [member, bytes] : sent(decompose(ag, 8)))
    CHECK(bytes == doctest::Approx(3.0 / 4 * S));
  CHECK(decompose({.group = {1}, .bytes = S}, 8).empty());
}

TEST_CASE("tree all-reduce: each member sends its buffer up once and down once per child")
{
  const double S = 10.0 * 1024 * 1024;  // 3 chunks
  const CollectiveTask t{.algorithm = CollectiveAlgorithm::tree, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S};
  REQUIRE(tree_chunks(S) == 3);
  const auto messages = decompose(t, 8);
  CHECK(messages.size() == 2 * 7 * 3 + 1);  // up and down per non-root member and chunk, one join
  CHECK(waits_point_backwards(messages));
  auto bytes = sent(messages);
  // Heap order: 0 has children 1, 2; 1 has 3, 4; 2 has 5, 6; 3 has 7.
  CHECK(bytes[0] == doctest::Approx(2 * S));      // root: down to two children
  CHECK(bytes[3] == doctest::Approx(S + S));      // up once, down to one child
  CHECK(bytes[7] == doctest::Approx(S));          // leaf: up only
  CHECK(tree_chunks(1) == 1);
  CHECK(tree_chunks(1e12) == 16);
}

TEST_CASE("hierarchical all-reduce: intra-node shards, then across nodes, then back")
{
  const double S = 8000;
  const CollectiveTask h{.algorithm = CollectiveAlgorithm::hierarchical, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S};
  REQUIRE(effective_algorithm(h, 4) == CollectiveAlgorithm::hierarchical);
  const auto messages = decompose(h, 4);
  CHECK(waits_point_backwards(messages));
  // 2 nodes x 4 GPUs: reduce-scatter 2 x 3 x 4, all-reduce 4 rings x 2 steps x 2, all-gather 2 x 3 x 4, 2 joins.
  CHECK(messages.size() == 24 + 16 + 24 + 2);
  for (const auto& [member, bytes] : sent(messages))
    CHECK(bytes == doctest::Approx(2 * 3.0 / 4 * S + 2 * 1.0 / 2 * (S / 4)));
  // Fallbacks: one node, uneven nodes, or not an all-reduce.
  CHECK(effective_algorithm(h, 8) == CollectiveAlgorithm::ring);
  CollectiveTask uneven = h;
  uneven.group = {0, 1, 2, 4};
  CHECK(effective_algorithm(uneven, 4) == CollectiveAlgorithm::ring);
  CollectiveTask gather = h;
  gather.kind = CollectiveKind::all_gather;
  CHECK(effective_algorithm(gather, 4) == CollectiveAlgorithm::ring);
  CHECK(effective_algorithm({.algorithm = CollectiveAlgorithm::tree, .group = {0, 1}}, 4) == CollectiveAlgorithm::ring);
}

TEST_CASE("analytic times are the closed forms")
{
  ClusterSpec c;
  c.nodes = 2;
  c.gpus_per_node = 4;
  c.intra_node = {.bandwidth = 100e9, .latency = 1e-6};
  c.nic = {.bandwidth = 25e9, .latency = 2e-6};
  c.fabric_latency = 1e-6;
  const double S = 1e8;
  CHECK(analytic_seconds({.group = {0, 1, 2, 3}, .bytes = S}, c) == doctest::Approx(6 * (1e-6 + S / 4 / 100e9)));
  // A ring across nodes is paced by its slowest hop (NIC bandwidth, inter-node latency).
  CHECK(analytic_seconds({.group = {0, 1, 4, 5}, .bytes = S}, c) == doctest::Approx(6 * (3e-6 + S / 4 / 25e9)));
  CHECK(analytic_seconds({.kind = CollectiveKind::reduce_scatter, .group = {0, 1, 2, 3}, .bytes = S}, c) ==
        doctest::Approx(3 * (1e-6 + S / 4 / 100e9)));
  // Hierarchical: the m = 4 rings across the nodes share the node's one NIC (4 flows on it)...
  CHECK(analytic_seconds({.algorithm = CollectiveAlgorithm::hierarchical, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S},
                         c) == doctest::Approx(6 * (1e-6 + S / 4 / 100e9) + 2 * (3e-6 + 4 * S / 8 / 25e9)));
  // ... or each run on its own NIC.
  c.nics_per_node = 4;
  CHECK(analytic_seconds({.algorithm = CollectiveAlgorithm::hierarchical, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S},
                         c) == doctest::Approx(6 * (1e-6 + S / 4 / 100e9) + 2 * (3e-6 + S / 8 / 25e9)));
}

TEST_CASE("message_count equals the messages decompose builds, for every algorithm and group shape")
{
  // Groups: contiguous, strided (a dp group with tp = 2), spread over nodes evenly and unevenly.
  const std::vector<std::vector<int>> groups = {
      {0, 1}, {0, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 2, 4, 6, 8, 10, 12, 14}, {0, 1, 8, 9, 16, 17},
      {0, 1, 2, 8}, {3, 11, 19, 27, 35}};
  int checked = 0;
  for (const auto& group : groups)
    for (auto kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                      CollectiveKind::broadcast})
      for (auto algorithm : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::hierarchical,
                             CollectiveAlgorithm::double_tree, CollectiveAlgorithm::nvls, CollectiveAlgorithm::sharp})
        for (int channels : {1, 4})
          for (double bytes : {1e3, 3e7, 1e9}) {
            const CollectiveTask c{.kind = kind, .algorithm = algorithm, .group = group, .bytes = bytes, .channels = channels};
            std::uint64_t messages = 0;
            const auto built = decompose(c, 8);
            for (const Message& m : built)
              messages += m.src != -1 || m.dst != -1 ? 1 : 0;  // joins carry nothing; switches' sends are Comms
            CAPTURE(group.size());
            CAPTURE(static_cast<int>(algorithm));
            CHECK(message_count(c, 8) == messages);
            CHECK(waits_point_backwards(built));
            ++checked;
          }
  CHECK(checked == 7 * 4 * 6 * 2 * 3);
}

// NCCL's tuner (sim/Collectives.hpp: resolve_collective) against NCCL's own numbers
// (src/graph/tuning.cc): ring latency = base + (nsteps - nInter) x intra + nInter x (net + fabric),
// tree latency = base + 2 ((ppn - 1) x intra + log2(nodes) x (net + fabric)); and the choices
// nccl-tests #309 reports on one 8-GPU H100 node.
namespace {
CollectiveTask all_reduce(int n, double bytes, CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic)
{
  CollectiveTask c{.algorithm = algorithm, .group = {}, .bytes = bytes};
  for (int i = 0; i < n; ++i)
    c.group.push_back(i);
  return c;
}
}  // namespace

TEST_CASE("the tuner's latencies are NCCL's: ring and tree LL over two DGX H100 nodes")
{
  const ClusterSpec c = load_cluster("dgx-h100x2");  // fabric latency 1 us
  CollectiveTask ring = all_reduce(16, 8, CollectiveAlgorithm::ring);
  resolve_collective(ring, c, CollectiveProtocol::ll);
  CHECK(ring.protocol == CollectiveProtocol::ll);
  CHECK(ring.channels == 8);  // one per NIC
  // 6.6 + (30 - 2) x max(0.6, 1.0 network overhead) + 2 x (2.7 + 1.0) us, and 8 bytes at LL's bandwidth.
  CHECK(analytic_seconds(ring, c) == doctest::Approx(42.0e-6).epsilon(1e-3));
  CollectiveTask tree = all_reduce(16, 8, CollectiveAlgorithm::double_tree);
  resolve_collective(tree, c, CollectiveProtocol::ll);
  // 6.8 + 2 ((8 - 1) x 0.6 + 1 x (5.0 + 1.0)) us.
  CHECK(analytic_seconds(tree, c) == doctest::Approx(27.2e-6).epsilon(1e-3));
  // auto takes the faster: the tree.
  CollectiveTask any = all_reduce(16, 8);
  resolve_collective(any, c);
  CHECK(any.algorithm == CollectiveAlgorithm::double_tree);
  CHECK(any.protocol == CollectiveProtocol::ll);
}

TEST_CASE("the tuner on one DGX H100: ring/LL up to 1 MiB, NVLS/Simple from 2 MiB (nccl-tests #309)")
{
  const ClusterSpec c = load_cluster("dgx-h100");
  for (double bytes : {8.0, 65536.0, 1048576.0}) {
    CollectiveTask t = all_reduce(8, bytes);
    resolve_collective(t, c);
    CHECK(t.algorithm == CollectiveAlgorithm::ring);
    CHECK(t.protocol == CollectiveProtocol::ll);
  }
  for (double bytes : {2097152.0, 1073741824.0}) {
    CollectiveTask t = all_reduce(8, bytes);
    resolve_collective(t, c);
    CHECK(t.algorithm == CollectiveAlgorithm::nvls);
    CHECK(t.protocol == CollectiveProtocol::simple);
  }
  // LL's bus bandwidth is capped at NCCL's 141 GB/s on Hopper: a share of 141 / 450, below LL's 0.5.
  CollectiveTask ll = all_reduce(8, 1e9, CollectiveAlgorithm::ring);
  resolve_collective(ll, c, CollectiveProtocol::ll);
  CHECK(ll.bandwidth_factor == doctest::Approx(141.0 / 450.0).epsilon(1e-9));
  // A broadcast has only the ring; all-gather may take NVLS.
  CollectiveTask b{.kind = CollectiveKind::broadcast, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = 1e9};
  resolve_collective(b, c);
  CHECK(b.algorithm == CollectiveAlgorithm::ring);
}

TEST_CASE("the tuner: a tree for 8 bytes over 1,024 GPUs, no LL128 over PCIe, nothing of NCCL between CPU threads")
{
  CollectiveTask big = all_reduce(1024, 8);
  resolve_collective(big, load_cluster("dgx-h100x128"));
  CHECK(big.algorithm == CollectiveAlgorithm::double_tree);
  CHECK(analytic_seconds(big, load_cluster("dgx-h100x128")) < 200e-6);
  for (double bytes : {8.0, 1e5, 1e7, 1e9}) {
    CollectiveTask t = all_reduce(8, bytes);
    resolve_collective(t, load_cluster("pcie-8gpu"));
    CHECK(t.protocol != CollectiveProtocol::ll128);
  }
  const ClusterSpec host = load_cluster("host-2core");
  CollectiveTask t = all_reduce(2, 1e6);
  resolve_collective(t, host);
  CHECK(t.algorithm == CollectiveAlgorithm::ring);
  CHECK(t.base_latency_s == 0);
  CHECK(analytic_seconds(t, host) == doctest::Approx(2 * (5e-6 + 1e6 / 2 / 10e9)));  // the links' ring
}

TEST_CASE("collective_hash: equal collectives hash alike, and what the tuner reads tells them apart")
{
  CollectiveTask a{.kind = CollectiveKind::all_reduce, .group = {0, 1, 2, 3}, .bytes = 1 << 20};
  CollectiveTask b = a;
  b.stage = 5;  // where it sits in the iteration is not what the tuner reads
  CHECK(collective_hash(a) == collective_hash(b));
  CollectiveTask zero = a, negative_zero = a;
  zero.bytes = 0.0;
  negative_zero.bytes = -0.0;  // equal values: equal hashes, or a cache keyed on them would miss
  CHECK(collective_hash(zero) == collective_hash(negative_zero));
  CollectiveTask other_group = a, other_bytes = a, other_kind = a;
  other_group.group = {0, 1, 3, 2};
  other_bytes.bytes = 2 << 20;
  other_kind.kind = CollectiveKind::all_gather;
  CHECK(collective_hash(other_group) != collective_hash(a));
  CHECK(collective_hash(other_bytes) != collective_hash(a));
  CHECK(collective_hash(other_kind) != collective_hash(a));
}

TEST_CASE("for_each_send: a ring over the rails crosses nodes at every member's NIC, not at one GPU")
{
  // 4 nodes x 2 members (GPUs 0, 4 | 8, 12 | ...), 2 channels (NICs 0 and 4): each member sends its
  // ring hop's bytes, half of them to its peer on the next node.
  const double S = 8000;
  CollectiveTask ring{.kind = CollectiveKind::all_reduce, .algorithm = CollectiveAlgorithm::ring,
                      .group = {0, 4, 8, 12, 16, 20, 24, 28}, .bytes = S};
  ring.channels = 2;
  const double per_member = 2.0 * 7 / 8 * S;
  std::map<int, double> all, between;
  for_each_send(ring, 8, [&](int src, int dst, double bytes) {
    all[src] += bytes;
    between[src] += src / 8 != dst / 8 ? bytes : 0.0;
  });
  REQUIRE(all.size() == 8);
  for (int d : ring.group) {
    CHECK(all[d] == doctest::Approx(per_member));
    CHECK(between[d] == doctest::Approx(per_member / 2));
  }
  // One channel (one NIC in use per node): the ring crosses at the last member of each node.
  ring.channels = 1;
  between.clear();
  for_each_send(ring, 8, [&](int src, int dst, double bytes) { between[src] += src / 8 != dst / 8 ? bytes : 0.0; });
  CHECK(between[0] == 0);
  CHECK(between[4] == doctest::Approx(per_member));
  // A ring that visits its nodes more than once (0, 8, 4, 12: every hop crosses): each hop over the
  // rails still leaves from both members of its node, and no byte is lost.
  CollectiveTask zigzag{.kind = CollectiveKind::all_reduce, .algorithm = CollectiveAlgorithm::ring,
                        .group = {0, 8, 4, 12}, .bytes = S};
  zigzag.channels = 2;
  std::map<int, double> zig;
  double zig_total = 0;
  for_each_send(zigzag, 8, [&](int src, int dst, double bytes) {
    CHECK(src / 8 != dst / 8);
    zig[src] += bytes;
    zig_total += bytes;
  });
  for (int d : zigzag.group)
    CHECK(zig[d] == doctest::Approx(2.0 * 3 / 4 * S));
  CHECK(zig_total == doctest::Approx(4 * 2.0 * 3 / 4 * S));
  // A double tree over the rails: every hop between nodes leaves from each member of its node alike.
  CollectiveTask tree{.kind = CollectiveKind::all_reduce, .algorithm = CollectiveAlgorithm::double_tree,
                      .group = ring.group, .bytes = S};
  tree.channels = 2;
  between.clear();
  double total = 0;
  for_each_send(tree, 8, [&](int src, int dst, double bytes) {
    if (src / 8 != dst / 8) {
      between[src] += bytes;
      total += bytes;
    }
  });
  for (int node = 0; node < 4; ++node)
    CHECK(between[8 * node] == doctest::Approx(between[8 * node + 4]));
  double decomposed = 0;
  for (const Message& m : decompose(tree, 8))
    if (m.src >= 0 && m.src / 8 != m.dst / 8)
      decomposed += m.bytes;
  CHECK(total == doctest::Approx(decomposed));
}
