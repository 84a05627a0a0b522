// One CSV row per configuration, with units in every column name.
//
// Columns (in this order; ARCHITECTURE.md's contract first, then extras):
//   config_id, experiment, model, cluster, calibration, schedule, pp, dp, tp, gpus, global_batch,
//   micro_batch, num_micro_batches, dtype, status, iteration_time_s, throughput_samples_per_s,
//   bubble_fraction, compute_time_s, exposed_comm_time_s, comm_bytes_per_gpu, peak_memory_bytes,
//   memory_capacity_bytes, sim_activities, sim_wall_time_s, message,
//   optimizer, dp_collective, collective_fidelity, model_parameters, achieved_flop_per_s_per_gpu,
//   recompute, partition, stage_blocks (blocks per stage, "13/12/12/13"), bn_batch (samples batch-norm
//   statistics see; empty without batch norm), activation_memory_bytes (on the peak device),
//   memory_reserve_bytes
// A value that does not apply (e.g. the iteration time of an invalid point) is left empty.
#pragma once

#include "common/EnumTable.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::experiments {

enum class Status { ok, oom, invalid, error };

inline constexpr EnumTable<Status, 4> status_table{{{
    {"ok", Status::ok, "simulated"},
    {"oom", Status::oom, "does not fit in GPU memory; not simulated"},
    {"invalid", Status::invalid, "the configuration cannot be simulated as written (see message)"},
    {"error", Status::error, "the simulation failed (see message)"},
}}};

/// Column names, in CSV order.
const std::vector<std::string>& csv_columns();

/// A row as text cells, indexed like csv_columns(). Numbers are formatted deterministically.
class ResultRow {
public:
  ResultRow();
  void set(const std::string& column, const std::string& value);
  void set(const std::string& column, double value);
  void set(const std::string& column, long long value);
  const std::string& get(const std::string& column) const;
  const std::vector<std::string>& cells() const { return cells_; }

  /// Cells joined by the ASCII unit separator, for passing rows between processes.
  std::string serialize() const;
  /// Inverse of serialize(); nullopt when the text has the wrong number of cells.
  static std::optional<ResultRow> deserialize(const std::string& text);

private:
  std::vector<std::string> cells_;
};

/// Formats a double with up to 10 significant digits ("%.10g"): stable across runs and machines.
std::string format_number(double value);

/// Writes header and rows to `path` atomically: a temporary file in the same folder, renamed
/// into place, so a reader never sees a half-written CSV. Creates the folder if needed.
/// Throws ddlsim::Error when the file cannot be written.
void write_csv(const std::string& path, const std::vector<ResultRow>& rows);

/// Quotes a cell for CSV when it contains a comma, quote or line break.
std::string csv_escape(const std::string& cell);

/// Reads a CSV that write_csv wrote. Throws ConfigError (file:line) when the header is not this
/// version's columns, a row has the wrong number of cells, or a quote is not closed.
std::vector<ResultRow> read_csv(const std::string& path);

/// The columns that say which configuration a row is (experiment, config_id, model, cluster,
/// calibration, schedule, pp, dp, tp, gpus, global_batch, micro_batch, dtype): two rows with equal
/// values there are results of the same point.
bool same_point(const ResultRow& a, const ResultRow& b);

}  // namespace ddlsim::experiments
