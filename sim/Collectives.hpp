// Collectives as point-to-point messages (flow fidelity) or as closed forms (analytic fidelity), with
// NCCL's algorithms, protocols and tuner (docs/collectives.md).
//
// decompose() turns a collective into a small DAG of messages: each message goes from one member
// to another (or to a switch that reduces in the network) and may start only after the messages it
// waits for have arrived. The replay sends them as SimGrid Comms, so a collective's steps contend on
// links with all other traffic. S is the buffer, n the members, m of them on each of N nodes:
//   ring          all-reduce 2(n-1) steps of S/n per member (member i sends step k to i+1 after
//                 sending step k-1 and receiving step k-1), all-gather and reduce-scatter n-1 steps,
//                 broadcast a pipelined chain from the first member in K chunks. NCCL runs one ring
//                 per channel with the channels spread over every NIC a node's members use (its
//                 rails); with c.channels = C > 1 the ring's hops between nodes stand for those C
//                 channels: one flow through the C NICs together (Message::rails), which alone on
//                 the network is exactly C rings of S/C. Inside one node the C rotated rings are the
//                 same ring (identical links), so one ring is exact there
//   tree          binary tree over the members in order (member i's parent is (i-1)/2): the buffer
//                 goes up in K chunks (pipelined: a member forwards chunk c once it has chunk c from
//                 both children; siblings send each chunk together), then, once the root has it
//                 all, down again in K chunks; K = ceil(S / 4 MiB), at most 16
//   hierarchical  ring reduce-scatter inside each node, m ring all-reduces of S/m across the nodes
//                 (one per local rank, on different NICs), ring all-gather inside each node; each
//                 phase starts when the previous one has finished
//   double_tree   NCCL's tree: in each node a chain of its members, whose head joins one of two
//                 complementary binary trees over the nodes (each node is interior in at most one);
//                 2C tree channels (both trees on each of the C NICs), S/(2C) each, reduced up in
//                 K chunks and broadcast down in K chunks
//   nvls          NVLink SHARP inside one node: in K chunks, every member sends its data into the
//                 node's NVSwitch, which reduces it and multicasts the result back ((m+1)/m of a
//                 chunk each way, the owner's share included); needs intra_node.nvls
//   sharp         in-network reduction across nodes (NCCL CollNet): ring reduce-scatter inside each
//                 node, every member's S/m shard into the fabric's switches and back reduced (K
//                 chunks), ring all-gather inside each node; needs fabric.sharp
//   all-to-all    member i sends the j-th of its n blocks (S/n each, times the load of j, or of i
//                 for a combine: CollectiveTask::member_load) to member j:
//     direct      every message at once, no waits (NCCL's grouped send/recv): n (n-1) messages.
//                 With c.channels > 1 (NCCL's PXN, set by resolve_collective across NVLink nodes)
//                 a message to another node leaves through the NIC on the destination's rail: it is
//                 sent by the sender's node-mate of the destination's local rank (NCCL's NVLink hop
//                 there is not simulated)
//     hierarchical  members spread evenly over N nodes of m: inside each node, member j sends
//                 member j' every block it holds for local rank j' of any node (N blocks); then
//                 member j' of node a sends member j' of node b the m blocks of node a's members for
//                 it, once its own phase-1 blocks have arrived (Tutel's 2DH, DeepSpeed's
//                 hierarchical all-to-all): N m (m-1) + m N (N-1) messages
// Algorithms that do not apply (tree, double_tree, sharp for an all-gather; hierarchical or sharp
// over one node or uneven nodes; nvls across nodes or without NVLS) fall back to ring; an
// all-to-all is direct unless hierarchical applies; `direct` for the other kinds is ring.
//
// analytic_seconds() is the same algorithm's time, uncontended, from the links each step loads
// (a = a step's latency, B = the bottleneck bandwidth of its links given every channel's load):
//   ring all-reduce   2(n-1) (a + S/(nB))          all-gather, reduce-scatter  (n-1) (a + S/(nB))
//   ring broadcast    (n-2+K) (a + S/(KB))
//   tree all-reduce   exact recursion of the pipelined tree; 2 (D + K - 1) (a + 2 S/(K B)) for a
//                     full binary tree of depth D
//   hierarchical      2 (m-1)(a_i + S/(m B_i)) + 2 (N-1)(a_n + S/(m N B_n))
//   double_tree       2 (path + (K-1) max hop) over the chain and the deeper tree (steady-state loads)
//   nvls              (K+1) (S (m+1) / (m K min(B, B_nvls/m)))
//   sharp             2 (m-1)(a_i + S/(m B_i)) + (K+1) S / (m K B_nic/g)  (g members per NIC)
//   direct a2a        the link class that finishes last: max(a_i + L_i / B_i, a_n + L_n / B_n), L_i the
//                     most bytes one GPU sends or receives inside its node, L_n the most one NIC (or,
//                     on a fat tree, one leaf's uplinks) carries each way (uniform, m members on each
//                     of N nodes, a NIC each: L_i = (m-1) S/n, L_n = (N-1) m S/n; one switch:
//                     a + (n-1) S / (n B))
//   hierarchical a2a  a_i + L_1 / B_i + a_n + L_2 / B_n, the two phases' busiest links (uniform:
//                     L_1 = (m-1) S/m, L_2 = (N-1) S/N)
// plus the protocol's fixed latency. At flow fidelity every algorithm but double_tree takes exactly
// this time alone on its links (tests/sim); double_tree's closed form counts every link at its
// steady-state load, so the flows finish a little earlier while the pipeline fills.
//
// Protocols and the tuner (NCCL's src/graph/tuning.cc). resolve_collective() picks, for
// `auto`, the algorithm and protocol (LL, LL128, Simple) of least predicted time for the operation,
// its size and its group, and for a forced algorithm its best protocol, and sets the task's
// channels, fixed latency, per-step latencies (NCCL's per-step latency of the protocol on NVLink,
// PCIe or the network, plus the fabric's latency between nodes) and bandwidth share (Simple 1,
// LL128 0.92, LL 0.5 up to NCCL's LL ceiling; tree all-reduce 0.92 of that). An all-to-all is NCCL's
// p2p path: LL or Simple (no LL128), the ring's per-step latency of the protocol per message and its
// fixed latency per exchange; `auto` is direct, or hierarchical where it fits and is faster.
//
// Measured collectives. calibrate_collective() maps a fitted curve t = alpha + S / bandwidth (from a
// profile's `collectives`, e.g. nccl-tests on the real cluster) onto one collective: every message
// waits alpha / H instead of its step's latency (H = the hops on the closed form's critical path:
// 2(n-1) for a ring all-reduce) and gets its links' bandwidth times f = W / (S / bandwidth), where W
// is the closed form's transfer time at full link bandwidth. The uncontended time, analytic or flow,
// is then the measured one; under contention the messages share links as before, at the measured
// efficiency. f is a per-size bandwidth factor: it changes with the regime that covers S.
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

