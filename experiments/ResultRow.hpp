// One CSV row per configuration, with units in every column name.
//
// Columns (in this order; docs/ARCHITECTURE.md's contract first, then extras):
//   config_id, experiment, model, cluster, calibration, schedule, pp, dp, tp, gpus, global_batch,
//   micro_batch, num_micro_batches, dtype, status, iteration_time_s, throughput_samples_per_s,
//   bubble_fraction, compute_time_s, exposed_comm_time_s, comm_bytes_per_gpu, peak_memory_bytes,
//   memory_capacity_bytes, sim_activities, sim_wall_time_s, message,
//   optimizer, dp_collective, collective_fidelity, model_parameters, achieved_flop_per_s_per_gpu,
//   recompute, partition, stage_blocks (blocks per stage, "13/12/12/13"), bn_batch (samples batch-norm
//   statistics see; empty without batch norm), activation_memory_bytes (on the peak device),
//   memory_reserve_bytes, ... (csv_columns() lists them all; docs/csv.md says what each holds)
// A value that does not apply (e.g. the iteration time of an invalid point) is left empty.
//
// Which columns a file holds (ColumnSelection): by default the contract columns and every other
// column that some row fills, in csv_columns() order, so that a CSV has no column that is empty
// throughout; `--columns` chooses them by name and preset instead:
//
//   write_csv("out.csv", rows);                                             // the default set
//   write_csv("out.csv", rows, ColumnSelection::parse("default,-sim_wall_time_s,bn_batch"));
//
// read_csv reads any such file back: a column the file lacks is empty in its rows.
#pragma once

#include "common/EnumTable.hpp"

#include <array>
#include <cstddef>
#include <functional>
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

/// ARCHITECTURE.md's contract columns (config_id ... message): in every default CSV, filled or not.
const std::vector<std::string>& contract_columns();

/// The columns that say which point a row is (see same_point): --resume and merge need them.
const std::vector<std::string>& identity_columns();

/// A row as text cells, indexed like csv_columns(). Numbers are formatted deterministically.
class ResultRow {
public:
  ResultRow();
  void set(const std::string& column, const std::string& value);
  void set(const std::string& column, double value);
  void set(const std::string& column, long long value);
  const std::string& get(const std::string& column) const;
  /// The cell as a number; nullopt when it is empty (does not apply) or not a finite number.
  std::optional<double> number(const std::string& column) const;
  /// Whether the point was simulated (status ok).
  bool is_ok() const { return get("status") == status_table.name(Status::ok); }
  const std::vector<std::string>& cells() const { return cells_; }

  /// Cells joined by the ASCII unit separator, for passing rows between processes.
  std::string serialize() const;
  /// Inverse of serialize(); nullopt when the text has the wrong number of cells.
  static std::optional<ResultRow> deserialize(const std::string& text);

private:
  std::vector<std::string> cells_;
};

/// The rows that ran (status ok) with a throughput, best first by throughput_samples_per_s (ties keep
/// their order), as indices into `rows`: how `ddlsim search` and `ddlsim report` rank points.
std::vector<std::size_t> rank_by_throughput(const std::vector<ResultRow>& rows);

/// Sets filled[c] (one flag per csv_columns() entry) for every cell `row` fills.
void mark_filled(const ResultRow& row, std::vector<bool>& filled);

/// A cell's text as a number; nullopt when it is empty or not a finite number ("12.5", "1e+09").
std::optional<double> cell_number(const std::string& cell);

/// Formats a double with up to 10 significant digits ("%.10g"): stable across runs and machines.
std::string format_number(double value);

