#include "sim/backends/cuda/ExecutionPlan.hpp"

#include "common/Dtype.hpp"
#include "common/Error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace ddlsim::backends::cuda {
namespace {

std::size_t whole_bytes(double bytes)
{
  return bytes > 0 ? static_cast<std::size_t>(std::llround(bytes)) : 0;
}

std::string device_list(const std::vector<int>& devices)
{
  std::string out;
  for (std::size_t i = 0; i < devices.size(); ++i)
    out += (i ? "," : "") + std::to_string(devices[i]);
  return out;
}

// Launches that run the same kernels: the label names op, dtype and shape, except a plain GEMM's batch.
std::string launch_key(const calibration::BenchPoint& p)
{
  return p.label() + " batch=" + std::to_string(p.batch);
}

constexpr std::size_t operand_alignment = 256; // what cudaMalloc guarantees, and cuBLAS and cuDNN prefer

std::size_t aligned(std::size_t bytes)
{
  return (bytes + operand_alignment - 1) / operand_alignment * operand_alignment;
}

// Region sizes of each simulated device from the workload's memory model, and every compute launch's operands
// placed in them: each region filled in launch order, from its start again when the next operand does not fit.
void plan_memory(const Workload& w, ExecutionPlan& plan)
{
  const auto devices = static_cast<std::size_t>(w.devices);
  plan.memory.assign(devices, {});
  plan.placement.assign(w.tasks.size(), {});
  // The largest operand of each region per device: no region may be smaller.
  std::vector<std::array<std::size_t, region_count>> largest(devices, {0, 0, 0, 0});
  for (const WorkTask& t : w.tasks)
    if (t.kind == WorkTask::Kind::compute)
      for (const calibration::BenchPoint& p : t.launches) {
        const auto bytes   = p.operand_bytes();
        const auto regions = launch_operand_regions(p, t.phase);
        for (std::size_t o = 0; o < 3; ++o) {
          std::size_t& most = largest[static_cast<std::size_t>(t.device)][static_cast<std::size_t>(regions[o])];
          most              = std::max(most, aligned(bytes[o]));
        }
      }
  const bool model = w.memory.size() == devices;
  for (std::size_t d = 0; d < devices; ++d) {
    DeviceMemoryPlan& m = plan.memory[d];
    m.from_model        = model;
    if (model) {
      const DeviceMemory& mm = w.memory[d];
      m.simulated_bytes      = mm.total();
      // Scratch buffers live as long as activations do: one region.
      const std::array<double, region_count> want{mm.weights, mm.gradients, mm.optimizer_state,
                                                  mm.activations + mm.workspace};
      for (std::size_t r = 0; r < region_count; ++r) {
        m.region_bytes[r] = aligned(whole_bytes(want[r]));
        if (m.region_bytes[r] < largest[d][r]) {
          if (m.region_bytes[r] > 0 || want[r] > 0)
            m.grown.push_back(static_cast<Region>(r));
          m.region_bytes[r] = largest[d][r];
        }
      }
    } else {
      m.region_bytes = largest[d];
    }
  }
  std::vector<std::array<std::size_t, region_count>> cursor(devices, {0, 0, 0, 0});
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    const WorkTask& t = w.tasks[i];
    if (t.kind != WorkTask::Kind::compute)
      continue;
    const auto d = static_cast<std::size_t>(t.device);
    for (const calibration::BenchPoint& p : t.launches) {
      const auto bytes   = p.operand_bytes();
      const auto regions = launch_operand_regions(p, t.phase);
      std::array<OperandPlace, 3> places{};
      for (std::size_t o = 0; o < 3; ++o) {
        const auto r        = static_cast<std::size_t>(regions[o]);
        const std::size_t b = aligned(bytes[o]);
        std::size_t& at     = cursor[d][r];
        if (at + b > plan.memory[d].region_bytes[r])
          at = 0;
        places[o] = {.region = regions[o], .offset = at, .bytes = bytes[o]};
        at += b;
      }
      plan.placement[i].push_back(places);
    }
  }
}

} // namespace

