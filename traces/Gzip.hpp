// Reading trace files that may be gzip-compressed (PyTorch profiler traces often are: *.json.gz).
//
//   std::string text = read_maybe_gzip("rank0.json.gz");   // plain files are read as they are
//   const TraceText file("rank0.json");                    // ... or mapped, for reading only
//   parse(file.view());
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ddlsim::traces {

/// Reads a whole file, gunzipping it when it is gzip-compressed, into a string with room for
/// `padding` more bytes (no reallocation on the way: a plain file is read at its size, a gzip one
/// at the size its trailer gives). Throws TraceError when the file cannot be read or the
/// compressed stream is corrupt or truncated.
std::string read_maybe_gzip(const std::string& path, std::size_t padding = 0);

/// Whether the file begins with gzip's magic bytes (1f 8b); false when it cannot be read.
bool is_gzip_file(const std::string& path);

/// The bytes read_maybe_gzip makes room for: a plain file's size; a gzip file's trailer (ISIZE, the
/// size mod 2^32), but never more than deflate can expand the file to (1,032:1), so that a damaged
/// or crafted trailer cannot make it reserve gigabytes; 0 for what is not a regular file.
std::size_t uncompressed_size_hint(const std::string& path);

/// A trace file's bytes, for reading only: a plain file is mapped (no copy and no fresh memory to
/// clear: the page cache's own pages), a gzip one, or one that cannot be mapped (a pipe, an empty
/// file), is read by read_maybe_gzip. Throws what read_maybe_gzip throws. A mapped file must not
/// be cut short on disk while it is held (reading past its new end ends the process with SIGBUS).
class TraceText {
public:
  explicit TraceText(const std::string& path);
  ~TraceText();
  TraceText(const TraceText&) = delete;
  TraceText& operator=(const TraceText&) = delete;

  std::string_view view() const { return map_ != nullptr ? std::string_view(map_, size_) : std::string_view(text_); }

private:
  const char* map_ = nullptr;
  std::size_t size_ = 0;
  std::string text_;
};

}  // namespace ddlsim::traces
