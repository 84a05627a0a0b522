// A sweep's rows kept on disk instead of in memory, until the CSV is written.
//
// `ddlsim run` adds each row as its point finishes, in whatever order they finish; write_csv writes
// them in point order with the columns that some row fills (or the `--columns` selection), as
// experiments/ResultRow.hpp's write_csv does for rows in memory. Memory is a few bytes a row (its
// place in the file), so a sweep of 100,000 points holds no more than one of 250 (issue 30 item 7).
// The spool is an anonymous temporary file in TMPDIR (/tmp by default), gone when the object, or the
// process, is.
//
//   RowSpool spool;
//   spool.add(3, row3);  spool.add(1, row1);
//   spool.write_csv("results/x.csv");           // rows 1 and 3, in that order
#pragma once

#include "experiments/ResultRow.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// Row counts by status as `ddlsim run` and `execute` report them: "3 ok, 1 oom" (statuses in order).
std::string status_summary(const std::map<std::string, std::size_t>& counts);

class RowSpool {
public:
  /// Throws ddlsim::Error when no temporary file can be created.
  RowSpool();
  ~RowSpool();
  RowSpool(const RowSpool&)            = delete;
  RowSpool& operator=(const RowSpool&) = delete;

  /// Adds the row of point `index` (any order, each index once). Throws ddlsim::Error when the file
  /// cannot be written (a full disk) or the index is there already.
  void add(std::size_t index, const ResultRow& row);
  std::size_t size() const { return places_.size(); }
  bool contains(std::size_t index) const { return places_.count(index) > 0; }
  /// How many rows have each status ("3 ok, 1 oom"), as `ddlsim run` reports them.
  std::string status_summary() const;
  /// Calls `visit` with every row, in index order (each read back from the file).
  void for_each(const std::function<void(std::size_t, const ResultRow&)>& visit) const;
  /// Writes every row, in index order, to `path` atomically (write_csv of ResultRow.hpp).
  void write_csv(const std::string& path, const ColumnSelection& columns = {}) const;

private:
  struct Place {
    std::uint64_t offset = 0;
    std::uint32_t size   = 0;
  };
  std::FILE* file_   = nullptr;
  std::uint64_t end_ = 0;
  std::map<std::size_t, Place> places_; // by index
  std::vector<bool> filled_;            // per csv_columns() entry: does some row fill it
  std::map<std::string, std::size_t> statuses_;
};

} // namespace ddlsim::experiments
