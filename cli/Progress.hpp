// `ddlsim run`'s progress line on a terminal: the sweep's points done, elapsed and ETA, and for each
// point running for over 2 s its own progress: the simulated time reached, the share of the
// activities the resource guard estimated for it (experiments/Resources.hpp) simulated so far, its
// elapsed time and ETA (the replay's time so far x (1 - share) / share).
//
//   cli::ProgressLine line(stderr, points);
//   line.point(index, progress);      // as a running point reports (SweepRunner's pipe)
//   line.finished(index);             // when it is done
//   line.sweep(done);                 // after each finished point
//
// It rewrites one line in place ("\r", then erase to its end) and ends it when the sweep is done.
// The caller decides whether to show one (a terminal, no --quiet).
#pragma once

#include "experiments/SweepRunner.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

namespace ddlsim::cli {

class ProgressLine {
public:
  /// Points are shown once they have run `point_after_s` (host seconds).
  ProgressLine(std::FILE* out, std::size_t total, double point_after_s = 2.0)
      : out_(out), total_(total), point_after_s_(point_after_s) {}
  /// `done` of the points are finished.
  void sweep(std::size_t done);
  /// Point `index` (in the sweep's order) reports.
  void point(std::size_t index, const experiments::PointProgress& progress);
  /// Point `index` is done: its progress leaves the line.
  void finished(std::size_t index) { running_.erase(index); }

  /// The text of a point's progress, e.g. "point 4: 1.234 s simulated, 45% of ~2.1e+06 activities,
  /// 6.1s, eta 7.5s".
  static std::string describe(std::size_t index, const experiments::PointProgress& progress);

private:
  void draw();
  std::FILE* out_;
  std::size_t total_;
  double point_after_s_;
  std::size_t done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::map<std::size_t, experiments::PointProgress> running_;
};

}  // namespace ddlsim::cli
