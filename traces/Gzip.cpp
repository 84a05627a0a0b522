#include "traces/Gzip.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>

namespace ddlsim::traces {

// A gzip member's ISIZE (the size mod 2^32) is only a hint, and a damaged or crafted trailer can
// claim 4 GB for a few bytes: no more than deflate can expand the file to, 1,032 bytes out per byte
// in (zlib's technical details: a 258-byte match coded in 2 bits, 1032:1).
std::size_t uncompressed_size_hint(const std::string& path)
{
  std::error_code ec;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || !std::filesystem::is_regular_file(path, ec))
    return 0;
  const auto size = static_cast<std::size_t>(in.tellg());
  unsigned char head[2] = {0, 0};
  in.seekg(0);
  in.read(reinterpret_cast<char*>(head), 2);
  if (size < 18 || head[0] != 0x1f || head[1] != 0x8b)
    return size;
  unsigned char tail[4] = {0, 0, 0, 0};
  in.seekg(static_cast<std::streamoff>(size - 4));
  in.read(reinterpret_cast<char*>(tail), 4);
  const std::size_t isize = static_cast<std::size_t>(tail[0]) | static_cast<std::size_t>(tail[1]) << 8 |
                            static_cast<std::size_t>(tail[2]) << 16 | static_cast<std::size_t>(tail[3]) << 24;
  constexpr std::size_t deflate_max_ratio = 1032;
  return std::min(isize, size * deflate_max_ratio);
}

namespace {

// A big buffer in 2 MB pages where the kernel offers them on request (Linux's transparent huge
// pages in "madvise" mode): a 64 MB trace then costs 32 page faults instead of 16,000.
void advise_huge_pages(std::string& text)
{
  constexpr std::size_t huge = std::size_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(text.data());
  const std::uintptr_t first = (begin + huge - 1) / huge * huge;
  const std::uintptr_t last = (begin + text.capacity()) / huge * huge;
  if (last > first)
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // a hint: failure is harmless
}

}  // namespace

bool is_gzip_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  in.read(magic, 2);
  return in.gcount() == 2 && static_cast<unsigned char>(magic[0]) == 0x1f && static_cast<unsigned char>(magic[1]) == 0x8b;
}

std::string read_maybe_gzip(const std::string& path, std::size_t padding)
{
  std::error_code ec;
  if (std::ifstream plain(path, std::ios::binary | std::ios::ate); plain && std::filesystem::is_regular_file(path, ec)) {
    const auto size = static_cast<std::size_t>(plain.tellg());
    unsigned char head[2] = {0, 0};
    plain.seekg(0);
    plain.read(reinterpret_cast<char*>(head), 2);
    if (size < 2 || head[0] != 0x1f || head[1] != 0x8b) {  // not gzip: read it in one go
      std::string text;
      text.reserve(size + padding);
      advise_huge_pages(text);
      text.resize(size);
      plain.clear();  // a 1-byte file failed the 2-byte read above
      plain.seekg(0);
      if (size > 0 && !plain.read(text.data(), static_cast<std::streamsize>(size)))
        throw TraceError(path + ": cannot read (" + std::strerror(errno) + ")");
      return text;
    }
  }
  gzFile f = gzopen(path.c_str(), "rb");  // reads uncompressed files as they are
  if (f == nullptr)
    throw TraceError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string text;
  text.reserve(uncompressed_size_hint(path) + padding);
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
    if (text.size() + static_cast<std::size_t>(n) + padding > text.capacity())  // grow geometrically, keep the padding
      text.reserve(std::max(2 * text.capacity(), text.size() + static_cast<std::size_t>(n) + padding));
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

TraceText::TraceText(const std::string& path)
{
  // O_NONBLOCK: a FIFO is not waited for here (it is not mapped; read_maybe_gzip reads it as before)
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); fd >= 0) {
    struct stat st {};
    unsigned char head[2] = {0, 0};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 2 && ::pread(fd, head, 2, 0) == 2 &&
        !(head[0] == 0x1f && head[1] == 0x8b)) {
      const auto size = static_cast<std::size_t>(st.st_size);
      // MAP_POPULATE: every page mapped at once (no fault per page later: the whole file is read)
      void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (map != MAP_FAILED) {
        map_ = static_cast<const char*>(map);
        size_ = size;
      }
    }
    ::close(fd);
  }
  if (map_ == nullptr)
    text_ = read_maybe_gzip(path);
}

TraceText::~TraceText()
{
  if (map_ != nullptr)
    ::munmap(const_cast<char*>(map_), size_);
}

}  // namespace ddlsim::traces
