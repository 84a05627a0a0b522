// Chakra execution traces as ddlsim workloads: `ddlsim export chakra` writes a point's task graph
// as one Chakra ET file per rank, and `model: {chakra: DIR}` reads such files back as the work to
// simulate on the experiment's cluster and calibration (docs/chakra.md).
//
// Mapping (TaskGraph -> Chakra, one file per GPU rank, node ids 0.. in each file):
//   METADATA_NODE  node 0: the rank's process groups, as PyTorch writes them (ASTRA-sim reads them)
//   compute task   COMP_NODE: num_ops (flop), tensor_size (bytes moved), duration_micros, and
//                  ddlsim_duration_s (the exact seconds); ctrl_deps on the rank's previous compute
//                  node (the GPU stream's order)
//   transfer       COMM_SEND_NODE on the sender, COMM_RECV_NODE on the receiver: comm_src, comm_dst,
//                  comm_tag (shared by the pair), comm_size (bytes)
//   collective     COMM_COLL_NODE on every member: comm_type, comm_size (the full buffer in bytes,
//                  nccl-tests' "size"), pg_name (the process group, "1", "2", ...)
//   dependency     data_deps, on every rank the two tasks share
// ddlsim_* attributes keep what Chakra has no field for (phase, stage, micro-batch, the collective's
// algorithm and fidelity, the original task order), and the metadata keeps the point's CSV columns,
// so that importing an export simulates the same iteration. Tensor-parallel groups are written
// rank by rank (never folded into one device).
//
// Import (any Chakra ET, ddlsim's or not): the files DIR/<prefix>.<rank>.et, ranks 0..N-1. Every
// compute node becomes a compute task on its rank's stream in file order; a send and the receive
// with the same (src, dst, tag), k-th of their kind, become one transfer; the k-th collective of a
// process group on each member becomes one collective. Metadata nodes and CPU operators
// (is_cpu_op) take no time: dependencies pass through them. A compute node's time is
// ddlsim_duration_s, else duration_micros, else the calibration's roofline of num_ops and
// tensor_size.
//
//   write_chakra(point, "out/chakra");                  // out/chakra/<experiment>.<rank>.et
//   auto w = ChakraWorkload::load("out/chakra");
//   auto [graph, seconds] = w->build(*cost_model, dtype);
#pragma once

#include "calibration/CostModel.hpp"
#include "common/YamlReader.hpp"
#include "experiments/Experiment.hpp"
#include "sim/TaskGraph.hpp"
#include "traces/ChakraTrace.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// The schema version ddlsim writes in GlobalMetadata.version and the `schema` attribute.
inline constexpr const char* chakra_schema_version = "0.0.4";

struct ChakraExport {
  std::vector<std::string> files;  ///< one per rank, in rank order; with a rank map, the templates
  std::string comm_groups;         ///< the process groups as ASTRA-sim's --comm-group-configuration JSON
  std::string rank_map;            ///< DIR/rank_map.json, or empty (ChakraRankMap.hpp)
  std::size_t nodes = 0;           ///< over all ranks
  int ranks         = 0;
};

struct ChakraExportOptions {
  /// Alike ranks written once: templates and DIR/rank_map.json (ChakraRankMap.hpp) instead of a file
  /// per rank, which ASTRA-sim needs.
  bool rank_map = false;
  /// Called after each rank's file: (ranks done, ranks).
  std::function<void(int, int)> on_rank;
};

/// Writes point `point` as Chakra ET files in `dir` (created): <dir>/<experiment>.<rank>.et (or a rank
/// map) and <dir>/comm_groups.json, rank by rank (one rank's nodes in memory at a time). A point whose
/// model is itself a Chakra workload (model: {chakra: DIR}) is written as loaded: a rank map is
/// written back out rank by rank, or the other way. Throws Error when the point is not simulable
/// (invalid, out of memory, or its unfolded task graph over the experiment's `limits:`: the message
/// says why and how to raise them) or is a parameter-server point (servers apply pushes in arrival
/// order, which Chakra cannot express), and when a file cannot be written.
ChakraExport write_chakra(const PointConfig& point, const std::string& dir, const ChakraExportOptions& options = {});

/// `model: {chakra: DIR}` in an experiment (DIR relative to the experiment's folder, else to the
/// working directory): loads the traces into point.chakra and names the model (the exported model's
/// name, else the folder's). A folder that does not load is a diagnostic at model.chakra.
void read_chakra_model(YamlMap& top, const std::filesystem::path& experiment_dir, PointConfig& point);

/// The training:, parallelism:, output: and limits: sections of an experiment whose model is a
/// Chakra workload (after read_chakra_model). The traces fix the layout and the work: a key whose
/// value the traces record (ddlsim's export: every configuration column) must give that value, and
/// any other training or parallelism key is refused (diagnostics naming file:line: key), except,
/// for foreign traces, training.global_batch (for the throughput columns) and training.dtype (the
/// roofline's peak for nodes without a time). Fills point.training and point.parallelism from the traces.
void read_chakra_keys(YamlMap& top, PointConfig& point);

/// Why `command` (search, execute) does not take an experiment whose model is a Chakra workload.
std::string chakra_refusal(const std::string& command);

/// Chakra ET files read as a workload.
class ChakraWorkload {
public:
  /// Reads every <prefix>.<rank>.et of `dir`. Throws TraceError naming the file (and node) when
  /// the folder holds none, ranks are missing, a file does not decode, a dependency names no node,
  /// a send has no receive, a collective's group or members disagree.
  static std::shared_ptr<const ChakraWorkload> load(const std::string& dir);

  const std::string& get_dir() const { return dir_; }
  int ranks() const { return static_cast<int>(files_.size()); }
  /// Rank `rank`'s file as read (a rank map's bound again).
  const traces::EtFile& file(int rank) const { return files_.at(static_cast<std::size_t>(rank)); }
  /// The process groups, group "k" at k - 1, when they are numbered 1..N as ddlsim numbers them.
  std::optional<std::vector<std::vector<int>>> numbered_groups() const;
  /// True when ddlsim wrote the files (their metadata holds the point's CSV columns).
  bool from_ddlsim() const { return !columns_.empty(); }
  /// The exported point's CSV columns (configuration and memory), by name; empty for foreign files.
  const std::map<std::string, std::string>& columns() const { return columns_; }
  /// Model flop of one sample, forward and backward, as the CSV's flop columns count them, and per
  /// token (0 without tokens): from the metadata, else the compute nodes' num_ops / `global_batch`.
  double flop_per_sample(long long global_batch) const;
  double model_flop_per_sample(long long global_batch) const;
  double tokens_per_sample() const;

  struct Graph {
    sim::TaskGraph graph{1};
    std::vector<double> compute_seconds;  ///< per task (0 for communication)
    bool priced = false;                  ///< some compute node had no time and was priced by the roofline
  };
  /// The task graph of the traces; compute nodes without a time are priced by `cost` at `dtype`.
  Graph build(const calibration::CostModel& cost, Dtype dtype) const;

private:
  struct Task;
  struct Matching;
  std::string dir_;
  std::vector<std::string> paths_;
  std::vector<traces::EtFile> files_;
  std::map<std::string, std::string> columns_;
  std::map<std::string, double> numbers_;  ///< ddlsim_* numeric metadata
  std::vector<Task> tasks_;                ///< matched, in creation order
  std::map<std::string, std::vector<int>> groups_; ///< process groups by name
  double total_ops_ = 0;
  void load_metadata();
  void match();
};

}  // namespace ddlsim::experiments
