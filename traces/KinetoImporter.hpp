// Importing PyTorch profiler (Kineto) Chrome traces, gzip-compressed or not.
//
// Kept: every GPU kernel event (cat "kernel": name, ts and dur in microseconds, args device,
// stream, grid, block); for NCCL kernels also a collective record whose size is `In msg nelems`
// x `dtype` and group `Group size` when the kernel carries them (PyTorch >= 2.1), else its kind from
// the kernel name; and CPU-side `nccl:<op>` annotations carrying `Input Dims` and `Input type`
// (older traces), whose size is the first input's elements x its type. Device properties and
// distributedInfo become provenance. Malformed events are skipped and counted by reason; a file
// that is not a trace (not JSON, no traceEvents list) throws TraceError.
//
//   TraceSet set = import_kineto("a100_ddp_2rank_rank0.json.gz");
//   set.kernels.size();                 // 2,700
#pragma once

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
/// Adds the kernels and collectives of `events` (elements of traceEvents) to `set`, counting skips,
/// and what links its kernels to their CPU ops to `links`: once every batch of a trace's events is
/// in, attach_kernel_shapes(set.kernels, links.ops, links.launches, links.links) gives the kernels
/// their shapes (KernelShapes.hpp).
void import_kineto_events(TraceSet& set, const std::vector<JsonValue>& events, KernelLinks& links);
/// The same for one event (KinetoEvent.hpp), as import_kineto_text reads them. Throws nothing but
/// std::bad_alloc.
void import_kineto_event(TraceSet& set, const KinetoEvent& event, KernelLinks& links);

/// The collective an NCCL kernel name or annotation stands for ("ncclKernel_AllReduce_RING_LL_Sum_float",
/// "ncclDevKernel_SendRecv", "nccl:_all_gather_base" -> all_reduce, send_recv, all_gather); empty when none.
std::string collective_from_name(const std::string& name);

}  // namespace ddlsim::traces
