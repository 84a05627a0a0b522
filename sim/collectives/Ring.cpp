// The ring family's messages: rings (NCCL's ring algorithm, hierarchical rings), the messages and
// joins every builder uses, and pipelined chains (broadcast).
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <utility>

namespace ddlsim::sim::collectives {

// Appends a ring over `members` of `steps` steps of `chunk` bytes. Every first-step message waits
// for `start` (when given). Returns the indices of the messages each member receives last.
// With rails_gpn > 0 (GPUs per node), hops between nodes go over the nodes' rails.
std::vector<Index> add_ring(std::vector<Message>& out, const std::vector<int>& members, int steps, double chunk,
                            const std::vector<Index>& start, int rails_gpn)
{
  const std::size_t n = members.size();
  std::vector<Index> previous(n); // message member i sent at the previous step
  std::vector<Index> current(n);
  for (int k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      const int dst = members[(i + 1) % n];
      Message m{.src   = members[i],
                .dst   = dst,
                .bytes = chunk,
                .after = {},
                .rails = rails_gpn > 0 && members[i] / rails_gpn != dst / rails_gpn};
      if (k == 0) {
        m.after = start;
      } else {
        m.after.push_back(previous[i]);               // i finished sending step k-1
        m.after.push_back(previous[(i + n - 1) % n]); // i received step k-1
      }
      current[i] = static_cast<Index>(out.size());
      out.push_back(std::move(m));
    }
    previous = current;
  }
  // Member i's last arrival is what its predecessor sent at the last step.
  std::vector<Index> last(n);
  for (std::size_t i = 0; i < n; ++i)
    last[i] = previous[(i + n - 1) % n];
  return last;
}

Index add_join(std::vector<Message>& out, std::vector<Index> after)
{
  out.push_back({.src = -1, .dst = -1, .bytes = 0, .after = std::move(after)});
  return static_cast<Index>(out.size() - 1);
}

Index add_message(std::vector<Message>& out, int src, int dst, double bytes, std::vector<Index> after, bool rails)
{
  out.push_back({.src = src, .dst = dst, .bytes = bytes, .after = std::move(after), .rails = rails});
  return static_cast<Index>(out.size() - 1);
}

// A pipelined chain (broadcast): chunk c crosses hop h once it has crossed hop h-1 and hop h has
// carried chunk c-1.
void add_chain(std::vector<Message>& out, const std::vector<int>& chain, int chunks, double chunk, int rails_gpn)
{
  std::vector<Index> previous_hop(static_cast<std::size_t>(chunks));
  for (std::size_t h = 0; h + 1 < chain.size(); ++h)
    for (int c = 0; c < chunks; ++c) {
      std::vector<Index> after;
      if (h > 0)
        after.push_back(previous_hop[static_cast<std::size_t>(c)]);
      if (c > 0)
        after.push_back(static_cast<Index>(out.size() - 1));
      previous_hop[static_cast<std::size_t>(c)] =
          add_message(out, chain[h], chain[h + 1], chunk, std::move(after),
                      rails_gpn > 0 && chain[h] / rails_gpn != chain[h + 1] / rails_gpn);
    }
}

} // namespace ddlsim::sim::collectives
