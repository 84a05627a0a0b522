// NVLink SHARP (NVLS): the bytes each member sends into the switch and back, and the switch's
// chunk pipeline.
#include "sim/collectives/Internal.hpp"

#include <algorithm>
#include <utility>

namespace ddlsim::sim::collectives {

// Bytes each member sends into the switch and receives back, per whole buffer: NVLS reads every
// member's data for the reduction and multicasts the result to every member.
std::pair<double, double> nvls_bytes(CollectiveKind kind, double bytes, double m)
{
  switch (kind) {
  case CollectiveKind::all_reduce:
    return {bytes * (m + 1) / m, bytes * (m + 1) / m};
  case CollectiveKind::all_gather:
    return {bytes / m, bytes};
  case CollectiveKind::reduce_scatter:
    return {bytes, bytes / m};
  case CollectiveKind::broadcast:
  case CollectiveKind::all_to_all:
    break;
  }
  return {bytes, bytes};
}

// K chunks into a switch and back: every member sends chunk c up after chunk c-1; the switch sends
// chunk c down to every member once all of chunk c is in and chunk c-1 went down. Returns the last
// arrivals.
std::vector<Index> add_switch_pipeline(std::vector<Message>& out, const std::vector<int>& members, int endpoint,
                                       int chunks, double up_bytes, double down_bytes, const std::vector<Index>& start)
{
  const std::size_t m = members.size();
  std::vector<Index> up(m), down(m);
  for (int c = 0; c < chunks; ++c) {
    std::vector<Index> in;
    for (std::size_t i = 0; i < m; ++i) {
      up[i] = add_message(out, members[i], endpoint, up_bytes, c == 0 ? start : std::vector<Index>{up[i]});
      in.push_back(up[i]);
    }
    const Index all_in = add_join(out, std::move(in));
    for (std::size_t i = 0; i < m; ++i)
      down[i] = add_message(out, endpoint, members[i], down_bytes,
                            c == 0 ? std::vector<Index>{all_in} : std::vector<Index>{all_in, down[i]});
  }
  return down;
}

} // namespace ddlsim::sim::collectives
