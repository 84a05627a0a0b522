// RowSpool (experiments/RowSpool.hpp): a sweep's rows spooled to disk in the order their points finish
// make the same CSV, byte for byte, as write_csv of the rows in point order.
#include "experiments/RowSpool.hpp"

#include "common/Error.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ddlsim::experiments;

namespace {

ResultRow row_of(int index, const std::string& status)
{
  ResultRow row;
  row.set("config_id", static_cast<long long>(index));
  row.set("status", status);
  row.set("message", std::string("point ") + std::to_string(index) + ", \"quoted\"\nsecond line");
  if (status == "ok")
    row.set("mfu", 0.25 + index / 100.0); // a column only some rows fill
  return row;
}

std::string read(const std::filesystem::path& path)
{
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

TEST_CASE("spooled rows, added in any order, write the CSV of the rows in point order")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_spool_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<ResultRow> rows;
  for (int i = 0; i < 6; ++i)
    rows.push_back(row_of(i, i == 2 ? "oom" : "ok"));
  RowSpool spool;
  for (int i : {3, 0, 5, 2, 1, 4})
    spool.add(static_cast<std::size_t>(i), rows[static_cast<std::size_t>(i)]);
  CHECK(spool.size() == 6);
  CHECK(spool.contains(5));
  CHECK_FALSE(spool.contains(6));
  CHECK(spool.status_summary() == "5 ok, 1 oom");

  for (const std::string spec : {"", "mfu,message,config_id", "all"}) {
    const ColumnSelection columns = spec.empty() ? ColumnSelection() : ColumnSelection::parse(spec);
    write_csv((dir / "memory.csv").string(), rows, columns);
    spool.write_csv((dir / "spool.csv").string(), columns);
    CHECK(read(dir / "spool.csv") == read(dir / "memory.csv"));
  }
  // the default columns: those some row fills (mfu), as for rows in memory
  CHECK(read(dir / "memory.csv").find("mfu") != std::string::npos);

  std::size_t seen = 0;
  spool.for_each([&](std::size_t index, const ResultRow& row) {
    CHECK(index == seen);
    CHECK(row.cells() == rows[seen].cells());
    ++seen;
  });
  CHECK(seen == 6);
  CHECK_THROWS_AS(spool.add(3, rows[3]), ddlsim::Error); // each point once
  std::filesystem::remove_all(dir);
}

TEST_CASE("an empty spool writes the header of the contract columns")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_spool_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  RowSpool spool;
  spool.write_csv((dir / "empty.csv").string());
  write_csv((dir / "memory.csv").string(), {});
  CHECK(read(dir / "empty.csv") == read(dir / "memory.csv"));
  CHECK(spool.status_summary().empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("the spool lives in TMPDIR, unlinked from the start")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_spool_tmpdir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", dir.c_str(), 1);
  {
    RowSpool spool;
    bool found = false;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
      found = found || (target.rfind(dir.string(), 0) == 0 && target.find("ddlsim-rows-") != std::string::npos &&
                        target.find("(deleted)") != std::string::npos);
    }
    CHECK(found);
    CHECK(std::filesystem::is_empty(dir));  // nothing there to leave behind
  }
  if (before)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  std::filesystem::remove_all(dir);
}
