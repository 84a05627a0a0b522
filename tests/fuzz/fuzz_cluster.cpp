// Fuzz target: cluster files (sim/ClusterSpec.hpp), and the per-GPU queries the simulator makes.
#include "sim/ClusterSpec.hpp"
#include "tests/fuzz/FuzzInput.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const sim::ClusterSpec c = sim::load_cluster_file(fuzz::as_file(data, size, "cluster.yaml"));
    const int last           = c.gpu_count() - 1;
    volatile double sink     = c.smallest_memory() + c.memory_of(last) + c.speed_of(last) + c.latency(0, last) +
                           c.leaf_uplink_bandwidth() + c.node_of(last);
    (void)sink;
  });
}
