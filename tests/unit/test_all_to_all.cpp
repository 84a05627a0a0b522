// The all-to-all collective: its messages (count, bytes per member, per-member loads), the
// hierarchical variant's two phases, the fallbacks, the O(n) fast paths (for_each_send, the closed
// form's link loads) against the messages themselves, the closed form on one switch, and how NCCL's
// tuner resolves it (protocol, latencies, PXN's rails).
#include "sim/Collectives.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

using namespace ddlsim::sim;

namespace {
struct Totals {
  std::map<int, double> sent, received, sent_inter;
};

Totals totals(const std::vector<Message>& messages, int gpus_per_node)
{
  Totals t;
  for (const auto& m : messages)
    if (m.src >= 0) {
      t.sent[m.src] += m.bytes;
      t.received[m.dst] += m.bytes;
      if (m.src / gpus_per_node != m.dst / gpus_per_node)
        t.sent_inter[m.src] += m.bytes;
    }
  return t;
}

ClusterSpec cluster(int nodes, int gpus_per_node, int nics)
{
  ClusterSpec c;
  c.name = "test";
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.gpu_memory = 1e12;
  c.intra_node = {.bandwidth = 400e9, .latency = 2e-6};
  c.nics_per_node = nics;
  c.nic = {.bandwidth = 50e9, .latency = 3e-6};
  c.fabric_latency = 1e-6;
  return c;
}

// The busiest link (a GPU's NVLink link or a NIC, one direction) of a set of messages, in seconds
// of its bandwidth: what the closed form's transfer part is made of, counted message by message.
double busiest_link_seconds(const std::vector<Message>& messages, const ClusterSpec& c)
{
  std::map<std::pair<int, int>, double> link;  // (GPU or -1 - NIC key, direction) -> bytes
  for (const auto& m : messages) {
    if (m.src < 0)
      continue;
    if (c.node_of(m.src) == c.node_of(m.dst)) {
      link[{m.src, 0}] += m.bytes / c.intra_node.bandwidth;
      link[{m.dst, 1}] += m.bytes / c.intra_node.bandwidth;
    } else {
      auto nic = [&](int gpu) { return -1 - (c.node_of(gpu) * c.nics_per_node + (gpu % c.gpus_per_node) % c.nics_per_node); };
      link[{nic(m.src), 0}] += m.bytes / c.nic.bandwidth;
      link[{nic(m.dst), 1}] += m.bytes / c.nic.bandwidth;
    }
  }
  double most = 0;
  for (const auto& [key, seconds] : link)
    most = std::max(most, seconds);
  return most;
}
}  // namespace

TEST_CASE("direct all-to-all: n(n-1) independent messages of S/n, every member sends and receives (n-1)/n S")
{
  const double S = 8000;
  const CollectiveTask c{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::direct,
                         .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S};
  const auto messages = decompose(c, 8);
  CHECK(messages.size() == 8 * 7);
  CHECK(message_count(c, 8) == 8 * 7);
  for (const auto& m : messages) {
    CHECK(m.after.empty());
    CHECK(m.src != m.dst);
    CHECK(m.bytes == doctest::Approx(S / 8));
  }
  const Totals t = totals(messages, 8);
  for (int d = 0; d < 8; ++d) {
    CHECK(t.sent.at(d) == doctest::Approx(7.0 / 8 * S));
    CHECK(t.received.at(d) == doctest::Approx(7.0 / 8 * S));
  }
  // Every ordered pair exactly once.
  std::map<std::pair<int, int>, int> pairs;
  for (const auto& m : messages)
    ++pairs[{m.src, m.dst}];
  CHECK(pairs.size() == 56);
  CHECK(decompose({.kind = CollectiveKind::all_to_all, .group = {3}, .bytes = S}, 8).empty());
}

TEST_CASE("all-to-all member loads: a dispatch weights what each member receives, a combine what it sends")
{
  const double S = 4000;
  CollectiveTask c{.kind = CollectiveKind::all_to_all, .group = {0, 1, 2, 3}, .bytes = S};
  c.member_load = {2.0, 2.0 / 3, 2.0 / 3, 2.0 / 3};  // the busiest member twice the mean, the total kept
  Totals t = totals(decompose(c, 4), 4);
  CHECK(t.received.at(0) == doctest::Approx(2.0 * 3 / 4 * S));
  CHECK(t.received.at(1) == doctest::Approx(2.0 / 3 * 3 / 4 * S));
  CHECK(t.sent.at(0) == doctest::Approx(3 * 2.0 / 3 * S / 4));  // to three members of load 2/3
  c.load_at_source = true;
  t = totals(decompose(c, 4), 4);
  CHECK(t.sent.at(0) == doctest::Approx(2.0 * 3 / 4 * S));
  CHECK(t.received.at(0) == doctest::Approx(3 * 2.0 / 3 * S / 4));
  double total = 0;
  for (const auto& [d, bytes] : t.sent)
    total += bytes;
  CHECK(total == doctest::Approx(4 * 3.0 / 4 * S));  // the same bytes as uniform, moved elsewhere
}