namespace ddlsim::sim {

struct Message {
  int src = -1;  ///< device or switch endpoint; -1 with dst -1 is a join (no data: completes when its waits are done)
  int dst = -1;
  double bytes = 0;
  std::vector<std::uint32_t> after;  ///< messages (indices) that must have arrived first
  /// Between nodes, a channel group's hop: it leaves and enters through all of its nodes' NICs
  /// together (the nodes' rails), at most the collective's `channels` NICs' bandwidth.
  bool rails = false;
};

/// Message endpoints that are switches, not GPUs: the NVSwitch of a node (nvls) and the fabric's
/// reducing switches (sharp). Both are below -1 (-1 is a join).
constexpr int node_switch_endpoint(int node) { return -2 - node; }
inline constexpr int fabric_switch_endpoint = -2'000'000'000;
constexpr bool is_switch_endpoint(int endpoint) { return endpoint <= -2; }
constexpr int node_of_switch_endpoint(int endpoint) { return -2 - endpoint; }

/// A binary tree or NCCL's double binary tree: a root apart from the other members, so that no rotation of
/// the members maps its messages onto themselves (the fold runs such collectives apart, Fold.hpp), and NCCL's
/// tree latencies apply.
constexpr bool is_tree(CollectiveAlgorithm a)
{
  return a == CollectiveAlgorithm::tree || a == CollectiveAlgorithm::double_tree;
}

/// The algorithm actually used for `c` (after the fallbacks above; `auto` is resolved to ring when
/// resolve_collective() has not run). The cluster-free overload cannot know about NVLS or SHARP and
/// keeps nvls and sharp as they are.
CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, int gpus_per_node);
CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, const ClusterSpec& cluster);

/// A hash of what NCCL's tuner reads of `c` (kind, asked algorithm, bytes, group, member loads and
/// their direction), for caches of repeated collectives: equal collectives hash alike, and callers
/// compare the fields they key on.
std::uint64_t collective_hash(const CollectiveTask& c);

/// The index of a cache of repeated collectives (the tuner's, the fold's, the closed forms'): `find`
/// returns the slot of an earlier collective that `same` calls equal to `c`, trying first the one
/// found or added last (an iteration repeats a collective many times in a row), then those of c's
/// collective_hash; after a miss, `add` gives `c` its slot. `at(slot)` is a slot's collective, kept
/// by the caller with whatever the cache holds for it.
class RepeatedCollectives {
public:
  template <typename At, typename Same> std::optional<std::size_t> find(const CollectiveTask& c, At at, Same same)
  {
    if (last_ && same(at(*last_), c))
      return last_;
    hash_ = collective_hash(c);
    for (auto [it, end] = slots_.equal_range(hash_); it != end; ++it)
      if (same(at(it->second), c))
        return last_ = it->second;
    return std::nullopt;
  }
  /// The collective that `find` just missed has `slot`.
  void add(std::size_t slot)
  {
    slots_.emplace(hash_, slot);
    last_ = slot;
  }

private:
  std::unordered_multimap<std::uint64_t, std::size_t> slots_;  // hash -> slots
  std::optional<std::size_t> last_;
  std::uint64_t hash_ = 0;  // of the collective `find` missed last
};

