#include "sim/Metrics.hpp"

#include <doctest/doctest.h>

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

TEST_CASE("device statistics split the iteration into compute, exposed communication and idle")
{
  TaskGraph g(2);
  TaskId c0 = g.add_compute({.device = 0, .phase = Phase::forward});
  TaskId t = g.add_transfer({.src = 0, .dst = 1, .bytes = 100});
  TaskId c1 = g.add_compute({.device = 1, .phase = Phase::forward});
  g.add_dependency(c0, t);
  g.add_dependency(t, c1);
  std::vector<TaskTiming> timings(3);
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
