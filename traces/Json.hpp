// JSON for trace files (Kineto Chrome traces, nccl-tests -J output, our JSONL), read by simdjson
// (libsimdjson-dev; its on-demand reader) into a small value tree.
//
// parse_json() builds the tree of a whole document; parse_json_streaming() hands the elements of
// one big array member to a callback one at a time (a Kineto trace's traceEvents), so that memory
// stays near the text's size. Neither crashes on bad input: syntax errors, nesting deeper than 512,
// numbers out of double range, invalid escapes and control characters throw TraceError naming the
// input and the byte offset ("trace.json: byte 11: the text ends (truncated?)"; a multi-line text
// also gets the line). Objects keep their keys in order; find() looks a key up.
//
//   JsonValue root = parse_json(text, "trace.json");
//   if (const JsonValue* events = root.find("traceEvents"); events && events->is_array()) ...
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ddlsim::traces {

class JsonValue {
public:
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;
  explicit JsonValue(bool b) : value_(b) {}
  explicit JsonValue(double d) : value_(d) {}
  explicit JsonValue(std::string s) : value_(std::move(s)) {}
  explicit JsonValue(Array a) : value_(std::move(a)) {}
  explicit JsonValue(Object o) : value_(std::move(o)) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_number() const { return std::holds_alternative<double>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_array() const { return std::holds_alternative<Array>(value_); }
  bool is_object() const { return std::holds_alternative<Object>(value_); }

  /// The value; undefined behaviour is avoided by checking is_*() first (these throw
  /// std::bad_variant_access otherwise).
  bool as_bool() const { return std::get<bool>(value_); }
  double as_number() const { return std::get<double>(value_); }
  const std::string& as_string() const { return std::get<std::string>(value_); }
  const Array& as_array() const { return std::get<Array>(value_); }
  const Object& as_object() const { return std::get<Object>(value_); }

  /// Member `key` of an object (the first one), or nullptr when absent or not an object.
  const JsonValue* find(std::string_view key) const;
  /// Member `key` as a number / string, or nullptr when absent or of another type.
  const double* number(std::string_view key) const;
  const std::string* string(std::string_view key) const;

private:
  std::variant<std::monostate, bool, double, std::string, Array, Object> value_;
};

/// Parses one JSON document (trailing whitespace allowed). `origin` names the input in errors.
/// Throws TraceError ("origin: byte N: message").
JsonValue parse_json(std::string_view text, const std::string& origin);

/// Bytes simdjson reads past a text's end (the padding its parsers give the copies they read).
std::size_t json_padding();

/// Elements of a streamed array to leave out unbuilt: objects whose string member `key` is a value
/// that `keep` refuses (elements without it, or where it is not a string, are kept).
struct JsonFilter {
  std::string_view key;
  std::function<bool(std::string_view)> keep;
};

/// Parses a document whose root is an object without holding its array member `array_key` whole:
/// each element of that array is parsed and passed to `on_element` (which may keep it), in order. Returns
/// the root with that member present but empty (any other document: the whole tree, as parse_json).
/// `text` is only read (a window of its elements at a time is copied). With `filter`, the elements it refuses
/// are skipped before they are built (they are still checked as JSON only as far as simdjson reads
/// them to find the member). Throws TraceError as parse_json does; elements before the faulty one
/// have been passed on by then.
JsonValue parse_json_streaming(std::string_view text, const std::string& origin, std::string_view array_key,
                               const std::function<void(JsonValue&&)>& on_element, const JsonFilter* filter = nullptr);

}  // namespace ddlsim::traces
