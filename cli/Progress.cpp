#include "cli/Progress.hpp"

#include <algorithm>

namespace ddlsim::cli {

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
  draw();
  if (done_ == total_)
    std::fputc('\n', out_);
}

void ProgressLine::point(std::size_t index, const experiments::PointProgress& progress)
{
  running_[index] = progress;
  draw();
}

void ProgressLine::draw()
{
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done_ ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
  std::string line = "\r[" + std::to_string(done_) + "/" + std::to_string(total_) + "]";
  char text[96];
  std::snprintf(text, sizeof text, " %3.0f%%  elapsed %.1fs  eta %.1fs",
                total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0, elapsed, eta);
  line += text;
  for (const auto& [index, p] : running_)
    if (p.elapsed_s >= point_after_s_)
      line += "  | " + describe(index, p);
  line += "\x1b[K";  // erase what a longer line left
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

}  // namespace ddlsim::cli
