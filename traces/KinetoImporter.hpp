// Importing PyTorch profiler (Kineto) Chrome traces, gzip-compressed or not.
//
// Kept: every GPU kernel event (cat "kernel": name, ts and dur in microseconds, args device,
// stream, grid, block); for NCCL kernels also a collective record whose size is `In msg nelems`
// x `dtype` and group `Group size` when the kernel carries them (PyTorch >= 2.1), else its kind from
// the kernel name; and CPU-side `nccl:<op>` annotations carrying `Input Dims` and `Input type`
// (older traces), whose size is the first input's elements x its type. Host records of the CPU ops
// (HostActivity.hpp: per pass and op, the host time from each top-level op to the next, and the step's
// spans, GPU busy time and optimizer) when the trace has CPU ops. Device properties and
// distributedInfo become provenance. Malformed events are skipped and counted by reason; a file
// that is not a trace (not JSON, no traceEvents list) throws TraceError.
//
//   TraceSet set = import_kineto("a100_ddp_2rank_rank0.json.gz");
//   set.kernels.size();                 // 2,700
#pragma once

#include "traces/HostActivity.hpp"
#include "traces/Json.hpp"
#include "traces/KernelShapes.hpp"
#include "traces/KinetoEvent.hpp"
#include "traces/TraceRecords.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::traces {

/// Reads `path`, streaming its events (memory near the file's size, not a tree of it). Throws
/// TraceError naming the file when it cannot be read or is not a Kineto trace.
TraceSet import_kineto(const std::string& path);
/// The same from a parsed document (`path` names it in errors and provenance).
TraceSet import_kineto(const JsonValue& root, const std::string& path);
/// The same from a file's text (only read); nullopt when the document has no traceEvents member,
/// and then `root` is the whole document.
std::optional<TraceSet> import_kineto_text(std::string_view text, const std::string& path, JsonValue& root);
/// What an import keeps of a trace's events while they stream past, owning it so that each batch of
/// events can be dropped once read: what links kernels to their CPU ops (KernelShapes.hpp), and the
/// host's activity (HostActivity.hpp).
struct KinetoImport {
  KernelLinks links;
  HostActivity host;
};
/// Adds the kernels and collectives of `events` (elements of traceEvents) to `set`, counting skips,
/// and keeps the rest in `state`: once every batch of a trace's events is in, finish_kineto_import
/// completes `set`.
void import_kineto_events(TraceSet& set, const std::vector<JsonValue>& events, KinetoImport& state);
/// The same for one event (KinetoEvent.hpp), as import_kineto_text reads them. Throws nothing but
/// std::bad_alloc (and TraceError when a fused optimizer op's args are not JSON).
void import_kineto_event(TraceSet& set, const KinetoEvent& event, KinetoImport& state);
/// Gives the kernels their shapes (attach_kernel_shapes) and appends the host records of the trace
/// `path` (HostActivity::finish).
void finish_kineto_import(TraceSet& set, KinetoImport& state, const std::string& path);

/// The collective an NCCL kernel name or annotation stands for ("ncclKernel_AllReduce_RING_LL_Sum_float",
/// "ncclDevKernel_SendRecv", "nccl:_all_gather_base" -> all_reduce, send_recv, all_gather); empty when none.
std::string collective_from_name(const std::string& name);

}  // namespace ddlsim::traces
