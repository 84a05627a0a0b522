// One entry of a Kineto trace's traceEvents, flat: the members the importer reads
// (KinetoImporter.cpp), and nothing else.
//
// Two readers fill it and must agree member for member (tests/unit/test_json_stream.cpp):
// kineto_event() from a parsed tree (JsonValue), and read_kineto_events(), which walks simdjson's
// on-demand values of a streamed trace straight into it without building a tree (the import's
// speed: no allocation per member). Text members are views: into the tree, or into the reader's
// buffers, valid only during the call that hands the event over.
//
//   read_kineto_events(text, "trace.json", keep, [&](const KinetoEvent& e) { ... e.name.text ... });
#pragma once

#include "traces/Json.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ddlsim::traces {

/// A member as the importer sees it: absent, or of a JSON type, with its number or text when it
/// is one (the first member of that name when an object repeats it, as JsonValue::find).
struct KinetoMember {
  enum class Type : unsigned char { absent, null, boolean, number, string, array, object };
  Type type = Type::absent;
  double number = 0;      ///< when a number (always finite)
  std::string_view text;  ///< when a string, unescaped

  const double* as_number() const { return type == Type::number ? &number : nullptr; }
  const std::string_view* as_string() const { return type == Type::string ? &text : nullptr; }
};

/// The product of a shape's entries, added one at a time; not `ok` once one is not a finite
/// non-negative number or the product overflows.
struct ElementCount {
  double elements = 1;
  bool ok = true;

  void add(const double* entry)
  {
    ok = ok && entry != nullptr && std::isfinite(*entry) && *entry >= 0 &&
         (elements *= *entry, std::isfinite(elements));
  }
};

struct KinetoEvent {
  KinetoMember cat, name, ts, dur, pid, tid;  ///< ts and dur in microseconds
  KinetoMember args;                          ///< its type only
  /// members of args (all absent when args is not an object)
  KinetoMember correlation, external_id, device, stream, collective_name, dtype, group_size, in_msg_nelems;
  /// args' grid and block: their first three entries when numbers, else -1 (also when absent or
  /// not an array)
  std::array<double, 3> grid{-1, -1, -1}, block{-1, -1, -1};
  /// args' "Input Dims" (an NCCL annotation's shapes): whether its first entry is an array, and
  /// the product of that entry's entries (ElementCount)
  bool input_dims_listed = false;
  ElementCount input_elements;
  /// args' "Input type": its first entry when it is a string
  std::optional<std::string_view> input_type;
  /// args as a tree (kineto_event), or its JSON text (read_kineto_events): the importer builds a
  /// tree only for the ops whose shapes it prices
  const JsonValue* args_tree = nullptr;
  std::string_view args_json;
};

/// The event an element of traceEvents holds (any JsonValue: a non-object has every member absent).
/// `e` must outlive the event.
KinetoEvent kineto_event(const JsonValue& e);

/// Reads a trace's text whose root object has a traceEvents array, handing each event whose string
/// member "cat" `keep_category` accepts (and each one without a string "cat") to `on_event`, in
/// order, without building trees. Elements that are not objects are checked and dropped. Returns
/// what parse_json_streaming(text, origin, "traceEvents", ...) returns: the root with traceEvents
/// empty, or the whole document when it has no such array. `text` is only read, and the errors are
/// parse_json_streaming's errors (TraceError naming `origin` and
/// the byte): every member of an event handed over is checked, as when building its tree.
JsonValue read_kineto_events(std::string_view text, const std::string& origin,
                                            const std::function<bool(std::string_view)>& keep_category,
                                            const std::function<void(const KinetoEvent&)>& on_event);

}  // namespace ddlsim::traces
