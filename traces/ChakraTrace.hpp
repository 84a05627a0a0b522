// Reading and writing Chakra execution traces (ET): the per-rank workload files of MLCommons Chakra
// and ASTRA-sim (schema in traces/chakra_et.proto, written from Chakra's published et_def.proto).
//
// A file is Chakra's length-delimited stream: a varint byte count, then a GlobalMetadata message,
// then one varint-framed Node message per operation. This layer knows the format, not ddlsim's
// task graph (experiments/ChakraWorkload.hpp maps one to the other), and hides protobuf: callers
// see plain structs. Attributes keep their Chakra names (num_ops, tensor_size, comm_type, comm_size,
// pg_name, comm_src, comm_dst, comm_tag, is_cpu_op); a numeric attribute of any protobuf integer or
// float type reads as a double, so foreign files that chose int64 or uint64 read alike.
//
//   EtFile f;
//   f.version = "0.0.4";
//   EtNode& n = f.nodes.emplace_back();
//   n.id = 0; n.type = EtNodeType::comp; n.name = "F s0 mb0";
//   n.set("num_ops", 1.2e12);
//   write_et_file("out/workload.0.et", f);
//   EtFile back = read_et_file("out/workload.0.et");   // back.nodes[0].number("num_ops") == 1.2e12
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ddlsim::traces {

/// Chakra's NodeType, with its wire values.
enum class EtNodeType : int { invalid = 0, metadata = 1, mem_load = 2, mem_store = 3, comp = 4, send = 5, recv = 6, coll = 7 };

/// Chakra's CollectiveCommType (the `comm_type` attribute of a collective node), with its wire values.
enum class EtCommType : int {
  all_reduce = 0, reduce = 1, all_gather = 2, gather = 3, scatter = 4, broadcast = 5, all_to_all = 6,
  reduce_scatter = 7, reduce_scatter_block = 8, barrier = 9
};

/// Chakra's name of a node type ("COMP_NODE") and of a collective ("ALL_REDUCE"), for messages.
std::string et_node_type_name(EtNodeType type);
std::string et_comm_type_name(EtCommType type);

/// One attribute. Written as Chakra's tools write it: integers as int64_val, unsigned ones as
/// uint64_val, reals as double_val, flags as bool_val, text as string_val, flag lists as bool_list.
/// Read: every scalar numeric type becomes int64, uint64 or double; other lists are skipped.
struct EtAttr {
  using Value = std::variant<std::int64_t, std::uint64_t, double, bool, std::string, std::vector<bool>>;
  std::string name;
  Value value;
};

struct EtNode {
  std::uint64_t id = 0;
  std::string name;
  EtNodeType type = EtNodeType::invalid;
  std::vector<std::uint64_t> ctrl_deps;
  std::vector<std::uint64_t> data_deps;
  std::uint64_t start_time_micros = 0;
  std::uint64_t duration_micros = 0;
  std::string inputs_values;  ///< IOInfo inputs.values (a metadata node's process groups, as PyTorch writes them)
  std::vector<EtAttr> attrs;

  /// The attribute named `name`, or nullptr.
  const EtAttr* find(const std::string& name) const;
  /// A numeric attribute as a double (bools as 0/1); nullopt when absent or not a number.
  std::optional<double> number(const std::string& name) const;
  /// A string attribute; nullopt when absent or not a string.
  std::optional<std::string> text(const std::string& name) const;
  void set(const std::string& attr_name, EtAttr::Value value) { attrs.push_back({attr_name, std::move(value)}); }
};

struct EtFile {
  std::string version;        ///< GlobalMetadata.version
  std::vector<EtAttr> attrs;  ///< GlobalMetadata.attr
  std::vector<EtNode> nodes;  ///< in file order
  /// A metadata attribute as text (a string attribute) or nullopt.
  std::optional<std::string> text(const std::string& name) const;
};

/// The bytes of `file` in Chakra's framing, as write_et_file writes them.
std::string encode_et_file(const EtFile& file);

/// Writes `file` to `path` in Chakra's framing. Throws ddlsim::Error when it cannot be written.
void write_et_file(const std::string& path, const EtFile& file);

/// Reads a Chakra ET file, gzip-compressed or not (as Chakra's protolib reads them). Throws TraceError naming the file and the
/// message (the metadata, or node N with its id when known) when it cannot be read, a length runs
/// past the end of the file, or a message does not decode.
EtFile read_et_file(const std::string& path);

}  // namespace ddlsim::traces
