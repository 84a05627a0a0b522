#include "sim/backends/cuda/Coordination.hpp"

#include "common/Error.hpp"
#include "gpu/CudaCheck.hpp"

#include <algorithm>
#include <cuda_runtime_api.h>
#include <utility>

namespace ddlsim::backends::cuda::detail {

std::string nccl_text(ncclResult_t status, ncclComm_t comm)
{
  std::string text = ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    text += std::string(" (") + last + ")";
  return text;
}

// ---- Coordinator -------------------------------------------------------------------------------------------------

Coordinator::Coordinator(int threads, std::size_t signals, std::function<void()> on_all_arrived_cb,
                         std::function<void(const std::string&)> on_failure_cb)
    : threads_(threads), recorded_(std::make_unique<std::atomic<int>[]>(signals)),
      on_all_arrived_cb_(std::move(on_all_arrived_cb)), on_failure_cb_(std::move(on_failure_cb))
{
  for (std::size_t s = 0; s < signals; ++s)
    recorded_[s].store(-1);
}

void Coordinator::fail(const std::string& message)
{
  bool first = false;
  {
    const std::lock_guard lock(mutex_);
    if (!failed_.load()) {
      error_ = message;
      failed_.store(true);
      first = true;
    }
  }
  cv_.notify_all();
  if (first && on_failure_cb_)
    on_failure_cb_(message);
}

std::string Coordinator::error() const
{
  const std::lock_guard lock(mutex_);
  return error_;
}

void Coordinator::publish(int signal, int iteration)
{
  {
    const std::lock_guard lock(mutex_);
    recorded_[static_cast<std::size_t>(signal)].store(iteration, std::memory_order_release);
  }
  cv_.notify_all();
}

void Coordinator::await(int signal, int iteration)
{
  std::atomic<int>& recorded = recorded_[static_cast<std::size_t>(signal)];
  if (recorded.load(std::memory_order_acquire) >= iteration)
    return;
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return recorded.load(std::memory_order_acquire) >= iteration || failed_.load(); });
  if (recorded.load(std::memory_order_acquire) < iteration)
    throw Aborted{};
}

Meeting Coordinator::meet(const std::function<void()>& last_cb)
{
  std::unique_lock lock(mutex_);
  if (failed_.load())
    throw Aborted{};
  const long generation = generation_;
  if (++arrived_ == threads_) {
    Meeting met{.arrived = Clock::now(), .released = {}};
    if (last_cb) {
      lock.unlock();
      last_cb();
      lock.lock();
    }
    if (on_all_arrived_cb_) {
      // Without the lock: the others only wait for the generation to change, and no thread can fail now.
      lock.unlock();
      on_all_arrived_cb_();
      lock.lock();
      met.released = Clock::now();
    } else {
      met.released = met.arrived;
    }
    arrived_ = 0;
    ++generation_;
    met_ = met;
    lock.unlock();
    cv_.notify_all();
    return met;
  }
  cv_.wait(lock, [&] { return generation_ != generation || failed_.load(); });
  if (generation_ == generation)
    throw Aborted{};
  return met_; // nobody can open the next meeting before this thread arrives at it
}

// ---- Communicators -----------------------------------------------------------------------------------------------

Communicators::Communicators(const Workload& w, const ExecutionPlan& plan, ProcessGroup* ranks)
{
  for (std::size_t c = 0; c < plan.communicators.size(); ++c) {
    const std::vector<int>& group = plan.communicators[c];
    std::vector<ncclComm_t> comms(group.size(), nullptr); // null: another rank's member, or not made
    const std::string failed = ranks == nullptr ? init_all(plan, group, comms) : init_ranks(plan, group, *ranks, comms);
    comms_.push_back(std::move(comms)); // those made, even when another failed: release() aborts them
    if (!failed.empty()) {
      std::string first =
          static_cast<int>(c) == plan.world_communicator ? "the transfers between ranks" : "a collective";
      for (std::size_t t = 0; t < w.tasks.size(); ++t)
        if (w.tasks[t].kind == WorkTask::Kind::collective && plan.collectives[t].communicator == static_cast<int>(c)) {
          first = describe_task(w, static_cast<int>(t));
          break;
        }
      abort_ = true;
      release(); // the communicators of the groups before: no destructor runs after a throwing constructor
      throw ExecutionError(first + ": " + failed);
    }
  }
}

void Communicators::release() noexcept
{
  for (const auto& group : comms_)
    for (ncclComm_t comm : group) {
      if (comm == nullptr) // another rank's member
        continue;
      if (abort_)
        ncclCommAbort(comm);
      else
        ncclCommDestroy(comm);
    }
  comms_.clear();
}

// Every member on its GPU of this process. Returns what failed, or nothing.
std::string Communicators::init_all(const ExecutionPlan& plan, const std::vector<int>& group,
                                    std::vector<ncclComm_t>& comms)
{
  std::vector<int> gpus;
  std::string gpu_list;
  for (int d : group) {
    gpus.push_back(plan.cuda_device(plan.gpu_of[static_cast<std::size_t>(d)]));
    gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(gpus.back());
  }
  const ncclResult_t status = ncclCommInitAll(comms.data(), static_cast<int>(group.size()), gpus.data());
  if (status == ncclSuccess)
    return {};
  std::fill(comms.begin(), comms.end(), nullptr); // ncclCommInitAll leaves none made when it fails
  return "ncclCommInitAll over GPUs " + gpu_list + ": " + nccl_text(status, nullptr);
}

// This rank's members of a communicator over several ranks; the other members are made by their own ranks at the
// same point of the same order. Returns what failed, or nothing; the other ranks then wait: the caller aborts them.
std::string Communicators::init_ranks(const ExecutionPlan& plan, const std::vector<int>& group, ProcessGroup& ranks,
                                      std::vector<ncclComm_t>& comms)
{
  const int root = plan.rank_of(plan.gpu_of[static_cast<std::size_t>(group.front())]);
  ncclUniqueId id{};
  if (ranks.rank() == root)
    if (const ncclResult_t status = ncclGetUniqueId(&id); status != ncclSuccess)
      return "ncclGetUniqueId: " + nccl_text(status, nullptr);
  ranks.broadcast(&id, sizeof id, root);

  std::vector<std::pair<std::size_t, int>> mine; // (member, its CUDA device)
  std::string gpu_list;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const int gpu = plan.gpu_of[static_cast<std::size_t>(group[k])];
    if (!plan.is_local(gpu))
      continue;
    mine.emplace_back(k, plan.cuda_device(gpu));
    gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(mine.back().second);
    // Checked before the group call: inside it, a member left out would keep the others waiting for it.
    if (const cudaError_t set = cudaSetDevice(mine.back().second); set != cudaSuccess)
      return "cudaSetDevice(" + std::to_string(mine.back().second) + "): " + gpu::cuda_error_text(set);
  }
  if (mine.empty())
    return {};
  const int n         = static_cast<int>(group.size());
  ncclResult_t status = ncclGroupStart();
  if (status == ncclSuccess) {
    for (const auto& [k, gpu] : mine) {
      cudaSetDevice(gpu); // succeeded just above
      status = ncclCommInitRank(&comms[k], n, id, static_cast<int>(k));
      if (status != ncclSuccess)
        break;
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (status == ncclSuccess)
      status = ended;
  }
  if (status == ncclSuccess)
    return {};
  return "ncclCommInitRank of " + std::to_string(mine.size()) + " of its " + std::to_string(n) +
         " members, on GPU(s) " + gpu_list + ": " + nccl_text(status, nullptr);
}

} // namespace ddlsim::backends::cuda::detail
