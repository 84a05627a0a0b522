#include "sim/backends/cuda/MpiBootstrap.hpp"

#include "common/Error.hpp"

#include <cstdlib>
#include <limits>
#include <mpi.h>
#include <string>

// MPI's errors keep MPI_COMM_WORLD's default handler, MPI_ERRORS_ARE_FATAL: a failed MPI call ends every rank,
// which is what a failed rank must do anyway, so no call here checks its result.

namespace ddlsim::backends::cuda {
namespace {

std::string thread_level_name(int level)
{
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  default:
    return "thread level " + std::to_string(level);
  }
}

} // namespace

MpiBootstrap::MpiBootstrap(int& argc, char**& argv)
{
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize(); // every rank gets here alike: the same library everywhere
    throw ExecutionError("the MPI library offers only " + thread_level_name(provided) +
                         "; ddlsim-run-cuda --mpi needs MPI_THREAD_SERIALIZED");
  }
}

MpiBootstrap::~MpiBootstrap()
{
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0)
    MPI_Finalize();
}

void MpiBootstrap::barrier()
{
  MPI_Barrier(MPI_COMM_WORLD);
}

void MpiBootstrap::broadcast(void* data, std::size_t bytes, int root)
{
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ExecutionError("MPI broadcast of " + std::to_string(bytes) + " B: too large for one MPI_Bcast");
  MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
}

std::int64_t MpiBootstrap::min_over_ranks(std::int64_t value)
{
  std::int64_t out = value;
  MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  return out;
}

std::int64_t MpiBootstrap::max_over_ranks(std::int64_t value)
{
  std::int64_t out = value;
  MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

std::vector<double> MpiBootstrap::max_to_root(const std::vector<double>& values, int root)
{
  if (values.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw ExecutionError("MPI reduction of " + std::to_string(values.size()) + " values: too many for one MPI_Reduce");
  std::vector<double> out(values);
  MPI_Reduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD);
  return out;
}

void MpiBootstrap::abort(int exit_code)
{
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code); // MPI_Abort need not return, but the standard does not promise it
}

} // namespace ddlsim::backends::cuda
