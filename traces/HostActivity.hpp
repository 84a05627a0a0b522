// The host side of a PyTorch profiler trace of a training step: how long each operator kept the CPU
// busy, for the host costs `ddlsim calibrate fit` fits (calibration/HostFit.hpp, docs/calibration.md).
//
// Eager PyTorch runs the forward on the main Python thread (top-level cpu_ops: aten::linear,
// aten::conv2d, ...) and the backward on the autograd engine's thread (top-level cpu_ops
// "autograd::engine::evaluate_function: AddmmBackward0", ...); the optimizer is annotated
// (user_annotation "Optimizer.zero_grad#AdamW.zero_grad", "Optimizer.step#AdamW.step"). The step's
// region is the time from the end of the optimizer annotation before each Optimizer.step (the trace's
// start when there is none) to that step's start; without any Optimizer.step the whole trace is one region.
// In a region:
//   - a top-level op is a cpu_op inside no other cpu_op of its thread;
//   - the main thread is the one that holds Optimizer.step (else zero_grad, else the one with the most
//     top-level ops); an autograd thread is another one that runs autograd nodes;
//   - an op's pass is backward on an autograd thread or when it is an autograd node, else forward;
//   - an op's host time runs from its start to the next top-level op's start on its thread in the
//     same region; the last one's is its own duration, and so is that of an op after which a top-level
//     op of another thread starts first (the host's work moved there: a micro-batch's last forward op
//     before its backward, its last backward node before the next micro-batch's forward);
//   - its events are the recorded host events (cpu_op, user_annotation, cuda_runtime, cuda_driver)
//     of its thread that start in that interval: the profiler's own cost grows with them;
//   - its stall is the part of that interval in which the profiler set up its thread: at a thread's
//     first CUDA runtime or driver call, a silence (no recorded event starts or ends) of 0.3 ms or
//     more right before or after that call. The H200 traces show one on every thread (0.4 to 2.5 ms;
//     no other silence before a CUDA call reaches 0.3 ms there), and once they are left out the two
//     ResNet-50 traces give the same profiler cost per event (2.8 us) where they differed by 2%.
// Per trace this yields one HostOpRecord per (pass, op name) and one HostStepRecord: the spans, the
// GPU's busy time (kernels, memcpys, memsets), the optimizer's annotations and their events, the
// parameter tensors (from the fused optimizer's TensorList input, else the AccumulateGrad nodes per
// backward pass) and each thread's totals.
//
//   HostActivity host;
//   for (const KinetoEvent& e : events) host.add(e);     // as KinetoImporter.cpp streams them
//   host.finish("step.json.gz", set);                    // appends set.host_ops, set.host_steps
#pragma once

#include "traces/KinetoEvent.hpp"
#include "traces/TraceRecords.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::traces {

class HostActivity {
public:
  /// Keeps what the records need of one event: host events (cpu_op, user_annotation, cuda_runtime,
  /// cuda_driver) and GPU activity (kernel, gpu_memcpy, gpu_memset) with a finite, non-negative ts
  /// and dur; ignores the others. Throws nothing but std::bad_alloc (and TraceError from a fused
  /// optimizer's malformed args text).
  void add(const KinetoEvent& e);
  /// Appends the records of the trace named `trace` to `set`: none when it holds no cpu_op.
  void finish(const std::string& trace, TraceSet& set);

  enum class Category : std::uint8_t { cpu_op, annotation, runtime };
  struct Event {
    double ts = 0, dur = 0;  ///< microseconds
    std::uint32_t name = 0;  ///< into names_; no_name for runtime calls
    std::uint32_t thread = 0;
    Category category = Category::cpu_op;
    double end() const { return ts + dur; }
  };
  static constexpr std::uint32_t no_name = 0xffffffffu;

private:
  std::uint32_t name_id(std::string_view name);
  std::uint32_t thread_id(double pid, double tid);

  std::vector<Event> events_;
  std::vector<std::pair<double, double>> gpu_;  ///< start, end in microseconds
  std::map<std::string, std::uint32_t, std::less<>> name_ids_;
  std::vector<std::string> names_;
  std::map<std::pair<double, double>, std::uint32_t> thread_ids_;
  std::vector<std::pair<double, double>> threads_;  ///< pid, tid
  int fused_optimizer_tensors_ = 0;                 ///< summed over the fused optimizer's calls
};

}  // namespace ddlsim::traces
