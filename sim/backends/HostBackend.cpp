#include "sim/backends/HostBackend.hpp"

#include "common/Error.hpp"
#include "sim/backends/HostOps.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace ddlsim::backends {
namespace {

using clock = std::chrono::steady_clock;

// Shared state of one run: which tasks are done, and a way to wait for more.
class Progress {
public:
  explicit Progress(std::size_t tasks) : done_(tasks) {}
  void reset()
  {
    for (auto& d : done_)
      d.store(false, std::memory_order_relaxed);
  }
  bool done(int task) const { return done_[static_cast<std::size_t>(task)].load(std::memory_order_acquire); }
  void finish(int task)
  {
    {
      const std::lock_guard lock(mutex_);
      done_[static_cast<std::size_t>(task)].store(true, std::memory_order_release);
    }
    changed_.notify_all();
  }
  template <typename Predicate> void wait_until(Predicate ready)
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, ready);
  }
  void fail(std::string message)
  {
    {
      const std::lock_guard lock(mutex_);
      if (error_.empty())
        error_ = std::move(message);
      failed_.store(true);
    }
    changed_.notify_all();
  }
  bool failed() const { return failed_.load(); }
  std::string error() const { return error_; }

private:
  std::vector<std::atomic<bool>> done_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<bool> failed_{false};
  std::string error_;
};

struct Device {
  std::vector<int> tasks;  // its tasks, in workload order
  std::unique_ptr<HostBuffers> buffers;
  std::vector<float> send, receive;  // transfer and collective buffers
};

}  // namespace

