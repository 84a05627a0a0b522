// Internal to ddlsim::traces (not installed, not for other folders): the pieces of the streamed
// JSON reader (Json.cpp) that a reader of one document type's elements builds on, so that the
// Kineto importer's own element reader (KinetoEvent.cpp) walks simdjson's on-demand values with
// the same calls, in the same order, as the tree builder: the same bytes are checked and the same
// errors come out at the same byte offsets.
//
// Throws: simdjson::simdjson_error from the walkers (the stream loop turns it into TraceError,
// "origin: byte N: message"); TraceError from the rest.
#pragma once

#include "traces/Json.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::traces::detail {

namespace od = simdjson::ondemand;

constexpr int json_max_depth = 512;
/// Elements of a streamed array are parsed in windows of at most this many bytes (an element must fit in one).
constexpr std::size_t json_stream_window = std::size_t{4} << 20;

/// Throws TraceError "origin[:line]: byte N: message" (a multi-line text also gets the line).
[[noreturn]] void json_fail(std::string_view text, const std::string& origin, std::size_t at,
                            const std::string& message);
/// simdjson's error `e` said for a person; `at` is where the reader stood.
std::string json_describe(simdjson::error_code e, std::string_view text, std::size_t at);
/// The index of the closing quote of the string whose opening quote is at `i`, or npos.
std::size_t json_string_end(std::string_view text, std::size_t i);
/// `part`, which starts at byte `offset` of `original`, parsed whole (errors at `original`'s offsets).
JsonValue parse_json_part(std::string_view part, std::string_view original, std::size_t offset,
                          const std::string& origin);

/// Where the streamed array member lies: text[begin, close) holds its elements, and the commas
/// between them are at `separators`, in order.
struct StreamedArray {
  std::size_t begin = 0, close = 0;
  std::vector<std::size_t> separators;
};
/// Finds the root object's array member `key` and parses the root without its elements into
/// `root`; nullopt (and `root` the whole document) when there is none. `text` is only read.
std::optional<StreamedArray> open_streamed_array(std::string_view text, const std::string& origin, std::string_view key,
                                                 JsonValue& root);

inline void check_depth(int depth)
{
  if (depth > json_max_depth)
    throw simdjson::simdjson_error(simdjson::DEPTH_ERROR);
}

// Our value tree from simdjson's on-demand reader (a document or a value inside one).
template <typename Node> JsonValue convert(Node& node, int depth);

inline JsonValue convert_object(od::object object, int depth)
{
  JsonValue::Object members;
  members.reserve(16);
  for (auto field : object) {
    std::string key(field.unescaped_key().value());
    od::value v = field.value().value();
    members.emplace_back(std::move(key), convert(v, depth + 1));
  }
  return JsonValue(std::move(members));
}

template <typename Node> JsonValue convert(Node& node, int depth)
{
  check_depth(depth);
  switch (node.type().value()) {
  case od::json_type::object: return convert_object(node.get_object().value(), depth);
  case od::json_type::array: {
    JsonValue::Array elements;
    for (auto element : node.get_array()) {
      od::value v = element.value();
      elements.push_back(convert(v, depth + 1));
    }
    return JsonValue(std::move(elements));
  }
  case od::json_type::number: {
    const double d = node.get_double().value();
    if (!std::isfinite(d))
      throw simdjson::simdjson_error(simdjson::NUMBER_ERROR);
    return JsonValue(d);
  }
  case od::json_type::string: return JsonValue(std::string(node.get_string().value()));
  case od::json_type::boolean: return JsonValue(node.get_bool().value());
  case od::json_type::null:
    if (!node.is_null().value())
      throw simdjson::simdjson_error(simdjson::N_ATOM_ERROR);
    return JsonValue();
  }
  return JsonValue();
}

