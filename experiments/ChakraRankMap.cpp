// Rank maps: templates of alike ranks and their bindings (ChakraRankMap.hpp, docs/chakra.md#rank-maps).
#include "experiments/ChakraRankMap.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "experiments/ChakraSchema.hpp"
#include "traces/ChromeTrace.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string_view>
#include <utility>
#include <variant>

namespace ddlsim::experiments::rank_map {

namespace fs = std::filesystem;
using traces::EtAttr;
using traces::EtFile;
using traces::EtNode;

namespace {

constexpr const char* schema        = "ddlsim-rank-map.1";
constexpr const char* groups_marker = "@process_groups";

EtAttr* find(std::vector<EtAttr>& attrs, const std::string& name)
{
  auto it = std::find_if(attrs.begin(), attrs.end(), [&](const EtAttr& a) { return a.name == name; });
  return it == attrs.end() ? nullptr : &*it;
}

// "@k" -> k; -3 for any other text.
std::int64_t slot_text(const std::string& s)
{
  if (s.size() < 2 || s.size() > 12 || s.front() != '@' ||
      !std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -3;
  return std::stoll(s.substr(1));
}

// The slot of `value` in `list` (appended when new).
template <typename T> std::int64_t slot_of(std::vector<T>& list, const T& value)
{
  auto it = std::find(list.begin(), list.end(), value);
  if (it == list.end())
    it = list.insert(list.end(), value);
  return it - list.begin();
}

// Replaces a rank's names in `n` by slots (make_template's work on one node).
void template_names(EtNode& n, int rank, RankBinding& b)
{
  for (EtAttr& a : n.attrs) // every one, as bind_template restores every one
    if (auto* name = std::get_if<std::string>(&a.value); name && a.name == "pg_name")
      *name = "@" + std::to_string(slot_of(b.groups, *name));
    else if (auto* r = std::get_if<std::int64_t>(&a.value);
             r && (a.name == "comm_src" || a.name == "comm_dst" || a.name == "root"))
      *r = *r == rank ? -1 : slot_of(b.peers, *r);
}

// The rank's value of a slot, or a TraceError naming `where`.
template <typename T>
const T& at_slot(const std::vector<T>& list, std::int64_t slot, const std::string& what, const std::string& where)
{
  if (slot < 0 || static_cast<std::size_t>(slot) >= list.size())
    throw TraceError(where + ": the template names " + what + " slot " + std::to_string(slot) +
                     " but the rank's binding has " + std::to_string(list.size()));
  return list[static_cast<std::size_t>(slot)];
}

// Rank numbers on disk: per rank its task numbers, then its tags, each as a count and the zigzag
// varints of their successive differences (a rank's numbers mostly rise in small steps).
constexpr std::string_view numbers_magic = "ddlsim-rank-numbers.1\n";

void put_varint(std::string& out, std::uint64_t v)
{
  for (; v >= 0x80; v >>= 7)
    out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}

template <typename T> void put_sequence(std::string& out, const std::vector<T>& values)
{
  put_varint(out, values.size());
  T previous = 0;
  for (T v : values) {
    const auto step = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(previous));
    put_varint(out, (static_cast<std::uint64_t>(step) << 1) ^ static_cast<std::uint64_t>(step >> 63));
    previous = v;
  }
}

// Reads rank_map.numbers front to back; a truncated or overlong file is a TraceError naming it.
class NumberReader {
public:
  NumberReader(std::string bytes, std::string path) : bytes_(std::move(bytes)), path_(std::move(path))
  {
    if (bytes_.compare(0, numbers_magic.size(), numbers_magic) != 0)
      throw TraceError(path_ + ": not a file of rank numbers (it starts with " +
                       std::string(numbers_magic.substr(0, 21)) + ")");
    at_ = numbers_magic.size();
  }
  template <typename T> std::vector<T> sequence(const std::string& what)
  {
    const std::uint64_t count = varint(what);
    if (count > bytes_.size() - at_) // each number takes a byte at least
      fail(what, "counts " + std::to_string(count) + " numbers, more than the file holds");
    std::vector<T> out;
    out.reserve(count);
    std::uint64_t value = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t z = varint(what);
      value += static_cast<std::uint64_t>(static_cast<std::int64_t>(z >> 1) ^ -static_cast<std::int64_t>(z & 1));
      out.push_back(static_cast<T>(value));
    }
    return out;
  }
  void expect_end() const
  {
    if (at_ != bytes_.size())
      fail("the end", std::to_string(bytes_.size() - at_) + " bytes more than the ranks of rank_map.json use");
  }

private:
  std::uint64_t varint(const std::string& what)
  {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size())
        fail(what, "the file ends inside it: truncated?");
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80)
        return v;
    }
    fail(what, "a number longer than 64 bits");
  }
  [[noreturn]] void fail(const std::string& what, const std::string& why) const
  {
    throw TraceError(path_ + ": byte " + std::to_string(at_) + ": " + what + ": " + why);
  }
  std::string bytes_, path_;
  std::size_t at_ = 0;
};

} // namespace

