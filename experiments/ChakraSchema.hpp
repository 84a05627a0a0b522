// Internal to experiments/ (ChakraExport.cpp writes, ChakraWorkload.cpp reads): how ddlsim's tasks
// map onto Chakra's execution-trace schema, written once for both directions.
#pragma once

#include "sim/TaskGraph.hpp"
#include "traces/ChakraTrace.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::experiments::chakra_schema {

/// Prefix of the metadata attributes that carry the row's configuration columns.
inline constexpr const char* column_prefix = "ddlsim_column.";

/// Chakra's comm_type of a collective, and back (nullopt: a collective ddlsim does not simulate).
inline traces::EtCommType comm_type_of(sim::CollectiveKind kind)
{
  using traces::EtCommType;
  switch (kind) {
  case sim::CollectiveKind::all_reduce:
    return EtCommType::all_reduce;
  case sim::CollectiveKind::all_gather:
    return EtCommType::all_gather;
  case sim::CollectiveKind::reduce_scatter:
    return EtCommType::reduce_scatter;
  case sim::CollectiveKind::broadcast:
    return EtCommType::broadcast;
  case sim::CollectiveKind::all_to_all:
    return EtCommType::all_to_all;
  }
  return EtCommType::all_reduce;
}

inline std::optional<sim::CollectiveKind> collective_of(double comm_type)
{
  using traces::EtCommType;
  switch (static_cast<int>(comm_type)) {
  case static_cast<int>(EtCommType::all_reduce):
    return sim::CollectiveKind::all_reduce;
  case static_cast<int>(EtCommType::all_gather):
    return sim::CollectiveKind::all_gather;
  case static_cast<int>(EtCommType::reduce_scatter):
    return sim::CollectiveKind::reduce_scatter;
  case static_cast<int>(EtCommType::broadcast):
    return sim::CollectiveKind::broadcast;
  case static_cast<int>(EtCommType::all_to_all):
    return sim::CollectiveKind::all_to_all;
  default:
    return std::nullopt;
  }
}

/// "[0, 1, 2]": a process group's ranks as comm_groups.json and the metadata nodes write them.
inline std::string ranks_json(const std::vector<int>& ranks)
{
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

/// The number of a process group named as ddlsim names them ("1", "2", ...: decimal, no leading zero),
/// or 0 for any other name.
inline std::size_t group_number(const std::string& name)
{
  if (name.empty() || name.size() > 9 || name.front() == '0' ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return std::stoul(name);
}

/// A rank's metadata node value: the process groups it belongs to (`groups[i]` is group "i + 1"), as
/// PyTorch's trace writes them and ASTRA-sim's issue_pytorch_pg_metadata parses them (it strips two
/// characters at each end, then reads the JSON list).
inline std::string process_groups_value(int rank, const std::vector<std::vector<int>>& groups)
{
  std::string list;
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (std::find(groups[i].begin(), groups[i].end(), rank) != groups[i].end())
      list += std::string(list.empty() ? "" : ", ") + "{\"pg_name\": \"" + std::to_string(i + 1) +
              "\", \"ranks\": " + ranks_json(groups[i]) + "}";
  return "[\"[" + list + "]\"]";
}

} // namespace ddlsim::experiments::chakra_schema
