// Searches over configurations, built on the sweep runner.
//
// Micro-batch search (the memory-aware search of the PLOS ONE 2023 study): for the experiment's model,
// cluster and pipeline layout, which micro-batch size b and count M = B / (b x dp) give the highest
// throughput at each mini-batch size B, and what is the largest mini-batch that trains at all,
// both against the conventional rule of GPipe (M = 4 K micro-batches for K stages). Mini-batches
// double from the experiment's global batch until no micro-batch size fits in memory (or until
// `max_batch`); each is tried with every micro-batch size that divides B / dp (up to
// `max_micro_batches` micro-batches), and with the baseline's. Between the last mini-batch that
// trains and the first that does not, a bisection in steps of dp x the baseline's M finds each
// largest trainable mini-batch (the search's and the baseline's) more finely.
//
//   MicrobatchSearch s = search_microbatch(point, make_point, {.jobs = 2});
//   for (const auto& b : s.batches) ...   // best and baseline per mini-batch
#pragma once

#include "experiments/Plan.hpp"
#include "experiments/SweepRunner.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace ddlsim::experiments {

struct MicrobatchSearchOptions {
  int jobs = 1;
  long long max_batch = 0;        ///< stop doubling the mini-batch here (0: 16 x the experiment's)
  long long max_micro_batches = 1024;  ///< leave out micro-batch sizes that need more than this M
  int baseline_factor = 4;        ///< the baseline's M = factor x pp
};

struct BatchResult {
  long long global_batch = 0;
  std::optional<std::size_t> best;      ///< row (in MicrobatchSearch::rows) of the fastest point that is ok
  std::optional<std::size_t> baseline;  ///< row of the baseline's point (M = factor x pp), if it exists
};

struct MicrobatchSearch {
  std::vector<ResultRow> rows;        ///< every point tried, in order of (mini-batch, micro-batch)
  std::vector<BatchResult> batches;   ///< per mini-batch, in increasing order
  long long largest_batch = 0;        ///< largest mini-batch with some point ok (0: none)
  long long largest_baseline_batch = 0;  ///< largest mini-batch whose baseline point is ok
  bool stopped_at_max = false;        ///< the doubling reached max_batch with points still fitting
};

/// Runs the search from `base` (its global batch is the first mini-batch). Throws Error when the
/// base point is invalid. `make_point(global_batch, micro_batch)` gives each point tried: `base` with
/// those two set, derived and checked again (Experiment::with).
MicrobatchSearch search_microbatch(const PointConfig& base,
                                   const std::function<PointConfig(long long, int)>& make_point,
                                   const MicrobatchSearchOptions& options);

// Grid search (Gholami et al., SPAA 2018, extended with pipeline stages): every way of writing the
// cluster's GPU count P as pp x tp x dp (tp is the P_r of the model x data grid, dp its P_c), each
// simulated at the experiment's other settings; the rows ranked by throughput. With `pipeline`
// false only pp = 1: the P_r x P_c grid itself.

struct GridSearchOptions {
  int jobs = 1;
  bool pipeline = true;  ///< also vary pp
};

/// One shape of the grid: pipeline, tensor and data-parallel sizes.
struct GridShape {
  int pp = 1, tp = 1, dp = 1;
};

struct GridSearch {
  std::vector<ResultRow> rows;       ///< every shape, in order of (pp, tp, dp)
  std::vector<GridShape> shapes;     ///< the shape of each row
  std::vector<std::size_t> ranking;  ///< rows that are ok, fastest first
};

/// Every shape of `gpus` GPUs. `make_point(pp, tp, dp)` resolves the experiment at that shape, with
/// the checks of an experiment file (tensor parallelism dividing the heads, enough blocks for pp),
/// so an impossible shape is an `invalid` row that says why.
GridSearch search_grid(int gpus, const std::function<PointConfig(int pp, int tp, int dp)>& make_point,
                       const GridSearchOptions& options);

