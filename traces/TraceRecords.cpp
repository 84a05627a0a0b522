#include "traces/TraceRecords.hpp"

#include "common/Error.hpp"
#include "traces/ChromeTrace.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <zlib.h>

namespace ddlsim::traces {
namespace {

std::string number(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string triple(const std::array<int, 3>& a)
{
  return "[" + std::to_string(a[0]) + "," + std::to_string(a[1]) + "," + std::to_string(a[2]) + "]";
}

std::string quoted(const std::string& s) { return "\"" + json_escape(s) + "\""; }

}  // namespace

int TraceSet::skipped_total() const
{
  int n = 0;
  for (const auto& [reason, count] : skipped)
    n += count;
  return n;
}

void write_jsonl(const TraceSet& set, std::ostream& out)
{
  out << "{\"type\":\"provenance\"";
  for (const auto& [key, value] : set.provenance)
    out << "," << quoted(key) << ":" << quoted(value);
  out << "}\n";
  for (const auto& k : set.kernels)
    out << "{\"type\":\"kernel\",\"name\":" << quoted(k.name) << ",\"duration_s\":" << number(k.duration_s)
        << ",\"start_s\":" << number(k.start_s) << ",\"device\":" << k.device << ",\"stream\":" << k.stream
        << ",\"grid\":" << triple(k.grid) << ",\"block\":" << triple(k.block)
        << (k.flop > 0 || k.bytes > 0 ? ",\"flop\":" + number(k.flop) + ",\"bytes\":" + number(k.bytes) +
                                           ",\"dtype\":" + quoted(k.dtype)
                                     : std::string())
        << "}\n";
  for (const auto& c : set.collectives)
    out << "{\"type\":\"collective\",\"collective\":" << quoted(c.collective) << ",\"bytes\":" << number(c.bytes)
        << ",\"dtype\":" << quoted(c.dtype) << ",\"group_size\":" << c.group_size
        << ",\"duration_s\":" << number(c.duration_s) << ",\"source\":" << quoted(c.source)
        << ",\"name\":" << quoted(c.name) << "}\n";
}

double element_bytes(const std::string& dtype)
{
  std::string d;
  for (char c : dtype)
    d += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d.rfind("c10::", 0) == 0)  // PyTorch's C++ names: c10::Half, c10::BFloat16
    d = d.substr(5);
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "uint32" || d == "tf32")
    return 4;
  if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "uint64")
    return 8;
  if (d == "half" || d == "float16" || d == "bfloat16" || d == "bf16" || d == "fp16" || d == "short" || d == "int16")
    return 2;
  if (d == "byte" || d == "char" || d == "int8" || d == "uint8" || d == "bool" || d == "fp8" ||
      d.rfind("float8", 0) == 0)
    return 1;
  return 0;
}

std::string read_maybe_gzip(const std::string& path)
{
  gzFile f = gzopen(path.c_str(), "rb");  // reads uncompressed files as they are
  if (f == nullptr)
    throw TraceError(path + ": cannot open");
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