/// The columns a CSV is written with, as `--columns` names them: comma-separated column names and
/// presets, in the order wanted; `-NAME` takes a column or preset out again. Presets:
///   default           the contract columns and every other column some row fills (the default)
///   all               every column, in csv_columns() order (a fixed schema for scripts)
///   contract          docs/ARCHITECTURE.md's contract columns
///   identity          the columns that say which point a row is (what --resume and merge match)
///   memory            peak, capacity, activation and reserve bytes
///   throughput        iteration time, samples/s, tokens/s (and per GPU), MFU, model TFLOP/s per GPU,
///                     bubble, GPU utilization
///   measured          what `ddlsim execute` adds (backend, device, measured times, error_pct)
///   parameter_server  the parameter-server settings and staleness
///   framework         framework, host and GPU busy fractions, GPU utilization, compute time
///   llm               seq, attention, cp, cp_algorithm, zero, zero_group, sequence_parallel, the
///                     overlap options (tp_comm_overlap ... overlap_p2p_comm), active_parameters
///   communication     exposed communication by dimension, all-to-all times, bytes per GPU
///   moe               expert parallelism, all-to-alls, drops, load, active parameters
///   simulation        activity counts and estimates, wall time, fidelity, cost sources
class ColumnSelection {
public:
  /// The default set.
  ColumnSelection() = default;
  /// Parses a --columns value. Throws ddlsim::Error naming an unknown name with the closest valid
  /// one ("unknown column 'iteration_time' (did you mean 'iteration_time_s'?)"), or a selection of nothing.
  static ColumnSelection parse(const std::string& spec);
  /// The columns for these rows, each once, in the order selected.
  std::vector<std::string> resolve(const std::vector<ResultRow>& rows) const;
  /// The same for rows seen one at a time: filled[c] says whether some row fills csv_columns()[c]
  /// (mark_filled).
  std::vector<std::string> resolve_filled(const std::vector<bool>& filled) const;
  bool is_default() const { return tokens_.empty(); }
  /// Names of the presets, for help texts.
  static std::vector<std::string> presets();

private:
  std::vector<std::string> tokens_;  // names and presets, "-" prefixed to remove; empty: default
};

/// Writes header and rows to `path` atomically: a temporary file in the same folder, renamed
/// into place, so a reader never sees a half-written CSV. Creates the folder if needed.
/// Throws ddlsim::Error when the file cannot be written.
void write_csv(const std::string& path, const std::vector<ResultRow>& rows, const ColumnSelection& columns = {});
/// Calls its argument on every row to write, in order.
using RowVisitor = std::function<void(const std::function<void(const ResultRow&)>&)>;
/// The same for rows that come one at a time (experiments/RowSpool.hpp): `names` is the header.
void write_csv(const std::string& path, const std::vector<std::string>& names, const RowVisitor& for_each_row);

/// Quotes a cell for CSV when it contains a comma, quote or line break.
std::string csv_escape(const std::string& cell);

/// A CSV read back: its header (columns of this version, in the file's order) and its rows.
struct CsvTable {
  std::vector<std::string> columns;
  std::vector<ResultRow> rows;
};

/// Reads a CSV that write_csv wrote, with any selection of columns; the cells of columns it lacks
/// are empty. Throws ConfigError (file:line) when a header cell is not a column of this version
/// (or appears twice), a row has the wrong number of cells, or a quote is not closed.
CsvTable read_csv_table(const std::string& path);
/// read_csv_table's rows.
std::vector<ResultRow> read_csv(const std::string& path);

/// Throws ConfigError (file:1) unless `table` holds every identity column, naming the first missing
/// one and `why` ("--resume matches rows by them").
void require_identity_columns(const std::string& path, const CsvTable& table, const std::string& why);

/// The columns that say which configuration a row is (experiment, config_id, model, cluster,
/// calibration, schedule, pp, dp, tp, gpus, global_batch, micro_batch, dtype): two rows with equal
/// values there are results of the same point.
bool same_point(const ResultRow& a, const ResultRow& b);
/// The identity columns' cells as one string: equal for two rows exactly when same_point is true.
std::string point_key(const ResultRow& row);

}  // namespace ddlsim::experiments