EtFile make_template(EtFile file, int rank, const std::vector<std::vector<int>>& groups, RankBinding& binding)
{
  binding = RankBinding{};
  if (EtAttr* a = find(file.attrs, "ddlsim_rank"); a && a->value == EtAttr::Value{std::int64_t{rank}})
    a->value = std::int64_t{-1}; // the rank's own number (any other value stays, and the template is its own)
  for (EtNode& n : file.nodes) {
    if (n.type == traces::EtNodeType::metadata && n.inputs_values == chakra_schema::process_groups_value(rank, groups))
      n.inputs_values = groups_marker;
    template_names(n, rank, binding);
    for (EtAttr& a : n.attrs)
      if (auto* t = std::get_if<std::uint64_t>(&a.value); t && a.name == "ddlsim_task")
        binding.tasks.push_back(std::exchange(*t, 0));
      else if (auto* g = std::get_if<std::int64_t>(&a.value); g && a.name == "comm_tag")
        binding.tags.push_back(std::exchange(*g, 0));
  }
  return file;
}

EtFile bind_template(EtFile tmpl, int rank, const RankBinding& b, const std::vector<std::vector<int>>& groups,
                     const std::string& where)
{
  if (EtAttr* a = find(tmpl.attrs, "ddlsim_rank"); a && a->value == EtAttr::Value{std::int64_t{-1}})
    a->value = std::int64_t{rank};
  std::size_t task = 0, tag = 0;
  auto next = [&](const auto& list, std::size_t& i, const char* what) {
    if (i >= list.size())
      throw TraceError(where + ": the template has more " + what + " than the rank's " + std::to_string(list.size()));
    return list[i++];
  };
  for (EtNode& n : tmpl.nodes) {
    if (n.type == traces::EtNodeType::metadata && n.inputs_values == groups_marker)
      n.inputs_values = chakra_schema::process_groups_value(rank, groups);
    for (EtAttr& a : n.attrs) {
      if (a.name == "pg_name") {
        if (auto* s = std::get_if<std::string>(&a.value); s && slot_text(*s) >= 0)
          *s = at_slot(b.groups, slot_text(*s), "process group", where);
      } else if (a.name == "comm_src" || a.name == "comm_dst" || a.name == "root") {
        if (auto* r = std::get_if<std::int64_t>(&a.value))
          *r = *r == -1 ? rank : at_slot(b.peers, *r, "peer", where);
      } else if (auto* t = std::get_if<std::uint64_t>(&a.value); t && a.name == "ddlsim_task") {
        *t = next(b.tasks, task, "task numbers");
      } else if (auto* g = std::get_if<std::int64_t>(&a.value); g && a.name == "comm_tag") {
        *g = next(b.tags, tag, "transfer tags");
      }
    }
  }
  if (task != b.tasks.size() || tag != b.tags.size())
    throw TraceError(where + ": the rank has " + std::to_string(b.tasks.size()) + " task numbers and " +
                     std::to_string(b.tags.size()) + " transfer tags, its template " + std::to_string(task) + " and " +
                     std::to_string(tag));
  return tmpl;
}

Writer::Writer(std::string dir, std::string prefix, std::vector<std::vector<int>> groups)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), groups_(std::move(groups))
{
}

