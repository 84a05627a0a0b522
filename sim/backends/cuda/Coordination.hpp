// What the host threads of a CUDA run share, and the NCCL communicators they issue on. Internal to
// ddlsim-run-cuda (CudaExecutor.cpp and GpuWorker.cpp); nothing here is part of the backend's interface.
//
//   Coordinator     the first failure, the iteration each cross-thread signal was last recorded in, and the
//                   meeting (barrier) of every GPU thread between iterations, with the ranks' barrier inside it
//   CommBuffers     each GPU's send and receive buffers, which other GPUs' threads copy from and into
//   Communicators   one NCCL communicator per distinct group of the plan, made before any thread starts
#pragma once

#include "sim/backends/Workload.hpp"
#include "sim/backends/cuda/ExecutionPlan.hpp"
#include "sim/backends/cuda/ProcessGroup.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <nccl.h>
#include <string>
#include <vector>

namespace ddlsim::backends::cuda::detail {

using Clock = std::chrono::steady_clock;

/// Unwinds a GPU thread once another one has failed: the first failure is the one reported.
struct Aborted {};

/// NCCL's text for `status`, with the communicator's last error when it has one (`comm` may be null).
std::string nccl_text(ncclResult_t status, ncclComm_t comm);

/// When this process's GPU threads met between iterations: when the last of them arrived (its GPUs had all
/// finished), and when they went on, after meeting the other ranks' (the same instant with one rank).
struct Meeting {
  Clock::time_point arrived, released;
};

/// The first failure, the iteration each cross-thread signal was last recorded in, and the barrier between
/// iterations. One mutex and condition variable serve all three: waits are rare and short next to GPU work.
class Coordinator {
public:
  /// `on_all_arrived_cb`, when set, runs on the last thread to arrive at each meeting, before any goes on (the
  /// ranks' barrier); `on_failure_cb`, when set, on the first thread to fail.
  Coordinator(int threads, std::size_t signals, std::function<void()> on_all_arrived_cb,
              std::function<void(const std::string&)> on_failure_cb);

  void fail(const std::string& message);
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string error() const;

  /// After the event of `signal` was recorded in `iteration`: lets other threads wait on it.
  void publish(int signal, int iteration);
  /// Until the event of `signal` has been recorded in `iteration`. Throws Aborted when another thread failed.
  void await(int signal, int iteration);
  /// Every thread meets here; returns once the last one arrived and on_all_arrived_cb returned. `last_cb`, when
  /// given, runs first on the last thread to arrive (every thread passes the same). Throws Aborted when another
  /// thread failed.
  Meeting meet(const std::function<void()>& last_cb = {});

private:
  const int threads_;
  std::unique_ptr<std::atomic<int>[]> recorded_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> failed_{false};
  std::string error_;
  int arrived_     = 0;
  long generation_ = 0;
  Meeting met_;
  const std::function<void()> on_all_arrived_cb_;
  const std::function<void(const std::string&)> on_failure_cb_;
};

/// The communication buffers of each GPU, which other GPUs' threads copy from and into: each thread writes its
/// GPU's entries during set-up, and the others read them only after the set-up barrier.
struct CommBuffers {
  std::vector<void*> send, recv;
};

/// One NCCL communicator per distinct group (and the world communicator of transfers between ranks), made before
/// any thread starts. In one process, by ncclCommInitAll over the group's GPUs. Across ranks, every rank goes
/// through the communicators in the plan's order: the rank of the group's first device makes a unique id and
/// broadcasts it, and each rank with members joins with ncclCommInitRank per member GPU, in one NCCL group call
/// (each call waits for the communicator's other members: one after the other, a rank's GPUs would wait for each
/// other). Destroyed after a clean run; aborted after a failure, which also stops NCCL kernels still waiting for a
/// peer that will never come (freeing memory under a running kernel would wait forever).
class Communicators {
public:
  /// Throws ExecutionError naming the first task of a group whose communicator could not be made.
  Communicators(const Workload& w, const ExecutionPlan& plan, ProcessGroup* ranks);
  ~Communicators() { release(); }
  Communicators(const Communicators&)            = delete;
  Communicators& operator=(const Communicators&) = delete;

  ncclComm_t get(int communicator, std::size_t rank) const
  {
    return comms_.at(static_cast<std::size_t>(communicator)).at(rank);
  }
  void abort_on_destroy() { abort_ = true; }

private:
  void release() noexcept;
  static std::string init_all(const ExecutionPlan& plan, const std::vector<int>& group, std::vector<ncclComm_t>& comms);
  static std::string init_ranks(const ExecutionPlan& plan, const std::vector<int>& group, ProcessGroup& ranks,
                                std::vector<ncclComm_t>& comms);

  std::vector<std::vector<ncclComm_t>> comms_;
  bool abort_ = false;
};

} // namespace ddlsim::backends::cuda::detail
