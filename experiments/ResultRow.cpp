#include "experiments/ResultRow.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "common/Suggest.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
  static const std::vector<std::string> columns{"config_id",
                                                "experiment",
                                                "model",
                                                "cluster",
                                                "calibration",
                                                "schedule",
                                                "pp",
                                                "dp",
                                                "tp",
                                                "gpus",
                                                "global_batch",
                                                "micro_batch",
                                                "num_micro_batches",
                                                "dtype",
                                                "status",
                                                "iteration_time_s",
                                                "throughput_samples_per_s",
                                                "bubble_fraction",
                                                "compute_time_s",
                                                "exposed_comm_time_s",
                                                "comm_bytes_per_gpu",
                                                "peak_memory_bytes",
                                                "memory_capacity_bytes",
                                                "sim_activities",
                                                "sim_wall_time_s",
                                                "message",
                                                "optimizer",
                                                "dp_collective",
                                                "collective_fidelity",
                                                "model_parameters",
                                                "achieved_flop_per_s_per_gpu",
                                                "recompute",
                                                "partition",
                                                "stage_blocks",
                                                "bn_batch",
                                                "activation_memory_bytes",
                                                "memory_reserve_bytes",
                                                "dp_bucket_bytes",
                                                "virtual_stages",
                                                "ps_servers",
                                                "ps_consistency",
                                                "ps_iterations",
                                                "staleness_max",
                                                "staleness_mean",
                                                "inter_node_bytes_per_gpu",
                                                "gpu_utilization",
                                                "compute_costs",
                                                "collective_times",
                                                "backend",
                                                "device",
                                                "measured_iteration_time_s",
                                                "measured_min_s",
                                                "measured_max_s",
                                                "measured_throughput_samples_per_s",
                                                "error_pct",
                                                "work_scale",
                                                "sim_activities_estimate",
                                                "sim_memory_estimate_bytes",
                                                "cp",
                                                "zero",
                                                "zero_group",
                                                "sequence_parallel",
                                                "seq",
                                                "attention",
                                                "tokens_per_s",
                                                "mfu",
                                                "active_parameters",
                                                "ep",
                                                "ep_collective",
                                                "all_to_all_time_s",
                                                "dropped_tokens",
                                                "load_imbalance",
                                                "capacity_factor",
                                                "measured_peak_memory_bytes",
                                                "collective_algorithms",
                                                "framework",
                                                "host_busy_fraction",
                                                "gpu_busy_fraction",
                                                "tokens_per_s_per_gpu",
                                                "model_tflops_per_gpu",
                                                "total_a2a_s",
                                                "cp_algorithm",
                                                "tp_comm_overlap",
                                                "tp_backward_overlap",
                                                "overlap_param_gather",
                                                "overlap_p2p_comm",
                                                "exposed_tp_s",
                                                "exposed_dp_s",
                                                "exposed_pp_s",
                                                "exposed_cp_s",
                                                "cuda_graphs"};
  return columns;
}

const std::vector<std::string>& contract_columns()
{
  static const std::vector<std::string> columns(csv_columns().begin(), csv_columns().begin() + 26);
  return columns;
}

const std::vector<std::string>& identity_columns()
{
  static const std::vector<std::string> columns{"experiment", "config_id", "model", "cluster", "calibration",
                                                "schedule",   "pp",        "dp",    "tp",      "gpus",
                                                "global_batch", "micro_batch", "dtype"};
  return columns;
}