/// Messages of collective `c`; GPU g is on node g / gpus_per_node. Empty for groups of one.
std::vector<Message> decompose(const CollectiveTask& c, int gpus_per_node);

/// How many messages decompose(c, gpus_per_node) holds (joins left out: they carry no data and
/// are no SimGrid activity), computed without building them: O(n log n) for n members. What the
/// resource guard (experiments/Resources.hpp) counts a flow-level collective as.
std::uint64_t message_count(const CollectiveTask& c, int gpus_per_node);

/// Calls send(src, dst, bytes) with the total bytes each member sends to each peer in `c`'s
/// decomposition, without building the messages for a ring (O(nC) instead of O(n^2 C)). Bytes a
/// GPU sends into a switch are reported with dst a GPU of the switch's reach (its own node for an
/// NVSwitch, another node for the fabric); what switches send is not reported. A direct all-to-all
/// gives, per member, the bytes of its own blocks it sends to each node at once (PXN's relay left
/// out), addressed to that node's first other member (O(n x nodes) instead of O(n^2)): per-member
/// totals and node crossings are exact, the peer inside a node is a representative. Between nodes
/// over the rails (several channels), as NCCL's channels cross at every GPU's own NIC: a ring's
/// members each send their hop's bytes, 1/k of them (k members per node) to the next node; another
/// algorithm's hop between nodes leaves from every member of its node in equal parts.
void for_each_send(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send);

/// Closed-form duration of `c` on `cluster` (see above), with c's protocol and calibration.
double analytic_seconds(const CollectiveTask& c, const ClusterSpec& cluster);

/// The closed form in parts, at the links' own bandwidth (c's bandwidth factor and fixed latency
/// left out).
struct AnalyticParts {
  double hops = 0;        ///< messages on the critical path, each paying one latency
  double latency_s = 0;   ///< the latency part: sum over those hops
  double transfer_s = 0;  ///< the bandwidth part
};
AnalyticParts analytic_parts(const CollectiveTask& c, const ClusterSpec& cluster);

/// One-way latency of c's message from src to dst (endpoints as in Message), in seconds: the
/// calibrated hop latency, else the protocol's step latency, else the route's.
double message_latency(const CollectiveTask& c, const ClusterSpec& cluster, int src, int dst);

/// Sets c.hop_latency_s and c.bandwidth_factor so that c's uncontended time is alpha_s + transfer_s
/// (a measured curve at c's size: transfer_s = S / bandwidth); clears the protocol's fixed latency.
/// The curve is of the collective at uniform load: with member loads (an all-to-all with a busy
/// expert) the busiest link's bandwidth term stays that many times the measured one. No-op for groups
/// of one.
void calibrate_collective(CollectiveTask& c, const ClusterSpec& cluster, double alpha_s, double transfer_s);

/// Groups above this many members are not tuned (their closed forms cost seconds each): `auto` is
/// ring and the protocol Simple.
inline constexpr std::size_t max_tuned_group = 65536;

/// NCCL's tuner: for c.algorithm == automatic, the algorithm and protocol of least predicted time;
/// for a forced algorithm, its fallback and best protocol. Sets algorithm, protocol, channels,
/// base_latency_s, the per-step latencies and bandwidth_factor. A forced `protocol` (NCCL_PROTO)
/// limits the choice to it where the algorithm supports it. Groups of one are left as they are.
void resolve_collective(CollectiveTask& c, const ClusterSpec& cluster,
                        std::optional<CollectiveProtocol> protocol = std::nullopt);

/// The NICs a ring or tree of `c` uses across nodes (NCCL's rails): the distinct NICs of a node's
/// members, sorted (empty inside one node or over uneven nodes); rail_channels() counts them (at
/// least 1). A rails message crosses these NICs together (sim/Platform.hpp).
std::vector<int> rail_nics(const CollectiveTask& c, const ClusterSpec& cluster);
int rail_channels(const CollectiveTask& c, const ClusterSpec& cluster);

/// Number of chunks the tree algorithms (and pipelined broadcasts and switch reductions) split a
/// buffer of `bytes` into.
int tree_chunks(double bytes);

/// A collective's bus bandwidth factor as nccl-tests defines it: 2(n-1)/n for all-reduce, (n-1)/n for
/// all-gather, reduce-scatter and all-to-all, 1 for broadcast (busbw = algbw x factor).
double bus_bandwidth_factor(CollectiveKind kind, int members);

}  // namespace ddlsim::sim
