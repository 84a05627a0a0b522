// MPI for ddlsim-run-cuda --mpi: one process (rank) per machine under mpirun, each driving its machine's GPUs,
// with NCCL's communicators bootstrapped through MPI (CudaExecutor gets the ProcessGroup). MPI is optional: this
// header needs no MPI, MpiBootstrap.cpp is compiled only when CMake found it (and then sets DDLSIM_RUN_CUDA_MPI on
// this target alone), and mpi_built is the one place the rest of the code learns which build it is in.
//
//   if constexpr (mpi_built) {
//     MpiBootstrap mpi(argc, argv);   // MPI_Init_thread; MPI_Finalize when it goes
//     run_on_gpus(workload, options, hooks, &mpi);
//   }
#pragma once

#include "sim/backends/cuda/ProcessGroup.hpp"

namespace ddlsim::backends::cuda {

#ifdef DDLSIM_RUN_CUDA_MPI
inline constexpr bool mpi_built = true;
#else
inline constexpr bool mpi_built = false; ///< MpiBootstrap is declared, not defined: use it under if constexpr
#endif

/// MPI_COMM_WORLD as a ProcessGroup. One per process, made before any other MPI call and gone after the last.
class MpiBootstrap final : public ProcessGroup {
public:
  /// MPI_Init_thread asking for MPI_THREAD_SERIALIZED (a GPU thread, not always the same one, calls the barrier).
  /// Throws ExecutionError, after MPI_Finalize, when the MPI library offers less.
  MpiBootstrap(int& argc, char**& argv);
  /// MPI_Finalize, unless MPI is finalized already.
  ~MpiBootstrap() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  std::int64_t min_over_ranks(std::int64_t value) override;
  std::int64_t max_over_ranks(std::int64_t value) override;
  std::vector<double> max_to_root(const std::vector<double>& values, int root) override;
  [[noreturn]] void abort(int exit_code) override;

private:
  int rank_ = 0;
  int size_ = 1;
};

} // namespace ddlsim::backends::cuda