namespace {
// The presets of --columns but `default`, which depends on the rows.
const std::vector<std::pair<std::string, std::vector<std::string>>>& column_presets()
{
  static const std::vector<std::pair<std::string, std::vector<std::string>>> presets{
      {"all", csv_columns()},
      {"contract", contract_columns()},
      {"identity", identity_columns()},
      {"memory", {"peak_memory_bytes", "memory_capacity_bytes", "activation_memory_bytes", "memory_reserve_bytes"}},
      {"throughput",
       {"iteration_time_s", "throughput_samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu",
        "model_tflops_per_gpu", "bubble_fraction", "gpu_utilization"}},
      {"measured",
       {"backend", "device", "measured_iteration_time_s", "measured_min_s", "measured_max_s",
        "measured_throughput_samples_per_s", "error_pct", "work_scale", "measured_peak_memory_bytes"}},
      {"parameter_server", {"ps_servers", "ps_consistency", "ps_iterations", "staleness_max", "staleness_mean"}},
      {"framework",
       {"framework", "cuda_graphs", "host_busy_fraction", "gpu_busy_fraction", "gpu_utilization", "compute_time_s"}},
      {"llm",
       {"seq", "attention", "cp", "cp_algorithm", "zero", "zero_group", "sequence_parallel", "tp_comm_overlap",
        "tp_backward_overlap", "overlap_param_gather", "overlap_p2p_comm", "active_parameters"}},
      {"communication",
       {"exposed_comm_time_s", "exposed_tp_s", "exposed_dp_s", "exposed_pp_s", "exposed_cp_s", "all_to_all_time_s",
        "total_a2a_s", "comm_bytes_per_gpu", "inter_node_bytes_per_gpu"}},
      {"moe",
       {"ep", "ep_collective", "all_to_all_time_s", "total_a2a_s", "dropped_tokens", "load_imbalance",
        "capacity_factor", "active_parameters", "collective_algorithms"}},
      {"simulation",
       {"sim_activities", "sim_activities_estimate", "sim_wall_time_s", "sim_memory_estimate_bytes",
        "collective_fidelity", "collective_algorithms", "compute_costs", "collective_times"}},
  };
  return presets;
}

// The default set: the contract columns and every column some row fills, in csv_columns() order.
std::vector<std::string> default_columns(const std::vector<bool>& filled)
{
  const auto& cols = csv_columns();
  std::vector<bool> keep = filled;
  std::fill(keep.begin(), keep.begin() + static_cast<long>(contract_columns().size()), true);
  std::vector<std::string> out;
  for (std::size_t c = 0; c < cols.size(); ++c)
    if (keep[c])
      out.push_back(cols[c]);
  return out;
}

// The columns a name stands for (a column, a preset, or `default`); empty when it is neither.
std::vector<std::string> expand(const std::string& name, const std::vector<bool>& filled)
{
  if (name == "default")
    return default_columns(filled);
  for (const auto& [preset, columns] : column_presets())
    if (preset == name)
      return columns;
  const auto& cols = csv_columns();
  if (std::find(cols.begin(), cols.end(), name) != cols.end())
    return {name};
  return {};
}
}  // namespace

std::vector<std::string> ColumnSelection::presets()
{
  std::vector<std::string> names{"default"};
  for (const auto& [preset, columns] : column_presets())
    names.push_back(preset);
  return names;
}

ColumnSelection ColumnSelection::parse(const std::string& spec)
{
  ColumnSelection selection;
  std::vector<std::string> valid = presets();
  valid.insert(valid.end(), csv_columns().begin(), csv_columns().end());
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t comma = spec.find(',', start);
    if (comma == std::string::npos)
      comma = spec.size();
    std::string token = spec.substr(start, comma - start);
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    start = comma + 1;
    if (token.empty())
      continue;
    const std::string name = token[0] == '-' ? token.substr(1) : token;
    if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
      std::string listed;
      for (const auto& preset : presets())
        listed += (listed.empty() ? "" : ", ") + preset;
      throw Error("unknown column '" + name + "'" + did_you_mean(name, valid) +
                  " (a column of docs/csv.md, or a preset: " + listed + ")");
    }
    selection.tokens_.push_back(token);
  }
  // A selection that starts by taking out takes out of the default set.
  if (!selection.tokens_.empty() && selection.tokens_.front()[0] == '-')
    selection.tokens_.insert(selection.tokens_.begin(), "default");
  ResultRow filled;
  for (const auto& column : csv_columns())
    filled.set(column, std::string("x"));
  if (selection.tokens_.empty() || selection.resolve({filled}).empty())
    throw Error("'" + spec + "' selects no column");
  return selection;
}

std::vector<std::string> ColumnSelection::resolve(const std::vector<ResultRow>& rows) const
{
  std::vector<bool> filled(csv_columns().size(), false);
  for (const auto& row : rows)
    mark_filled(row, filled);
  return resolve_filled(filled);
}

std::vector<std::string> ColumnSelection::resolve_filled(const std::vector<bool>& filled) const
{
  if (tokens_.empty())
    return default_columns(filled);
  std::vector<std::string> out;
  for (const auto& token : tokens_) {
    const bool remove = token[0] == '-';
    for (const auto& column : expand(remove ? token.substr(1) : token, filled)) {
      auto it = std::find(out.begin(), out.end(), column);
      if (remove && it != out.end())
        out.erase(it);
      else if (!remove && it == out.end())
        out.push_back(column);
    }
  }
  return out;
}