TEST_CASE("hierarchical all-to-all: a phase inside each node, then one exchange per local rank across nodes")
{
  const double S = 8000;
  const CollectiveTask c{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::hierarchical,
                         .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S};
  REQUIRE(effective_algorithm(c, 4) == CollectiveAlgorithm::hierarchical);
  const auto messages = decompose(c, 4);
  const std::uint64_t nodes = 2, m = 4;
  CHECK(messages.size() == nodes * m * (m - 1) + m * nodes * (nodes - 1));
  CHECK(message_count(c, 4) == messages.size());
  std::size_t intra = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& msg = messages[i];
    for (auto before : msg.after)
      CHECK(before < i);
    if (msg.src / 4 == msg.dst / 4) {
      ++intra;
      CHECK(msg.after.empty());
      CHECK(msg.bytes == doctest::Approx(nodes * S / 8));  // the blocks for local rank j' on both nodes
    } else {
      CHECK(msg.src % 4 == msg.dst % 4);                  // same local rank, other node
      CHECK(msg.after.size() == m - 1);                   // after its node-mates' phase-1 blocks
      CHECK(msg.bytes == doctest::Approx(m * S / 8));     // m times direct's inter-node message
    }
  }
  CHECK(intra == nodes * m * (m - 1));
  // The same inter-node bytes as the direct algorithm, (N-1)/N S per member, in m times fewer messages.
  const Totals t = totals(messages, 4);
  CollectiveTask direct = c;
  direct.algorithm = CollectiveAlgorithm::direct;
  const Totals d = totals(decompose(direct, 4), 4);
  for (int g = 0; g < 8; ++g) {
    CHECK(t.sent_inter.at(g) == doctest::Approx(S / 2));
    CHECK(d.sent_inter.at(g) == doctest::Approx(S / 2));
  }
}

TEST_CASE("all-to-all fallbacks: hierarchical needs even nodes of several members; direct means ring elsewhere")
{
  CollectiveTask c{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::hierarchical,
                   .group = {0, 1, 2, 3}, .bytes = 1e6};
  CHECK(effective_algorithm(c, 8) == CollectiveAlgorithm::direct);  // one node
  c.group = {0, 1, 2, 8};
  CHECK(effective_algorithm(c, 8) == CollectiveAlgorithm::direct);  // uneven
  c.group = {0, 8, 16};
  CHECK(effective_algorithm(c, 8) == CollectiveAlgorithm::direct);  // one member per node
  c.algorithm = CollectiveAlgorithm::ring;
  c.group = {0, 1, 8, 9};
  CHECK(effective_algorithm(c, 8) == CollectiveAlgorithm::direct);  // ring and tree do not apply
  CHECK(effective_algorithm({.algorithm = CollectiveAlgorithm::direct, .group = {0, 1, 2}}, 8) ==
        CollectiveAlgorithm::ring);
  CHECK(decompose({.algorithm = CollectiveAlgorithm::direct, .group = {0, 1, 2}, .bytes = 30}, 8).size() == 2 * 2 * 3);
}