ExecutionResult execute_on_host(const Workload& w, const HostOptions& options)
{
  if (w.devices < 1)
    throw ExecutionError(w.label + ": a workload without devices");
  const std::size_t n = w.tasks.size();
  std::vector<Device> devices(static_cast<std::size_t>(w.devices));
  std::vector<std::unique_ptr<std::barrier<>>> meet(n);  // per collective: members meet between phases
  double largest_message = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const WorkTask& t = w.tasks[i];
    switch (t.kind) {
    case WorkTask::Kind::compute:
      devices[static_cast<std::size_t>(t.device)].tasks.push_back(static_cast<int>(i));
      break;
    case WorkTask::Kind::transfer:
      devices[static_cast<std::size_t>(t.dst)].tasks.push_back(static_cast<int>(i));
      largest_message = std::max(largest_message, t.bytes);
      break;
    case WorkTask::Kind::collective:
      for (int g : t.group)
        devices[static_cast<std::size_t>(g)].tasks.push_back(static_cast<int>(i));
      meet[i] = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(t.group.size()));
      largest_message = std::max(largest_message, t.bytes);
      break;
    }
  }
  use_single_threaded_blas();
  // Each device's thread allocates and first touches its own buffers, after it is pinned, as a GPU
  // holds its own memory: buffers the main thread filled sit where it ran (another core's caches,
  // another memory node of the host under a virtual machine), and cost the device a remote read.
  auto allocate = [&](std::size_t d) {
    std::vector<calibration::BenchPoint> points;
    for (int i : devices[d].tasks)
      for (const auto& p : w.tasks[static_cast<std::size_t>(i)].launches)
        points.push_back(p);
    devices[d].buffers = std::make_unique<HostBuffers>(points);
    devices[d].send.assign(static_cast<std::size_t>(largest_message / 4) + 1, 1.0f);
    devices[d].receive.assign(devices[d].send.size(), 0.0f);
  };

  Progress progress(n);
  std::barrier start(static_cast<std::ptrdiff_t>(devices.size()) + 1);
  std::barrier end(static_cast<std::ptrdiff_t>(devices.size()) + 1);
  // Each device stamps its own start and end: the main thread may be scheduled late after the start
  // barrier (a loaded machine), and a stamp taken there could fall after the devices finished.
  std::vector<clock::time_point> started(devices.size());
  std::vector<clock::time_point> finished(devices.size());
  const int total = options.warmup + options.iterations;

  auto ready = [&](int task) {
    for (int a : w.tasks[static_cast<std::size_t>(task)].after)
      if (!progress.done(a))
        return false;
    return true;
  };

  auto run_collective = [&](const WorkTask& t, int task, int device) {
    // Reduce-scatter: member i sums its chunk from every member's send buffer; then all-gather:
    // member i copies every other member's chunk. Each member reads (n-1)/n of the buffer per phase.
    const std::size_t members = t.group.size();
    const std::size_t floats = static_cast<std::size_t>(t.bytes / 4);
    const std::size_t chunk = floats / std::max<std::size_t>(members, 1);
    const std::size_t me = static_cast<std::size_t>(std::find(t.group.begin(), t.group.end(), device) - t.group.begin());
    Device& self = devices[static_cast<std::size_t>(device)];
    meet[static_cast<std::size_t>(task)]->arrive_and_wait();
    if (t.collective != "all_gather") {
      float* mine = self.receive.data() + me * chunk;
      std::memcpy(mine, self.send.data() + me * chunk, chunk * sizeof(float));
      for (std::size_t o = 0; o < members; ++o)
        if (o != me) {
          const float* theirs = devices[static_cast<std::size_t>(t.group[o])].send.data() + me * chunk;
          for (std::size_t e = 0; e < chunk; ++e)
            mine[e] += theirs[e];
        }
      meet[static_cast<std::size_t>(task)]->arrive_and_wait();
    }
    if (t.collective != "reduce_scatter") {
      for (std::size_t o = 0; o < members; ++o)
        if (o != me)
          std::memcpy(self.receive.data() + o * chunk, devices[static_cast<std::size_t>(t.group[o])].receive.data() + o * chunk,
                      chunk * sizeof(float));
      meet[static_cast<std::size_t>(task)]->arrive_and_wait();
    }
  };

  auto worker = [&](int device) {
    Device& self = devices[static_cast<std::size_t>(device)];
    if (options.pin)
      pin_to_core(device);
    // Before the first start barrier (others read its buffers); a failure fails the run there, before
    // any device runs a task, instead of ending the process from this thread.
    try {
      allocate(static_cast<std::size_t>(device));
    } catch (const std::exception& e) {
      progress.fail("device " + std::to_string(device) + ": its buffers: " + e.what());
    }
    for (int iteration = 0; iteration < total; ++iteration) {
      start.arrive_and_wait();
      started[static_cast<std::size_t>(device)] = clock::now();
      std::vector<bool> mine_done(self.tasks.size(), false);
      std::size_t remaining = self.tasks.size();
      while (remaining > 0 && !progress.failed()) {
        // The first ready task in workload order; the next compute task and the next collective
        // only (stream order; one collective order on every member).
        int pick = -1;
        std::size_t slot = 0;
        bool compute_blocked = false, collective_blocked = false;
        for (std::size_t s = 0; s < self.tasks.size(); ++s) {
          if (mine_done[s])
            continue;
          const int task = self.tasks[s];
          const WorkTask& t = w.tasks[static_cast<std::size_t>(task)];
          const bool compute = t.kind == WorkTask::Kind::compute;
          const bool collective = t.kind == WorkTask::Kind::collective;
          if ((compute && compute_blocked) || (collective && collective_blocked))
            continue;
          if (ready(task)) {
            pick = task;
            slot = s;
            break;
          }
          compute_blocked = compute_blocked || compute;
          collective_blocked = collective_blocked || collective;
        }
        if (pick < 0) {
          progress.wait_until([&] {
            if (progress.failed())
              return true;
            for (std::size_t s = 0; s < self.tasks.size(); ++s)
              if (!mine_done[s] && ready(self.tasks[s]))
                return true;
            return false;
          });
          continue;
        }
        const WorkTask& t = w.tasks[static_cast<std::size_t>(pick)];
        try {
          switch (t.kind) {
          case WorkTask::Kind::compute:
            for (const auto& p : t.launches)
              run_point(p, *self.buffers);
            break;
          case WorkTask::Kind::transfer:
            std::memcpy(self.receive.data(), devices[static_cast<std::size_t>(t.src)].send.data(), static_cast<std::size_t>(t.bytes));
            break;
          case WorkTask::Kind::collective:
            run_collective(t, pick, device);
            break;
          }
        } catch (const std::exception& e) {
          progress.fail("task " + std::to_string(pick) + " on device " + std::to_string(device) + ": " + e.what());
        }
        mine_done[slot] = true;
        --remaining;
        // A collective is finished once its last member leaves it; any member may mark it.
        progress.finish(pick);
      }
      finished[static_cast<std::size_t>(device)] = clock::now();
      end.arrive_and_wait();
    }
  };

  std::vector<std::thread> threads;
  for (int d = 0; d < w.devices; ++d)
    threads.emplace_back(worker, d);
  ExecutionResult result;
  result.device = host_description();
  for (int iteration = 0; iteration < total; ++iteration) {
    progress.reset();
    start.arrive_and_wait();
    end.arrive_and_wait();
    const auto t0 = *std::min_element(started.begin(), started.end());
    const auto t1 = *std::max_element(finished.begin(), finished.end());
    if (iteration >= options.warmup)
      result.iterations_s.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  for (auto& t : threads)
    t.join();
  if (progress.failed())
    throw ExecutionError(w.label + ": " + progress.error());
  if (w.devices > static_cast<int>(std::thread::hardware_concurrency()))
    result.notes.push_back(std::to_string(w.devices) + " devices share " + std::to_string(std::thread::hardware_concurrency()) +
                           " cores");
  result.notes.push_back("every dtype computed in fp32");
  return result;
}

}  // namespace ddlsim::backends
