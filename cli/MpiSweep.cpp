#include "cli/MpiSweep.hpp"

#include "common/Error.hpp"

#include <mpi.h>

#include <cstdlib>
#include <vector>

namespace ddlsim::cli {
namespace {
constexpr char field_end = '\x1d';   // between a row's point index and its cells
constexpr char record_end = '\x1e';  // after each row (ResultRow::serialize uses \x1f between cells)
}  // namespace

MpiWorld mpi_start()
{
  // The ranks fork simulation processes that never call MPI; OpenMPI's warning about fork() does
  // not apply to them.
  ::setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS)
    throw Error("MPI_Init failed");
  MpiWorld world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  return world;
}

std::map<std::size_t, std::string> mpi_gather(const std::map<std::size_t, std::string>& rows, const MpiWorld& world)
{
  std::string mine;
  for (const auto& [index, row] : rows)
    mine += std::to_string(index) + field_end + row + record_end;
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(world.size));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(static_cast<std::size_t>(world.size), 0);
  int total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(world.rank == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world.rank != 0)
    return rows;
  std::map<std::size_t, std::string> out;
  for (std::size_t pos = 0; pos < all.size();) {
    const std::size_t sep = all.find(field_end, pos), end = all.find(record_end, pos);
    if (sep == std::string::npos || end == std::string::npos || sep > end)
      throw Error("malformed rows from another MPI rank");
    out[std::stoul(all.substr(pos, sep - pos))] = all.substr(sep + 1, end - sep - 1);
    pos = end + 1;
  }
  return out;
}

void mpi_stop() { MPI_Finalize(); }

}  // namespace ddlsim::cli
