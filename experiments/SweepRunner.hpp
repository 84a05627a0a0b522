// Running the points of a sweep, each in its own forked process.
//
// SimGrid's engine is a per-process singleton, so every point is simulated in a child process
// (fork costs about a millisecond and keeps results bit-identical). Up to `jobs` children run at
// once; rows come back in point order whatever order the children finish in. A child that crashes,
// returns garbage or runs past `point_timeout_s` becomes an `error` row naming the signal or the
// limit: the sweep goes on.
//
// on_row sees each row as soon as its point finishes, so a caller can keep a partial CSV on disk
// (`ddlsim run` rewrites it atomically as rows arrive: a killed sweep leaves a valid file, and
// `--resume` skips what it holds).
//
//   SweepOptions opts{.jobs = 2};
//   std::vector<ResultRow> rows = run_sweep(points, opts);
#pragma once

#include "experiments/Evaluate.hpp"

#include <functional>
#include <vector>

namespace ddlsim::experiments {

struct SweepOptions {
  int jobs = 1;
  EvaluateOptions evaluate;
  /// Called in the parent after each finished point with (points done, points in total).
  std::function<void(std::size_t, std::size_t)> on_progress;
  /// Called in the parent with each finished point's index (in `points`) and row, as it finishes.
  std::function<void(std::size_t, const ResultRow&)> on_row;
  /// A point still running after this many seconds is killed and becomes an `error` row (0: no limit).
  double point_timeout_s = 0;
};

/// A running point's progress as the parent sees it.
struct PointProgress {
  sim::ReplayProgress replay;  ///< its replay's report (wall_s: since the replay began)
  double elapsed_s = 0;        ///< since the point's process started
};
/// Called in the parent with a running point's index and progress, about every
/// evaluate.replay.progress_interval_s of its simulation (each child reports through a pipe).
using PointProgressCallback = std::function<void(std::size_t, const PointProgress&)>;

/// Evaluates every point; see the file comment. Throws ddlsim::Error only when the system refuses
/// to create processes or pipes.
std::vector<ResultRow> run_sweep(const std::vector<PointConfig>& points, const SweepOptions& options,
                                 const PointProgressCallback& on_point_progress = {});

}  // namespace ddlsim::experiments
