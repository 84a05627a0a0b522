#include "experiments/Evaluate.hpp"

#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/Timeline.hpp"
#include "models/Partition.hpp"
#include "sim/Collectives.hpp"
#include "sim/CommBreakdown.hpp"
#include "sim/Fold.hpp"
#include "sim/Framework.hpp"
#include "sim/OpCosts.hpp"
#include "sim/ParameterServer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <numeric>
#include <set>
#include <unordered_map>

namespace ddlsim::experiments {
namespace {

// Per simulated device of a point, next to its timeline (<dir>/<experiment>_<id>_devices.csv):
// the numbers the CSV row averages, one row per GPU in rank order. A device is one GPU, and its
// index is the GPU's global rank (tp innermost, then cp, dp, pp: Megatron's order) and its index in
// the cluster. `memory` gives a device's peak memory (empty: not known).
void write_device_table(const PointConfig& point, const sim::ReplayResult& result, const std::string& dir,
                        const std::function<double(int)>& memory)
{
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + point.experiment + "_" + std::to_string(point.index) + "_devices.csv";
  std::ofstream out(path);
  out << "rank,node,device,gpus,compute_time_s,exposed_comm_time_s,idle_time_s,utilization,comm_bytes,"
         "inter_node_bytes,peak_memory_bytes\n";
  const double t = result.makespan_s;
  for (std::size_t d = 0; d < result.devices.size(); ++d) {
    const auto& s = result.devices[d];
    out << d << ',' << point.cluster.node_of(static_cast<int>(d)) << ',' << d << ",1," << format_number(s.compute_s) << ',' << format_number(s.exposed_comm_s)
        << ',' << format_number(s.idle_s) << ',' << format_number(t > 0 ? s.compute_s / t : 0) << ','
        << format_number(s.bytes_sent) << ',' << format_number(s.bytes_sent_inter)
        << ',' << (memory ? format_number(memory(static_cast<int>(d))) : std::string()) << '\n';
  }
  if (!out)
    throw Error("cannot write " + path);
}

}  // namespace

namespace {

// Adds `text` to the row's message (after what is there, "; " between).
void add_message(ResultRow& row, const std::string& text)
{
  const std::string& now = row.get("message");
  row.set("message", now.empty() ? text : now + "; " + text);
}

namespace {

// The timeline of a point simulated without a fold (a parameter-server point, a custom graph).
void write_unfolded_timeline(ResultRow& row, const PointConfig& point, const sim::TaskGraph& graph,
                             const sim::ReplayResult& result, const TimelineMemory& memory, const EvaluateOptions& options)
{
  const TimelineChoice drawn = choose_timeline(point, options.trace_view, graph, nullptr);
  if (!drawn.note.empty())
    add_message(row, drawn.note);
  if (drawn.draw)
    write_timeline(point, graph, result, point.cluster, memory, options.trace_dir, nullptr, drawn.scope);
}

}  // namespace

// The highest MFU any dense transformer training run is published to reach: 65.3%, MegaScale's 175B on
// 256 Ampere GPUs (Jiang et al., NSDI 2024, Table 2; experiments/validation/published.csv). A simulated
// point above it is more likely a model or calibration error than a discovery: its message says so.
constexpr double published_mfu_bound = 0.653;

// tokens_per_s, model_tflops_per_gpu and mfu of an iteration of t seconds (and tokens per second per
// GPU). Model flop as PaLM counts them (appendix B): per token 6 N + 12 l h s for a transformer; a
// network without attention counts its forward and backward flop per sample. MFU divides the model
// flop per second and GPU by the dense peak for the training dtype (the profile's
// peak_flops_<dtype>); left empty when the profile has none.
void fill_model_flop_columns(ResultRow& row, const PointConfig& point, double t)
{
  const WorkloadFlop flop = workload_flop(point);
  const double samples_per_s = static_cast<double>(point.training.global_batch) / t;
  const double gpus = point.parallelism.gpus();
  if (flop.tokens > 0) {
    row.set("tokens_per_s", samples_per_s * flop.tokens);
    row.set("tokens_per_s_per_gpu", samples_per_s * flop.tokens / gpus);
  }
  const double model_flop_per_s_per_gpu = samples_per_s * flop.model_per_sample / gpus;
  if (model_flop_per_s_per_gpu > 0)
    row.set("model_tflops_per_gpu", model_flop_per_s_per_gpu / 1e12);
  const calibration::Parameter* peak =
      point.profile.find("peak_flops_" + std::string(dtype_table.name(point.training.dtype)));
  if (peak == nullptr || !(peak->value > 0))
    return;
  const double mfu = samples_per_s * flop.model_per_sample / (point.parallelism.gpus() * peak->value);
  row.set("mfu", mfu);
  if (mfu > published_mfu_bound && point.model.has(models::LayerKind::attention)) {
    char percent[32], bound[32];
    std::snprintf(percent, sizeof percent, "%.1f%%", 100 * mfu);
    std::snprintf(bound, sizeof bound, "%.1f%%", 100 * published_mfu_bound);
    add_message(row, "MFU " + std::string(percent) + " is above the highest published for transformer training (" +
                         bound + ", MegaScale 2024): check the profile and the layout (docs/validation.md)");
  }
}

// Result columns of a replay covering `iterations` iterations (devices: every GPU's statistics).
void fill_timing_columns(ResultRow& row, const PointConfig& point, const sim::ReplayResult& result, int iterations)
{
  const auto& dev = result.devices;
  const double n = static_cast<double>(dev.size());
  auto mean = [&](auto field) {
    return std::accumulate(dev.begin(), dev.end(), 0.0, [&](double acc, const sim::DeviceStats& d) { return acc + field(d); }) /
           n;
  };
  const double t = result.makespan_s / iterations;
  const double flop_per_iteration = static_cast<double>(point.training.global_batch) * workload_flop(point).per_sample;
  row.set("status", std::string("ok"));
  row.set("iteration_time_s", t);
  row.set("throughput_samples_per_s", static_cast<double>(point.training.global_batch) / t);
  row.set("bubble_fraction", mean([](const sim::DeviceStats& d) { return d.idle_s; }) / result.makespan_s);
  row.set("compute_time_s", mean([](const sim::DeviceStats& d) { return d.compute_s; }) / iterations);
  row.set("exposed_comm_time_s", mean([](const sim::DeviceStats& d) { return d.exposed_comm_s; }) / iterations);
  row.set("comm_bytes_per_gpu", mean([](const sim::DeviceStats& d) { return d.bytes_sent; }) / iterations);
  row.set("inter_node_bytes_per_gpu", mean([](const sim::DeviceStats& d) { return d.bytes_sent_inter; }) / iterations);
  row.set("gpu_utilization", mean([](const sim::DeviceStats& d) { return d.compute_s; }) / result.makespan_s);
  row.set("sim_activities", static_cast<long long>(result.activities));
  row.set("sim_wall_time_s", result.wall_time_s);
  row.set("achieved_flop_per_s_per_gpu", flop_per_iteration / t / n);
  fill_model_flop_columns(row, point, t);
}

// What the tuner chose, per use and algorithm/protocol: "dp ring/simple 4, ep direct/simple 8, tp nvls/simple 96"
// (ep: expert parallelism's all-to-alls; cp: context parallelism's K/V all-gathers and dK/dV
// reduce-scatters; dp: every other collective beside the tensor-parallel ones).
struct ChoiceCount {
  // (group kind: 0 tp, 1 ep, 2 dp, 3 cp; algorithm; protocol) -> collectives
  std::map<std::tuple<int, sim::CollectiveAlgorithm, sim::CollectiveProtocol>, std::size_t> counts;
  void add(const sim::CollectiveTask& c, std::size_t images = 1)
  {
    const bool tp = c.role == sim::CollectiveRole::tensor_parallel;
    const bool ep = c.role == sim::CollectiveRole::expert_dispatch || c.role == sim::CollectiveRole::expert_combine;
    counts[{tp ? 0 : ep ? 1 : c.role == sim::CollectiveRole::context ? 3 : 2, c.algorithm, c.protocol}] += images;
  }
  /// "dp ring/simple 128, tp nvls/simple 889344": by name.
  std::string text() const
  {
    std::map<std::string, std::size_t> named;
    for (const auto& [key, n] : counts) {
      const auto& [group, algorithm, protocol] = key;
      named[std::string(group == 0 ? "tp " : group == 1 ? "ep " : group == 3 ? "cp " : "dp ") +
            std::string(sim::collective_algorithm_table.name(algorithm)) + "/" +
            std::string(sim::collective_protocol_table.name(protocol))] += n;
    }
    std::string out;
    for (const auto& [name, n] : named)
      out += (out.empty() ? "" : ", ") + name + " " + std::to_string(n);
    return out;
  }
};

// NCCL's tuner on every collective of `graph` (Collectives.hpp: resolve_collective), with a cache:
// a point repeats the same few collectives thousands of times. The key holds everything the tuner
// reads, an all-to-all's member loads and their direction included: a combine (the busiest GPU sends)
// is not its dispatch (it receives), and the cached copy replaces the task. Under a fold (`fold` not
// null) each collective counts once per image, |G| / |H| (H: the elements that keep its group), as
// unfolded.
void resolve_collectives(sim::TaskGraph& graph, const sim::ClusterSpec& cluster, ChoiceCount& choices,
                         const sim::Fold* fold = nullptr)
{
  // The tuner's choice depends on the kind, the asked algorithm, the bytes, the group and the loads:
  // each distinct one is resolved once (found by a hash of those, then compared).
  struct Resolved {
    sim::CollectiveTask task;  // as asked
    sim::CollectiveTask resolved;
    std::size_t images;
  };
  std::vector<Resolved> cache;
  sim::RepeatedCollectives index;  // slot: the place in `cache`
  auto same = [](const sim::CollectiveTask& a, const sim::CollectiveTask& b) {
    return a.kind == b.kind && a.algorithm == b.algorithm && a.bytes == b.bytes && a.load_at_source == b.load_at_source &&
           a.group == b.group && a.member_load == b.member_load;
  };
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != sim::TaskKind::collective)
      continue;
    sim::CollectiveTask& c = graph.collective(id);
    if (c.group.size() < 2)
      continue;
    std::optional<std::size_t> slot =
        index.find(c, [&](std::size_t i) -> const sim::CollectiveTask& { return cache[i].task; }, same);
    if (!slot) {
      sim::CollectiveTask resolved = c;
      sim::resolve_collective(resolved, cluster);
      std::size_t images = 1;
      if (fold != nullptr) {
        std::string why;
        const int stabilizer = sim::collective_stabilizer(c, *fold, why);
        images = stabilizer > 0 ? static_cast<std::size_t>(fold->order() / stabilizer) : 1;
      }
      slot = cache.size();
      cache.push_back({c, std::move(resolved), images});
      index.add(*slot);
    }
    const Resolved& found = cache[*slot];
    // The tuner's choice, with c's own place in the iteration (copy-assigned: c's group and loads
    // equal the choice's, so their buffers are reused).
    const sim::CollectiveFidelity fidelity = c.fidelity;
    const int stage = c.stage, micro_batch = c.micro_batch;
    const sim::Phase phase = c.phase;
    const sim::CollectiveRole role = c.role;
    c = found.resolved;
    c.fidelity = fidelity;
    c.stage = stage;
    c.micro_batch = micro_batch;
    c.phase = phase;
    c.role = role;
    choices.add(c, found.images);
  }
}

