// The timeline of a simulated point: what `ddlsim run --trace-dir DIR` writes to
// <DIR>/<experiment>_<config_id>.json, in Chrome's Trace Event Format (traces/ChromeTrace.hpp), for
// Perfetto (ui.perfetto.dev) and chrome://tracing; with --trace-format perfetto (or both) the same
// trace in Perfetto's protobuf format, <DIR>/<experiment>_<config_id>.perfetto-trace.
//
// One process per GPU ("gpu<d> (node <n>)", pid d + 1: Perfetto keeps pid 0 for the kernel's
// swapper), with these tracks (threads, from tid 1). Which GPUs, which part of the run and which
// counters: TimelineView (experiments/TimelineView.hpp, choose_timeline below). A folded point
// (sim/Fold.hpp) is drawn as unfolded up to `full_timeline_tasks` tasks, beyond that (or where the
// view asks for it) by its representatives: "gpu<d> (node <n>), 1 of <k> alike".
//   compute stream     its forward, backward and optimizer tasks (complete slices, "ph": "X")
//   off-stream work    parameter-server updates, applied one at a time beside the stream
//   intra-node links   transfers and collectives inside its node: a transfer on its sender and its
//   inter-node links   receiver, a collective on every member (inter-node when its group spans nodes)
// A track is made of lanes ("intra-node links", "intra-node links #2", ...): each slice goes to the
// first lane free at its start, so concurrent transfers sit on separate lanes and the slices of a
// lane never overlap. (Lanes rather than async slices, "ph": "b"/"e": Perfetto gives every async
// slice name a track of its own, one per transfer here.) Slices carry numbers as JSON numbers
// (bytes, samples, layer range, devices).
//
// Flows ("ph": "s"/"t"/"f", id = the task's id) join each transfer's slice on its sender to its
// slice on its receiver, and a collective's slices through its members in ring order. Their events
// lie strictly inside the slices they bind to, each after the previous one; a task shorter than its
// flow's events + 1 ns gets no flow.
//
// Counters ("ph": "C"), per GPU:
//   memory bytes                 what the GPU holds: its training state, workspace and reserve,
//                                plus one stash per micro-batch in flight on each of its model
//                                chunks (from the micro-batch's first forward pass there to the end
//                                of the backward pass that follows). Its maximum is the CSV's peak
//                                memory where the schedule holds as many micro-batches at once as
//                                the memory model counts; it stays below it under the interleaved
//                                schedule (the model adds up each chunk's own peak) and on
//                                parameter-server workers with several micro-batches (the model
//                                counts them all; a worker runs each forward and backward in turn)
//   link send intra_node_Bps,    bytes per second the GPU sends over each link class: a transfer's
//   link send inter_node_Bps     bytes, and the GPU's messages of a collective (sim::for_each_send:
//                                a hop between nodes over the rails leaves from every GPU of its
//                                node), spread evenly over the task's interval, through the GPU's
//                                link of that class (its NVLink or PCIe link, its NIC): never above
//                                the link's bandwidth, what concurrent tasks ask beyond it queued
//                                and sent as soon as there is room (the simulation shared the link
//                                among them in turn). Integrated over the run they give the device
//                                table's comm_bytes and inter_node_bytes. The file's "otherData"
//                                gives the ceilings: intra_node_link_Bps, inter_node_link_Bps
//
// Times are whole nanoseconds. Size: about 170 bytes per slice (one per compute task, two per
// transfer, one per collective member) and 100 per flow event or counter sample, which come to
// about as many again: 17 MB for Llama 3.1 405B on 1,024 GPUs as 128 folded devices.
//
//   const PointPlan plan = plan_point(point, cost);
//   ...  // build the graph, replay it
//   write_timeline(point, graph, result, cluster, pipeline_timeline_memory(point, plan, graph), "traces");
#pragma once

#include "experiments/Plan.hpp"
#include "experiments/TimelineView.hpp"
#include "sim/ClusterSpec.hpp"
#include "sim/Replay.hpp"
#include "sim/TaskGraph.hpp"
#include "traces/ChromeTrace.hpp"

