#include "experiments/Resources.hpp"

#include "common/Units.hpp"
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "sim/Collectives.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ddlsim::experiments {
namespace {

// Memory model: the process with the model, profile and SimGrid loaded, then per task (graph node,
// its timing and replay state), per dependency, per simulated host (SimGrid host, links, routes) and
// per message of the flow-level collectives in flight (at most one per host's stream and group).
// Chosen to stay above the peak RSS that `ddlsim bench` measures for its scenarios (by 1.1-2x:
// docs/performance.md prints both): a guard should refuse late rather than early.
constexpr double base_bytes        = 24.0 * (1 << 20);
constexpr double bytes_per_task    = 150;
constexpr double bytes_per_edge    = 8;
constexpr double bytes_per_host    = 64.0 * 1024;
constexpr double bytes_per_message = 120;

// Messages of a collective of `kind` over `group` (flow fidelity), 0 for analytic ones (a timer).
double messages(sim::CollectiveKind kind, sim::CollectiveAlgorithm algorithm, sim::CollectiveFidelity fidelity,
                std::vector<int> group, int gpus_per_node)
{
  if (fidelity == sim::CollectiveFidelity::analytic || group.size() < 2)
    return 0;
  // The most tree chunks (16): the estimate does not know each bucket's exact size.
  const sim::CollectiveTask c{.kind = kind, .algorithm = algorithm, .group = std::move(group), .bytes = 1e300};
  return static_cast<double>(sim::message_count(c, gpus_per_node));
}

ResourceEstimate parameter_server(const PointConfig& point)
{
  const auto& ps = *point.parallelism.ps;
  const double W = point.parallelism.dp, S = ps.servers, K = ps.iterations, M = point.micro_batches();
  ResourceEstimate e;
  e.devices = ps.gpus(point.parallelism.dp);
  // Per iteration: 2M passes per worker, a push, an update and a pull per worker and server, and
  // with BSP one barrier per server.
  e.tasks      = K * (W * 2 * M + 3 * W * S + S);
  e.activities = K * (W * 2 * M + 3 * W * S);
  // Each pull waits for W updates under SSP (and the staleness analysis reads as many).
  const double waits = ps.consistency == sim::Consistency::ssp ? W : ps.consistency == sim::Consistency::bsp ? 2 : 1;
  e.edges            = K * (W * 2 * M + W * S * (3 + waits));
  return e;
}

} // namespace

