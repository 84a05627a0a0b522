#include "experiments/ResultRow.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ddlsim::experiments {
namespace {
constexpr char separator = '\x1f';

std::size_t column_index(const std::string& column)
{
  const auto& cols = csv_columns();
  auto it = std::find(cols.begin(), cols.end(), column);
  if (it == cols.end())
    throw Error("internal error: unknown CSV column '" + column + "'");
  return static_cast<std::size_t>(it - cols.begin());
}
}  // namespace

const std::vector<std::string>& csv_columns()
{
  static const std::vector<std::string> columns{
      "config_id",        "experiment",          "model",
      "cluster",          "calibration",         "schedule",
      "pp",               "dp",                  "tp",
      "gpus",             "global_batch",        "micro_batch",
      "num_micro_batches", "dtype",              "status",
      "iteration_time_s", "throughput_samples_per_s", "bubble_fraction",
      "compute_time_s",   "exposed_comm_time_s", "comm_bytes_per_gpu",
      "peak_memory_bytes", "memory_capacity_bytes", "sim_activities",
      "sim_wall_time_s",  "message",             "optimizer",
      "dp_collective",    "collective_fidelity", "model_parameters",
      "achieved_flop_per_s_per_gpu", "recompute",  "partition",
      "stage_blocks",     "bn_batch",            "activation_memory_bytes",
      "memory_reserve_bytes", "dp_bucket_bytes",     "virtual_stages",
      "ps_servers",       "ps_consistency",      "ps_iterations",
      "staleness_max",    "staleness_mean",      "inter_node_bytes_per_gpu",
      "gpu_utilization",  "compute_costs",       "collective_times",
      "backend",          "device",              "measured_iteration_time_s",
      "measured_min_s",   "measured_max_s",      "measured_throughput_samples_per_s",
      "error_pct",        "work_scale",          "sim_activities_estimate",
      "sim_memory_estimate_bytes", "cp",          "zero",
      "zero_group",       "sequence_parallel",   "seq",
      "attention",        "tokens_per_s",        "mfu",
      "active_parameters", "collective_algorithms"};
  return columns;
}

ResultRow::ResultRow() : cells_(csv_columns().size()) {}

void ResultRow::set(const std::string& column, const std::string& value) { cells_[column_index(column)] = value; }
// Byte and count columns are whole numbers, written as such (never 6.738415616e+09); the rest
// keeps ten significant digits.
bool whole_number_column(const std::string& column)
{
  return column.find("bytes") != std::string::npos || column == "model_parameters" || column == "active_parameters" ||
         column == "sim_activities_estimate";
}

void ResultRow::set(const std::string& column, double value)
{
  if (whole_number_column(column) && std::isfinite(value) && std::fabs(value) < 9.0e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", std::round(value));
    cells_[column_index(column)] = buf;
    return;
  }
  cells_[column_index(column)] = format_number(value);
}
void ResultRow::set(const std::string& column, long long value)
{
  cells_[column_index(column)] = std::to_string(value);
}
const std::string& ResultRow::get(const std::string& column) const { return cells_[column_index(column)]; }

std::string ResultRow::serialize() const
{
  std::string out;
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    if (i)
      out += separator;
    out += cells_[i];
  }
  return out;
}

std::optional<ResultRow> ResultRow::deserialize(const std::string& text)
{
  ResultRow row;
  std::size_t i = 0;
  std::size_t start = 0;
  for (std::size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos == text.size() || text[pos] == separator) {
      if (i >= row.cells_.size())
        return std::nullopt;
      row.cells_[i++] = text.substr(start, pos - start);
      start = pos + 1;
    }
  }
  if (i != row.cells_.size())
    return std::nullopt;
  return row;
}

std::string format_number(double value)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", value);
  return buf;
}

std::string csv_escape(const std::string& cell)
{
  if (cell.find_first_of(",\"\n\r") == std::string::npos)
    return cell;
  std::string out = "\"";
  for (char c : cell) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<ResultRow> read_csv(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path, 0, "", "cannot open the CSV");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<std::vector<std::string>> records;
  std::vector<int> lines;
  std::vector<std::string> record;
  std::string cell;
  bool quoted = false, cell_started = false;
  int line = 1, record_line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        line += c == '\n';
        cell += c;
      }
      continue;
    }
    if (c == '"' && !cell_started) {
      quoted = cell_started = true;
    } else if (c == ',') {
      record.push_back(std::move(cell));
      cell.clear();
      cell_started = false;
    } else if (c == '\n') {
      record.push_back(std::move(cell));
      cell.clear();
      cell_started = false;
      records.push_back(std::move(record));
      lines.push_back(record_line);
      record.clear();
      record_line = ++line;
    } else if (c != '\r') {
      cell += c;
      cell_started = true;
    }
  }
  if (quoted)
    throw ConfigError(path, record_line, "", "a quoted cell is not closed (a cut file?)");
  if (cell_started || !record.empty())
    throw ConfigError(path, record_line, "", "the last row has no line end (a cut file?)");
  const auto& cols = csv_columns();
  if (records.empty() || records[0] != cols)
    throw ConfigError(path, 1, "", "not a CSV of this ddlsim version (its header differs)");
  std::vector<ResultRow> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != cols.size())
      throw ConfigError(path, lines[r], "", "expected " + std::to_string(cols.size()) + " cells, found " +
                                                std::to_string(records[r].size()));
    ResultRow row;
    for (std::size_t c = 0; c < cols.size(); ++c)
      row.set(cols[c], records[r][c]);
    rows.push_back(std::move(row));
  }
  return rows;
}

bool same_point(const ResultRow& a, const ResultRow& b)
{
  for (const char* column : {"experiment", "config_id", "model", "cluster", "calibration", "schedule", "pp", "dp", "tp",
                             "gpus", "global_batch", "micro_batch", "dtype"})
    if (a.get(column) != b.get(column))
      return false;
  return true;
}

void write_csv(const std::string& path, const std::vector<ResultRow>& rows)
{
  write_file_atomically(path, "the CSV", [&](std::ostream& out) {
    const auto& cols = csv_columns();
    for (std::size_t i = 0; i < cols.size(); ++i)
      out << (i ? "," : "") << cols[i];
    out << '\n';
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.cells().size(); ++i)
        out << (i ? "," : "") << csv_escape(row.cells()[i]);
      out << '\n';
    }
  });
}

}  // namespace ddlsim::experiments
