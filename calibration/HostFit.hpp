// Host costs of eager PyTorch fitted from the host records of profiler traces (`ddlsim calibrate fit`;
// the records: traces/HostActivity.hpp; the kinds: HostModel.hpp; docs/calibration.md).
//
//   host_profiler_event_s   what the profiler adds per recorded event: the median, over the traces that are
//                           host-bound (GPU busy under half the span) and carry the step's time without the
//                           profiler (import --untraced-step-s), of
//                             (traced host span - profiler stalls - steps x untraced step) / recorded host events
//                           0 when no trace qualifies (the costs below then keep the profiler's share)
//   host_<pass>_<kind>_s    per pass and kind, pooled over every trace:
//   host_accumulate_s         (summed host seconds - their stalls - their events x host_profiler_event_s) / ops
//                           a kind no trace holds gets the median of its pass's fitted kinds
//   host_optimizer_tensor_s (optimizer seconds - their events x host_profiler_event_s) / parameter tensors
//   host_compiled_graph_s,  torch.compile's costs (framework pytorch-compile): published values, each with its
//   host_compiled_kernel_s, source, until a trace of a compiled step is imported (an eager trace holds none)
//   host_graph_replay_s
// The profiler's stalls (its set-up of a thread at the thread's first CUDA call, HostActivity.hpp) happen
// once per thread and trace, not per operator: they are no operator's cost. A cost the correction takes
// below 0 is 0. Each parameter's source names the traces and the numbers.
//
//   HostFit fit = fit_host_costs(read_jsonl("host.jsonl"));
//   for (const Parameter& p : fit.parameters) profile.parameters[p.name] = p;
#pragma once

#include "calibration/Profile.hpp"
#include "traces/TraceRecords.hpp"

#include <string>
#include <vector>

namespace ddlsim::calibration {

struct HostFit {
  std::vector<Parameter> parameters;  ///< host_*; none when the records hold no host record
  std::vector<std::string> notes;     ///< what was not fitted, or estimated, and why
};

/// Fits the host parameters from records.host_ops and records.host_steps (the kind of each op is
/// host_op_kind(op), whatever the record's `kind` says). Throws nothing but std::bad_alloc.
HostFit fit_host_costs(const traces::TraceSet& records);

/// Sets each record's kind to host_kind_name(host_op_kind(op)) (the import writes it for readers).
void classify_host_ops(std::vector<traces::HostOpRecord>& ops);

}  // namespace ddlsim::calibration
