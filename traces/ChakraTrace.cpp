#include "traces/ChakraTrace.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "traces/Gzip.hpp"
#include "chakra_et.pb.h"  // generated from traces/chakra_et.proto

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <array>
#include <sstream>

namespace ddlsim::traces {
namespace {

namespace pb = ChakraProtoMsg;

constexpr std::array<const char*, 8> node_type_names = {"INVALID_NODE",   "METADATA_NODE",  "MEM_LOAD_NODE",
                                                        "MEM_STORE_NODE", "COMP_NODE",      "COMM_SEND_NODE",
                                                        "COMM_RECV_NODE", "COMM_COLL_NODE"};
constexpr std::array<const char*, 10> comm_type_names = {"ALL_REDUCE", "REDUCE",  "ALL_GATHER", "GATHER",
                                                         "SCATTER",    "BROADCAST", "ALL_TO_ALL", "REDUCE_SCATTER",
                                                         "REDUCE_SCATTER_BLOCK", "BARRIER"};

void to_proto(const EtAttr& a, pb::AttributeProto& out)
{
  out.set_name(a.name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>)
          out.set_int64_val(v);
        else if constexpr (std::is_same_v<T, std::uint64_t>)
          out.set_uint64_val(v);
        else if constexpr (std::is_same_v<T, double>)
          out.set_double_val(v);
        else if constexpr (std::is_same_v<T, bool>)
          out.set_bool_val(v);
        else if constexpr (std::is_same_v<T, std::string>)
          out.set_string_val(v);
        else
          for (bool b : v)
            out.mutable_bool_list()->add_values(b);
      },
      a.value);
}

// Scalars of every protobuf type, flag lists; other lists are not used by ddlsim: skipped.
std::optional<EtAttr> from_proto(const pb::AttributeProto& a)
{
  EtAttr out{a.name(), std::int64_t{0}};
  switch (a.value_case()) {
  case pb::AttributeProto::kDoubleVal: out.value = a.double_val(); break;
  case pb::AttributeProto::kFloatVal: out.value = static_cast<double>(a.float_val()); break;
  case pb::AttributeProto::kInt32Val: out.value = std::int64_t{a.int32_val()}; break;
  case pb::AttributeProto::kInt64Val: out.value = std::int64_t{a.int64_val()}; break;
  case pb::AttributeProto::kUint32Val: out.value = std::uint64_t{a.uint32_val()}; break;
  case pb::AttributeProto::kUint64Val: out.value = std::uint64_t{a.uint64_val()}; break;
  case pb::AttributeProto::kSint32Val: out.value = std::int64_t{a.sint32_val()}; break;
  case pb::AttributeProto::kSint64Val: out.value = std::int64_t{a.sint64_val()}; break;
  case pb::AttributeProto::kFixed32Val: out.value = std::uint64_t{a.fixed32_val()}; break;
  case pb::AttributeProto::kFixed64Val: out.value = std::uint64_t{a.fixed64_val()}; break;
  case pb::AttributeProto::kSfixed32Val: out.value = std::int64_t{a.sfixed32_val()}; break;
  case pb::AttributeProto::kSfixed64Val: out.value = std::int64_t{a.sfixed64_val()}; break;
  case pb::AttributeProto::kBoolVal: out.value = a.bool_val(); break;
  case pb::AttributeProto::kStringVal: out.value = a.string_val(); break;
  case pb::AttributeProto::kBoolList: out.value = std::vector<bool>(a.bool_list().values().begin(), a.bool_list().values().end()); break;
  default: return std::nullopt;
  }
  return out;
}

std::optional<double> as_number(const EtAttr* a)
{
  if (a == nullptr)
    return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(&a->value))
    return static_cast<double>(*i);
  if (const auto* u = std::get_if<std::uint64_t>(&a->value))
    return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(&a->value))
    return *d;
  if (const auto* b = std::get_if<bool>(&a->value))
    return *b ? 1.0 : 0.0;
  return std::nullopt;
}

const EtAttr* find_attr(const std::vector<EtAttr>& attrs, const std::string& name)
{
  for (const EtAttr& a : attrs)
    if (a.name == name)
      return &a;
  return nullptr;
}

// Libraries do not print: protobuf's own log lines (e.g. "String field ... contains invalid UTF-8
// data" before a parse fails, which this file reports as a TraceError) are dropped.
void quiet_protobuf()
{
  static const bool once = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)once;
}