void mark_filled(const ResultRow& row, std::vector<bool>& filled)
{
  for (std::size_t c = 0; c < filled.size(); ++c)
    if (!row.cells()[c].empty())
      filled[c] = true;
}

ResultRow::ResultRow() : cells_(csv_columns().size()) {}

void ResultRow::set(const std::string& column, const std::string& value) { cells_[column_index(column)] = value; }
// Byte and count columns are whole numbers, written as such (never 6.738415616e+09); the rest
// keeps ten significant digits.
bool whole_number_column(const std::string& column)
{
  return column.find("bytes") != std::string::npos || column == "model_parameters" || column == "active_parameters" ||
         column == "sim_activities_estimate" || column == "dropped_tokens";
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

std::optional<double> cell_number(const std::string& cell)
{
  if (cell.empty())
    return std::nullopt;
  char* end      = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end == cell.c_str() || *end != '\0' || !std::isfinite(v))
    return std::nullopt;
  return v;
}

std::optional<double> ResultRow::number(const std::string& column) const
{
  return cell_number(get(column));
}

std::vector<std::size_t> rank_by_throughput(const std::vector<ResultRow>& rows)
{
  std::vector<std::size_t> ranking;
  std::vector<double> throughput(rows.size(), 0.0);
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (const auto t = rows[r].number("throughput_samples_per_s"); rows[r].is_ok() && t) {
      throughput[r] = *t;
      ranking.push_back(r);
    }
  std::stable_sort(ranking.begin(), ranking.end(),
                   [&](std::size_t a, std::size_t b) { return throughput[a] > throughput[b]; });
  return ranking;
}

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

CsvTable read_csv_table(const std::string& path)
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
  if (records.empty())
    throw ConfigError(path, 1, "", "not a ddlsim CSV: it is empty");
  CsvTable table;
  const auto& cols = csv_columns();
  for (const auto& name : records[0]) {
    if (std::find(cols.begin(), cols.end(), name) == cols.end())
      throw ConfigError(path, 1, "", "not a CSV of this ddlsim version: unknown column '" + name + "'" +
                                         did_you_mean(name, cols));
    if (std::find(table.columns.begin(), table.columns.end(), name) != table.columns.end())
      throw ConfigError(path, 1, "", "column '" + name + "' appears twice");
    table.columns.push_back(name);
  }
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.columns.size())
      throw ConfigError(path, lines[r], "", "expected " + std::to_string(table.columns.size()) + " cells, found " +
                                                std::to_string(records[r].size()));
    ResultRow row;
    for (std::size_t c = 0; c < table.columns.size(); ++c)
      row.set(table.columns[c], records[r][c]);
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::vector<ResultRow> read_csv(const std::string& path) { return read_csv_table(path).rows; }

void require_identity_columns(const std::string& path, const CsvTable& table, const std::string& why)
{
  for (const auto& column : identity_columns())
    if (std::find(table.columns.begin(), table.columns.end(), column) == table.columns.end())
      throw ConfigError(path, 1, "", "no column '" + column + "': " + why +
                                         " (write the CSV with the default columns, or with --columns including "
                                         "the preset identity)");
}

bool same_point(const ResultRow& a, const ResultRow& b)
{
  for (const auto& column : identity_columns())
    if (a.get(column) != b.get(column))
      return false;
  return true;
}

std::string point_key(const ResultRow& row)
{
  std::string key;
  for (const auto& column : identity_columns())
    key += row.get(column) + separator; // no cell holds it (serialize relies on that too)
  return key;
}

void write_csv(const std::string& path, const std::vector<std::string>& names, const RowVisitor& for_each_row)
{
  std::vector<std::size_t> index;
  for (const auto& name : names)
    index.push_back(column_index(name));
  write_file_atomically(path, "the CSV", [&](std::ostream& out) {
    for (std::size_t i = 0; i < names.size(); ++i)
      out << (i ? "," : "") << names[i];
    out << '\n';
    for_each_row([&](const ResultRow& row) {
      for (std::size_t i = 0; i < index.size(); ++i)
        out << (i ? "," : "") << csv_escape(row.cells()[index[i]]);
      out << '\n';
    });
  });
}

void write_csv(const std::string& path, const std::vector<ResultRow>& rows, const ColumnSelection& columns)
{
  write_csv(path, columns.resolve(rows), [&](const std::function<void(const ResultRow&)>& emit) {
    for (const auto& row : rows)
      emit(row);
  });
}

}  // namespace ddlsim::experiments
