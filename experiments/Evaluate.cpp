#include "experiments/Evaluate.hpp"

#include "calibration/RooflineCostModel.hpp"
#include "common/Error.hpp"
#include "common/Units.hpp"
#include "sim/OpCosts.hpp"
#include "traces/ChromeTrace.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

namespace ddlsim::experiments {
namespace {

void write_timeline(const PointConfig& point, const sim::TaskGraph& graph, const sim::ReplayResult& result,
                    const std::string& dir)
{
  traces::ChromeTrace trace;
  for (int d = 0; d < graph.device_count(); ++d) {
    trace.set_track_name(d, 0, "gpu" + std::to_string(d), "compute");
    trace.set_track_name(d, 1, "gpu" + std::to_string(d), "communication");
  }
  for (sim::TaskId id = 0; id < graph.size(); ++id) {
    const auto& t = result.timings[id];
    traces::TraceEvent e{.name = graph.label(id), .category = "", .pid = 0, .tid = 0, .start_s = t.start_s,
                         .duration_s = t.end_s - t.start_s, .args = {}};
    switch (graph.kind(id)) {
    case sim::TaskKind::compute:
      e.pid = graph.compute(id).device;
      e.category = std::string(sim::phase_table.name(graph.compute(id).phase));
      trace.add(e);
      break;
    case sim::TaskKind::transfer:
      e.category = "transfer";
      e.args = {{"bytes", format_number(graph.transfer(id).bytes)}};
      e.pid = graph.transfer(id).src;
      e.tid = 1;
      trace.add(e);
      break;
    case sim::TaskKind::collective:
      e.category = "collective";
      e.args = {{"bytes", format_number(graph.collective(id).bytes)}};
      e.tid = 1;
      for (int d : graph.collective(id).group) {
        e.pid = d;
        trace.add(e);
      }
      break;
    }
  }
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + point.experiment + "_" + std::to_string(point.index) + ".json";
  std::ofstream out(path);
  trace.write(out);
  if (!out)
    throw Error("cannot write timeline " + path);
}

}  // namespace

PointPlan plan_point(const PointConfig& point, const calibration::CostModel& cost)
{
  const auto& layers = point.model.layers();
  const int mb = point.training.micro_batch;
  const Dtype dtype = point.training.dtype;
  std::vector<double> layer_seconds(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i)
    layer_seconds[i] = cost.seconds(sim::layer_work(layers[i], sim::Phase::forward, mb, dtype, point.training.optimizer)) +
                       cost.seconds(sim::layer_work(layers[i], sim::Phase::backward, mb, dtype, point.training.optimizer));
  const auto ranges = models::partition_min_max(layer_seconds, point.parallelism.pp);

  PointPlan plan;
  auto& pipe = plan.pipeline;
  pipe.schedule = point.parallelism.schedule;
  pipe.dp = point.parallelism.dp;
  pipe.micro_batches = point.micro_batches();
  pipe.micro_batch_size = mb;
  pipe.dp_algorithm = point.parallelism.dp_collective;
  // GPipe keeps every micro-batch's activations until its backward: M x mb samples per stage.
  const double in_flight = static_cast<double>(pipe.micro_batches) * mb;
  for (const auto& r : ranges) {
    double params = 0;
    for (std::size_t i = r.begin; i < r.end; ++i)
      params += layers[i].parameters;
    pipe.stages.push_back({.layers = r,
                           .activation_bytes = layers[r.end - 1].output_elements * dtype_bytes(dtype),
                           .gradient_bytes = params * dtype_bytes(dtype)});
    plan.stage_memory.push_back(
        models::estimate_stage_memory(point.model, r, dtype, point.training.optimizer, in_flight));
  }
  return plan;
}

ResultRow describe_point(const PointConfig& p)
{
  ResultRow row;
  row.set("config_id", static_cast<long long>(p.index));
  row.set("experiment", p.experiment);
  row.set("model", p.model_label);
  row.set("cluster", p.cluster_label);
  row.set("calibration", p.calibration_label);
  row.set("schedule", std::string(sim::schedule_table.name(p.parallelism.schedule)));
  row.set("pp", static_cast<long long>(p.parallelism.pp));
  row.set("dp", static_cast<long long>(p.parallelism.dp));
  row.set("tp", static_cast<long long>(p.parallelism.tp));
  row.set("gpus", static_cast<long long>(p.parallelism.gpus()));
  row.set("global_batch", p.training.global_batch);
  row.set("micro_batch", static_cast<long long>(p.training.micro_batch));
  if (p.is_valid())
    row.set("num_micro_batches", static_cast<long long>(p.micro_batches()));
  row.set("dtype", std::string(dtype_table.name(p.training.dtype)));
  row.set("optimizer", std::string(models::optimizer_table.name(p.training.optimizer)));
  row.set("dp_collective", std::string(sim::collective_algorithm_table.name(p.parallelism.dp_collective)));
  row.set("collective_fidelity", std::string("flow"));
  row.set("model_parameters", p.model.parameter_count());
  row.set("memory_capacity_bytes", p.cluster.gpu_memory);
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
  ResultRow row = describe_point(point);
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
    const calibration::RooflineCostModel cost(point.profile);
    const PointPlan plan = plan_point(point, cost);

    double peak = 0;
    for (std::size_t s = 0; s < plan.stage_memory.size(); ++s) {
      const double need = plan.stage_memory[s].total();
      peak = std::max(peak, need);
      if (need > point.cluster.gpu_memory) {
        row.set("peak_memory_bytes", need);
        return fail(Status::oom, "stage " + std::to_string(s) + " (GPU " + std::to_string(plan.pipeline.device(int(s), 0)) +
                                     ") needs " + format_quantity(need, Dimension::bytes) + " > capacity " +
                                     format_quantity(point.cluster.gpu_memory, Dimension::bytes) + " (weights " +
                                     format_quantity(plan.stage_memory[s].weights, Dimension::bytes) + ", activations " +
                                     format_quantity(plan.stage_memory[s].activations, Dimension::bytes) + ")");
      }
    }
    row.set("peak_memory_bytes", peak);

    const sim::TaskGraph graph = sim::build_schedule(plan.pipeline);
    const auto seconds =
        sim::compute_durations(graph, point.model, cost, point.training.dtype, point.training.optimizer);
    const sim::ReplayResult result = sim::replay(graph, point.cluster, seconds, options.replay);

    const auto& dev = result.devices;
    const double n = static_cast<double>(dev.size());
    auto mean = [&](auto field) {
      return std::accumulate(dev.begin(), dev.end(), 0.0, [&](double acc, const sim::DeviceStats& d) { return acc + field(d); }) / n;
    };
    const double t = result.makespan_s;
    const double flop_per_iteration = static_cast<double>(point.training.global_batch) *
                                      (point.model.forward_flop_per_sample() + point.model.backward_flop_per_sample());
    row.set("status", std::string("ok"));
    row.set("iteration_time_s", t);
    row.set("throughput_samples_per_s", static_cast<double>(point.training.global_batch) / t);
    row.set("bubble_fraction", mean([](const sim::DeviceStats& d) { return d.idle_s; }) / t);
    row.set("compute_time_s", mean([](const sim::DeviceStats& d) { return d.compute_s; }));
    row.set("exposed_comm_time_s", mean([](const sim::DeviceStats& d) { return d.exposed_comm_s; }));
    row.set("comm_bytes_per_gpu", mean([](const sim::DeviceStats& d) { return d.bytes_sent; }));
    row.set("sim_activities", static_cast<long long>(result.activities));
    row.set("sim_wall_time_s", result.wall_time_s);
    row.set("achieved_flop_per_s_per_gpu", flop_per_iteration / t / n);
    if (!options.trace_dir.empty())
      write_timeline(point, graph, result, options.trace_dir);
    return row;
  } catch (const std::exception& e) {
    return fail(Status::error, e.what());
  }
}

}  // namespace ddlsim::experiments