ResourceEstimate estimate_resources(const PointConfig& point)
{
  const auto& par = point.parallelism;
  ResourceEstimate e;
  if (par.ps) {
    e = parameter_server(point);
  } else {
    const bool folded  = folds_tensor_groups(point); // as evaluate_point() simulates it
    const int tp       = folded ? 1 : par.tp;
    const int per_node = folded ? point.cluster.gpus_per_node / par.tp : point.cluster.gpus_per_node;
    const double M = point.micro_batches(), C = static_cast<double>(par.pp) * par.virtual_stages;
    const double members       = static_cast<double>(par.dp) * tp;
    const models::Model& model = point.model;

    // Per micro-batch and replica over the whole model: the tensor-parallel collectives and the
    // synchronised-norm points (as plan_point() places them), each splitting a pass.
    const models::StageRange all{0, model.size()};
    const double tp_collectives = tp < 2 ? 0 : static_cast<double>(tensor_collectives(model, all, 1.0).size());
    double sync_points          = 0;
    if (par.dp > 1)
      for (const models::Layer& l : model.layers())
        sync_points += l.norm_channels > 0 ? 1 : 0;
    // Gradient buckets: each chunk's last bucket, plus those the whole model's gradients close as
    // evaluate's gradient_buckets() fills them (from the last layer; a bucket closes at the cap).
    double buckets = C;
    if (par.dp > 1 && par.dp_bucket > 0) {
      const double d = dtype_bytes(point.training.dtype);
      double bytes   = 0;
      for (std::size_t i = model.size(); i-- > 0;) {
        bytes += model.held_parameters(i, all, tp) * d;
        if (bytes >= par.dp_bucket) {
          buckets += 1;
          bytes = 0;
        }
      }
    }

    std::vector<int> dp_group, tp_group;
    for (int r = 0; r < par.dp; ++r)
      dp_group.push_back(r * tp);
    for (int t = 0; t < tp; ++t)
      tp_group.push_back(t);
    const double dp_messages =
        messages(sim::CollectiveKind::all_reduce, par.dp_collective, par.dp_fidelity, dp_group, per_node);
    // Tensor-parallel collectives are all-reduces or all-gathers: count the larger.
    const double tp_messages =
        messages(sim::CollectiveKind::all_reduce, par.tp_collective, par.tp_fidelity, tp_group, per_node);

    const double passes        = members * M * (2 * C + 2 * sync_points + tp_collectives); // compute segments
    const double bucket_splits = par.dp > 1 && par.dp_bucket > 0 ? members * (buckets - C) : 0;
    const double optimizer     = members * C;
    const double transfers     = par.pp > 1 ? 2 * M * (C - 1) * members : 0;
    const double collectives =
        (par.dp > 1 ? tp * (M * 2 * sync_points + (par.dp_bucket > 0 ? buckets : C)) : 0) + par.dp * M * tp_collectives;
    e.devices    = static_cast<double>(par.pp) * par.dp * tp;
    e.tasks      = passes + bucket_splits + optimizer + transfers + collectives;
    e.activities = passes + bucket_splits + optimizer + transfers +
                   (par.dp > 1 ? tp * (M * 2 * sync_points + (par.dp_bucket > 0 ? buckets : C)) * dp_messages : 0) +
                   par.dp * M * tp_collectives * tp_messages;
    // Every task waits for about two others (stream order and one transfer or collective); a
    // collective waits for each of its members.
    e.edges = 2 * e.tasks + (par.dp > 1 ? tp * M * 2 * sync_points * par.dp : 0) + par.dp * M * tp_collectives * tp;
    const double in_flight =
        e.devices * std::max({1.0, dp_messages / std::max(1, par.dp), tp_messages / std::max(1, tp)});
    e.memory_bytes = bytes_per_message * in_flight;
  }
  e.memory_bytes += base_bytes + bytes_per_task * e.tasks + bytes_per_edge * e.edges + bytes_per_host * e.devices;
  return e;
}

std::string over_limits(const PointConfig& point, const ResourceEstimate& cost)
{
  const bool activities = cost.activities > point.limits.max_activities;
  if (!activities && !(cost.memory_bytes > point.limits.max_memory_bytes))
    return {};
  const auto& par         = point.parallelism;
  const std::string shape = std::to_string(point.micro_batches()) + " micro-batches x pp " + std::to_string(par.pp) +
                            (par.virtual_stages > 1 ? " x v " + std::to_string(par.virtual_stages) : "") + " x dp " +
                            std::to_string(par.dp) + " x tp " + std::to_string(par.tp);
  char text[512];
  if (activities)
    std::snprintf(text, sizeof text,
                  "this point would need about %.3g SimGrid activities (%s), over limits.max_activities = %.3g: "
                  "make it smaller, or raise the limit (limits: {max_activities: N} or --set limits.max_activities=N)",
                  cost.activities, shape.c_str(), point.limits.max_activities);
  else
    std::snprintf(text, sizeof text,
                  "simulating this point would take about %s of memory (%.3g tasks, %s), over limits.max_memory = %s: "
                  "make it smaller, or raise the limit (limits: {max_memory: 64GiB} or --set limits.max_memory=64GiB)",
                  format_quantity(cost.memory_bytes, Dimension::bytes).c_str(), cost.tasks, shape.c_str(),
                  format_quantity(point.limits.max_memory_bytes, Dimension::bytes).c_str());
  return text;
}

} // namespace ddlsim::experiments
