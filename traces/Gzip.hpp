// Reading trace files that may be gzip-compressed (PyTorch profiler traces often are: *.json.gz).
//
//   std::string text = read_maybe_gzip("rank0.json.gz");   // plain files are read as they are
#pragma once

#include <cstddef>
#include <string>

namespace ddlsim::traces {

/// Reads a whole file, gunzipping it when it is gzip-compressed, into a string with room for
/// `padding` more bytes (no reallocation on the way: a plain file is read at its size, a gzip one
/// at the size its trailer gives). Throws TraceError when the file cannot be read or the
/// compressed stream is corrupt or truncated.
std::string read_maybe_gzip(const std::string& path, std::size_t padding = 0);

}  // namespace ddlsim::traces
