#include "experiments/Report.hpp"

#include "common/Error.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace ddlsim::experiments;

namespace {

std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// Rows of a small sweep over pp and micro_batch; tp, model and the rest alike.
CsvTable sweep()
{
  CsvTable table;
  table.columns = {"config_id", "experiment", "model", "pp", "dp", "tp", "gpus", "micro_batch", "status",
                   "iteration_time_s", "throughput_samples_per_s", "bubble_fraction", "compute_time_s",
                   "exposed_comm_time_s", "peak_memory_bytes", "memory_capacity_bytes", "tokens_per_s", "mfu"};
  struct Point {
    const char *id, *pp, *dp, *mb, *status, *t, *rate;
  };
  for (const Point& p : std::vector<Point>{{"0", "1", "4", "1", "ok", "2", "32"},
                                           {"1", "2", "2", "1", "ok", "1", "64"},
                                           {"2", "2", "2", "2", "oom", "", ""},
                                           {"3", "4", "1", "1", "ok", "0.5", "128"},
                                           {"4", "4", "1", "2", "ok", "1", "64"}}) {
    ResultRow row;
    row.set("config_id", std::string(p.id));
    row.set("experiment", std::string("toy"));
    row.set("model", std::string("gpt2-small"));
    row.set("pp", std::string(p.pp));
    row.set("dp", std::string(p.dp));
    row.set("tp", std::string("1"));
    row.set("gpus", std::string("4"));
    row.set("micro_batch", std::string(p.mb));
    row.set("status", std::string(p.status));
    if (std::string(p.status) == "ok") {
      row.set("iteration_time_s", std::string(p.t));
      row.set("throughput_samples_per_s", std::string(p.rate));
      row.set("bubble_fraction", std::string("0.25"));
      row.set("compute_time_s", std::string("0.000123"));
      row.set("exposed_comm_time_s", std::string("0"));
      row.set("tokens_per_s", std::to_string(std::stod(p.rate) * 1024));  // seq 1024
      row.set("mfu", std::string("0.4"));
    }
    row.set("peak_memory_bytes", std::string("21474836480"));  // 20 GiB
    row.set("memory_capacity_bytes", std::string("85899345920"));  // 80 GiB
    table.rows.push_back(row);
  }
  return table;
}

}  // namespace

TEST_CASE("report: the best ok points by throughput, with the layout columns that differ")
{
  const std::string text = format_report("toy.csv", sweep(), {.top = 3});
  const auto lines = lines_of(text);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "toy.csv: 5 points (4 ok, 1 oom); the 3 best by throughput");
  // Equal in the three rows shown: named once, in the layout columns' order; tp 1 and gpus are not layout.
  CHECK(lines[1] == "same in all 3: experiment toy, model gpt2-small, tp 1");
  // pp, dp and micro_batch differ between points 3, 1 and 4 (ties keep the file's order: 1 before 4).
  CHECK(lines[2].find("rank  config_id  pp  dp  micro_batch  iteration_s  samples/s  tokens/s/GPU    MFU") == 0);
  CHECK(lines[3].find("   1          3   4   1            1       0.5000      128.0         32768  40.0%") == 0);
  CHECK(lines[4].find("   2          1   2   2            1        1.000      64.00         16384") == 0);
  CHECK(lines[5].find("   3          4   4   1            2") == 0);
  // Fixed width: every line of the table is as long as its header; no exponent anywhere.
  CHECK(lines[3].size() == lines[2].size());
  CHECK(lines[5].size() == lines[2].size());
  CHECK(text.find("e-0") == std::string::npos);
  CHECK(lines[3].find("0.0001230") != std::string::npos);  // compute_s in fixed notation
  CHECK(lines[3].find("25.0%") != std::string::npos);      // bubble
  CHECK(lines[3].find("20.0 of 80.0") != std::string::npos);  // memory per GPU of its capacity, GiB
  // No mixture of experts here: no exposed all-to-all column.
  CHECK(lines[2].find("exposed_a2a_s") == std::string::npos);
}

TEST_CASE("report: --top larger than the ok rows, and a CSV without an ok row")
{
  auto lines = lines_of(format_report("toy.csv", sweep(), {.top = 100}));
  CHECK(lines.size() == 2 + 1 + 4);  // summary, same line, header, the 4 ok rows
  CHECK(lines[0] == "toy.csv: 5 points (4 ok, 1 oom); the 4 best by throughput");

  CsvTable none = sweep();
  for (auto& row : none.rows)
    row.set("status", std::string("oom"));
  lines = lines_of(format_report("none.csv", none));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "none.csv: 5 points (5 oom); no point ran (status ok): nothing to rank");
}

TEST_CASE("report: tokens per second per GPU from the column, else tokens_per_s / gpus")
{
  CsvTable table = sweep();
  table.columns.push_back("tokens_per_s_per_gpu");
  table.rows[3].set("tokens_per_s_per_gpu", std::string("7"));  // the column wins where it is filled
  const auto lines = lines_of(format_report("toy.csv", table, {.top = 2}));
  REQUIRE(lines.size() == 5);
  CHECK(lines[3].find("  7  40.0%") != std::string::npos);
  CHECK(lines[4].find("16384") != std::string::npos);
}

TEST_CASE("report: a CSV without the columns it ranks by, or no CSV, is refused naming the file")
{
  CsvTable table = sweep();
  table.columns.erase(table.columns.begin() + 10);  // throughput_samples_per_s
  try {
    (void)format_report("thin.csv", table);
    FAIL("no error");
  } catch (const ddlsim::ConfigError& e) {
    CHECK(std::string(e.what()).find("thin.csv:1") != std::string::npos);
    CHECK(std::string(e.what()).find("throughput_samples_per_s") != std::string::npos);
  }
  try {
    (void)report_csv("/nonexistent/ddlsim-report.csv");
    FAIL("no error");
  } catch (const ddlsim::Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/ddlsim-report.csv") != std::string::npos);
  }
}