void write_framed(std::ostream& out, const google::protobuf::MessageLite& message)
{
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint32(static_cast<std::uint32_t>(message.ByteSizeLong()));
    message.SerializeWithCachedSizes(&coded);
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

std::string et_node_type_name(EtNodeType type)
{
  const auto i = static_cast<std::size_t>(type);
  return i < node_type_names.size() ? node_type_names[i] : "node type " + std::to_string(i);
}

std::string et_comm_type_name(EtCommType type)
{
  const auto i = static_cast<std::size_t>(type);
  return i < comm_type_names.size() ? comm_type_names[i] : "comm_type " + std::to_string(i);
}

const EtAttr* EtNode::find(const std::string& attr_name) const { return find_attr(attrs, attr_name); }

std::optional<double> EtNode::number(const std::string& attr_name) const { return as_number(find(attr_name)); }

std::optional<std::string> EtNode::text(const std::string& attr_name) const
{
  const EtAttr* a = find(attr_name);
  if (a == nullptr || !std::holds_alternative<std::string>(a->value))
    return std::nullopt;
  return std::get<std::string>(a->value);
}

std::optional<std::string> EtFile::text(const std::string& attr_name) const
{
  const EtAttr* a = find_attr(attrs, attr_name);
  if (a == nullptr || !std::holds_alternative<std::string>(a->value))
    return std::nullopt;
  return std::get<std::string>(a->value);
}

std::string encode_et_file(const EtFile& file)
{
  quiet_protobuf();
  std::ostringstream out;
  pb::GlobalMetadata meta;
  meta.set_version(file.version);
  for (const EtAttr& a : file.attrs)
    to_proto(a, *meta.add_attr());
  write_framed(out, meta);
  pb::Node node;
  for (const EtNode& n : file.nodes) {
    node.Clear();
    node.set_id(n.id);
    node.set_name(n.name);
    node.set_type(static_cast<pb::NodeType>(n.type));
    for (std::uint64_t d : n.ctrl_deps)
      node.add_ctrl_deps(d);
    for (std::uint64_t d : n.data_deps)
      node.add_data_deps(d);
    node.set_start_time_micros(n.start_time_micros);
    node.set_duration_micros(n.duration_micros);
    if (!n.inputs_values.empty())
      node.mutable_inputs()->set_values(n.inputs_values);
    for (const EtAttr& a : n.attrs)
      to_proto(a, *node.add_attr());
    write_framed(out, node);
  }
  return std::move(out).str();
}

void write_et_file(const std::string& path, const EtFile& file)
{
  const std::string bytes = encode_et_file(file);
  write_file_atomically(path, "Chakra execution trace", [&](std::ostream& out) { out << bytes; });
}

EtFile read_et_file(const std::string& path)
{
  quiet_protobuf();
  const std::string bytes = read_maybe_gzip(path);
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(static_cast<int>(std::min<std::size_t>(bytes.size() + 1, 0x7fffffff)));
  EtFile file;
  // Message i (0: the metadata): its framed bytes, or false at the end of the file.
  std::string message;
  auto next = [&](std::size_t i) {
    if (static_cast<std::size_t>(in.CurrentPosition()) >= bytes.size())
      return false;
    std::uint32_t size = 0;
    const int at = in.CurrentPosition();
    const std::string what = i == 0 ? "the metadata" : "node " + std::to_string(i - 1);
    if (!in.ReadVarint32(&size))
      throw TraceError(path + ": byte " + std::to_string(at) + ": " + what + ": bad length prefix");
    if (static_cast<std::size_t>(in.CurrentPosition()) + size > bytes.size())
      throw TraceError(path + ": byte " + std::to_string(at) + ": " + what + ": its length " + std::to_string(size) +
                       " runs past the end of the file (" + std::to_string(bytes.size()) + " bytes): truncated?");
    if (!in.ReadString(&message, static_cast<int>(size)))
      throw TraceError(path + ": byte " + std::to_string(at) + ": " + what + ": cannot read " + std::to_string(size) +
                       " bytes");
    return true;
  };
  if (bytes.empty() || !next(0))
    throw TraceError(path + ": empty file: a Chakra execution trace starts with its metadata");
  pb::GlobalMetadata meta;
  if (!meta.ParseFromString(message))
    throw TraceError(path + ": the metadata (first message) does not decode as Chakra's GlobalMetadata");
  file.version = meta.version();
  for (const auto& a : meta.attr())
    if (auto attr = from_proto(a))
      file.attrs.push_back(std::move(*attr));
  pb::Node node;
  for (std::size_t i = 1; next(i); ++i) {
    if (!node.ParseFromString(message))
      throw TraceError(path + ": node " + std::to_string(i - 1) + " (message " + std::to_string(i) +
                       "): does not decode as a Chakra Node");
    EtNode& n = file.nodes.emplace_back();
    n.id = node.id();
    n.name = node.name();
    n.type = static_cast<EtNodeType>(node.type());
    n.ctrl_deps.assign(node.ctrl_deps().begin(), node.ctrl_deps().end());
    n.data_deps.assign(node.data_deps().begin(), node.data_deps().end());
    n.start_time_micros = node.start_time_micros();
    n.duration_micros = node.duration_micros();
    n.inputs_values = node.inputs().values();
    for (const auto& a : node.attr())
      if (auto attr = from_proto(a))
        n.attrs.push_back(std::move(*attr));
  }
  return file;
}

}  // namespace ddlsim::traces
