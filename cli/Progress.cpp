#include "cli/Progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

namespace ddlsim::cli {

void add_progress_option(CLI::App* app, std::optional<std::string>& value, const std::string& default_help)
{
  std::string help = "progress on stderr (" + default_help + ")";
  for (const auto& mode : progress_mode_table.entries)
    help += fmt::format("; {}: {}", mode.name, mode.help);
  app->add_option("--progress", value, help)
      ->check(
          [](const std::string& v) {
            return progress_mode_table.parse(v) ? std::string()
                                                : "expects one of " + progress_mode_table.names() + ", not '" + v + "'";
          },
          "", "")
      ->type_name("auto|always|never");
}

std::optional<ProgressStyle> progress_style(const std::optional<std::string>& value, ProgressMode fallback)
{
  return progress_style(value ? *progress_mode_table.parse(*value) : fallback, ::isatty(STDERR_FILENO) != 0);
}

double progress_setting(const char* variable, double fallback)
{
  const char* value = std::getenv(variable);
  return value ? std::atof(value) : fallback;
}

std::optional<ProgressStyle> progress_style(ProgressMode mode, bool stderr_is_terminal)
{
  switch (mode) {
  case ProgressMode::automatic:
    return stderr_is_terminal ? ProgressStyle::terminal : ProgressStyle::plain;
  case ProgressMode::always:
    return ProgressStyle::plain;
  case ProgressMode::never:
    break;
  }
  return std::nullopt;
}

std::string ProgressLine::describe(std::size_t index, const experiments::PointProgress& point)
{
  const sim::ReplayProgress& p = point.replay;
  char text[200];
  if (p.estimated_activities <= 0 || p.activities == 0) {
    std::snprintf(text, sizeof text, "point %zu: %.4g s simulated, %.1fs", index, p.simulated_s, point.elapsed_s);
    return text;
  }
  // The estimate may run a little above or below the replay's count: never 100% before the end.
  const double share = std::min(0.99, static_cast<double>(p.activities) / p.estimated_activities);
  std::snprintf(text, sizeof text, "point %zu: %.4g s simulated, %.0f%% of ~%.2g activities, %.1fs, eta %.1fs", index,
                p.simulated_s, 100 * share, p.estimated_activities, point.elapsed_s, p.wall_s * (1 - share) / share);
  return text;
}

void ProgressLine::sweep(std::size_t done)
{
  done_ = done;
  if (style_ == ProgressStyle::plain) {
    write_plain(done_ == total_ && plain_lines_ > 0);  // the end closes a log that showed progress
    return;
  }
  draw();
  if (done_ == total_)
    std::fputc('\n', out_);
}

void ProgressLine::point(std::size_t index, const experiments::PointProgress& progress)
{
  running_[index] = progress;
  if (style_ == ProgressStyle::plain)
    write_plain(false);
  else
    draw();
}

namespace {

struct SweepFigures {
  double elapsed_s, eta_s, percent;
};

SweepFigures figures(std::chrono::steady_clock::time_point start, std::size_t done, std::size_t total)
{
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {.elapsed_s = elapsed,
          .eta_s     = done ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0.0,
          .percent   = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0};
}

}  // namespace

void ProgressLine::draw()
{
  const SweepFigures f = figures(start_, done_, total_);
  std::string line = "\r[" + std::to_string(done_) + "/" + std::to_string(total_) + "]";
  char text[96];
  std::snprintf(text, sizeof text, " %3.0f%%  elapsed %.1fs  eta %.1fs", f.percent, f.elapsed_s, f.eta_s);
  line += text;
  for (const auto& [index, p] : running_)
    if (p.elapsed_s >= point_after_s_)
      line += "  | " + describe(index, p);
  line += "\x1b[K";  // erase what a longer line left
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

void ProgressLine::write_plain(bool last)
{
  const auto now = std::chrono::steady_clock::now();
  if (!last && std::chrono::duration<double>(now - last_line_).count() < interval_s_)
    return;
  last_line_ = now;
  ++plain_lines_;
  const SweepFigures f = figures(start_, done_, total_);
  char text[128];
  std::snprintf(text, sizeof text, "ddlsim: progress [%zu/%zu] %.0f%%, elapsed %.1fs", done_, total_, f.percent,
                f.elapsed_s);
  std::string line = text;
  if (done_ > 0) {  // the sweep's ETA needs a finished point
    std::snprintf(text, sizeof text, ", eta %.1fs", f.eta_s);
    line += text;
  }
  if (!last)
    for (const auto& [index, p] : running_)
      if (p.elapsed_s >= point_after_s_)
        line += "; " + describe(index, p);
  line += '\n';
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

}  // namespace ddlsim::cli
