// Turning per-task start/end times into the numbers a user reads: per-GPU compute, exposed
// communication and idle ("bubble") time. Pure functions, no SimGrid: unit-testable.
//
// For each GPU over the iteration [0, T]:
//   compute       union of its compute tasks
//   communication union of the transfers it sends or receives and the collectives it joins
//   exposed comm  communication time not hidden under compute
//   idle          T - compute - exposed comm   (pipeline bubble and waiting on others)
// bubble_fraction = mean idle / T. With no communication, GPipe's K balanced stages and M
// micro-batches give (K-1)/(M+K-1).
#pragma once

#include "common/HugePages.hpp"

#include "sim/TaskGraph.hpp"

#include <utility>
#include <vector>

namespace ddlsim::sim {

struct TaskTiming {
  double start_s = -1;
  double end_s = -1;
};
/// Per task of a graph, as a replay measures them: a large array, in huge pages (common/HugePages.hpp).
using Timings = HugePageVector<TaskTiming>;

struct DeviceStats {
  double compute_s = 0;
  double exposed_comm_s = 0;
  double idle_s = 0;
  double bytes_sent = 0;        ///< all bytes this GPU sends
  double bytes_sent_inter = 0;  ///< of which to other nodes (through its NIC)
};

using Interval = std::pair<double, double>;

/// Length of the union of intervals (any order, may overlap).
double union_length(std::vector<Interval> intervals);
/// Length of the union of `a` minus its overlap with the union of `b`.
double uncovered_length(std::vector<Interval> a, std::vector<Interval> b);
/// Sorts and coalesces `intervals` in place: the form uncovered_by_merged takes `b` in, so that one
/// `b` serves several `a` (comm_breakdown: a GPU's compute against each dimension's communication).
void merge_intervals(std::vector<Interval>& intervals);
/// uncovered_length(a, b) for a `b` already merge_intervals()'d.
double uncovered_by_merged(std::vector<Interval> a, const std::vector<Interval>& merged_b);

/// Bytes each device injects into the network for this graph: the transfers it sends and the
/// messages it sends in every collective's decomposition (2(n-1)/n x S for a ring all-reduce),
/// whatever the collective's fidelity. GPU g is on node g / gpus_per_node.
std::vector<double> bytes_sent_per_device(const TaskGraph& graph, int gpus_per_node);

struct SentBytes {
  std::vector<double> total;  ///< per device, as bytes_sent_per_device
  std::vector<double> inter;  ///< per device, only what goes to another node
};
/// Both counts in one pass over the graph (each collective is decomposed once).
SentBytes sent_bytes_per_device(const TaskGraph& graph, int gpus_per_node);

/// Per-device statistics from the timings of every task and the iteration time.
std::vector<DeviceStats> device_stats(const TaskGraph& graph, const Timings& timings, double makespan_s,
                                      int gpus_per_node);

class Fold;               // Fold.hpp
class FoldedCollectives;  // Fold.hpp
/// The same for a graph built under `fold` (only the representatives' tasks): each representative
/// gathers what its orbit's images of the graph's tasks do to it (a transfer into an image of it,
/// its share of every collective an image of it joins), and every GPU gets its representative's
/// numbers.
std::vector<DeviceStats> device_stats(const TaskGraph& graph, const Timings& timings, double makespan_s,
                                      int gpus_per_node, const Fold& fold, const FoldedCollectives& folded);

}  // namespace ddlsim::sim
