// An allocator for the simulator's large arrays (the task graph's, the replay's): blocks of 1 MiB or more are
// mapped from the kernel 2 MiB aligned and marked for huge pages (madvise MADV_HUGEPAGE), so that filling an array
// of tens of megabytes costs a page fault per 2 MiB instead of one per 4 KiB where the kernel has transparent huge
// pages (`always` or `madvise` in /sys/kernel/mm/transparent_hugepage/enabled; elsewhere the blocks are plain
// pages). Page faults were a fifth of the time of a GPT-3 175B point on 1,024 GPUs (docs/performance.md).
// Smaller blocks come from operator new. Where the kernel refuses a mapping, allocate() throws std::bad_alloc, as
// operator new does when memory runs out.
//
//   HugePageVector<Task> tasks;   // a std::vector<Task, HugePageAllocator<Task>>, in huge pages once it is large
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace ddlsim {

namespace huge_pages {
inline constexpr std::size_t page = std::size_t{2} << 20;
/// Blocks from this size on are mapped (a 1 MiB array in a 2 MiB huge page: one fault instead of 256).
inline constexpr std::size_t threshold = std::size_t{1} << 20;
/// A 2 MiB aligned block of `bytes` rounded up to 2 MiB, marked for huge pages; nullptr when the kernel refuses.
void* map(std::size_t bytes) noexcept;
/// Returns a block map() gave for `bytes`.
void unmap(void* block, std::size_t bytes) noexcept;
}  // namespace huge_pages

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n)
  {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_pages::threshold)
      return static_cast<T*>(::operator new(bytes));
    if (void* block = huge_pages::map(bytes))
      return static_cast<T*>(block);
    throw std::bad_alloc();
  }
  void deallocate(T* p, std::size_t n) noexcept
  {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_pages::threshold)
      ::operator delete(p);
    else
      huge_pages::unmap(p, bytes);
  }
  template <class U>
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator<U>&) noexcept
  {
    return true;
  }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace ddlsim
