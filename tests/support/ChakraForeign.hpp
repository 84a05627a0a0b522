// A Chakra execution trace written the way a foreign tool writes one: straight through protobuf's
// generated classes and its CodedOutputStream (not through ddlsim's writer), with the attribute
// types other producers choose (int32, uint64, bool) and node ids that do not start at 0.
//
// Two ranks, process group "7" = [0, 1] given in comm_groups.json (ASTRA-sim's way):
//   rank 0: 10 COMP fwd 100 us -> 11 CPU op (no time) -> 12 ALL_REDUCE 1e8 B -> 13 SEND 4e6 B to 1, tag 5
//   rank 1:  0 COMP fwd 100 us -> 1 ALL_REDUCE 1e8 B -> 2 RECV 4e6 B from 0, tag 5
//            -> 3 COMP bwd, 50 us (or, with untimed, no time: num_ops 1e12, tensor_size 1e9)
#pragma once

#include "chakra_et.pb.h"  // generated from traces/chakra_et.proto

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace chakra_foreign {

namespace pb = ChakraProtoMsg;

inline void write_framed(google::protobuf::io::CodedOutputStream& out, const google::protobuf::MessageLite& m)
{
  out.WriteVarint32(static_cast<std::uint32_t>(m.ByteSizeLong()));
  m.SerializeWithCachedSizes(&out);
}

inline void write_file(const std::string& path, const std::vector<pb::Node>& nodes)
{
  std::ofstream file(path, std::ios::binary);
  google::protobuf::io::OstreamOutputStream raw(&file);
  google::protobuf::io::CodedOutputStream out(&raw);
  pb::GlobalMetadata meta;
  meta.set_version("0.0.4");
  auto* schema = meta.add_attr();
  schema->set_name("schema");
  schema->set_string_val("1.0.2-chakra.0.0.4");
  write_framed(out, meta);
  for (const auto& n : nodes)
    write_framed(out, n);
}

inline pb::Node node(std::uint64_t id, const std::string& name, pb::NodeType type, std::vector<std::uint64_t> data_deps,
                     std::vector<std::uint64_t> ctrl_deps = {})
{
  pb::Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(type);
  for (auto d : data_deps)
    n.add_data_deps(d);
  for (auto d : ctrl_deps)
    n.add_ctrl_deps(d);
  return n;
}

inline pb::AttributeProto* attr(pb::Node& n, const std::string& name)
{
  auto* a = n.add_attr();
  a->set_name(name);
  return a;
}

/// Writes the two ranks' files (trace.0.et, trace.1.et) and comm_groups.json into `dir`.
inline void write_trace(const std::filesystem::path& dir, bool untimed = false)
{
  std::filesystem::create_directories(dir);
  std::vector<pb::Node> r0, r1;
  r0.push_back(node(10, "fwd", pb::COMP_NODE, {}));
  r0.back().set_duration_micros(100);
  attr(r0.back(), "num_ops")->set_int64_val(2'000'000'000);
  r0.push_back(node(11, "aten::copy_", pb::COMP_NODE, {}, {10}));
  attr(r0.back(), "is_cpu_op")->set_bool_val(true);
  r0.push_back(node(12, "all_reduce", pb::COMM_COLL_NODE, {11}));
  attr(r0.back(), "comm_type")->set_int64_val(pb::ALL_REDUCE);
  attr(r0.back(), "comm_size")->set_int64_val(100'000'000);
  attr(r0.back(), "pg_name")->set_string_val("7");
  r0.push_back(node(13, "send", pb::COMM_SEND_NODE, {12}));
  attr(r0.back(), "comm_dst")->set_int32_val(1);
  attr(r0.back(), "comm_tag")->set_int32_val(5);
  attr(r0.back(), "comm_size")->set_uint64_val(4'000'000);

  r1.push_back(node(0, "fwd", pb::COMP_NODE, {}));
  r1.back().set_duration_micros(100);
  r1.push_back(node(1, "all_reduce", pb::COMM_COLL_NODE, {0}));
  attr(r1.back(), "comm_type")->set_int32_val(pb::ALL_REDUCE);
  attr(r1.back(), "comm_size")->set_uint64_val(100'000'000);
  attr(r1.back(), "pg_name")->set_string_val("7");
  r1.push_back(node(2, "recv", pb::COMM_RECV_NODE, {1}));
  attr(r1.back(), "comm_src")->set_int32_val(0);
  attr(r1.back(), "comm_tag")->set_int32_val(5);
  attr(r1.back(), "comm_size")->set_uint64_val(4'000'000);
  r1.push_back(node(3, "bwd", pb::COMP_NODE, {2}));
  if (untimed) {
    attr(r1.back(), "num_ops")->set_uint64_val(1'000'000'000'000);
    attr(r1.back(), "tensor_size")->set_uint64_val(1'000'000'000);
  } else {
    r1.back().set_duration_micros(50);
  }
  write_file((dir / "trace.0.et").string(), r0);
  write_file((dir / "trace.1.et").string(), r1);
  std::ofstream((dir / "comm_groups.json").string()) << "{\"7\": [0, 1]}\n";
}

}  // namespace chakra_foreign