// Parallel-layout search (Megatron's and Calculon's planners): every (tp, pp, dp, cp, zero,
// micro-batch, schedule, virtual stages) of the cluster's GPUs for the experiment's model and global
// batch, with the cheapest recomputation that fits, screened before anything is simulated:
//   1. enumerate: tp a divisor of a node's GPUs, cp a power of two with the sequence divisible by
//      2 cp and at least min_cp_tokens tokens per GPU (sequence models), pp a divisor of the rest up
//      to the model's blocks, dp what is left; ZeRO stages 0-3; sequence parallelism whenever
//      tp > 1 (as Megatron recommends); micro-batch sizes up to max_micro_batch
//      dividing global_batch / dp that leave at least pp micro-batches; with pp > 1 the schedules
//      (1F1B and interleaved) and the virtual stages that split the layers evenly
//      (models::splits_evenly), interleaved only where pp divides the micro-batch count; the dtypes
//      and frameworks asked for
//   2. validate: each layout resolved with the experiment file's own checks (heads, K/V heads,
//      blocks, divisibility, the resource guard): `make_point`
//   3. memory: plan_point and the memory model, no SimGrid, for each recomputation in turn (none,
//      selective, full: recomputing only adds work, so the first that fits is the fastest); what
//      fits with none of them is dropped
//   4. estimate: a closed form of the iteration: the slowest stage's forward and backward times the
//      pipeline's (M + (K - 1) / v) passes, the tensor-parallel collectives of every micro-batch, and
//      the data-parallel and ZeRO traffic that cannot hide under compute (analytic collectives)
//   5. simulate the `top` best estimates in full (the sweep runner, -j) and rank them by throughput
//   6. with `confirm` K: simulate the K best again with every collective as flows (the slow, contended
//      model) and rank those, so that a caller can say when the order changes
struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;
  ZeroStage zero         = ZeroStage::none;
  bool sequence_parallel = false;
  int micro_batch = 1;
  int ep = 1;  ///< expert parallelism (mixtures of experts): a divisor of dp x cp that fits the experts
  sim::ScheduleKind schedule = sim::ScheduleKind::one_f_one_b;
  int virtual_stages = 1;
  models::Recompute recompute = models::Recompute::none;  ///< the cheapest that fits (step 3)
  std::optional<Dtype> dtype;                 ///< set when the search varies it (--dtype)
  std::optional<sim::Framework> framework;    ///< set when the search varies it (--framework)
};

struct ParallelSearchOptions {
  int jobs = 1;
  std::size_t top = 16;                  ///< layouts simulated in full
  std::vector<ZeroStage> zero_stages{ZeroStage::none, ZeroStage::optimizer, ZeroStage::gradients,
                                     ZeroStage::parameters};
  std::vector<int> expert_parallel;      ///< ep sizes tried for a mixture of experts; empty: every one that fits
  long long max_micro_batches = 4096;    ///< leave out micro-batch sizes that need more than this M
  int max_micro_batch = 16;              ///< the largest micro-batch size tried
  double min_cp_tokens = 4096;           ///< context parallelism only down to chunks of this many tokens
  /// Pipeline schedules tried with pp > 1; empty: the experiment's, and with 1F1B or interleaved both.
  std::vector<sim::ScheduleKind> schedules;
  /// Virtual stages tried with the interleaved schedule, those that split the layers evenly
  /// (models::splits_evenly); empty: every such v from 2 to 8.
  std::vector<int> virtual_stages;
  /// Recomputation tried in this order, the first that fits kept (recomputing only adds work);
  /// empty: none, selective (models with attention), full.
  std::vector<models::Recompute> recomputes;
  std::vector<Dtype> dtypes;                  ///< empty: the experiment's only
  std::vector<sim::Framework> frameworks;     ///< empty: the experiment's only
  std::size_t confirm = 0;                    ///< the best this many simulated again at flow fidelity
};

struct ParallelCandidate {
  ParallelLayout layout;
  PointConfig point;
  double estimate_s = 0;     ///< the closed-form iteration time (step 4)
  double peak_bytes = 0;     ///< the GPU that needs the most memory
};

struct ParallelSearch {
  std::size_t enumerated = 0;           ///< layouts of step 1
  std::size_t valid = 0;                ///< of them, passing step 2
  std::size_t fitting = 0;              ///< of them, fitting in memory (step 3)
  std::vector<ParallelCandidate> simulated;  ///< the `top` best estimates, in estimate order
  std::vector<ResultRow> rows;          ///< their simulated rows, same order
  std::vector<std::size_t> ranking;     ///< rows that are ok, highest throughput first
  double screen_s = 0;                  ///< host seconds of steps 1-4
  double simulate_s = 0;                ///< host seconds of step 5
  /// --confirm K: the K best of `ranking` simulated again with every collective at flow fidelity,
  /// rows in that order; `confirmed_ranking` ranks them (indices into confirmed) by throughput.
  std::vector<ResultRow> confirmed;
  std::vector<std::size_t> confirmed_ranking;
  double confirm_s = 0;                 ///< host seconds of the confirmation
};

/// Every layout of step 1 for the base point's model, cluster and global batch.
std::vector<ParallelLayout> parallel_layouts(const PointConfig& base, const ParallelSearchOptions& options);

/// Closed-form iteration time of a valid point (step 4), seconds. Its plan from plan_point.
double estimate_iteration(const PointConfig& point, const PointPlan& plan, const calibration::CostModel& cost);

/// Runs the search. `make_point(layout)` resolves the experiment at that layout with an experiment
/// file's checks (its problems filled when it cannot be simulated); it is called once per shape
/// (tp, pp, dp, cp, ep, ZeRO stage, dtype, framework), the micro-batch, schedule, virtual stages and
/// recomputation set on a copy. Throws Error when no layout fits.
ParallelSearch search_parallel(const PointConfig& base, const std::function<PointConfig(const ParallelLayout&)>& make_point,
                               const ParallelSearchOptions& options);

}  // namespace ddlsim::experiments
