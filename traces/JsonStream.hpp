// Internal to ddlsim::traces (not installed, not for other folders): the pieces of the streamed
// JSON reader (Json.cpp) that a reader of one document type's elements builds on, so that the
// Kineto importer's own element reader (KinetoEvents.cpp) walks simdjson's on-demand values with
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

namespace ddlsim::traces::detail {

namespace od = simdjson::ondemand;

constexpr int json_max_depth = 512;
/// Elements of a streamed array are parsed in windows of this many bytes (an element must fit in one).
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

/// Where the streamed array member lies: text[begin, close) holds its elements, separated by spaces.
struct StreamedArray {
  std::size_t begin = 0, close = 0;
};
/// Pads `text` (json_padding()), finds the root object's array member `key` and parses the root
/// without its elements into `root`; nullopt (and `root` the whole document) when there is none.
std::optional<StreamedArray> open_streamed_array(std::string& text, const std::string& origin, std::string_view key,
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

/// Reads the elements of `array` (open_streamed_array) one document at a time: an object the
/// filter keeps goes to on_object(od::object&, od::document_reference&, std::size_t offset) (its
/// members not yet read), any other element, built as a tree, to on_other(JsonValue&&). Throws
/// TraceError at the file's byte offset.
template <typename OnObject, typename OnOther>
void for_each_streamed_element(std::string& text, const std::string& origin, std::string_view array_key,
                               StreamedArray array, const JsonFilter* filter, OnObject&& on_object,
                               OnOther&& on_other)
{
  const std::size_t begin = array.begin, close = array.close;
  od::document_stream stream;
  od::parser elements(std::max(json_stream_window, std::size_t{1} << 16));
  if (const auto e = elements.iterate_many(text.data() + begin, close - begin, json_stream_window).get(stream))
    json_fail(text, origin, begin, json_describe(e, text, begin));
  for (auto it = stream.begin(); it != stream.end(); ++it) {
    const std::size_t at = begin + it.current_index();
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
          if (member.error() == simdjson::SUCCESS && member.get_string().get(value) == simdjson::SUCCESS &&
              !filter->keep(value))
            continue;
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
                                    ? static_cast<std::size_t>(p - text.data()) : at;
      json_fail(text, origin, where, json_describe(e.error(), text, where));
    }
    // simdjson 3.0's stream mistakes what follows a scalar for trailing content (and its source()
    // can drop the last byte): parse a scalar alone, up to the space that ends it.
    const std::size_t end = text[at] == '"' ? json_string_end(text, at) + 1 : text.find_first_of(" \t\r\n", at);
    on_other(parse_json_part(std::string_view(text).substr(at, std::min(end, close) - at), text, at, origin));
  }
}

}  // namespace ddlsim::traces::detail