// Calibrates every collective of `graph` that a fitted curve covers, and every pipeline (and ring
// attention) transfer that a send/recv curve covers; says how many, for the CSV: "fitted K/N", with
// the collectives the links time and why ("links M/N (no curve for all_reduce x16 on 2 nodes)"), and
// "p2p fitted K/N".
std::string apply_measured_collectives(sim::TaskGraph& graph, const sim::ClusterSpec& cluster,
                                       const calibration::CalibrationProfile& profile)
{
  if (profile.collectives.empty())
    return "links";
  std::size_t total = 0, fitted = 0, transfers = 0, p2p = 0;
  std::string first_missing;
  for (sim::TaskId id = 0; id < graph.size(); ++id)
    if (graph.kind(id) == sim::TaskKind::collective && graph.collective(id).group.size() > 1) {
      ++total;
      std::string missing;
      fitted += apply_measured_collective(graph.collective(id), cluster, profile, 1, &missing) ? 1 : 0;
      if (first_missing.empty())
        first_missing = missing;
    } else if (graph.kind(id) == sim::TaskKind::transfer) {
      sim::TransferTask& t = graph.transfer(id);
      if (t.kind != sim::TransferKind::activation && t.kind != sim::TransferKind::context)
        continue;  // parameter-server pushes and pulls are not NCCL's
      ++transfers;
      p2p += apply_measured_transfer(t, cluster, profile) ? 1 : 0;
    }
  std::string out = fitted == 0 ? "links" : "fitted " + std::to_string(fitted) + "/" + std::to_string(total);
  if (fitted < total)
    out += (fitted > 0 ? ", links " : " ") + std::to_string(total - fitted) + "/" + std::to_string(total);
  if (!first_missing.empty())
    out += " (no curve for " + first_missing + ")";
  if (p2p > 0)
    out += "; p2p fitted " + std::to_string(p2p) + "/" + std::to_string(transfers);
  return out;
}