// The elements in `window` (whole ones, separated by spaces, padded), which is text[from, ...):
// the loop of for_each_streamed_element over one window.
template <typename OnObject, typename OnOther>
void read_streamed_window(const std::string& window, std::size_t from, std::string_view text, const std::string& origin,
                          std::string_view array_key, od::parser& elements, const JsonFilter* filter,
                          OnObject& on_object, OnOther& on_other)
{
  od::document_stream stream;
  if (const auto e = elements.iterate_many(window.data(), window.size(), json_stream_window).get(stream))
    json_fail(text, origin, from, json_describe(e, text, from));
  for (auto it = stream.begin(); it != stream.end(); ++it) {
    const std::size_t local = it.current_index(), at = from + local;
    od::document_reference doc;
    bool have_doc = false;  // a document_reference that failed to come has no position to ask
    try {
      doc = (*it).value();
      have_doc = true;
      const od::json_type type = doc.type().value();
      if (type == od::json_type::object) {
        od::object object = doc.get_object().value();
        if (filter != nullptr) {  // look at the one member first; read only the elements kept
          std::string_view value;
          auto member = object.find_field_unordered(filter->key);
          simdjson::error_code found = member.error();
          if (found == simdjson::SUCCESS) {
            found = member.get_string().get(value);
            if (found == simdjson::SUCCESS && !filter->keep(value))
              continue;
          }
          // Absent, or not a string: kept, read again from the start. Any other error (bad JSON)
          // leaves simdjson's iterator abandoned, where a reset is not allowed: reported here.
          if (found != simdjson::SUCCESS && found != simdjson::NO_SUCH_FIELD && found != simdjson::INCORRECT_TYPE)
            throw simdjson::simdjson_error(found);
          object.reset().value();
        }
        on_object(object, doc, at);
        continue;
      }
      if (type == od::json_type::array) {
        on_other(convert(doc, 1));
        continue;
      }
    } catch (const simdjson::simdjson_error& e) {
      if (e.error() == simdjson::CAPACITY)
        json_fail(text, origin, at, "an element of '" + std::string(array_key) + "' over " +
                                        std::to_string(json_stream_window >> 20) + " MB");
      const char* p = nullptr;
      const std::size_t where = have_doc && doc.current_location().get(p) == simdjson::SUCCESS
                                    ? from + static_cast<std::size_t>(p - window.data()) : at;
      json_fail(text, origin, where, json_describe(e.error(), text, where));
    }
    // simdjson 3.0's stream mistakes what follows a scalar for trailing content (and its source()
    // can drop the last byte): parse a scalar alone, up to the space that ends it.
    const std::size_t end =
        window[local] == '"' ? json_string_end(window, local) + 1 : window.find_first_of(" \t\r\n", local);
    on_other(parse_json_part(std::string_view(window).substr(local, std::min(end, window.size()) - local), text, at,
                             origin));
  }
}

/// Reads the elements of `array` (open_streamed_array) one document at a time: an object the
/// filter keeps goes to on_object(od::object&, od::document_reference&, std::size_t offset) (its
/// members not yet read), any other element, built as a tree, to on_other(JsonValue&&). Throws
/// TraceError at the file's byte offset.
///
/// The text is only read (it may be a file's read-only mapping): whole elements, up to
/// json_stream_window bytes of them, are copied into one padded window with the commas between
/// them as spaces, and simdjson reads the window as a stream of documents while it is in cache.
template <typename OnObject, typename OnOther>
void for_each_streamed_element(std::string_view text, const std::string& origin, std::string_view array_key,
                               const StreamedArray& array, const JsonFilter* filter, OnObject&& on_object,
                               OnOther&& on_other)
{
  const std::vector<std::size_t>& separators = array.separators;
  std::string window;
  window.reserve(std::min(array.close - array.begin, json_stream_window) + simdjson::SIMDJSON_PADDING);
  od::parser elements(std::max(json_stream_window, std::size_t{1} << 16));
  std::size_t next = 0;  // the first separator past `from`
  for (std::size_t from = array.begin; from <= array.close;) {
    std::size_t to = array.close;  // the window: text[from, to), ending at a separator or the array's end
    if (to - from > json_stream_window) {
      std::size_t last = next;  // the first separator out of reach
      while (last < separators.size() && separators[last] - from <= json_stream_window)
        ++last;
      if (last == next) {
        const std::size_t at = std::min(text.find_first_not_of(" \t\r\n", from), to);
        json_fail(text, origin, at, "an element of '" + std::string(array_key) + "' over " +
                                        std::to_string(json_stream_window >> 20) + " MB");
      }
      to = separators[last - 1];
    }
    window.assign(text.substr(from, to - from));
    for (; next < separators.size() && separators[next] < to; ++next)
      window[separators[next] - from] = ' ';
    next += next < separators.size() && separators[next] == to;  // the window's end
    if (from == array.begin || window.find_first_not_of(" \t\r\n") != std::string::npos)
      read_streamed_window(window, from, text, origin, array_key, elements, filter, on_object, on_other);
    from = to + 1;
  }
}

}  // namespace ddlsim::traces::detail
