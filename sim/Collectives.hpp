// Collectives as point-to-point messages (flow fidelity) or as closed forms (analytic fidelity).
//
// decompose() turns a collective into a small DAG of messages: each message goes from one member
// to another and may start only after the messages it waits for have arrived. The replay sends
// them as SimGrid Comms, so a collective's steps contend on links with all other traffic.
//   ring all-reduce      2(n-1) steps of S/n; member i sends step k to i+1 after sending step k-1
//                        and receiving step k-1 (reduce-scatter then all-gather)
//   ring all-gather /
//   reduce-scatter       n-1 such steps
//   tree all-reduce      binary tree over the members in order (member i's parent is (i-1)/2):
//                        the buffer goes up in C chunks (pipelined: a member forwards chunk c once
//                        it has chunk c from both children), then, once the root has it all, down
//                        again in C chunks; C = ceil(S / 4 MiB), at most 16
//   hierarchical         members grouped by node (the same count m on each of N nodes): ring
//                        reduce-scatter inside each node, then m ring all-reduces of S/m across the
//                        nodes (one per local rank, on different NICs), then ring all-gather inside
//                        each node; each phase starts when the previous one has finished
//   all-to-all          member i sends the j-th of its n blocks (bytes / n each, times the load of
//                        j, or of i for a combine: CollectiveTask::member_load) to member j:
//     direct             every message at once, no waits (NCCL's grouped send/recv): n (n-1) messages
//     hierarchical       members spread evenly over N nodes of m: inside each node, member j sends
//                        member j' every block it holds for local rank j' of any node (N blocks);
//                        then member j' of node a sends member j' of node b the m blocks of node a's
//                        members for it, once its own phase-1 blocks have arrived (Tutel's 2DH,
//                        DeepSpeed's hierarchical all-to-all): N m (m-1) + m N (N-1) messages, each
//                        inter-node one m times larger than direct's
// Algorithms that do not apply (tree for an all-gather, hierarchical over one node or uneven
// nodes) fall back to ring; an all-to-all is direct unless hierarchical applies; `direct` for
// the other kinds is ring.
//
// analytic_seconds() is the same algorithm's alpha-beta time with every hop at its link's full
// bandwidth (a = one-way latency, B = bandwidth of the slowest hop of the phase):
//   ring all-reduce   2(n-1) (a + S/(nB))          all-gather, reduce-scatter  (n-1) (a + S/(nB))
//   tree all-reduce   2 (D + C - 1) (a + 2 S/(C B)) for a full binary tree of depth D
//   hierarchical      2 (m-1)(a_i + S/(m B_i)) + 2 (N-1)(a_n + S/(m N B_n))
//   direct all-to-all the link that finishes last: max(a_i + L_i / B_i, a_n + L_n / B_n), L_i the
//                     most bytes one GPU sends or receives inside its node and L_n the most one NIC
//                     carries each way (uniform, m members on each of N nodes: L_i = (m-1) S/n,
//                     L_n = (N-1) m S/n per NIC when each member has its own; one switch:
//                     a + (n-1) S / (n B))
//   hierarchical a2a  a_i + L_1 / B_i + a_n + L_2 / B_n, the two phases' busiest links (uniform:
//                     L_1 = (m-1) S/m, L_2 = (N-1) S/N)
//
// Measured collectives. calibrate_collective() maps a fitted curve t = alpha + S / bandwidth (from a
// profile's `collectives`, e.g. nccl-tests on the real cluster) onto one collective: every message
// waits alpha / H instead of its route's latency (H = the hops on the closed form's critical path:
// 2(n-1) for a ring all-reduce) and gets its links' bandwidth times f = W / (S / bandwidth), where W
// is the closed form's transfer time at full link bandwidth. The uncontended time, analytic or flow,
// is then the measured one; under contention the messages share links as before, at the measured
// efficiency. f is a per-size bandwidth factor: it changes with the regime that covers S.
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/TaskGraph.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace ddlsim::sim {

struct Message {
  int src = -1;  ///< device; -1 with dst -1 is a join (no data: completes when its waits are done)
  int dst = -1;
  double bytes = 0;
  std::vector<std::uint32_t> after;  ///< messages (indices) that must have arrived first
};

/// The algorithm actually used for `c` (after the fallbacks above).
CollectiveAlgorithm effective_algorithm(const CollectiveTask& c, int gpus_per_node);

/// Messages of collective `c`; GPU g is on node g / gpus_per_node. Empty for groups of one.
std::vector<Message> decompose(const CollectiveTask& c, int gpus_per_node);

/// How many messages decompose(c, gpus_per_node) holds (joins left out: they carry no data and
/// are no SimGrid activity), computed without building them: O(n log n) for n members. What the
/// resource guard (experiments/Resources.hpp) counts a flow-level collective as.
std::uint64_t message_count(const CollectiveTask& c, int gpus_per_node);

/// Calls send(src, dst, bytes) with the total bytes each member sends to each peer in `c`'s
/// decomposition, without building the messages for a ring (O(n) instead of O(n^2)). A direct
/// all-to-all gives, per member, the bytes it sends to each node at once, addressed to that node's
/// first other member (O(n x nodes) instead of O(n^2)): per-member totals and node crossings are
/// exact, the peer inside a node is a representative.
void for_each_send(const CollectiveTask& c, int gpus_per_node, const std::function<void(int, int, double)>& send);

/// Closed-form duration of `c` on `cluster` (see above), with c's calibration when it has one.
double analytic_seconds(const CollectiveTask& c, const ClusterSpec& cluster);

/// The closed form in parts, at the links' own latency and bandwidth (c's calibration ignored).
struct AnalyticParts {
  double hops = 0;        ///< messages on the critical path, each paying one latency
  double latency_s = 0;   ///< the latency part: sum over those hops
  double transfer_s = 0;  ///< the bandwidth part
};
AnalyticParts analytic_parts(const CollectiveTask& c, const ClusterSpec& cluster);

/// Sets c.hop_latency_s and c.bandwidth_factor so that c's uncontended time is alpha_s + transfer_s
/// (a measured curve at c's size: transfer_s = S / bandwidth). The curve is of the collective at
/// uniform load: with member loads (an all-to-all with a busy expert) the busiest link's bandwidth term
/// stays that many times the measured one. No-op for groups of one.
void calibrate_collective(CollectiveTask& c, const ClusterSpec& cluster, double alpha_s, double transfer_s);

/// Number of chunks the tree algorithm pipelines a buffer of `bytes` into.
int tree_chunks(double bytes);

}  // namespace ddlsim::sim
