// `ddlsim report`: the best points of a result CSV as a table a person reads, in fixed-width text.
//
// The `ok` rows are ranked by throughput (samples per second; ties keep the file's order) and the
// best `top` are shown with their breakdown: iteration time, throughput, tokens per second per GPU,
// MFU, compute time, pipeline bubble, exposed communication and its part per parallel dimension
// (tp_s, dp_s, pp_s, cp_s; exposed all-to-all for mixtures of experts) and peak memory per GPU
// against the GPU's capacity, after the layout columns whose values differ between the rows shown
// (pp, dp, tp, micro_batch, ...); those equal in every row shown are named once above the table. A
// breakdown column empty in every row shown (tokens for a CNN, MFU without a peak; a dimension's
// exposed time also when 0 in all) is left out, and an empty cell is "-".
//
//   fmt::print("{}", experiments::report_csv("results/demo.csv", {.top = 5}));
//
//   results/demo.csv: 16 points (15 ok, 1 invalid); the 5 best by throughput
//   same in all 5: experiment demo, model gpt2-xl, cluster dgx-h100x2, ..., tp 1, cp 1, zero 0, ...
//   rank  config_id  pp  dp  micro_batch  num_micro_batches  iteration_s  samples/s  tokens/s/GPU  ...
//      1          2   1  16            4                  1       0.1676      381.8         24436  ...
#pragma once

#include "experiments/ResultRow.hpp"

#include <cstddef>
#include <string>

namespace ddlsim::experiments {

struct ReportOptions {
  std::size_t top = 10;  ///< rows shown, at most
};

/// The report of `table`, read from `path` (which it names). Throws ConfigError (path:1) when the
/// table lacks a column it ranks or describes by: status, iteration_time_s or throughput_samples_per_s.
std::string format_report(const std::string& path, const CsvTable& table, const ReportOptions& options = {});

/// Reads a CSV that ddlsim wrote (read_csv_table) and formats its report. Throws ConfigError naming
/// the file when it cannot be read, is not a ddlsim CSV of this version, or lacks those columns.
std::string report_csv(const std::string& path, const ReportOptions& options = {});

}  // namespace ddlsim::experiments