// The resource guard (Resources.hpp): its estimate beside the replay's own count and the process's
// size, and why the point is over its limits (empty when it is not). Experiment::point() has refused
// such points already; a point changed since (the micro-batch search's) is refused here. `estimate`,
// when given, receives the estimate.
std::string check_estimate(ResultRow& row, const PointConfig& point, const FoldPlan* fold = nullptr,
                           ResourceEstimate* estimate = nullptr)
{
  const ResourceEstimate e = estimate_resources(point, fold);
  row.set("sim_activities_estimate", e.activities);
  row.set("sim_memory_estimate_bytes", e.memory_bytes);
  if (estimate != nullptr)
    *estimate = e;
  return over_limits(point, e);
}

// The replay's options for a point: the run's, with the profile's compute slowdown under overlapping
// communication (0 when the profile has none).
sim::ReplayOptions replay_options(const PointConfig& point, const EvaluateOptions& options)
{
  sim::ReplayOptions replay = options.replay;
  if (const calibration::Parameter* slowdown = point.profile.find("comm_compute_slowdown"))
    replay.comm_compute_slowdown = slowdown->value;
  return replay;
}

// Data parallelism through parameter servers: workers hold the model, weights and gradients and
// their activations; servers hold 1/S of the weights and the optimizer state each.
ResultRow evaluate_parameter_server(const PointConfig& point, const calibration::CostModel& cost,
                                    const EvaluateOptions& options, ResultRow& row)
{
  const auto& ps = *point.parallelism.ps;
  const models::Model& model = point.model;
  const Dtype dtype = point.training.dtype;
  const double d = dtype_bytes(dtype);
  const int workers = point.parallelism.dp;
  sim::PsPlan plan;
  plan.workers = workers;
  plan.servers = ps.servers;
  for (int j = 0; j < ps.servers; ++j)
    plan.server_devices.push_back(ps.server_gpu(j, workers));
  plan.devices = ps.gpus(workers);
  plan.iterations = ps.iterations;
  plan.micro_batches = point.micro_batches();
  plan.micro_batch_size = point.training.micro_batch;
  plan.layers = {0, model.size()};
  plan.gradient_bytes = model.parameter_count() * d;
  plan.consistency = ps.consistency;
  plan.staleness = ps.staleness;
  row.set("stage_blocks", std::to_string(model.blocks().size()));

  const MemoryVerdict verdict = parameter_server_memory(point);
  row.set("peak_memory_bytes", verdict.peak_bytes);
  row.set("activation_memory_bytes", verdict.activation_bytes);
  if (!verdict.fits()) {
    row.set("status", std::string(status_table.name(Status::oom)));
    row.set("message", verdict.message);
    return row;
  }

  if (const std::string over = check_estimate(row, point); !over.empty()) {
    row.set("status", std::string(status_table.name(Status::invalid)));
    row.set("message", over);
    return row;
  }
  const sim::PsGraph g = sim::build_parameter_server(plan);
  const auto seconds = sim::compute_durations(
      g.graph, model, cost, {.dtype = dtype, .optimizer = point.training.optimizer, .recompute = point.training.recompute});
  const sim::ReplayResult result = sim::replay(g.graph, point.cluster, seconds, replay_options(point, options));
  // Throughput credits each worker with its own pace, and each GPU is timed over its own run
  // (ParameterServer.hpp): the makespan would time every worker at the straggler's pace.
  const sim::PsThroughput rate = sim::ps_throughput(plan, g, result.timings);
  sim::ReplayResult own_runs;
  own_runs.makespan_s = ps.iterations * rate.iteration_time_s;
  own_runs.devices = sim::ps_device_stats(plan, g, result.timings, result.devices, rate);
  own_runs.activities = result.activities;
  own_runs.wall_time_s = result.wall_time_s;
  fill_timing_columns(row, point, own_runs, ps.iterations);
  const sim::StalenessStats staleness = sim::observed_staleness(plan, g, result.timings);
  row.set("staleness_max", staleness.max);
  row.set("staleness_mean", staleness.mean);
  if (!options.trace_dir.empty()) {
    write_unfolded_timeline(row, point, g.graph, result, parameter_server_timeline_memory(point, g.graph), options);
    write_device_table(point, result, options.trace_dir, {});
  }
  return row;
}

