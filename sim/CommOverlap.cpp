#include "sim/CommOverlap.hpp"

#include <algorithm>
#include <utility>

namespace ddlsim::sim::detail {

std::vector<double> gpu_speeds(double full_speed, double slowdown)
{
  if (slowdown <= 0)
    return {full_speed};
  return {full_speed, full_speed / (1 + slowdown)};
}

CommOverlap::CommOverlap(const std::vector<simgrid::s4u::Host*>& gpus, double slowdown, std::vector<int> representative)
    : gpus_(gpus), representative_(std::move(representative)), in_flight_(gpus.size(), 0),
      slowdown_(slowdown > 0 ? slowdown : 0.0), running_on_(gpus.size())
{
}

bool CommOverlap::blocks_stream(const CollectiveTask& task) const
{
  return slowdown_ > 0 && task.fidelity == CollectiveFidelity::analytic && task.role == CollectiveRole::tensor_parallel;
}

void CommOverlap::update(const TaskGraph& graph, TaskId id, int delta)
{
  if (slowdown_ <= 0)
    return;
  if (graph.kind(id) == TaskKind::transfer) {
    const TransferTask& t = graph.transfer(id);
    if (t.src == t.dst)
      return; // a local hand-over: no communication kernel runs
    add(rep(t.src), delta);
    add(rep(t.dst), delta);
  } else if (graph.kind(id) == TaskKind::collective && !blocks_stream(graph.collective(id))) {
    for (int device : graph.collective(id).group)
      add(rep(device), delta);
  }
}

double CommOverlap::rate_of(const std::vector<int>& group) const
{
  for (int device : group)
    if (in_flight_[static_cast<std::size_t>(device)] > 0)
      return 1 / (1 + slowdown_);
  return 1;
}

namespace {
// The end of each part from the running one on, at a constant rate: each part starts where the
// previous one ends (the running part at `since` with `remaining` left).
template <typename Visit> void part_ends(double since, double remaining, double rate, const std::vector<double>& parts,
                                         std::size_t part, Visit visit)
{
  double end = since + remaining / rate;
  visit(end);
  for (std::size_t j = part + 1; j < parts.size(); ++j)
    visit(end = end + parts[j] / rate);
}
}  // namespace

void CommOverlap::schedule(TaskId id, Blocking& b)
{
  double end = 0;
  part_ends(b.since, b.remaining, b.rate, b.parts, b.part, [&](double e) { end = e; });
  b.timer = simgrid::kernel::timer::Timer::set(end, [this, id] {
    auto node = blocking_.extract(id);
    Blocking& done = node.mapped();
    for (int device : done.group) {
      auto& ids = running_on_[static_cast<std::size_t>(device)];
      ids.erase(std::lower_bound(ids.begin(), ids.end(), id));
    }
    part_ends(done.since, done.remaining, done.rate, done.parts, done.part, [&](double e) { done.ends.push_back(e); });
    done.done(done.ends);
  });
}

void CommOverlap::start(TaskId id, std::vector<int> group, std::vector<double> parts,
                        std::function<void(const std::vector<double>&)> done)
{
  // Each device once (a folded group names its representative for every member): a device's
  // state is all its rate depends on.
  std::sort(group.begin(), group.end());
  group.erase(std::unique(group.begin(), group.end()), group.end());
  Blocking& b = blocking_[id];
  b.group     = std::move(group);
  b.parts     = std::move(parts);
  b.remaining = b.parts.front();
  b.rate      = rate_of(b.group);
  b.since     = simgrid::s4u::Engine::get_clock();
  b.done      = std::move(done);
  for (int device : b.group) {
    auto& ids = running_on_[static_cast<std::size_t>(device)];
    ids.insert(std::lower_bound(ids.begin(), ids.end(), id), id);
  }
  schedule(id, b);
}

void CommOverlap::run_blocking(TaskId id, const CollectiveTask& task, double seconds, std::function<void()> done)
{
  std::vector<int> group;
  for (int device : task.group)
    group.push_back(rep(device));
  start(id, std::move(group), {seconds}, [done = std::move(done)](const std::vector<double>&) { done(); });
}

void CommOverlap::run_chain(TaskId id, int device, std::vector<double> parts,
                            std::function<void(const std::vector<double>&)> done)
{
  start(id, {rep(device)}, std::move(parts), std::move(done));
}

void CommOverlap::add(int device, int delta)
{
  int& count          = in_flight_[static_cast<std::size_t>(device)];
  const bool was_busy = count > 0;
  count += delta;
  if (was_busy == (count > 0))
    return;
  gpus_[static_cast<std::size_t>(device)]->set_pstate(count > 0 ? 1 : 0);
  // Stream-blocking collectives of this device change pace with it.
  const double now = simgrid::s4u::Engine::get_clock();
  for (TaskId id : running_on_[static_cast<std::size_t>(device)]) {
    Blocking& b       = blocking_.at(id);
    const double rate = rate_of(b.group);
    if (rate == b.rate)
      continue;
    // The parts of a chain that ended by now, as their own timers would have (a part ending now
    // included: then the next starts now, at the new rate either way).
    while (b.part + 1 < b.parts.size()) {
      const double end = b.since + b.remaining / b.rate;
      if (end > now)
        break;
      b.ends.push_back(end);
      b.since     = end;
      b.remaining = b.parts[++b.part];
    }
    b.remaining = std::max(0.0, b.remaining - (now - b.since) * b.rate);
    b.since     = now;
    b.rate      = rate;
    b.timer->remove();
    schedule(id, b);
  }
}

} // namespace ddlsim::sim::detail
