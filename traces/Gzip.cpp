#include "traces/Gzip.hpp"

#include "common/Error.hpp"

#include <cerrno>
#include <cstring>

#include <zlib.h>

namespace ddlsim::traces {

std::string read_maybe_gzip(const std::string& path)
{
  gzFile f = gzopen(path.c_str(), "rb");  // reads uncompressed files as they are
  if (f == nullptr)
    throw TraceError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      throw TraceError(path + ": cannot read (" + why + ")");
    }
    if (n == 0)
      break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  int code = 0;
  const char* why = gzerror(f, &code);
  const bool truncated = code == Z_BUF_ERROR;  // the compressed stream ended early
  const std::string message = why ? why : "";
  gzclose(f);
  if (truncated)
    throw TraceError(path + ": the gzip stream is truncated (" + message + ")");
  return text;
}

}  // namespace ddlsim::traces