// The exposed communication by parallel dimension (sim/CommBreakdown.hpp): exposed_tp_s, exposed_dp_s,
// exposed_pp_s, exposed_cp_s, and for a mixture of experts all_to_all_time_s (exposed) and total_a2a_s.
void set_comm_columns(ResultRow& row, const sim::CommBreakdown& b, bool dimensions, bool experts)
{
  if (dimensions) {
    row.set("exposed_tp_s", b.exposed(sim::CommDimension::tp));
    row.set("exposed_dp_s", b.exposed(sim::CommDimension::dp));
    row.set("exposed_pp_s", b.exposed(sim::CommDimension::pp));
    row.set("exposed_cp_s", b.exposed(sim::CommDimension::cp));
  }
  if (experts) {
    row.set("all_to_all_time_s", b.exposed(sim::CommDimension::ep));
    row.set("total_a2a_s", b.expert_total_s);
  }
}

// The configuration columns of an imported Chakra workload: ddlsim's own export carries its point's
// (the model, layout, batch, memory), which stay; cluster and calibration are this experiment's.
ResultRow describe_chakra_point(const PointConfig& p)
{
  static const std::set<std::string> own = {"config_id", "experiment", "cluster", "calibration", "status", "message",
                                            "memory_capacity_bytes", "compute_costs", "collective_times"};
  const ChakraWorkload& w = *p.chakra;
  const auto& names = csv_columns();
  ResultRow row;
  for (const auto& [name, value] : w.columns())
    if (!own.count(name) && std::find(names.begin(), names.end(), name) != names.end())
      row.set(name, value);
  row.set("config_id", static_cast<long long>(p.index));
  row.set("experiment", p.experiment);
  row.set("cluster", p.cluster_label);
  row.set("calibration", p.calibration_label);
  row.set("memory_capacity_bytes", p.cluster.smallest_memory());
  if (!w.from_ddlsim()) {
    row.set("model", p.model_label);
    row.set("gpus", static_cast<long long>(w.ranks()));
    if (p.training.global_batch > 0)
      row.set("global_batch", p.training.global_batch);
    row.set("dtype", std::string(dtype_table.name(p.training.dtype)));
  }
  return row;
}

