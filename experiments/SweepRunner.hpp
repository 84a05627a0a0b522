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
// A long sweep streams: from a PointSource each point is built in the process that simulates it,
// and rows go only to on_row (`ddlsim run` spools them to disk, experiments/RowSpool.hpp), so the
// parent's memory, and with it the cost of each fork, stays the same however many points there are.
//
//   SweepOptions opts{.jobs = 2};
//   std::vector<ResultRow> rows = run_sweep(points, opts);     // a few points, rows in memory
//   opts.on_row = [&](std::size_t k, const ResultRow& row) { spool.add(k, row); };
//   run_sweep(point_source(exp, exp.point_list()), opts);      // any number of points
#pragma once

#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"

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

/// A sweep's points, built one at a time where they are needed (see the file comment).
struct PointSource {
  std::size_t count = 0;
  std::function<PointConfig(std::size_t)> point; ///< the k-th point, 0 <= k < count
  std::function<bool(std::size_t)> valid;        ///< whether point(k) can be simulated, without building it
};
/// The points of `list` (Experiment::point_list), each built by `exp` when it is simulated. `exp`
/// must outlive the source.
PointSource point_source(const Experiment& exp, const PointList& list);

/// Evaluates every point of `points`, handing each row to options.on_row (k: the point's position in
/// the source); see the file comment. Throws ddlsim::Error only when the system refuses to create
/// processes or pipes.
void run_sweep(const PointSource& points, const SweepOptions& options,
               const PointProgressCallback& on_point_progress = {});
/// The same over points held in memory, returning their rows in point order.
std::vector<ResultRow> run_sweep(const std::vector<PointConfig>& points, const SweepOptions& options,
                                 const PointProgressCallback& on_point_progress = {});

/// What `ddlsim validate` finds in a sweep.
struct SweepCheck {
  std::size_t points = 0; ///< those the `where:` constraint keeps
  std::size_t valid  = 0; ///< of which can be simulated
  std::size_t oom    = 0; ///< of those, do not fit in their GPUs' memory
};
/// Called for each invalid point with its problems, and for each point out of memory with its verdict.
using SweepCheckReport = std::function<void(const PointConfig&, const MemoryVerdict*)>;
/// Checks every point as `run` would without simulating (its problems; memory by partition and memory
/// model alone), building one point at a time. Throws ConfigError as Experiment::point_list does.
SweepCheck check_sweep(const Experiment& exp, const SweepCheckReport& report = {});

}  // namespace ddlsim::experiments