const char* region_name(Region region)
{
  switch (region) {
  case Region::weights:
    return "weights";
  case Region::gradients:
    return "gradients";
  case Region::optimizer:
    return "optimizer";
  case Region::activations:
    return "activations";
  }
  return "?";
}

std::array<Region, 3> launch_operand_regions(const calibration::BenchPoint& p, const std::string& phase)
{
  using calibration::BenchOp;
  using calibration::ConvPass;
  using calibration::GemmLayout;
  constexpr Region act = Region::activations;
  switch (p.op) {
  case BenchOp::gemm: // C = op(A) op(B): B holds the weights, unless the launch computes their gradient
    if (p.layout == GemmLayout::tn)
      return {act, act, Region::gradients};
    return {act, Region::weights, act};
  case BenchOp::conv2d:
    if (p.pass == ConvPass::backward_filter)
      return {act, Region::gradients, act};
    return {act, Region::weights, act};
  case BenchOp::pointwise:
    if (phase == "optimizer") // one fused kernel streaming the parameters' state (moments, master copy) in and out
      return {Region::optimizer, Region::optimizer, Region::optimizer};
    return {act, act, act};
  default:
    return {act, act, act};
  }
}

std::string describe_task(const Workload& w, int task)
{
  const WorkTask& t      = w.tasks.at(static_cast<std::size_t>(task));
  const std::string head = "task " + std::to_string(task) + " (";
  char bytes[32];
  std::snprintf(bytes, sizeof bytes, "%.0f", t.bytes);
  switch (t.kind) {
  case WorkTask::Kind::compute:
    return head + "compute on device " + std::to_string(t.device) + ")";
  case WorkTask::Kind::transfer:
    return head + "transfer of " + bytes + " B from device " + std::to_string(t.src) + " to device " +
           std::to_string(t.dst) + ")";
  case WorkTask::Kind::collective:
    return head + t.collective + " of " + bytes + " B over devices " + device_list(t.group) + ")";
  }
  return head + "?)";
}

namespace {

// Refuses a mapping that cannot run: no GPU, no device, no such rank, or devices and GPUs that do not match.
void check_mapping(const Workload& w, const MappingOptions& options)
{
  if (options.visible_gpus < 1)
    throw ExecutionError("no CUDA GPU is visible");
  if (w.devices < 1)
    throw ExecutionError("the workload has no devices");
  if (options.ranks < 1 || options.rank < 0 || options.rank >= options.ranks)
    throw ExecutionError("rank " + std::to_string(options.rank) + " of " + std::to_string(options.ranks) +
                         ": no such rank");
  const long all_gpus = static_cast<long>(options.ranks) * options.visible_gpus;
  if (options.ranks > 1 && (options.map_devices || w.devices != all_gpus))
    throw ExecutionError("the workload has " + std::to_string(w.devices) + " devices, " +
                         std::to_string(options.ranks) + " ranks of " + std::to_string(options.visible_gpus) +
                         " GPUs make " + std::to_string(all_gpus) +
                         ": across ranks, every device runs on a GPU of its own and every GPU runs a device");
  if (w.devices > options.visible_gpus && options.ranks == 1 && !options.map_devices)
    throw ExecutionError("the workload needs " + std::to_string(w.devices) + " GPUs, " +
                         std::to_string(options.visible_gpus) + (options.visible_gpus == 1 ? " is" : " are") +
                         " visible");
}

// The plan's devices on GPUs (device d on GPU d mod gpus) and its per-task and per-GPU tables, empty.
ExecutionPlan mapped_plan(const Workload& w, const MappingOptions& options)
{
  ExecutionPlan plan;
  plan.ranks         = options.ranks;
  plan.rank          = options.rank;
  plan.gpus          = options.ranks > 1 ? w.devices : std::min(w.devices, options.visible_gpus);
  plan.gpus_per_rank = options.ranks > 1 ? options.visible_gpus : plan.gpus;
  plan.mapped        = w.devices > plan.gpus;
  plan.devices_of.resize(static_cast<std::size_t>(plan.gpus));
  for (int d = 0; d < w.devices; ++d) {
    plan.gpu_of.push_back(d % plan.gpus);
    plan.devices_of[static_cast<std::size_t>(d % plan.gpus)].push_back(d);
  }
  plan.element_bytes      = dtype_bytes(w.dtype);
  const std::size_t tasks = w.tasks.size();
  plan.task_signal.assign(tasks, -1);
  plan.collectives.resize(tasks);
  plan.transfers.resize(tasks);
  plan.waits.resize(tasks);
  plan.launch_index.resize(tasks);
  plan.launches.resize(static_cast<std::size_t>(plan.gpus));
  plan.first_use.resize(static_cast<std::size_t>(plan.gpus));
  plan.comm_bytes.assign(static_cast<std::size_t>(plan.gpus), 0);
  return plan;
}

// Plans the workload's tasks in order, each from the signals of the tasks before it.
struct Planner {
  Planner(const Workload& workload, ExecutionPlan& p)
      : w(workload), plan(p), launch_ids(static_cast<std::size_t>(p.gpus))
  {
  }
  const Workload& w;
  ExecutionPlan& plan;
  std::vector<std::map<std::string, int>> launch_ids; // per GPU: a launch's key -> its index
  std::map<std::vector<int>, int> communicator_ids;
  std::set<std::pair<int, int>> peers;