// A Chakra workload (ChakraWorkload.hpp) replayed on the point's cluster: its compute times as the
// traces give them, its collectives timed by this calibration's curves where it has them.
ResultRow simulate_chakra_point(const PointConfig& point, const EvaluateOptions& options, ResultRow& row)
{
  if (const MemoryVerdict memory = check_memory(point); !memory.fits()) {
    row.set("status", std::string(status_table.name(Status::oom)));
    row.set("message", memory.message);
    return row;
  }
  const std::unique_ptr<calibration::CostModel> cost = calibration::make_cost_model(point.profile);
  ChakraWorkload::Graph built = point.chakra->build(*cost, point.training.dtype);
  row.set("compute_costs", std::string(built.priced ? "chakra+roofline" : "chakra"));
  ChoiceCount choices;  // the exported algorithm stays (it is NCCL's choice already); the tuner sets its protocol
  resolve_collectives(built.graph, point.cluster, choices);
  row.set("collective_algorithms", choices.text());
  row.set("collective_times", apply_measured_collectives(built.graph, point.cluster, point.profile));
  if (options.on_workload) {
    options.on_workload({built.graph, point.cluster, built.compute_seconds, row});
    return row;
  }
  const sim::ReplayResult result = sim::replay(built.graph, point.cluster, built.compute_seconds, replay_options(point, options));
  fill_timing_columns(row, point, result, 1);
  // An imported workload's collectives carry no parallel dimension: its all-to-alls alone are told apart.
  for (sim::TaskId id = 0; id < built.graph.size(); ++id)
    if (built.graph.kind(id) == sim::TaskKind::collective &&
        built.graph.collective(id).kind == sim::CollectiveKind::all_to_all) {
      set_comm_columns(row, sim::comm_breakdown(built.graph, result.timings), false, true);
      break;
    }
  if (!options.trace_dir.empty())
    write_unfolded_timeline(row, point, built.graph, result, TimelineMemory{}, options);
  return row;
}

}  // namespace

sim::ClusterSpec aggregate_cluster(const sim::ClusterSpec& c, int tp)
{
  sim::ClusterSpec a = c;
  a.gpus_per_node = c.gpus_per_node / tp;
  a.intra_node.bandwidth = c.intra_node.bandwidth * tp;
  // GPU i uses NIC i mod count: a group of tp GPUs uses min(count, tp) distinct NICs, and groups
  // sharing NICs keep sharing them (exact when count and tp divide one another).
  a.nics_per_node = std::max(1, c.nics_per_node / tp);
  a.nic.bandwidth = c.nic.bandwidth * std::min(c.nics_per_node, tp);
  a.memory.clear();
  a.gpu_names.clear();
  return a;
}

bool apply_measured_collective(sim::CollectiveTask& task, const sim::ClusterSpec& cluster,
                               const calibration::CalibrationProfile& profile, int gpus_per_device, std::string* missing)
{
  if (task.group.size() < 2)
    return false;
  std::set<int> nodes;
  for (int d : task.group)
    nodes.insert(cluster.node_of(d));
  const std::string kind(sim::collective_kind_table.name(task.kind));
  const int n = static_cast<int>(task.group.size()), spread = static_cast<int>(nodes.size());
  const double bytes = task.bytes / gpus_per_device;
  const auto measured = profile.measured_time(kind, n, spread, bytes);
  if (!measured) {
    if (missing != nullptr)
      *missing = kind + " x" + std::to_string(n) + " on " + std::to_string(spread) + (spread > 1 ? " nodes" : " node");
    return false;
  }
  sim::calibrate_collective(task, cluster, measured->alpha_s, measured->transfer_s);
  return true;
}

