// Reading trace files that may be gzip-compressed (PyTorch profiler traces often are: *.json.gz).
//
//   std::string text = read_maybe_gzip("rank0.json.gz");   // plain files are read as they are
#pragma once

#include <string>

namespace ddlsim::traces {

/// Reads a whole file, gunzipping it when it is gzip-compressed. Throws TraceError when the file
/// cannot be read or the compressed stream is corrupt or truncated.
std::string read_maybe_gzip(const std::string& path);

}  // namespace ddlsim::traces