#include <string>
#include <vector>

namespace ddlsim::sim {
class Fold;
}

namespace ddlsim::experiments {

/// A folded point whose whole graph has more tasks than this is drawn by its representatives only.
inline constexpr double full_timeline_tasks = 2e6;

/// What the memory counters draw, per GPU d:
///   peak_bytes[d] - sum over its chunks c of (peak_in_flight[c] - in_flight_c(t)) x stash_bytes[c]
/// where in_flight_c(t) counts the micro-batches chunk c holds at time t on d.
struct TimelineMemory {
  std::vector<double> peak_bytes;  ///< per simulated device: bytes per GPU at its peak (empty: no counters)
  std::vector<double> stash_bytes;  ///< per chunk (ComputeTask::stage of the passes): bytes of one micro-batch's stash
  std::vector<int> peak_in_flight;  ///< per chunk: micro-batches the memory model counts at the peak
};

/// The memory of a pipeline point's devices (plan_point's breakdown, per pipeline rank) for
/// `graph`, built from the point's plan: device d holds rank d / (devices / pp).
TimelineMemory pipeline_timeline_memory(const PointConfig& point, const PointPlan& plan, const sim::TaskGraph& graph);

/// The memory of a parameter-server point: workers hold the model, its gradients and their
/// micro-batches' activations; servers a 1/S shard of the weights with its optimizer state (plus
/// a worker's memory where they share its GPU). As the CSV's peak_memory_bytes counts it.
TimelineMemory parameter_server_timeline_memory(const PointConfig& point, const sim::TaskGraph& graph);

/// What a timeline draws of its graph: the GPUs (empty: every one; with a fold, the representatives
/// of those given), the window and the counters of `view` (experiments/TimelineView.hpp).
struct TimelineScope {
  std::vector<bool> gpus;
  TimelineView view;
};

/// The timeline of a replayed graph (see above); node of GPU g: g / gpus_per_node. With `fold`,
/// `graph` is the folded graph and only its representatives are drawn, each named "gpu<d> (node
/// <n>), 1 of <|G|> alike" (the others do the same at the same times; sim::unfold gives the whole
/// graph, what a point small enough to draw whole is drawn from).
traces::ChromeTrace build_timeline(const sim::TaskGraph& graph, const sim::Timings& timings,
                                   double makespan_s, const sim::ClusterSpec& cluster, const TimelineMemory& memory,
                                   const sim::Fold* fold = nullptr, const TimelineScope& scope = {});

/// Writes the timeline of a point to <dir>/<experiment>_<config_id>.json and/or .perfetto-trace
/// (scope.view's files; creating dir). Throws Error when a file cannot be written.
void write_timeline(const PointConfig& point, const sim::TaskGraph& graph, const sim::ReplayResult& result,
                    const sim::ClusterSpec& cluster, const TimelineMemory& memory, const std::string& dir,
                    const sim::Fold* fold = nullptr, const TimelineScope& scope = {});

/// How a point's timeline is drawn (TimelineView's rules): whether at all, from the folded graph
/// (its representatives) or the whole one, which GPUs, and what the row's message says of it.
struct TimelineChoice {
  bool draw   = true;
  bool folded = false;  ///< from the folded graph: its representatives only
  TimelineScope scope;
  std::string note;  ///< for the row's message ("" when the timeline is what was asked)
};
/// For `graph` (folded by `fold` when given): auto draws every GPU when the whole timeline holds at
/// most timeline_budget_slices slices, else the fold's representatives when they fit, else the GPUs
/// of data-parallel replica 0; a fold whose whole graph has over full_timeline_tasks tasks is drawn
/// by the representatives of the GPUs chosen.
TimelineChoice choose_timeline(const PointConfig& point, const TimelineView& view, const sim::TaskGraph& graph,
                               const sim::Fold* fold);

/// Slices a timeline of `graph` draws on each device (one per compute task, two per transfer, one
/// per collective member).
std::vector<double> timeline_slices(const sim::TaskGraph& graph);

}  // namespace ddlsim::experiments