bool apply_measured_transfer(sim::TransferTask& t, const sim::ClusterSpec& cluster,
                             const calibration::CalibrationProfile& profile)
{
  // A send/recv curve of the same spread: inside one node, or across nodes (any rank count:
  // nccl-tests' sendrecv times every rank's send to the next at once, each pair alone on its links).
  const bool across = cluster.node_of(t.src) != cluster.node_of(t.dst);
  const calibration::CollectiveCurve* curve = nullptr;
  for (const auto& c : profile.collectives)
    if (c.collective == "send_recv" && !c.regimes.empty() && c.spans_nodes() == across &&
        (curve == nullptr || c.group_size < curve->group_size))
      curve = &c;
  if (curve == nullptr || t.bytes <= 0)
    return false;
  const calibration::AlphaBetaFit& r = curve->regime(t.bytes);
  const double link = across ? cluster.nic.bandwidth : cluster.intra_node.bandwidth;
  t.latency_s = r.alpha_s;
  // Alone on its links the transfer then takes alpha + bytes / measured bandwidth.
  t.bandwidth_factor = r.bandwidth > 0 ? r.bandwidth / link : std::numeric_limits<double>::infinity();
  return true;
}

namespace {

// What the hosts of frameworks pytorch and pytorch-compile did: their busy seconds and their GPUs'
// kernel seconds, summed over the simulated GPUs.
struct HostIssue {
  double gpus = 0;
  double host_s = 0;
  double gpu_s = 0;
};

// Each GPU's host issues its compute tasks in the graph's order, one after the other, never waiting for
// the GPU (sim/Framework.hpp): the replay starts a task no earlier than its host starts issuing it and
// ends it no earlier than its host is done.
HostIssue issue_from_host(const sim::TaskGraph& graph, const PointConfig& point, const std::vector<double>& seconds,
                          sim::ReplayOptions& replay)
{
  const std::vector<double> host = sim::host_durations(graph, point.model, compute_options(point), point.profile);
  replay.host_start_s.assign(graph.size(), 0.0);
  replay.host_end_s.assign(graph.size(), 0.0);
  std::vector<double> clock(static_cast<std::size_t>(graph.device_count()), -1.0);
  HostIssue issue;
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    if (graph.kind(id) != sim::TaskKind::compute)
      continue;
    double& at = clock[static_cast<std::size_t>(graph.compute(id).device)];
    if (at < 0) {
      at = 0;
      ++issue.gpus;
    }
    replay.host_start_s[id] = at;
    at += host[id];
    replay.host_end_s[id] = at;
    issue.host_s += host[id];
    issue.gpu_s += seconds[id];
  }
  return issue;
}

}  // namespace

ResultRow describe_point(const PointConfig& p)
{
  ResultRow row;
  row.set("config_id", static_cast<long long>(p.index));
  row.set("experiment", p.experiment);
  row.set("model", p.model.get_name().empty() ? p.model_label : p.model.get_name());
  row.set("cluster", p.cluster_label);
  row.set("calibration", p.calibration_label);
  row.set("schedule", std::string(sim::schedule_table.name(p.parallelism.schedule)));
  row.set("pp", static_cast<long long>(p.parallelism.pp));
  row.set("dp", static_cast<long long>(p.parallelism.dp));
  row.set("tp", static_cast<long long>(p.parallelism.tp));
  row.set("cp", static_cast<long long>(p.parallelism.cp));
  if (p.parallelism.cp > 1)
    row.set("cp_algorithm", std::string(sim::cp_algorithm_table.name(p.parallelism.cp_algorithm)));
  row.set("zero", static_cast<long long>(zero_level(p.parallelism.zero)));
  row.set("sequence_parallel", std::string(p.parallelism.sequence_parallel ? "true" : "false"));
  if (p.parallelism.tp_comm_overlap)
    row.set("tp_comm_overlap", std::string("true"));
  if (p.parallelism.tp_backward_overlap && p.parallelism.tp > 1)
    row.set("tp_backward_overlap", std::string("true"));
  if (p.parallelism.overlap_param_gather)
    row.set("overlap_param_gather", std::string("true"));
  if (p.parallelism.pp > 1)
    row.set("overlap_p2p_comm", std::string(overlaps_p2p(p) ? "true" : "false"));
  if (shards_optimizer(p.parallelism.zero))
    row.set("zero_group", static_cast<long long>(p.parallelism.shard_group()));
  if (p.model.has(models::LayerKind::attention)) {
    row.set("seq", static_cast<long long>(p.model.input_shape().tokens));
    for (const auto& l : p.model.layers())
      if (l.kind == models::LayerKind::attention) {
        row.set("attention", std::string(l.kernels.front().name.find("flash") != std::string::npos ? "flash" : "eager"));
        break;
      }
  }
  row.set("gpus", static_cast<long long>(p.parallelism.gpus()));
  row.set("global_batch", p.training.global_batch);
  row.set("micro_batch", static_cast<long long>(p.training.micro_batch));
  if (p.is_valid())
    row.set("num_micro_batches", static_cast<long long>(p.micro_batches()));
  row.set("dtype", std::string(dtype_table.name(p.training.dtype)));
  row.set("optimizer", std::string(models::optimizer_table.name(p.training.optimizer)));
  row.set("framework", std::string(sim::framework_table.name(p.training.framework)));
  if (p.training.framework == sim::Framework::pytorch_compile)
    row.set("cuda_graphs", std::string(p.training.cuda_graphs ? "true" : "false"));
  row.set("dp_collective", std::string(sim::collective_algorithm_table.name(p.parallelism.dp_collective)));
  row.set("collective_fidelity", collective_fidelity(p, plan_fold(p)));
  if (p.model.has(models::LayerKind::moe)) {
    row.set("ep", static_cast<long long>(p.parallelism.ep));
    row.set("ep_collective", std::string(sim::collective_algorithm_table.name(p.parallelism.ep_collective)));
    if (p.is_valid())
      row.set("dropped_tokens", dropped_tokens(p));
    for (const auto& l : p.model.layers())
      if (l.kind == models::LayerKind::moe) {
        row.set("load_imbalance", l.load_imbalance);
        row.set("capacity_factor", l.capacity_factor);
        break;
      }
  }
  row.set("dp_bucket_bytes", p.parallelism.dp_bucket);
  row.set("virtual_stages", static_cast<long long>(p.parallelism.virtual_stages));
  if (p.parallelism.ps) {
    const auto& ps = *p.parallelism.ps;
    row.set("schedule", std::string("parameter_server"));
    row.set("ps_servers", static_cast<long long>(ps.servers));
    row.set("ps_consistency", std::string(sim::consistency_table.name(ps.consistency)) +
                                  (ps.consistency == sim::Consistency::ssp ? ":" + std::to_string(ps.staleness) : ""));
    row.set("ps_iterations", static_cast<long long>(ps.iterations));
  }
  row.set("model_parameters", p.model.parameter_count());
  row.set("active_parameters", p.model.active_parameter_count());
  row.set("memory_capacity_bytes", p.cluster.smallest_memory());
  row.set("recompute", std::string(models::recompute_table.name(p.training.recompute)));
  row.set("partition", std::string(models::partitioner_table.name(p.parallelism.partition)));
  row.set("memory_reserve_bytes", p.training.memory_reserve);
  if (p.is_valid() && bn_batch(p) > 0)
    row.set("bn_batch", bn_batch(p));
  return row;
}