  int gpu(int device) const { return plan.gpu_of[static_cast<std::size_t>(device)]; }
  int rank(int device) const { return plan.rank_of(gpu(device)); }
  int add_signal(int task, int device, Lane lane)
  {
    plan.signals.push_back({.task = task, .device = device, .lane = lane, .gpu = gpu(device)});
    return static_cast<int>(plan.signals.size()) - 1;
  }
  void grow_comm(int g, std::size_t bytes)
  {
    std::size_t& b = plan.comm_bytes[static_cast<std::size_t>(g)];
    b              = std::max(b, bytes);
  }
  void add_peers(int a, int b)
  {
    if (a != b && plan.rank_of(a) == plan.rank_of(b))
      peers.insert({std::min(a, b), std::max(a, b)});
  }
  void count_unenforced(const std::vector<char>& carried)
  {
    plan.unenforced_waits += static_cast<int>(std::count(carried.begin(), carried.end(), 0));
  }
  std::vector<int> waits_of(const WorkTask& t, int device, std::vector<char>& carried) const;
  void compute(std::size_t i);
  void transfer(std::size_t i);
  void collective(std::size_t i);
  void communicators();
  void cross_threads();
};

// What work issued on `device` waits for, from the signals of the tasks before it (all planned already). Only
// signals of the device's own rank: no thread sees another rank's. carried[j]: t.after[j] has a signal here.
std::vector<int> Planner::waits_of(const WorkTask& t, int device, std::vector<char>& carried) const
{
  std::vector<int> out;
  auto add = [&](int s) {
    if (s < 0 || plan.rank_of(plan.signals[static_cast<std::size_t>(s)].gpu) != rank(device))
      return false;
    if (std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
    return true;
  };
  carried.resize(t.after.size(), 0);
  for (std::size_t j = 0; j < t.after.size(); ++j) {
    const auto b           = static_cast<std::size_t>(t.after[j]);
    const WorkTask& before = w.tasks[b];
    bool here              = false;
    if (before.kind != WorkTask::Kind::collective) {
      here = add(plan.task_signal[b]) || add(plan.transfers[b].received); // a transfer: sent, or received
    } else {
      const PlannedCollective& c = plan.collectives[b];
      const auto member          = std::find(before.group.begin(), before.group.end(), device);
      if (member != before.group.end()) {
        here = add(c.done[static_cast<std::size_t>(member - before.group.begin())]);
      } else {
        for (int s : c.done) // the members of the device's rank, once they have finished, imply the others'
          here = add(s) || here;
      }
    }
    carried[j] = static_cast<char>(carried[j] || here);
  }
  return out;
}

void Planner::compute(std::size_t i)
{
  const WorkTask& t = w.tasks[i];
  const int task    = static_cast<int>(i);
  const int g       = gpu(t.device);
  std::vector<char> carried;
  plan.waits[i].push_back(waits_of(t, t.device, carried));
  count_unenforced(carried);
  plan.task_signal[i] = add_signal(task, t.device, Lane::compute);
  auto& ids           = launch_ids[static_cast<std::size_t>(g)];
  for (std::size_t l = 0; l < t.launches.size(); ++l) {
    const auto [it, added] = ids.try_emplace(launch_key(t.launches[l]), static_cast<int>(ids.size()));
    if (added) {
      plan.launches[static_cast<std::size_t>(g)].push_back(t.launches[l]);
      plan.first_use[static_cast<std::size_t>(g)].push_back({task, static_cast<int>(l)});
    }
    plan.launch_index[i].push_back(it->second);
  }
}

void Planner::transfer(std::size_t i)
{
  const WorkTask& t  = w.tasks[i];
  const int task     = static_cast<int>(i);
  PlannedTransfer& x = plan.transfers[i];
  x.nccl             = rank(t.src) != rank(t.dst);
  std::vector<char> carried;
  plan.waits[i].push_back(waits_of(t, t.src, carried));
  count_unenforced(carried);
  plan.task_signal[i] = add_signal(task, t.src, x.nccl ? Lane::nccl : Lane::transfer);
  if (x.nccl) {
    x.received = add_signal(task, t.dst, Lane::nccl);
    ++plan.rank_transfers;
  }
  grow_comm(gpu(t.src), whole_bytes(t.bytes));
  grow_comm(gpu(t.dst), whole_bytes(t.bytes));
  add_peers(gpu(t.src), gpu(t.dst));
}

void Planner::collective(std::size_t i)
{
  const WorkTask& t    = w.tasks[i];
  const int task       = static_cast<int>(i);
  PlannedCollective& c = plan.collectives[i];
  const std::size_t n  = t.group.size();
  std::set<int> member_gpus;
  for (int d : t.group)
    member_gpus.insert(gpu(d));
  c.nccl = member_gpus.size() == n;
  if (c.nccl && n > 0) {
    const auto [it, added] = communicator_ids.try_emplace(t.group, static_cast<int>(plan.communicators.size()));
    if (added)
      plan.communicators.push_back(t.group);
    c.communicator = it->second;
    c.count        = whole_bytes(t.bytes / plan.element_bytes);
    if (t.collective != "all_reduce" && c.count > 0)
      c.count = (c.count + n - 1) / n * n;
    for (int d : t.group)
      grow_comm(gpu(d), static_cast<std::size_t>(static_cast<double>(c.count) * plan.element_bytes));
  } else if (n > 0) {
    ++plan.emulated_collectives;
    c.copy_bytes = whole_bytes(t.bytes * static_cast<double>(n - 1) / static_cast<double>(n));
    for (std::size_t k = 0; k < n; ++k) {
      const int pred = t.group[(k + n - 1) % n];
      grow_comm(gpu(t.group[k]), c.copy_bytes);
      add_peers(gpu(t.group[k]), gpu(pred));
    }
  }
  // A dependency some member waits for holds for all: no member finishes before every member has joined.
  std::vector<char> carried;
  for (int d : t.group) {
    plan.waits[i].push_back(waits_of(t, d, carried));
    c.done.push_back(add_signal(task, d, c.nccl ? Lane::nccl : Lane::collective));
    if (!c.nccl)
      c.ready.push_back(add_signal(task, d, Lane::collective));
  }
  count_unenforced(carried);
}

// Transfers between ranks go over a communicator of every device, made after the collectives' (every rank makes
// them in this one order); a collective over every device in order already is one. NCCL work goes to its
// communicator's stream on each member GPU.
void Planner::communicators()
{
  if (plan.rank_transfers > 0) {
    std::vector<int> world(static_cast<std::size_t>(w.devices));
    for (int d = 0; d < w.devices; ++d)
      world[static_cast<std::size_t>(d)] = d;
    const auto [it, added] = communicator_ids.try_emplace(world, static_cast<int>(plan.communicators.size()));
    if (added)
      plan.communicators.push_back(world);
    plan.world_communicator = it->second;
  }
  plan.nccl_streams.assign(static_cast<std::size_t>(plan.gpus), {});
  for (std::size_t c = 0; c < plan.communicators.size(); ++c)
    for (int d : plan.communicators[c])
      plan.nccl_streams[static_cast<std::size_t>(gpu(d))].push_back(static_cast<int>(c));
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    const WorkTask& t = w.tasks[i];
    if (t.kind == WorkTask::Kind::collective && plan.collectives[i].nccl)
      for (int s : plan.collectives[i].done)
        plan.signals[static_cast<std::size_t>(s)].communicator = plan.collectives[i].communicator;
    if (t.kind == WorkTask::Kind::transfer && plan.transfers[i].nccl) {
      plan.signals[static_cast<std::size_t>(plan.task_signal[i])].communicator        = plan.world_communicator;
      plan.signals[static_cast<std::size_t>(plan.transfers[i].received)].communicator = plan.world_communicator;
    }
  }
}

// A signal is cross-thread when work on another GPU waits for it.
void Planner::cross_threads()
{
  for (std::size_t i = 0; i < w.tasks.size(); ++i) {
    const WorkTask& t = w.tasks[i];
    for (std::size_t slot = 0; slot < plan.waits[i].size(); ++slot) {
      const int device = t.kind == WorkTask::Kind::compute    ? t.device
                         : t.kind == WorkTask::Kind::transfer ? t.src
                                                              : t.group[slot];
      for (int s : plan.waits[i][slot])
        if (plan.signals[static_cast<std::size_t>(s)].gpu != gpu(device))
          plan.signals[static_cast<std::size_t>(s)].cross_thread = true;
    }
    if (t.kind == WorkTask::Kind::collective && !plan.collectives[i].nccl)
      for (int s : plan.collectives[i].ready)
        for (int d : t.group)
          if (plan.signals[static_cast<std::size_t>(s)].gpu != gpu(d))
            plan.signals[static_cast<std::size_t>(s)].cross_thread = true;
  }
}

} // namespace

