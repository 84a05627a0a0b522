// common/HugePages.hpp: the allocator of the task graph's large arrays behaves as std::allocator does (elements
// kept through growth, small blocks from operator new), and its large blocks are 2 MiB aligned.
#include "common/HugePages.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

using namespace ddlsim;

TEST_CASE("a vector in huge pages keeps its elements through growth, small and large")
{
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> v;
  const std::size_t n = 3 * huge_pages::page / sizeof(std::uint64_t) + 17;  // past 2 MiB, through several growths
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(i * 2654435761u);
    if (v.size() == 1000)  // still a small block: operator new's
      CHECK(v.capacity() * sizeof(std::uint64_t) < huge_pages::threshold);
  }
  REQUIRE(v.size() == n);
  bool same = true;
  for (std::size_t i = 0; i < n; ++i)
    same = same && v[i] == i * 2654435761u;
  CHECK(same);
  CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % huge_pages::page == 0);  // a mapped block, 2 MiB aligned
  auto copy = v;                                                               // copies allocate their own
  CHECK(copy == v);
  CHECK(copy.data() != v.data());
  v.clear();
  v.shrink_to_fit();  // gives the block back
  CHECK(v.capacity() == 0);
  std::vector<int, HugePageAllocator<int>> small(100, 7);
  CHECK(std::accumulate(small.begin(), small.end(), 0) == 700);
  CHECK(HugePageAllocator<int>() == HugePageAllocator<double>());
}

TEST_CASE("huge_pages::map gives 2 MiB aligned, writable blocks rounded up to 2 MiB")
{
  for (std::size_t bytes : {huge_pages::page, huge_pages::page + 1, 5 * huge_pages::page - 3}) {
    auto* block = static_cast<unsigned char*>(huge_pages::map(bytes));
    REQUIRE(block != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(block) % huge_pages::page == 0);
    const std::size_t rounded = (bytes + huge_pages::page - 1) / huge_pages::page * huge_pages::page;
    block[0] = 1;
    block[rounded - 1] = 2;  // the whole rounded block is ours
    CHECK(block[0] + block[rounded - 1] == 3);
    huge_pages::unmap(block, bytes);
  }
}
