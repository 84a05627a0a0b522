// `ddlsim run`'s progress on stderr: the sweep's points done, elapsed and ETA, and for each point
// running for over 2 s its own progress: the simulated time reached, the share of the activities the
// resource guard estimated for it (experiments/Resources.hpp) simulated so far, its elapsed time and
// ETA (the replay's time so far x (1 - share) / share).
//
//   cli::ProgressLine line(stderr, points, cli::ProgressStyle::plain);
//   line.point(index, progress);      // as a running point reports (SweepRunner's pipe)
//   line.finished(index);             // when it is done
//   line.sweep(done);                 // after each finished point
//
// Two styles. `terminal` rewrites one line in place ("\r", then erase to its end) at every report and
// ends it when the sweep is done. `plain` writes whole lines, "ddlsim: progress [3/16] 19%, elapsed
// 5.0s, eta 21.3s; point 4: ...", at most one every `interval_s` (host seconds; the first once the
// sweep has run that long, so a short sweep writes none), and a last one when the sweep ends if it
// wrote any: for logs and CI, where "\r" is noise. Lines are written when the sweep or a running
// point reports (a replay reports about every 0.5 s).
//
// Which style, if any, follows `--progress auto|always|never` (progress_mode_table, progress_style).
#pragma once

#include "cli/CommandLine.hpp"
#include "common/EnumTable.hpp"
#include "experiments/SweepRunner.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace ddlsim::cli {

enum class ProgressMode { automatic, always, never };

inline constexpr EnumTable<ProgressMode, 3> progress_mode_table{{{
    {"auto", ProgressMode::automatic,
     "on a terminal one line rewritten in place; elsewhere (a pipe, a file, CI) a plain line every 5 s"},
    {"always", ProgressMode::always, "a plain line every 5 s, on a terminal too (for a recorded terminal)"},
    {"never", ProgressMode::never, "none"},
}}};

enum class ProgressStyle { terminal, plain };

/// The style `mode` gives with stderr a terminal or not; nullopt: no progress.
std::optional<ProgressStyle> progress_style(ProgressMode mode, bool stderr_is_terminal);

/// `--progress auto|always|never` on a command (`value` unset: the command's default).
void add_progress_option(CLI::App* app, std::optional<std::string>& value, const std::string& default_help);

/// The style of `--progress value` (unset: `fallback`) on this process's stderr; nullopt: none.
std::optional<ProgressStyle> progress_style(const std::optional<std::string>& value, ProgressMode fallback);

/// Test hooks (tests/cli/test_cli_progress.py): DDLSIM_PROGRESS_AFTER_SECONDS=S shows points from S
/// seconds (default 2), DDLSIM_PROGRESS_INTERVAL_SECONDS=S writes plain lines every S (default 5).
double progress_setting(const char* variable, double fallback);

class ProgressLine {
public:
  /// Points are shown once they have run `point_after_s`; plain lines at most every `interval_s`
  /// (host seconds).
  ProgressLine(std::FILE* out, std::size_t total, ProgressStyle style = ProgressStyle::terminal,
               double point_after_s = 2.0, double interval_s = 5.0)
      : out_(out), total_(total), style_(style), point_after_s_(point_after_s), interval_s_(interval_s) {}
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
  void write_plain(bool last);
  std::FILE* out_;
  std::size_t total_;
  ProgressStyle style_;
  double point_after_s_;
  double interval_s_;
  std::size_t done_ = 0;
  std::size_t plain_lines_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_line_ = start_;
  std::map<std::size_t, experiments::PointProgress> running_;
};

}  // namespace ddlsim::cli