TEST_CASE("all-to-all fast paths equal the messages: per-member bytes sent and the closed form's busiest link")
{
  std::mt19937 random(7);
  std::uniform_real_distribution<double> load(0.2, 3.0);
  const ClusterSpec c = cluster(4, 4, 2);  // two GPUs share each NIC
  const std::vector<std::vector<int>> groups = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                                {0, 1, 4, 5, 8, 9},  // 3 nodes of 2
                                                {1, 2, 3, 6, 12},    // uneven
                                                {2, 3, 0, 1}};       // one node, not in order
  for (const auto& group : groups)
    for (auto algorithm : {CollectiveAlgorithm::direct, CollectiveAlgorithm::hierarchical})
      for (bool at_source : {false, true}) {
        CollectiveTask a2a{.kind = CollectiveKind::all_to_all, .algorithm = algorithm, .group = group, .bytes = 1e8};
        for (std::size_t i = 0; i < group.size(); ++i)
          a2a.member_load.push_back(load(random));
        a2a.load_at_source = at_source;
        const auto messages = decompose(a2a, c.gpus_per_node);
        const Totals t = totals(messages, c.gpus_per_node);
        std::map<int, double> sent, inter;
        for_each_send(a2a, c.gpus_per_node, [&](int src, int dst, double bytes) {
          sent[src] += bytes;
          if (c.node_of(src) != c.node_of(dst))
            inter[src] += bytes;
        });
        for (int g : group) {
          CHECK(sent[g] == doctest::Approx(t.sent.count(g) ? t.sent.at(g) : 0.0));
          CHECK(inter[g] == doctest::Approx(t.sent_inter.count(g) ? t.sent_inter.at(g) : 0.0));
        }
        // The closed form's bandwidth part: the busiest link of each phase, counted from the messages.
        const AnalyticParts parts = analytic_parts(a2a, c);
        if (effective_algorithm(a2a, c.gpus_per_node) == CollectiveAlgorithm::hierarchical) {
          std::vector<Message> one, two;
          for (const auto& m : messages)
            (c.node_of(m.src) == c.node_of(m.dst) ? one : two).push_back(m);
          CHECK(parts.transfer_s == doctest::Approx(busiest_link_seconds(one, c) + busiest_link_seconds(two, c)));
          CHECK(parts.hops == 2);
        } else {
          // Direct: the link class with the longest time (latency + bytes / bandwidth) binds.
          std::vector<Message> local, remote;
          for (const auto& m : messages)
            (c.node_of(m.src) == c.node_of(m.dst) ? local : remote).push_back(m);
          const double t_local = local.empty() ? 0 : c.intra_node.latency + busiest_link_seconds(local, c);
          const double t_remote = remote.empty() ? 0 : c.nic.latency + c.fabric_latency + busiest_link_seconds(remote, c);
          CHECK(parts.latency_s + parts.transfer_s == doctest::Approx(std::max(t_local, t_remote)));
          CHECK(parts.hops == 1);
        }
      }
}

TEST_CASE("all-to-all closed forms: a + (n-1) S/(nB) on one switch; the NICs across nodes")
{
  const double S = 64e6;
  const ClusterSpec one = cluster(1, 8, 8);
  const CollectiveTask c{.kind = CollectiveKind::all_to_all, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = S};
  CHECK(analytic_seconds(c, one) == doctest::Approx(2e-6 + 7.0 / 8 * S / 400e9).epsilon(1e-12));
  // 2 nodes of 4, a NIC per GPU: each NIC carries the (N-1) m S / n bytes its GPU sends off the node.
  const ClusterSpec two = cluster(2, 4, 4);
  const double inter = 3e-6 + 1e-6 + 4 * S / 8 / 50e9, intra = 2e-6 + 3 * S / 8 / 400e9;
  CHECK(analytic_seconds(c, two) == doctest::Approx(std::max(inter, intra)).epsilon(1e-12));
  // Hierarchical: (m-1) S/m inside the node, then (N-1) S/N per NIC.
  CollectiveTask h = c;
  h.algorithm = CollectiveAlgorithm::hierarchical;
  CHECK(analytic_seconds(h, two) ==
        doctest::Approx(2e-6 + 3.0 / 4 * S / 400e9 + 4e-6 + 1.0 / 2 * S / 50e9).epsilon(1e-12));
  // A busy member (twice the mean) receives twice the bytes: the bandwidth term doubles on one switch.
  CollectiveTask busy = c;
  busy.member_load = {2, 6.0 / 7, 6.0 / 7, 6.0 / 7, 6.0 / 7, 6.0 / 7, 6.0 / 7, 6.0 / 7};
  CHECK(analytic_parts(busy, one).transfer_s == doctest::Approx(2 * 7.0 / 8 * S / 400e9));
}

