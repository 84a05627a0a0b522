#include "sim/Metrics.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

using namespace ddlsim::sim;

TEST_CASE("interval union and uncovered length")
{
  CHECK(union_length({}) == 0);
  CHECK(union_length({{0, 1}, {2, 3}}) == 2);
  CHECK(union_length({{0, 2}, {1, 3}, {5, 5}}) == 3);
  CHECK(uncovered_length({{0, 10}}, {{2, 3}, {5, 7}}) == 7);
  CHECK(uncovered_length({{0, 1}, {4, 6}}, {{0.5, 5}}) == doctest::Approx(1.5));
  CHECK(uncovered_length({{0, 1}}, {}) == 1);
}

// Union and uncovered lengths by brute force: the intervals' ends cut the line into segments, and a
// segment counts when an interval covers it (an oracle that neither sorts nor merges).
namespace {
double covered(const std::vector<Interval>& v, double a, double b)
{
  for (const auto& [s, e] : v)
    if (s <= a && b <= e)
      return 1;
  return 0;
}
std::pair<double, double> brute_force(const std::vector<Interval>& a, const std::vector<Interval>& b)
{
  std::vector<double> cuts;
  for (const auto* v : {&a, &b})
    for (const auto& [s, e] : *v) {
      cuts.push_back(s);
      cuts.push_back(e);
    }
  std::sort(cuts.begin(), cuts.end());
  double in_a = 0, a_not_b = 0;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double length = cuts[i + 1] - cuts[i];
    in_a += covered(a, cuts[i], cuts[i + 1]) * length;
    a_not_b += covered(a, cuts[i], cuts[i + 1]) * (1 - covered(b, cuts[i], cuts[i + 1])) * length;
  }
  return {in_a, a_not_b};
}
}  // namespace

TEST_CASE("interval lengths agree with brute force, whether the intervals come sorted, in a few runs or shuffled")
{
  // Whole-number ends: every sum below is exact, so the fast paths must match to the bit.
  std::mt19937 random(7);
  for (int runs : {1, 2, 3, 8, 9, 40}) {
    std::vector<Interval> a, b;
    for (int r = 0; r < runs; ++r) {
      double at = static_cast<double>(random() % 50);
      for (int i = 0; i < 30; ++i) {  // one sorted run: a stream's tasks in program order
        const double start = at + static_cast<double>(random() % 4);
        const double end = start + static_cast<double>(random() % 6);  // some empty
        a.push_back({start, end});
        at = start;
      }
    }
    for (int i = 0; i < 60; ++i) {
      const double start = static_cast<double>(random() % 200);
      b.push_back({start, start + static_cast<double>(random() % 5)});
    }
    const auto [union_a, uncovered_a] = brute_force(a, b);
    CAPTURE(runs);
    CHECK(union_length(a) == union_a);
    CHECK(uncovered_length(a, b) == uncovered_a);
    std::shuffle(a.begin(), a.end(), random);
    CHECK(union_length(a) == union_a);
    CHECK(uncovered_length(a, b) == uncovered_a);
    // b merged once serves several a (comm_breakdown): the same length, to the bit.
    std::vector<Interval> merged_b = b;
    merge_intervals(merged_b);
    CHECK(uncovered_by_merged(a, merged_b) == uncovered_length(a, b));
  }
}

TEST_CASE("device statistics split the iteration into compute, exposed communication and idle")
{
  TaskGraph g(2);
  TaskId c0 = g.add_compute({.device = 0, .phase = Phase::forward});
  TaskId t = g.add_transfer({.src = 0, .dst = 1, .bytes = 100});
  TaskId c1 = g.add_compute({.device = 1, .phase = Phase::forward});
  g.add_dependency(c0, t);
  g.add_dependency(t, c1);
  Timings timings(3);
  timings[c0] = {0, 2};
  timings[t] = {1.5, 3};  // half a second hidden under device 0's compute
  timings[c1] = {3, 4};
  auto stats = device_stats(g, timings, 4, 8);
  CHECK(stats[0].compute_s == 2);
  CHECK(stats[0].exposed_comm_s == 1);
  CHECK(stats[0].idle_s == 1);
  CHECK(stats[0].bytes_sent == 100);
  CHECK(stats[1].compute_s == 1);
  CHECK(stats[1].exposed_comm_s == 1.5);
  CHECK(stats[1].idle_s == 1.5);
  CHECK(stats[1].bytes_sent == 0);
}

TEST_CASE("a ring all-reduce member sends 2(n-1)/n of the buffer")
{
  TaskGraph g(4);
  g.add_collective({.group = {0, 1, 2, 3}, .bytes = 800});
  auto bytes = bytes_sent_per_device(g, 8);
  for (double b : bytes)
    CHECK(b == doctest::Approx(1200));
}
