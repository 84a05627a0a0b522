#include "experiments/Report.hpp"

#include "common/Error.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

namespace ddlsim::experiments {
namespace {

// What says how a point was laid out and configured: shown in the table when it differs between the
// rows shown, named once above it when it does not.
const std::vector<std::string>& layout_columns()
{
  static const std::vector<std::string> columns{"experiment",
                                                "model",
                                                "cluster",
                                                "calibration",
                                                "framework",
                                                "cuda_graphs",
                                                "schedule",
                                                "pp",
                                                "dp",
                                                "tp",
                                                "cp",
                                                "ep",
                                                "zero",
                                                "zero_group",
                                                "sequence_parallel",
                                                "virtual_stages",
                                                "global_batch",
                                                "micro_batch",
                                                "num_micro_batches",
                                                "seq",
                                                "dtype",
                                                "optimizer",
                                                "recompute",
                                                "attention",
                                                "partition",
                                                "dp_collective",
                                                "ep_collective",
                                                "dp_bucket_bytes",
                                                "ps_servers",
                                                "ps_consistency",
                                                "load_imbalance",
                                                "capacity_factor"};
  return columns;
}

bool has_column(const CsvTable& table, const std::string& column)
{
  return std::find(table.columns.begin(), table.columns.end(), column) != table.columns.end();
}

// `significant` digits in fixed notation (never an exponent): 0.1676, 381.8, 24433.
std::string fixed(double v, int significant)
{
  if (v == 0)
    return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals  = std::clamp(significant - 1 - magnitude, 0, 9);
  return fmt::format("{:.{}f}", v, decimals);
}

struct Metric {
  std::string header;
  std::function<std::string(const ResultRow&)> cell;  // "" when it does not apply
  bool zero_is_absent = false;  ///< left out when 0 in every row shown too (a dimension nobody used)
};

std::vector<Metric> metrics()
{
  auto seconds = [](const char* column) {
    return [column](const ResultRow& r) {
      const auto v = r.number(column);
      return v ? fixed(*v, 4) : std::string();
    };
  };
  auto percent = [](const char* column) {
    return [column](const ResultRow& r) {
      const auto v = r.number(column);
      return v ? fmt::format("{:.1f}%", 100 * *v) : std::string();
    };
  };
  return {
      {"iteration_s", seconds("iteration_time_s")},
      {"samples/s",
       [](const ResultRow& r) {
         const auto v = r.number("throughput_samples_per_s");
         return v ? fixed(*v, 4) : std::string();
       }},
      {"tokens/s/GPU",
       [](const ResultRow& r) {
         // CSVs from before the column: tokens_per_s / gpus.
         auto v           = r.number("tokens_per_s_per_gpu");
         const auto total = r.number("tokens_per_s"), gpus = r.number("gpus");
         if (!v && total && gpus && *gpus > 0)
           v = *total / *gpus;
         return v ? fmt::format("{:.0f}", *v) : std::string();
       }},
      {"MFU", percent("mfu")},
      {"compute_s", seconds("compute_time_s")},
      {"bubble", percent("bubble_fraction")},
      {"exposed_comm_s", seconds("exposed_comm_time_s")},
      {"tp_s", seconds("exposed_tp_s"), true},
      {"dp_s", seconds("exposed_dp_s"), true},
      {"pp_s", seconds("exposed_pp_s"), true},
      {"cp_s", seconds("exposed_cp_s"), true},
      {"exposed_a2a_s", seconds("all_to_all_time_s")},
      {"memory/GPU_GiB",
       [](const ResultRow& r) {
         constexpr double gib = 1024.0 * 1024 * 1024;
         const auto used = r.number("peak_memory_bytes"), capacity = r.number("memory_capacity_bytes");
         if (!used)
           return std::string();
         return capacity ? fmt::format("{:.1f} of {:.1f}", *used / gib, *capacity / gib)
                         : fmt::format("{:.1f}", *used / gib);
       }},
  };
}

std::string status_summary(const std::vector<ResultRow>& rows)
{
  std::string text;
  for (const auto& entry : status_table.entries) {
    const auto n = std::count_if(rows.begin(), rows.end(), [&](const ResultRow& r) { return r.get("status") == entry.name; });
    if (n > 0)
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, entry.name);
  }
  return text.empty() ? "none ok" : text;
}

}  // namespace