// NCCL's p2p path (src/enqueue.cc, addP2pToPlan): an all-to-all is a grouped send/recv, LL or Simple
// (never LL128), each message one step of the ring column's latency of tuning.cc, the exchange the
// ring's fixed latency; across NVLink nodes PXN sends through the destination's rail.
TEST_CASE("a resolved all-to-all: LL for small exchanges, Simple for large, never LL128; auto is direct")
{
  ClusterSpec c = cluster(2, 4, 4);
  CollectiveTask a2a{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::automatic,
                     .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = 4096};
  CollectiveTask small = a2a;
  resolve_collective(small, c);
  CHECK(small.algorithm == CollectiveAlgorithm::direct);
  CHECK(small.protocol == CollectiveProtocol::ll);
  CHECK(small.bandwidth_factor == 0.5);                                 // LL: 4 data bytes in 8
  CHECK(small.base_latency_s == doctest::Approx(6.6e-6));               // the ring's LL fixed latency
  CHECK(small.intra_step_latency_s == doctest::Approx(0.6e-6));         // NVLink, LL
  CHECK(small.inter_step_latency_s == doctest::Approx(2.7e-6 + 1e-6));  // network, LL, plus the fabric
  CHECK(small.channels == 4);                                           // PXN over the node's 4 rails
  CollectiveTask large = a2a;
  large.bytes = 1e9;
  resolve_collective(large, c);
  CHECK(large.algorithm == CollectiveAlgorithm::direct);
  CHECK(large.protocol == CollectiveProtocol::simple);
  CHECK(large.bandwidth_factor == 1);
  CHECK(large.base_latency_s == doctest::Approx(8.4e-6));
  CHECK(large.inter_step_latency_s == doctest::Approx(14e-6 + 1e-6));
  // Even loads: the direct exchange loads every NIC as the hierarchical one's second phase does, so
  // the hierarchical one (an NVLink phase more, two launches) is slower and auto never takes it.
  CollectiveTask forced = a2a;
  forced.bytes = 1e9;
  forced.algorithm = CollectiveAlgorithm::hierarchical;
  resolve_collective(forced, c);
  CHECK(forced.algorithm == CollectiveAlgorithm::hierarchical);
  CHECK(forced.base_latency_s == doctest::Approx(2 * 8.4e-6));
  CHECK(forced.channels == 1);
  CHECK(analytic_seconds(forced, c) > analytic_seconds(large, c));
  // A forced LL128 (NCCL_PROTO) does not exist on the p2p path: the exchange keeps its own protocol.
  CollectiveTask ll128 = a2a;
  ll128.bytes = 1e9;
  resolve_collective(ll128, c, CollectiveProtocol::ll128);
  CHECK(ll128.protocol == CollectiveProtocol::simple);
  // Inside one node there is no network: no PXN; on PCIe nodes NCCL has no PXN either.
  CollectiveTask one{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::automatic,
                     .group = {0, 1, 2, 3}, .bytes = 1e9};
  resolve_collective(one, c);
  CHECK(one.channels == 1);
  c.intra_link = IntraLink::pcie;
  CollectiveTask pcie = a2a;
  resolve_collective(pcie, c);
  CHECK(pcie.channels == 1);
  CHECK(pcie.intra_step_latency_s == doctest::Approx(1.0e-6));  // PCI, LL
}

TEST_CASE("PXN: a message to another node leaves from the sender's node-mate on the destination's rail")
{
  std::mt19937 random(11);
  std::uniform_real_distribution<double> load(0.2, 3.0);
  const ClusterSpec c = cluster(3, 4, 2);  // two GPUs share each NIC
  for (bool at_source : {false, true}) {
    CollectiveTask a2a{.kind = CollectiveKind::all_to_all, .algorithm = CollectiveAlgorithm::automatic,
                       .group = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, .bytes = 1e8};
    for (std::size_t i = 0; i < a2a.group.size(); ++i)
      a2a.member_load.push_back(load(random));
    a2a.load_at_source = at_source;
    resolve_collective(a2a, c);
    REQUIRE(a2a.algorithm == CollectiveAlgorithm::direct);
    REQUIRE(a2a.channels == 2);
    CollectiveTask own = a2a;  // the same messages, each from its own sender
    own.channels = 1;
    const auto messages = decompose(a2a, c.gpus_per_node), logical = decompose(own, c.gpus_per_node);
    REQUIRE(messages.size() == logical.size());
    for (std::size_t k = 0; k < messages.size(); ++k) {
      CHECK(messages[k].dst == logical[k].dst);
      CHECK(messages[k].bytes == logical[k].bytes);
      if (c.node_of(logical[k].src) == c.node_of(logical[k].dst))
        CHECK(messages[k].src == logical[k].src);
      else  // the sender's node, the destination's local rank (so its rail)
        CHECK(messages[k].src == c.node_of(logical[k].src) * 4 + logical[k].dst % 4);
    }
    // The closed form's busiest link, counted from the messages as sent (NICs of the relaying GPUs).
    std::vector<Message> local, remote;
    for (const auto& m : messages)
      (c.node_of(m.src) == c.node_of(m.dst) ? local : remote).push_back(m);
    const AnalyticParts parts = analytic_parts(a2a, c);
    const double t_local = a2a.intra_step_latency_s + busiest_link_seconds(local, c) / a2a.bandwidth_factor;
    const double t_remote = a2a.inter_step_latency_s + busiest_link_seconds(remote, c) / a2a.bandwidth_factor;
    CHECK(parts.latency_s + parts.transfer_s / a2a.bandwidth_factor == doctest::Approx(std::max(t_local, t_remote)));
    // Bytes sent per member stay the member's own blocks (comm_bytes_per_gpu, inter_node_bytes_per_gpu).
    std::map<int, double> sent, expected;
    for_each_send(a2a, c.gpus_per_node, [&](int src, int, double bytes) { sent[src] += bytes; });
    for (const auto& m : logical)
      expected[m.src] += m.bytes;
    for (int g : a2a.group)
      CHECK(sent[g] == doctest::Approx(expected[g]));
  }
}