ResultRow failed_row(std::size_t index, const std::string& experiment, Status status, const std::string& message)
{
  ResultRow row;
  row.set("config_id", static_cast<long long>(index));
  row.set("experiment", experiment);
  row.set("status", std::string(status_table.name(status)));
  row.set("message", message);
  return row;
}

ResultRow evaluate_point(const PointConfig& point, const EvaluateOptions& options)
{
  ResultRow row = point.chakra ? describe_chakra_point(point) : describe_point(point);
  auto fail = [&](Status status, const std::string& message) {
    row.set("status", std::string(status_table.name(status)));
    row.set("message", message);
    return row;
  };
  if (!point.is_valid()) {
    std::string message;
    for (const auto& d : point.problems)
      message += (message.empty() ? "" : "; ") + d.to_string();
    return fail(Status::invalid, message);
  }
  try {
    if (point.chakra)
      return simulate_chakra_point(point, options, row);
    const std::unique_ptr<calibration::CostModel> cost_model = calibration::make_cost_model(point.profile);
    const calibration::CostModel& cost = *cost_model;
    row.set("compute_costs", point.profile.kernel_tables.empty() ? "roofline" : "tables+roofline");
    row.set("collective_times", "links");  // the parameter server moves gradients by transfers
    if (point.parallelism.ps)
      return evaluate_parameter_server(point, cost, options, row);
    const PointPlan plan = plan_point(point, cost);

    std::string blocks;
    for (const auto& r : plan.stage_blocks)
      blocks += (blocks.empty() ? "" : "/") + std::to_string(r.size());
    row.set("stage_blocks", blocks);
    const MemoryVerdict verdict = stage_memory_verdict(point, plan);
    row.set("peak_memory_bytes", verdict.peak_bytes);
    row.set("activation_memory_bytes", verdict.activation_bytes);
    if (!verdict.fits() && !point.training.simulate_oom)
      return fail(Status::oom, verdict.message);
    if (!verdict.fits())
      add_message(row, "does not fit, simulated (memory_check: warn): " + verdict.message);

    const auto& par = point.parallelism;
    sim::PipelinePlan pipe = plan.pipeline;
    for (auto& stage : pipe.stages)
      stage.activation_bytes *= options.work_scale;
    row.set("work_scale", options.work_scale);
    // Simulate under the point's symmetries (Fold.hpp), planned with the stages' own buckets; a
    // collective that does not fold drops the symmetries that keep it, and the graph is built again
    // with the others.
    FoldPlan folding = plan_fold(point);
    row.set("collective_fidelity", collective_fidelity(point, folding));
    ResourceEstimate estimate;
    if (const std::string over = check_estimate(row, point, &folding, &estimate); !over.empty())
      return fail(Status::invalid, over);
    if (options.on_workload) { // an exported workload holds every GPU's tasks: guarded unfolded
      folding = FoldPlan{};
      if (const std::string over = over_limits(point, estimate_resources(point, &folding)); !over.empty())
        return fail(Status::invalid, "its export holds every GPU's tasks, unfolded: " + over);
    }
    sim::ComputeOptions compute = compute_options(point);
    compute.scale               = options.work_scale;
    for (;;) {
      const sim::Fold fold(pipe.devices(), folding.generators);
      pipe.fold = fold.trivial() ? nullptr : &fold;
      sim::TaskGraph graph = sim::build_schedule(pipe);
      ChoiceCount choices;
      resolve_collectives(graph, point.cluster, choices, pipe.fold);
      row.set("collective_algorithms", choices.text());
      row.set("collective_times", apply_measured_collectives(graph, point.cluster, point.profile));
      const auto seconds = sim::compute_durations(graph, point.model, cost, compute);
      if (options.on_workload) {
        options.on_workload({graph, point.cluster, seconds, row});
        return row;
      }
      sim::ReplayOptions replay = replay_options(point, options);
      replay.fold = pipe.fold;
      replay.estimated_activities = estimate.activities; // for progress lines only
      const HostIssue host =
          sim::is_pytorch(point.training.framework) ? issue_from_host(graph, point, seconds, replay) : HostIssue{};
      sim::ReplayResult result;
      try {
        result = sim::replay(graph, point.cluster, seconds, replay);
      } catch (const sim::FoldError& e) {
        std::vector<sim::FoldGenerator> kept;
        for (auto& g : folding.generators)
          if (std::find(e.generators().begin(), e.generators().end(), g.name) == e.generators().end() &&
              !e.generators().empty())
            kept.push_back(std::move(g));
        for (const std::string& name : e.generators().empty() ? std::vector<std::string>{"tp", "dp"} : e.generators())
          (name == "tp" ? folding.tp : folding.replicas) = 1;
        folding.generators = std::move(kept);
        folding.note += (folding.note.empty() ? "" : "; ") + std::string(e.what());
        row.set("collective_fidelity", collective_fidelity(point, folding));
        // Less folded, the point costs more: estimated again, and refused over the limits.
        if (const std::string over = check_estimate(row, point, &folding, &estimate); !over.empty())
          return fail(Status::invalid, over);
        continue;
      }
      fill_timing_columns(row, point, result, 1);
      if (host.gpus > 0) {
        row.set("host_busy_fraction", host.host_s / (host.gpus * result.makespan_s));
        row.set("gpu_busy_fraction", host.gpu_s / (host.gpus * result.makespan_s));
      }
      set_comm_columns(row, sim::comm_breakdown(graph, result.timings, pipe.fold), true,
                       point.model.has(models::LayerKind::moe));
      for (const auto& l : point.model.layers())
        if (l.kind == models::LayerKind::attention && par.tp > l.kv_heads) {
          add_message(row, "K/V heads replicated: tp " + std::to_string(par.tp) + " > " + std::to_string(l.kv_heads) +
                               " K/V heads, each GPU computes one (Megatron); their weights are counted at 1/tp");
          break;
        }
      if (!options.trace_dir.empty()) {
        const TimelineChoice drawn =
            choose_timeline(point, options.trace_view, graph, pipe.fold != nullptr ? &fold : nullptr);
        if (!drawn.note.empty())
          add_message(row, drawn.note);
        if (drawn.draw && pipe.fold != nullptr && !drawn.folded) {  // every GPU of a folded run: unfold it
          const auto [whole, timings] = sim::unfold(graph, result.timings, fold);
          sim::ReplayResult unfolded = result;
          unfolded.timings = timings;
          write_timeline(point, whole, unfolded, point.cluster, pipeline_timeline_memory(point, plan, whole),
                         options.trace_dir, nullptr, drawn.scope);
        } else if (drawn.draw) {
          write_timeline(point, graph, result, point.cluster, pipeline_timeline_memory(point, plan, graph),
                         options.trace_dir, pipe.fold != nullptr ? &fold : nullptr, drawn.scope);
        }
        // Device (s, r, t) holds pipeline rank s mod pp.
        const int members = par.replicas() * par.tp;
        write_device_table(point, result, options.trace_dir, [&](int d) {
          return plan.stage_memory[static_cast<std::size_t>(d / members)].total();
        });
      }
      break;
    }
    return row;
  } catch (const std::exception& e) {
    return fail(Status::error, e.what());
  }
}

}  // namespace ddlsim::experiments
