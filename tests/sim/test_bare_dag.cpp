// The bare SimGrid DAG that `ddlsim bench` times beside every simulation (sim/BareDag.hpp). One
// engine per process.
#include "sim/BareDag.hpp"

#include <doctest/doctest.h>

using namespace ddlsim::sim;

// Regression: the DAG once kept a window of its latest activities alive, which on 2,048 hosts (the
// unfolded llama3-405b-16k-zero0 scenario) freed slow hosts' Execs while they ran: a crash within
// 300,000 activities. Every activity is now held until it finishes.
TEST_CASE("the bare DAG runs its whole budget on 2,048 hosts")
{
  const BareDagResult r = run_bare_dag(300'000, 2048);
  CHECK(r.activities == 300'000);
  CHECK(r.makespan_s > 0);
}
