// `ddlsim collective`: one collective simulated over a range of sizes and printed in nccl-tests'
// layout, so that it can stand beside a real all_reduce_perf log; and the comparison with such a log.
//
// nccl-tests semantics (github.com/NVIDIA/nccl-tests, src/*.cu): sizes go from -b to -e, times -f
// (or plus -i); a row's size is the larger of the send and receive buffers in bytes and its count
// the elements each rank passes to NCCL (all-gather and reduce-scatter: size / ranks, rounded down
// to 16 bytes; all-to-all: the count each rank sends each peer, size / ranks rounded down to 16
// bytes, the size being ranks x that); algbw = size / time for every operation (all-gather,
// reduce-scatter and all-to-all counting the whole buffer), busbw = algbw x 2(n-1)/n for all-reduce,
// x (n-1)/n for all-gather, reduce-scatter and all-to-all, x 1 for broadcast and send/recv.
// Send/recv sends each rank's buffer to the next rank, all at once; all-to-all is NCCL's grouped
// send/recv to every peer (sim/Collectives.hpp). The redop column is "none" for the operations that
// do not reduce, as nccl-tests prints it.
//
// Every size is one collective over the first `gpus` GPUs of the cluster, one after the other in a
// single replay (SimGrid's engine is once per process), resolved by NCCL's tuner
// (sim/Collectives.hpp) unless the algorithm or protocol is forced, optionally timed by a profile's
// measured curves. Out-of-place and in-place times are the same simulated time.
//
//   CollectiveSweep sweep{.cluster = sim::load_cluster("dgx-h100x2"), .op = "all_reduce",
//                         .sizes = nccl_tests_sizes(8, 1 << 30, 2, 0)};
//   auto rows = simulate_collective_sweep(sweep);   // throws ConfigError on a bad op or dtype
//   print_nccl_tests(std::cout, sweep, rows);
#pragma once

#include "calibration/Profile.hpp"
#include "sim/ClusterSpec.hpp"
#include "sim/TaskGraph.hpp"
#include "traces/TraceRecords.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// How a size is simulated: flow-level messages, the closed form (equal to the flows alone on the
/// network), or flows up to `max_flow_messages` messages and the closed form above.
enum class CollectiveFidelityChoice { automatic, flow, analytic };
inline constexpr double max_flow_messages = 2e5;

struct CollectiveSweep {
  sim::ClusterSpec cluster;        ///< its first `gpus` GPUs take part (sim::first_gpus)
  std::string cluster_label;       ///< for the header
  int gpus = 0;                    ///< 0: every GPU of the cluster
  std::string op = "all_reduce";   ///< all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv
  std::vector<double> sizes;       ///< requested sizes in bytes (nccl_tests_sizes)
  std::string dtype = "float";     ///< nccl-tests type name: float, half, bfloat16, int8, ...
  std::string redop = "sum";
  int root = 0;                    ///< broadcast's root
  sim::CollectiveAlgorithm algorithm = sim::CollectiveAlgorithm::automatic;
  std::optional<sim::CollectiveProtocol> protocol;  ///< forced protocol (NCCL_PROTO)
  CollectiveFidelityChoice fidelity = CollectiveFidelityChoice::automatic;
  const calibration::CalibrationProfile* profile = nullptr;  ///< measured collective curves, if any
  std::string profile_label;
};

struct CollectiveRow {
  double size_bytes = 0;     ///< as nccl-tests prints it
  long long count = 0;       ///< elements per rank, as nccl-tests prints it
  double time_s = 0;
  double algbw_Bps = 0;
  double busbw_Bps = 0;
  std::string how;           ///< algorithm/protocol (or `fitted`, `p2p`) and fidelity, e.g. "ring/simple flow"
};

/// nccl-tests' size sequence: min, then x factor (factor > 1) or + step, up to max. Throws
/// std::invalid_argument when it would not advance, min > max, or it holds more than 10,000 sizes.
std::vector<double> nccl_tests_sizes(double min_bytes, double max_bytes, double factor, double step_bytes);

/// A size as nccl-tests reads -b, -e and -i: a whole number with an optional K, M, G or T suffix
/// (binary: 1G = 2^30), or a quantity with its unit ("1GiB", "512MB"). Throws std::invalid_argument.
double parse_nccl_tests_size(const std::string& text);

/// Bytes of one element of an nccl-tests type name; throws std::invalid_argument naming the valid ones.
int nccl_tests_type_bytes(const std::string& dtype);

/// The operation's nccl-tests program ("all_reduce" -> all_reduce_perf); also accepts the program
/// names and "sendrecv". Throws std::invalid_argument naming the valid operations.
std::string nccl_tests_program(const std::string& op);

/// Simulates every size. Throws std::invalid_argument (bad op, dtype or GPU count) or
/// SimulationError. Calls the replay once: once per process.
std::vector<CollectiveRow> simulate_collective_sweep(const CollectiveSweep& sweep);

/// The rows as nccl-tests prints them: header (devices as ranks on hosts node0, node1, ...),
/// out-of-place then in-place columns, average bus bandwidth. `calibrate import` reads it back.
void print_nccl_tests(std::ostream& out, const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows);

struct ComparedSize {
  double size_bytes = 0;
  double measured_s = 0;
  double simulated_s = 0;
  double measured_busbw_Bps = 0;
  double simulated_busbw_Bps = 0;
  double error_pct = 0;  ///< 100 (simulated - measured) / measured
};

/// The log's collective records (one nccl-tests run: traces::import_nccl_tests) against the
/// simulated rows of the same sizes (sweep.sizes must be the log's sizes, in order; the first
/// record of each size counts).
std::vector<ComparedSize> compare_with_log(const traces::TraceSet& log, const CollectiveSweep& sweep,
                                           const std::vector<CollectiveRow>& rows);

/// The comparison table, with the mean absolute error.
void print_comparison(std::ostream& out, const std::string& log_path, const CollectiveSweep& sweep,
                      const std::vector<ComparedSize>& sizes);

}  // namespace ddlsim::experiments