ExecutionPlan plan_execution(const Workload& w, const MappingOptions& options)
{
  check_mapping(w, options);
  ExecutionPlan plan = mapped_plan(w, options);
  Planner planner(w, plan);
  for (std::size_t i = 0; i < w.tasks.size(); ++i)
    switch (w.tasks[i].kind) {
    case WorkTask::Kind::compute:
      planner.compute(i);
      break;
    case WorkTask::Kind::transfer:
      planner.transfer(i);
      break;
    case WorkTask::Kind::collective:
      planner.collective(i);
      break;
    }
  planner.communicators();
  plan_memory(w, plan);
  planner.cross_threads();
  plan.peer_pairs.assign(planner.peers.begin(), planner.peers.end());
  return plan;
}

std::string cuda_graph_refusal(const Workload& workload, const ExecutionPlan& plan, int warmup)
{
  if (warmup < 1)
    return "--cuda-graph captures the step after the warm-up, when the libraries have made their memory: give at "
           "least one warm-up iteration";
  const bool compute_only = std::all_of(workload.tasks.begin(), workload.tasks.end(),
                                        [](const WorkTask& t) { return t.kind == WorkTask::Kind::compute; });
  if (workload.devices != 1 || plan.gpus != 1 || plan.ranks != 1 || !compute_only)
    return "--cuda-graph replays one device's compute stream: this workload has " + std::to_string(workload.devices) +
           " device(s)" + (compute_only ? std::string() : std::string(" and transfers or collectives")) +
           "; run it without --cuda-graph";
  return {};
}

} // namespace ddlsim::backends::cuda