void Writer::add(const EtFile& file)
{
  const int rank          = static_cast<int>(bindings_.size());
  RankBinding& b          = bindings_.emplace_back();
  const std::string bytes = traces::encode_et_file(make_template(file, rank, groups_, b));
  if (numbers_.empty())
    numbers_ = numbers_magic;
  put_sequence(numbers_, b.tasks);
  put_sequence(numbers_, b.tags);
  std::vector<std::uint64_t>().swap(b.tasks); // on disk now: the bindings kept hold the names alone
  std::vector<std::int64_t>().swap(b.tags);
  const std::size_t hash = std::hash<std::string>{}(bytes);
  // A hash and a size name candidates; the bytes decide: kept in memory up to a budget, else read back.
  const auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const auto t = static_cast<std::size_t>(it->second);
    if (sizes_[t] == bytes.size() && (kept_[t].empty() ? traces::read_maybe_gzip(templates_[t]) : kept_[t]) == bytes) {
      b.template_index = it->second;
      return;
    }
  }
  b.template_index       = static_cast<int>(templates_.size());
  const std::string path = (fs::path(dir_) / (prefix_ + ".t" + std::to_string(templates_.size()) + ".et")).string();
  write_file_atomically(path, "Chakra template", [&](std::ostream& out) { out << bytes; });
  templates_.push_back(path);
  sizes_.push_back(bytes.size());
  kept_bytes_ += bytes.size();
  kept_.push_back(kept_bytes_ <= kept_budget ? bytes : std::string());
  by_hash_.emplace(hash, b.template_index);
}

namespace {

template <typename T> std::string json_list(const std::vector<T>& values, bool quoted)
{
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::ostringstream v;
    v << values[i];
    out += (i ? ", " : "") + (quoted ? "\"" + traces::json_escape(v.str()) + "\"" : v.str());
  }
  return out + "]";
}

} // namespace

std::vector<std::string> Writer::finish()
{
  std::string json = std::string("{\"schema\": \"") + schema + "\",\n \"templates\": [";
  for (std::size_t i = 0; i < templates_.size(); ++i)
    json += (i ? ", \"" : "\"") + traces::json_escape(fs::path(templates_[i]).filename().string()) + "\"";
  json += "],\n \"ranks\": [";
  for (std::size_t r = 0; r < bindings_.size(); ++r) {
    const RankBinding& b = bindings_[r];
    json += std::string(r ? ",\n  " : "\n  ") + "{\"template\": " + std::to_string(b.template_index) +
            ", \"groups\": " + json_list(b.groups, true) + ", \"peers\": " + json_list(b.peers, false) + "}";
  }
  json += "]}\n";
  write_file_atomically((fs::path(dir_) / numbers_file).string(), "rank numbers",
                        [&](std::ostream& out) { out << (numbers_.empty() ? std::string(numbers_magic) : numbers_); });
  write_file_atomically((fs::path(dir_) / map_file).string(), "rank map", [&](std::ostream& out) { out << json; });
  return templates_;
}

bool is_rank_mapped(const std::string& dir)
{
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / map_file, ec);
}

namespace {

// The parts of rank_map.json, each read with its key in the error.
class MapReader {
public:
  explicit MapReader(std::string path) : path_(std::move(path)) {}

