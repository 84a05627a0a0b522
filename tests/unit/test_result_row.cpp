#include "experiments/ResultRow.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ddlsim::experiments;

TEST_CASE("the CSV keeps ARCHITECTURE.md's contract columns first, with units")
{
  const std::vector<std::string> contract{
      "config_id", "experiment", "model", "cluster", "calibration", "schedule", "pp", "dp", "tp", "gpus",
      "global_batch", "micro_batch", "num_micro_batches", "dtype", "status", "iteration_time_s",
      "throughput_samples_per_s", "bubble_fraction", "compute_time_s", "exposed_comm_time_s", "comm_bytes_per_gpu",
      "peak_memory_bytes", "memory_capacity_bytes", "sim_activities", "sim_wall_time_s", "message"};
  const auto& cols = csv_columns();
  REQUIRE(cols.size() >= contract.size());
  CHECK(std::vector<std::string>(cols.begin(), cols.begin() + static_cast<long>(contract.size())) == contract);
}

TEST_CASE("rows survive the trip between processes and quote what CSV needs quoted")
{
  ResultRow row;
  row.set("message", std::string("a, \"quoted\"\nline"));
  row.set("iteration_time_s", 0.1234567890123);
  row.set("pp", 4LL);
  auto back = ResultRow::deserialize(row.serialize());
  REQUIRE(back);
  CHECK(back->cells() == row.cells());
  CHECK(row.get("iteration_time_s") == "0.123456789");
  CHECK(csv_escape(row.get("message")) == "\"a, \"\"quoted\"\"\nline\"");
  CHECK_FALSE(ResultRow::deserialize("too\x1f" "few"));
  CHECK_THROWS(row.set("no_such_column", 1.0));
}

TEST_CASE("write_csv replaces the file in one step and leaves no temporary behind")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_csv_" + std::to_string(::getpid()));
  const auto path = (dir / "sub" / "out.csv").string();
  ResultRow row;
  row.set("status", std::string("ok"));
  write_csv(path, {row, row});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string csv = text.str();
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "sub")) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("byte and count columns are whole numbers, never in scientific notation")
{
  ResultRow row;
  row.set("model_parameters", 405853388800.0);
  row.set("peak_memory_bytes", 6.161109402e10);
  row.set("comm_bytes_per_gpu", 1234.6);
  row.set("iteration_time_s", 11.15902334);
  CHECK(row.get("model_parameters") == "405853388800");
  CHECK(row.get("peak_memory_bytes") == "61611094020");
  CHECK(row.get("comm_bytes_per_gpu") == "1235");
  CHECK(row.get("iteration_time_s") == "11.15902334");
}

TEST_CASE("the default columns are the contract ones and those some row fills, in CSV order")
{
  ResultRow a, b;
  a.set("status", std::string("ok"));
  b.set("bn_batch", 8LL);
  b.set("mfu", 0.5);
  const auto cols = ColumnSelection().resolve({a, b});
  std::vector<std::string> expected = contract_columns();
  expected.push_back("bn_batch");
  expected.push_back("mfu");
  CHECK(cols == expected);
  CHECK(ColumnSelection().resolve({}) == contract_columns());
}

TEST_CASE("--columns: names and presets in order, -NAME takes out, unknown names get the closest")
{
  ResultRow row;
  row.set("bn_batch", 8LL);
  CHECK(ColumnSelection::parse("mfu, pp ,mfu").resolve({row}) == std::vector<std::string>{"mfu", "pp"});
  CHECK(ColumnSelection::parse("memory,-activation_memory_bytes").resolve({}) ==
        std::vector<std::string>{"peak_memory_bytes", "memory_capacity_bytes", "memory_reserve_bytes"});
  CHECK(ColumnSelection::parse("all").resolve({}) == csv_columns());
  // Starting with a removal removes from the default set.
  auto no_wall = ColumnSelection::parse("-sim_wall_time_s").resolve({row});
  CHECK(std::find(no_wall.begin(), no_wall.end(), "sim_wall_time_s") == no_wall.end());
  CHECK(std::find(no_wall.begin(), no_wall.end(), "bn_batch") != no_wall.end());
  CHECK(no_wall.size() == contract_columns().size());
  CHECK_THROWS_WITH(ColumnSelection::parse("iteration_time"),
                    doctest::Contains("unknown column 'iteration_time' (did you mean 'iteration_time_s'?)"));
  CHECK_THROWS_WITH(ColumnSelection::parse("all,-all"), doctest::Contains("selects no column"));
  CHECK_THROWS(ColumnSelection::parse(","));
  // The message lists every preset, the moe one included.
  const std::vector<std::string> presets = ColumnSelection::presets();
  REQUIRE(std::find(presets.begin(), presets.end(), "moe") != presets.end());
  std::string listed;
  for (const auto& preset : presets)
    listed += (listed.empty() ? "" : ", ") + preset;
  const std::string expected = "a preset: " + listed + ")";
  CHECK_THROWS_WITH(ColumnSelection::parse("nope"), doctest::Contains(expected.c_str()));
}

TEST_CASE("read_csv_table reads a file of any column set back; missing columns are empty")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_cols_" + std::to_string(::getpid()));
  const auto path = (dir / "sel.csv").string();
  ResultRow row;
  row.set("experiment", std::string("e"));
  row.set("config_id", 3LL);
  row.set("message", std::string("a, b"));
  row.set("mfu", 0.25);
  write_csv(path, {row}, ColumnSelection::parse("mfu,message,config_id"));
  const CsvTable table = read_csv_table(path);
  CHECK(table.columns == std::vector<std::string>{"mfu", "message", "config_id"});
  REQUIRE(table.rows.size() == 1);
  CHECK(table.rows[0].get("message") == "a, b");
  CHECK(table.rows[0].get("config_id") == "3");
  CHECK(table.rows[0].get("experiment").empty());
  CHECK_THROWS_WITH(require_identity_columns(path, table, "why"), doctest::Contains("no column 'experiment': why"));
  {
    std::ofstream out(path);
    out << "config_id,config_id\n1,1\n";
  }
  CHECK_THROWS_WITH(read_csv(path), doctest::Contains("appears twice"));
  std::filesystem::remove_all(dir);
}
