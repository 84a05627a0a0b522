// Searches over configurations, built on the sweep runner.
//
// Micro-batch search (the memory-aware search of the PLOS ONE 2023 study): for the experiment's model,
// cluster and pipeline layout, which micro-batch size b and count M = B / (b x dp) give the highest
// throughput at each mini-batch size B, and what is the largest mini-batch that trains at all,
// both against the conventional rule of GPipe (M = 4 K micro-batches for K stages). Mini-batches
// double from the experiment's global batch until no micro-batch size fits in memory (or until
// `max_batch`); each is tried with every power-of-two micro-batch size that divides B / dp (up to
// `max_micro_batches` micro-batches), and with the baseline's. Between the last mini-batch that
// trains and the first that does not, a bisection in steps of dp x the baseline's M finds each
// largest trainable mini-batch (the search's and the baseline's) more finely.
//
//   MicrobatchSearch s = search_microbatch(point, {.jobs = 2});
//   for (const auto& b : s.batches) ...   // best and baseline per mini-batch
#pragma once

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
/// base point is invalid.
MicrobatchSearch search_microbatch(const PointConfig& base, const MicrobatchSearchOptions& options);

// Grid search (Gholami et al., SPAA 2018, extended with pipeline stages): every way of writing the
// cluster's GPU count P as pp x tp x dp (tp is the P_r of the model x data grid, dp its P_c), each
// simulated at the experiment's other settings; the rows ranked by throughput. With `pipeline`
// false only pp = 1: the P_r x P_c grid itself.

struct GridSearchOptions {
  int jobs = 1;
  bool pipeline = true;  ///< also vary pp
};

struct GridSearch {
  std::vector<ResultRow> rows;       ///< every shape, in order of (pp, tp, dp)
  std::vector<std::size_t> ranking;  ///< rows that are ok, fastest first
};

/// Every shape of `gpus` GPUs. `make_point(pp, tp, dp)` resolves the experiment at that shape, with
/// the checks of an experiment file (tensor parallelism dividing the heads, enough blocks for pp),
/// so an impossible shape is an `invalid` row that says why.
GridSearch search_grid(int gpus, const std::function<PointConfig(int pp, int tp, int dp)>& make_point,
                       const GridSearchOptions& options);

}  // namespace ddlsim::experiments
