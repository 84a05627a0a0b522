#include "common/HugePages.hpp"

#include <cstdint>

#include <sys/mman.h>

namespace ddlsim::huge_pages {
namespace {

std::size_t rounded(std::size_t bytes) { return (bytes + page - 1) / page * page; }

}  // namespace

void* map(std::size_t bytes) noexcept
{
  const std::size_t size = rounded(bytes);
  // A page more than needed, then the unaligned head and the tail beyond the aligned block given back.
  void* raw = ::mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + page - 1) / page * page;
  if (aligned > start)
    ::munmap(raw, aligned - start);
  if (const std::size_t tail = start + size + page - (aligned + size); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + size), tail);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advice: plain pages where refused
#endif
  return reinterpret_cast<void*>(aligned);
}

void unmap(void* block, std::size_t bytes) noexcept { ::munmap(block, rounded(bytes)); }

}  // namespace ddlsim::huge_pages
