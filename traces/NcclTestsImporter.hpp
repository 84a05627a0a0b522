// Importing nccl-tests results (all_reduce_perf, all_gather_perf, ...): the text table they print
// and the JSON file they write with -J.
//
// Each result row becomes a collective record: its size in bytes (the per-rank buffer as
// nccl-tests reports it), element type, the out-of-place time, the group size (the number of
// ranks listed under "# Using devices") and the nodes it spans (their distinct host names). The collective comes from "# Collective test starting:
// NAME_perf", else from the program in the JSON's args, else from the file name. Rows that do not
// parse are skipped and counted.
//
//   TraceSet set = import_nccl_tests("all_reduce_8gpu.txt");
#pragma once

#include "traces/TraceRecords.hpp"

#include <string>

namespace ddlsim::traces {

/// Reads nccl-tests output, text or JSON (gzip or not). Throws TraceError when the file cannot be
/// read, is cut JSON, or holds no result row at all.
TraceSet import_nccl_tests(const std::string& path);

/// Reads any supported trace: a Kineto/Chrome trace, nccl-tests JSON or nccl-tests text.
TraceSet import_trace(const std::string& path);

}  // namespace ddlsim::traces