std::string format_report(const std::string& path, const CsvTable& table, const ReportOptions& options)
{
  for (const char* column : {"status", "iteration_time_s", "throughput_samples_per_s"})
    if (!has_column(table, column))
      throw ConfigError(path, 1, "", fmt::format("no column '{}': ddlsim report ranks the ok points by throughput "
                                                 "(write the CSV with the default columns, or with --columns "
                                                 "including status and the preset throughput)",
                                                 column));
  std::vector<const ResultRow*> ok;
  for (std::size_t r : rank_by_throughput(table.rows))
    ok.push_back(&table.rows[r]);
  const std::size_t shown = std::min(ok.size(), options.top);
  ok.resize(shown);

  std::string out = fmt::format("{}: {} point{} ({})", path, table.rows.size(), table.rows.size() == 1 ? "" : "s",
                                status_summary(table.rows));
  if (shown == 0)
    return out + "; no point ran (status ok): nothing to rank\n";
  out += shown == 1 ? "; the best by throughput\n" : fmt::format("; the {} best by throughput\n", shown);

  // Layout columns: those that differ between the rows shown go into the table, the rest above it.
  std::vector<std::string> headers{"rank"};
  std::vector<std::function<std::string(std::size_t)>> cells{[](std::size_t i) { return std::to_string(i + 1); }};
  if (has_column(table, "config_id")) {
    headers.push_back("config_id");
    cells.emplace_back([&](std::size_t i) { return ok[i]->get("config_id"); });
  }
  std::string same;
  for (const auto& column : layout_columns()) {
    if (!has_column(table, column))
      continue;
    const std::string& first = ok.front()->get(column);
    const bool varies = std::any_of(ok.begin(), ok.end(), [&](const ResultRow* r) { return r->get(column) != first; });
    if (varies) {
      headers.push_back(column);
      cells.emplace_back([&ok, column](std::size_t i) { return ok[i]->get(column); });
    } else if (!first.empty()) {
      same += fmt::format("{}{} {}", same.empty() ? "" : ", ", column, first);
    }
  }
  if (!same.empty())
    out += fmt::format("same in {}: {}\n", shown == 1 ? "it" : "all " + std::to_string(shown), same);
  for (const Metric& m : metrics()) {
    const bool applies = std::any_of(ok.begin(), ok.end(), [&](const ResultRow* r) {
      const std::string cell = m.cell(*r);
      return !cell.empty() && !(m.zero_is_absent && cell == "0");
    });
    if (!applies)
      continue;
    headers.push_back(m.header);
    cells.emplace_back([&ok, cell = m.cell](std::size_t i) { return cell(*ok[i]); });
  }

  // Fixed width: numbers right-aligned, text left-aligned, "-" for an empty cell.
  std::vector<std::vector<std::string>> text(shown);
  std::vector<std::size_t> width(headers.size());
  std::vector<bool> numeric(headers.size(), true);
  for (std::size_t c = 0; c < headers.size(); ++c) {
    width[c] = headers[c].size();
    for (std::size_t i = 0; i < shown; ++i) {
      std::string cell = cells[c](i);
      if (cell.empty())
        cell = "-";
      else if (!cell_number(cell) && !(cell.back() == '%' && cell_number(cell.substr(0, cell.size() - 1))) &&
               cell.find(" of ") == std::string::npos)
        numeric[c] = false;
      width[c] = std::max(width[c], cell.size());
      text[i].push_back(std::move(cell));
    }
  }
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      s += (c ? "  " : "") + (numeric[c] ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : ""));
    }
    return s + "\n";
  };
  out += line(headers);
  for (const auto& row : text)
    out += line(row);
  return out;
}

std::string report_csv(const std::string& path, const ReportOptions& options)
{
  return format_report(path, read_csv_table(path), options);
}

}  // namespace ddlsim::experiments
