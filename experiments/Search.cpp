#include "experiments/Search.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <set>

namespace ddlsim::experiments {
namespace {

class MicrobatchSearcher {
public:
  MicrobatchSearcher(const PointConfig& base, const MicrobatchSearchOptions& options)
      : base_(base), options_(options), dp_(base.parallelism.dp),
        baseline_m_(static_cast<long long>(options.baseline_factor) * base.parallelism.pp)
  {
  }

  // Simulates mini-batch `batch` with every candidate micro-batch size (or the baseline's alone).
  BatchResult run(long long batch, bool baseline_only)
  {
    BatchResult result{batch, std::nullopt, std::nullopt};
    if (batch % dp_ != 0)
      return result;
    const long long per_replica = batch / dp_;
    std::set<long long> sizes;  // powers of two dividing B / dp (up to the M cap), and the baseline's
    if (!baseline_only)
      for (long long b = 1; b <= per_replica; b *= 2)
        if (per_replica % b == 0 && per_replica / b <= options_.max_micro_batches)
          sizes.insert(b);
    const bool has_baseline = per_replica % baseline_m_ == 0;
    if (has_baseline)
      sizes.insert(per_replica / baseline_m_);
    std::vector<PointConfig> points;
    for (long long b : sizes) {
      PointConfig p = base_;
      p.index = next_index_++;
      p.training.global_batch = batch;
      p.training.micro_batch = static_cast<int>(b);
      if (p.parallelism.schedule == sim::ScheduleKind::interleaved && (per_replica / b) % p.parallelism.pp != 0)
        p.problems.push_back({"", 0, "training.micro_batch", "interleaved 1F1B needs M divisible by pp"});
      points.push_back(std::move(p));
    }
    const std::size_t first = search_.rows.size();
    for (auto& row : run_sweep(points, {.jobs = options_.jobs, .evaluate = {}, .on_progress = {}, .on_row = {}}))
      search_.rows.push_back(std::move(row));
    double best = 0;
    for (std::size_t r = first; r < search_.rows.size(); ++r) {
      const ResultRow& row = search_.rows[r];
      if (has_baseline && std::stoll(row.get("micro_batch")) == per_replica / baseline_m_)
        result.baseline = r;
      if (row.get("status") != "ok")
        continue;
      const double throughput = std::stod(row.get("throughput_samples_per_s"));
      if (throughput > best) {
        best = throughput;
        result.best = r;
      }
    }
    return result;
  }

  bool baseline_ok(const BatchResult& r) const { return r.baseline && search_.rows[*r.baseline].get("status") == "ok"; }

  // Largest mini-batch in (ok, fail) that still trains, by bisection in steps of dp x baseline M
  // (so that the baseline's micro-batch size stays whole).
  long long refine(long long ok, long long fail, bool baseline_only)
  {
    const long long step = dp_ * baseline_m_;
    long long lo = ok / step, hi = (fail + step - 1) / step;
    while (hi - lo > 1) {
      const long long mid = (lo + hi) / 2;
      const BatchResult r = run(mid * step, baseline_only);
      if (baseline_only ? baseline_ok(r) : r.best.has_value())
        lo = mid;
      else
        hi = mid;
    }
    return std::max(ok, lo * step);
  }

  MicrobatchSearch search_;

private:
  const PointConfig& base_;
  const MicrobatchSearchOptions& options_;
  int dp_;
  long long baseline_m_;
  std::size_t next_index_ = 0;
};

}  // namespace

MicrobatchSearch search_microbatch(const PointConfig& base, const MicrobatchSearchOptions& options)
{
  if (!base.is_valid())
    throw Error("the experiment's point is not valid: " + base.problems.front().to_string());
  MicrobatchSearcher s(base, options);
  MicrobatchSearch& search = s.search_;
  const long long max_batch = options.max_batch > 0 ? options.max_batch : 16 * base.training.global_batch;
  long long search_fail = 0, baseline_fail = 0;
  for (long long batch = base.training.global_batch; batch <= max_batch; batch *= 2) {
    const BatchResult result = s.run(batch, false);
    search.batches.push_back(result);
    if (s.baseline_ok(result))
      search.largest_baseline_batch = batch;
    else if (result.baseline && baseline_fail == 0 && search.largest_baseline_batch > 0)
      baseline_fail = batch;
    if (!result.best) {
      search_fail = batch;  // nothing fits at this mini-batch: larger ones fit even less
      break;
    }
    search.largest_batch = batch;
  }
  // The doubling brackets each largest trainable mini-batch; bisection narrows it.
  if (search_fail > 0 && search.largest_batch > 0)
    search.largest_batch = s.refine(search.largest_batch, search_fail, false);
  if (baseline_fail == 0 && search_fail > 0)
    baseline_fail = search_fail;
  if (baseline_fail > 0 && search.largest_baseline_batch > 0)
    search.largest_baseline_batch = s.refine(search.largest_baseline_batch, baseline_fail, true);
  search.stopped_at_max = search_fail == 0;
  return std::move(search);
}

GridSearch search_grid(int gpus, const std::function<PointConfig(int pp, int tp, int dp)>& make_point,
                       const GridSearchOptions& options)
{
  std::vector<PointConfig> points;
  for (int pp = 1; pp <= gpus; ++pp) {
    if (gpus % pp != 0 || (!options.pipeline && pp > 1))
      continue;
    for (int tp = 1; tp <= gpus / pp; ++tp) {
      if ((gpus / pp) % tp != 0)
        continue;
      PointConfig p = make_point(pp, tp, gpus / (pp * tp));
      p.index = points.size();
      points.push_back(std::move(p));
    }
  }
  GridSearch search;
  search.rows = run_sweep(points, {.jobs = options.jobs, .evaluate = {}, .on_progress = {}, .on_row = {}});
  for (std::size_t r = 0; r < search.rows.size(); ++r)
    if (search.rows[r].get("status") == "ok")
      search.ranking.push_back(r);
  std::stable_sort(search.ranking.begin(), search.ranking.end(), [&](std::size_t a, std::size_t b) {
    return std::stod(search.rows[a].get("throughput_samples_per_s")) > std::stod(search.rows[b].get("throughput_samples_per_s"));
  });
  return search;
}

}  // namespace ddlsim::experiments