  const traces::JsonValue& member(const traces::JsonValue& object, const std::string& key, const std::string& at) const
  {
    if (!object.is_object())
      fail(at.empty() ? "(top)" : at.substr(0, at.size() - 1), "expected an object with \"" + key + "\"");
    const traces::JsonValue* v = object.find(key);
    if (v == nullptr)
      fail(at + key, "missing");
    return *v;
  }
  const traces::JsonValue::Array& array(const traces::JsonValue& v, const std::string& key) const
  {
    if (!v.is_array())
      fail(key, "expected a list");
    return v.as_array();
  }
  // A whole number in [lo, hi].
  double whole(const traces::JsonValue& v, const std::string& key, double lo, double hi) const
  {
    if (!v.is_number() || v.as_number() != std::floor(v.as_number()) || v.as_number() < lo || v.as_number() > hi)
      fail(key, "expected a whole number in [" + std::to_string(static_cast<long long>(lo)) + ", " +
                    std::to_string(static_cast<long long>(hi)) + "]");
    return v.as_number();
  }
  template <typename T>
  std::vector<T> numbers(const traces::JsonValue& object, const std::string& key, const std::string& at, double lo,
                         double hi) const
  {
    std::vector<T> out;
    const auto& list = array(member(object, key, at), at + key);
    for (std::size_t i = 0; i < list.size(); ++i)
      out.push_back(static_cast<T>(whole(list[i], at + key + "[" + std::to_string(i) + "]", lo, hi)));
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const
  {
    throw TraceError(path_ + ": " + key + ": " + what);
  }

private:
  std::string path_;
};

constexpr double max_exact = 9007199254740992.0; // 2^53: JSON numbers are doubles

// comm_groups.json as a list: "1" is groups[0], and so on.
std::vector<std::vector<int>> read_groups(const fs::path& path)
{
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw TraceError(path.string() + ": missing: a rank-mapped folder keeps its process groups there");
  const MapReader in(path.string());
  const traces::JsonValue root = traces::parse_json(traces::read_maybe_gzip(path.string()), path.string());
  if (!root.is_object())
    in.fail("(top)", "expected {\"<pg_name>\": [ranks], ...}");
  std::vector<std::vector<int>> groups(root.as_object().size());
  for (const auto& [name, ranks] : root.as_object()) {
    const std::size_t k = chakra_schema::group_number(name);
    if (k < 1 || k > groups.size())
      in.fail(name, "a rank map's groups are numbered 1.." + std::to_string(groups.size()));
    for (std::size_t i = 0; i < in.array(ranks, name).size(); ++i)
      groups[k - 1].push_back(
          static_cast<int>(in.whole(ranks.as_array()[i], name + "[" + std::to_string(i) + "]", 0, 1 << 30)));
  }
  return groups;
}

} // namespace

std::vector<EtFile> read(const std::string& dir, std::vector<std::string>& names)
{
  const std::string path = (fs::path(dir) / map_file).string();
  const MapReader in(path);
  const traces::JsonValue root     = traces::parse_json(traces::read_maybe_gzip(path), path);
  const traces::JsonValue& version = in.member(root, "schema", "");
  if (!version.is_string() || version.as_string() != schema)
    in.fail("schema", std::string("expected \"") + schema + "\"");
  std::vector<EtFile> templates;
  std::vector<std::string> template_paths;
  const auto& listed = in.array(in.member(root, "templates", ""), "templates");
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const std::string key = "templates[" + std::to_string(i) + "]";
    if (!listed[i].is_string() || listed[i].as_string().find('/') != std::string::npos)
      in.fail(key, "expected a file name in " + dir);
    template_paths.push_back((fs::path(dir) / listed[i].as_string()).string());
    templates.push_back(traces::read_et_file(template_paths.back()));
  }
  const std::vector<std::vector<int>> groups = read_groups(fs::path(dir) / "comm_groups.json");
  const auto& ranks                          = in.array(in.member(root, "ranks", ""), "ranks");
  const std::string numbers_path             = (fs::path(dir) / numbers_file).string();
  std::error_code ec;
  if (!fs::is_regular_file(numbers_path, ec))
    throw TraceError(numbers_path + ": missing: a rank map keeps its ranks' task numbers and tags there");
  NumberReader numbers(traces::read_maybe_gzip(numbers_path), numbers_path);
  std::vector<EtFile> files;
  names.clear();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string at = "ranks[" + std::to_string(r) + "].";
    RankBinding b;
    b.template_index = static_cast<int>(
        in.whole(in.member(ranks[r], "template", at), at + "template", 0, static_cast<double>(templates.size()) - 1));
    for (const traces::JsonValue& g : in.array(in.member(ranks[r], "groups", at), at + "groups")) {
      if (!g.is_string())
        in.fail(at + "groups", "expected process group names");
      b.groups.push_back(g.as_string());
    }
    b.peers      = in.numbers<std::int64_t>(ranks[r], "peers", at, -max_exact, max_exact); // written back as read
    b.tasks      = numbers.sequence<std::uint64_t>("rank " + std::to_string(r) + "'s task numbers");
    b.tags       = numbers.sequence<std::int64_t>("rank " + std::to_string(r) + "'s transfer tags");
    const auto t = static_cast<std::size_t>(b.template_index);
    names.push_back(template_paths[t] + " as rank " + std::to_string(r));
    files.push_back(
        bind_template(templates[t], static_cast<int>(r), b, groups, path + ": " + at.substr(0, at.size() - 1)));
  }
  if (files.empty())
    in.fail("ranks", "empty: a rank map binds at least one rank");
  numbers.expect_end();
  return files;
}

} // namespace ddlsim::experiments::rank_map
