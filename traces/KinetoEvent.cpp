#include "traces/KinetoEvent.hpp"

#include "traces/JsonStream.hpp"

#include <cstring>

namespace ddlsim::traces {
namespace {

namespace od = simdjson::ondemand;
using detail::check_depth;
using Type = KinetoMember::Type;

// The scalar members each reader fills, by name: of the event, and of its args.
using MemberSlot = std::pair<std::string_view, KinetoMember KinetoEvent::*>;
constexpr MemberSlot event_members[] = {{"cat", &KinetoEvent::cat}, {"name", &KinetoEvent::name},
                                        {"ts", &KinetoEvent::ts},   {"dur", &KinetoEvent::dur},
                                        {"pid", &KinetoEvent::pid}, {"tid", &KinetoEvent::tid}};
constexpr MemberSlot args_members[] = {
    {"correlation", &KinetoEvent::correlation},         {"External id", &KinetoEvent::external_id},
    {"device", &KinetoEvent::device},                   {"stream", &KinetoEvent::stream},
    {"Collective name", &KinetoEvent::collective_name}, {"dtype", &KinetoEvent::dtype},
    {"Group size", &KinetoEvent::group_size},           {"In msg nelems", &KinetoEvent::in_msg_nelems}};

template <std::size_t N> KinetoMember* slot(KinetoEvent& e, const MemberSlot (&slots)[N], std::string_view key)
{
  for (const auto& [name, member] : slots)
    if (name == key)
      return &(e.*member);
  return nullptr;
}

KinetoMember make(Type type, double number = 0, std::string_view text = {})
{
  KinetoMember m;
  m.type = type;
  m.number = number;
  m.text = text;
  return m;
}

// ---- from simdjson's on-demand values ------------------------------------------------------
// Every scan reads a value with detail::convert's calls in convert's order (every byte checked, the
// same errors at the same places), keeping only what the event needs.

template <typename Node, typename OnElement> KinetoMember scan(Node& node, int depth, OnElement&& on_element);

// An array entry that is only checked.
struct SkipEntry {
  void operator()(std::size_t, od::value& v, int depth) const;
};

template <typename Node> KinetoMember scan(Node& node, int depth) { return scan(node, depth, SkipEntry{}); }

void SkipEntry::operator()(std::size_t, od::value& v, int depth) const { scan(v, depth); }

// The members of an object at `depth`: on_member(key, value, the value's depth) for each.
template <typename OnMember> void scan_members(od::object object, int depth, OnMember&& on_member)
{
  for (auto field : object) {
    const std::string_view key = field.unescaped_key().value();
    od::value v = field.value().value();
    on_member(key, v, depth + 1);
  }
}

// on_element(index, entry, its depth) for each entry of an array.
template <typename Node, typename OnElement> KinetoMember scan(Node& node, int depth, OnElement&& on_element)
{
  check_depth(depth);
  switch (node.type().value()) {
  case od::json_type::object:
    scan_members(node.get_object().value(), depth, [](std::string_view, od::value& v, int d) { scan(v, d); });
    return make(Type::object);
  case od::json_type::array: {
    std::size_t i = 0;
    for (auto element : node.get_array()) {
      od::value v = element.value();
      on_element(i++, v, depth + 1);
    }
    return make(Type::array);
  }
  case od::json_type::number: {
    const double d = node.get_double().value();
    if (!std::isfinite(d))
      throw simdjson::simdjson_error(simdjson::NUMBER_ERROR);
    return make(Type::number, d);
  }
  case od::json_type::string: return make(Type::string, 0, node.get_string().value());
  case od::json_type::boolean: node.get_bool().value(); return make(Type::boolean);
  case od::json_type::null:
    if (!node.is_null().value())
      throw simdjson::simdjson_error(simdjson::N_ATOM_ERROR);
    return make(Type::null);
  }
  return make(Type::null);
}

// The first member of a name wins (JsonValue::find); later ones are only checked.
void scan_once(KinetoMember& m, od::value& v, int depth)
{
  if (m.type == Type::absent)
    m = scan(v, depth);
  else
    scan(v, depth);
}

// grid and block: their first three entries when numbers.
KinetoMember scan_dims(od::value& v, int depth, std::array<double, 3>& out)
{
  return scan(v, depth, [&](std::size_t i, od::value& entry, int d) {
    const KinetoMember m = scan(entry, d);
    if (i < out.size())
      out[i] = m.type == Type::number ? m.number : -1;
  });
}

void scan_args(od::value& v, int depth, KinetoEvent& e)
{
  check_depth(depth);
  if (v.type().value() != od::json_type::object) {
    e.args = scan(v, depth);
    return;
  }
  e.args.type = Type::object;
  bool grid = false, block = false, input_dims = false, input_type = false;  // seen
  scan_members(v.get_object().value(), depth, [&](std::string_view key, od::value& m, int d) {
    if (KinetoMember* member = slot(e, args_members, key))
      scan_once(*member, m, d);
    else if (key == "grid" && !grid)
      grid = true, scan_dims(m, d, e.grid);
    else if (key == "block" && !block)
      block = true, scan_dims(m, d, e.block);
    else if (key == "Input Dims" && !input_dims) {
      input_dims = true;
      scan(m, d, [&](std::size_t i, od::value& entry, int de) {
        if (i > 0) {
          scan(entry, de);
          return;
        }
        e.input_dims_listed = scan(entry, de, [&](std::size_t, od::value& dim, int dd) {
                                 e.input_elements.add(scan(dim, dd).as_number());
                               }).type == Type::array;
      });
    } else if (key == "Input type" && !input_type) {
      input_type = true;
      scan(m, d, [&](std::size_t i, od::value& entry, int de) {
        const KinetoMember first = scan(entry, de);
        if (i == 0 && first.type == Type::string)
          e.input_type = first.text;
      });
    } else
      scan(m, d);
  });
}

// An element of traceEvents (depth 1), its members not yet read.
void read_event(od::object& object, od::document_reference& doc, KinetoEvent& e)
{
  bool args = false;
  scan_members(object, 1, [&](std::string_view key, od::value& v, int d) {
    if (KinetoMember* member = slot(e, event_members, key))
      scan_once(*member, v, d);
    else if (key == "args" && !args) {
      args = true;
      const char* begin = v.current_location().value();
      scan_args(v, d, e);
      const char* end = doc.current_location().value();  // the ',' or '}' after args
      e.args_json = std::string_view(begin, static_cast<std::size_t>(end - begin));
    } else
      scan(v, d);
  });
}

// ---- from a tree ---------------------------------------------------------------------------

KinetoMember member(const JsonValue* v)
{
  if (v == nullptr)
    return {};
  if (v->is_number())
    return make(Type::number, v->as_number());
  if (v->is_string())
    return make(Type::string, 0, v->as_string());
  return make(v->is_null() ? Type::null : v->is_bool() ? Type::boolean : v->is_array() ? Type::array : Type::object);
}

std::array<double, 3> dims(const JsonValue* v)
{
  std::array<double, 3> out{-1, -1, -1};
  if (v != nullptr && v->is_array())
    for (std::size_t i = 0; i < out.size() && i < v->as_array().size(); ++i)
      out[i] = v->as_array()[i].is_number() ? v->as_array()[i].as_number() : -1;
  return out;
}

}  // namespace

KinetoEvent kineto_event(const JsonValue& e)
{
  KinetoEvent out;
  for (const auto& [name, slot] : event_members)
    out.*slot = member(e.find(name));
  const JsonValue* args = e.find("args");
  out.args = member(args);
  out.args_tree = args;
  if (args == nullptr || !args->is_object())
    return out;
  for (const auto& [name, slot] : args_members)
    out.*slot = member(args->find(name));
  out.grid = dims(args->find("grid"));
  out.block = dims(args->find("block"));
  if (const JsonValue* d = args->find("Input Dims"); d && d->is_array() && !d->as_array().empty()) {
    out.input_dims_listed = d->as_array().front().is_array();
    if (out.input_dims_listed)
      for (const JsonValue& entry : d->as_array().front().as_array())
        out.input_elements.add(member(&entry).as_number());
  }
  if (const JsonValue* t = args->find("Input type");
      t && t->is_array() && !t->as_array().empty() && t->as_array().front().is_string())
    out.input_type = t->as_array().front().as_string();
  return out;
}

JsonValue read_kineto_events(std::string_view text, const std::string& origin,
                             const std::function<bool(std::string_view)>& keep_category,
                             const std::function<void(const KinetoEvent&)>& on_event)
{
  JsonValue root;
  const auto array = detail::open_streamed_array(text, origin, "traceEvents", root);
  if (!array)
    return root;
  const JsonFilter filter{.key = "cat", .keep = keep_category};
  detail::for_each_streamed_element(
      text, origin, "traceEvents", *array, &filter,
      [&](od::object& object, od::document_reference& doc, std::size_t) {
        KinetoEvent e;
        read_event(object, doc, e);
        on_event(e);
      },
      [](JsonValue&&) {});  // not an event: checked, dropped
  return root;
}

}  // namespace ddlsim::traces
