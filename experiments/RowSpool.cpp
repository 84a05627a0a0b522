#include "experiments/RowSpool.hpp"

#include "common/Error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace ddlsim::experiments {

RowSpool::RowSpool() : filled_(csv_columns().size(), false)
{
  // In TMPDIR (std::tmpfile ignores it), unlinked at once: nothing is left behind, even by a killed
  // process.
  std::string path = (std::filesystem::temp_directory_path() / "ddlsim-rows-XXXXXX").string();
  const int fd     = ::mkstemp(path.data());
  if (fd >= 0) {
    ::unlink(path.c_str());
    file_ = ::fdopen(fd, "w+b");
    if (file_ == nullptr)
      ::close(fd);
  }
  if (file_ == nullptr)
    throw Error("cannot create a temporary file for the sweep's rows in " + path + ": " + std::strerror(errno));
}

RowSpool::~RowSpool()
{
  std::fclose(file_);
}

void RowSpool::add(std::size_t index, const ResultRow& row)
{
  if (places_.count(index))
    throw Error("the sweep's row of point " + std::to_string(index) + " came twice");
  const std::string text = row.serialize();
  if (std::fseek(file_, static_cast<long>(end_), SEEK_SET) != 0 ||
      std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    throw Error(std::string("cannot write the sweep's rows to a temporary file: ") + std::strerror(errno));
  places_.emplace(index, Place{end_, static_cast<std::uint32_t>(text.size())});
  end_ += text.size();
  mark_filled(row, filled_);
  ++statuses_[row.get("status")];
}

std::string status_summary(const std::map<std::string, std::size_t>& counts)
{
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  return summary;
}

std::string RowSpool::status_summary() const
{
  return experiments::status_summary(statuses_);
}

void RowSpool::for_each(const std::function<void(std::size_t, const ResultRow&)>& visit) const
{
  if (std::fflush(file_) != 0)
    throw Error(std::string("cannot write the sweep's rows to a temporary file: ") + std::strerror(errno));
  std::string text;
  for (const auto& [index, place] : places_) {
    text.resize(place.size);
    if (std::fseek(file_, static_cast<long>(place.offset), SEEK_SET) != 0 ||
        std::fread(text.data(), 1, text.size(), file_) != text.size())
      throw Error(std::string("cannot read the sweep's rows back from their temporary file: ") + std::strerror(errno));
    const auto row = ResultRow::deserialize(text);
    if (!row)
      throw Error("the sweep's row of point " + std::to_string(index) + " came back damaged from its temporary file");
    visit(index, *row);
  }
}

void RowSpool::write_csv(const std::string& path, const ColumnSelection& columns) const
{
  experiments::write_csv(path, columns.resolve_filled(filled_), [&](const std::function<void(const ResultRow&)>& emit) {
    for_each([&](std::size_t, const ResultRow& row) { emit(row); });
  });
}

} // namespace ddlsim::experiments
