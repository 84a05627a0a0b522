// A foreign Chakra trace (tests/support/ChakraForeign.hpp: written through protobuf's generated
// classes, not ddlsim's writer) simulated on two GPUs of one node, latency a, bandwidth B, against
// the closed form of its critical path:
//   100 us forward, ring all-reduce of S = 1e8 B over n = 2 GPUs 2(n-1)(a + S/(n B)),
//   send of P = 4e6 B  a + P/B,  50 us backward
// The expected value comes from the formula, not from the simulator. One engine per process.
#include "calibration/Profile.hpp"
#include "calibration/TableCostModel.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "sim/Replay.hpp"
#include "support/ChakraForeign.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

using namespace ddlsim;

TEST_CASE("a foreign Chakra trace replays to the closed form of its critical path")
{
  constexpr double a = 2.3e-6, B = 97e9, S = 1e8, P = 4e6;
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_chakra_sim_" + std::to_string(::getpid()));
  chakra_foreign::write_trace(dir);
  const auto w = experiments::ChakraWorkload::load(dir.string());
  const auto cost = calibration::make_cost_model(calibration::load_profile("h100-sxm"));
  const auto built = w->build(*cost, Dtype::bf16);
  CHECK(!built.priced);
  sim::ClusterSpec c;
  c.name = "two";
  c.nodes = 1;
  c.gpus_per_node = 2;
  c.gpu_memory = 80e9;
  c.intra_node = {.bandwidth = B, .latency = a};
  c.nics_per_node = 1;
  c.nic = {.bandwidth = B, .latency = a};
  const sim::ReplayResult r = sim::replay(built.graph, c, built.compute_seconds);
  const double expected = 100e-6 + 2 * (a + S / (2 * B)) + a + P / B + 50e-6;
  CHECK(r.makespan_s == doctest::Approx(expected).epsilon(1e-9));
  std::filesystem::remove_all(dir);
}
