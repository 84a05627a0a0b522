// One sweep across MPI ranks: `mpirun -np N ddlsim run EXPERIMENT.yaml --mpi`.
//
// Every rank resolves the same points; rank r simulates those whose index mod N is r (each in forked
// processes, as a local run does), and rank 0 gathers every row and writes the one CSV, identical to
// a local run's. Part of the CLI: the libraries know nothing of MPI.
//
//   MpiWorld world = mpi_start();                     // MPI_Init
//   std::map<std::size_t, std::string> all = mpi_gather(mine, world);   // rank 0 gets every row
//   mpi_stop();
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace ddlsim::cli {

struct MpiWorld {
  int rank = 0;
  int size = 1;
};

/// Initialises MPI. Throws ddlsim::Error when this ddlsim was built without MPI.
MpiWorld mpi_start();
/// Rank 0 returns every rank's rows (point index -> serialized row); the others return theirs.
std::map<std::size_t, std::string> mpi_gather(const std::map<std::size_t, std::string>& rows, const MpiWorld& world);
/// Finalises MPI (after mpi_start).
void mpi_stop();

}  // namespace ddlsim::cli
