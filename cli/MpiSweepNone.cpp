// `run --mpi` in a build without MPI: a clear refusal (see MpiSweep.hpp).
#include "cli/MpiSweep.hpp"

#include "common/Error.hpp"

namespace ddlsim::cli {

MpiWorld mpi_start()
{
  throw Error("this ddlsim was built without MPI: install libopenmpi-dev and rebuild, or use --shard I/N and ddlsim merge");
}

std::map<std::size_t, std::string> mpi_gather(const std::map<std::size_t, std::string>& rows, const MpiWorld&) { return rows; }

void mpi_stop() {}

}  // namespace ddlsim::cli
