// The processes of a multi-machine run, as the CUDA backend needs them: who this process is among them, and the
// few collective operations that keep them in step (NCCL's unique ids handed out, a barrier before each iteration,
// the slowest rank's iteration times gathered). An interface, so that the executor knows nothing of MPI: only
// MpiBootstrap.cpp includes <mpi.h>, and a build without MPI runs on one machine with no ProcessGroup at all.
//
// Every operation but rank(), size() and abort() is collective: every process calls it, in the same order, or the
// run hangs. They are called from one thread at a time (MPI_THREAD_SERIALIZED), not always the same one.
//
//   MpiBootstrap mpi(argc, argv);                        // a ProcessGroup over MPI_COMM_WORLD
//   ncclUniqueId id;
//   if (mpi.rank() == 0) ncclGetUniqueId(&id);
//   mpi.broadcast(&id, sizeof id, 0);
//   std::vector<double> slowest = mpi.max_to_root(my_times_s, 0);   // element-wise maximum, on rank 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddlsim::backends::cuda {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;

  /// This process's rank, 0 .. size() - 1.
  virtual int rank() const = 0;
  /// The number of processes.
  virtual int size() const = 0;

  /// Returns once every process has called it.
  virtual void barrier() = 0;
  /// `bytes` bytes at `data` on `root` copied to `data` on every process.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  /// The smallest and the largest of the processes' `value`s, on every process.
  virtual std::int64_t min_over_ranks(std::int64_t value) = 0;
  virtual std::int64_t max_over_ranks(std::int64_t value) = 0;
  /// The element-wise maximum of the processes' `values` (all of one length) on `root`; `values` elsewhere.
  virtual std::vector<double> max_to_root(const std::vector<double>& values, int root) = 0;

  /// Ends every process of the run with `exit_code`, this one included, without waiting for any of them (a failed
  /// rank calls it, so that none waits forever for a peer that will not come); callable from any thread.
  [[noreturn]] virtual void abort(int exit_code) = 0;

protected:
  ProcessGroup()                               = default;
  ProcessGroup(const ProcessGroup&)            = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
};

} // namespace ddlsim::backends::cuda
