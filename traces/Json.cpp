#include "traces/Json.hpp"

#include "common/Error.hpp"
#include "traces/JsonStream.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <optional>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ddlsim::traces {
namespace {

using detail::convert;
using detail::json_max_depth;
namespace od = simdjson::ondemand;

// Where a parse failed, as "origin[:line]: byte N: message" (a multi-line text also gets the line).
[[noreturn]] void fail(std::string_view text, const std::string& origin, std::size_t at, const std::string& message)
{
  at = std::min(at, text.size());
  const auto newlines = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const bool multi_line = text.find('\n') != std::string_view::npos;
  throw TraceError(origin + (multi_line ? ":" + std::to_string(newlines + 1) : std::string()) + ": byte " +
                   std::to_string(at) + ": " + message);
}

// simdjson's error, said for a person; `at` is where the reader stood (the text's end when it ran out).
std::string describe(simdjson::error_code e, std::string_view text, std::size_t at)
{
  const bool at_end = at >= text.size();
  switch (e) {
  case simdjson::EMPTY: return "the text ends before any JSON value";
  case simdjson::INCOMPLETE_ARRAY_OR_OBJECT: return "the text ends (truncated?)";
  case simdjson::UNCLOSED_STRING: return "the text ends inside a string (truncated?)";
  case simdjson::DEPTH_ERROR: return "nesting deeper than " + std::to_string(json_max_depth);
  case simdjson::NUMBER_ERROR:
  case simdjson::NUMBER_OUT_OF_RANGE: {
    std::size_t end = at;
    while (end < text.size() && std::string_view("+-.0123456789eE").find(text[end]) != std::string_view::npos)
      ++end;
    return "number " + std::string(text.substr(at, end - at)) + " is out of range";
  }
  case simdjson::STRING_ERROR: return "invalid string (a bad escape or \\u sequence)";
  case simdjson::UNESCAPED_CHARS: return "control character inside a string (escape it)";
  case simdjson::UTF8_ERROR: return "invalid UTF-8";
  case simdjson::TRAILING_CONTENT: return "unexpected text after the JSON value";
  default:
    if (at_end)
      return "the text ends (truncated?)";
    return "unexpected character '" + std::string(1, text[at]) + "'";
  }
}

// The end of the string whose opening quote is at `i` (the index of its closing quote), or npos:
// the next quote not escaped by an odd run of backslashes (memchr finds quotes at memory speed).
std::size_t string_end(std::string_view text, std::size_t i)
{
  for (++i; i < text.size();) {
    const void* q = std::memchr(text.data() + i, '"', text.size() - i);
    if (q == nullptr)
      return std::string_view::npos;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(q) - text.data());
    std::size_t backslashes = 0;
    while (at - backslashes > i && text[at - backslashes - 1] == '\\')
      ++backslashes;
    if (backslashes % 2 == 0)
      return at;
    i = at + 1;
  }
  return std::string_view::npos;
}

// The bytes the structure scans stop at: quotes, brackets, commas and colons.
constexpr std::array<bool, 256> structural_bytes = [] {
  std::array<bool, 256> t{};
  for (const unsigned char c : std::string_view("\"{}[],:"))
    t[c] = true;
  return t;
}();

// The next structural byte at or after `i`, or the text's size.
std::size_t next_structural(std::string_view text, std::size_t i)
{
  while (i < text.size() && !structural_bytes[static_cast<unsigned char>(text[i])])
    ++i;
  return i;
}

// The same as next_structural less colons, for one long forward scan, and string_end: the bytes
// found 64 at a time into bit masks (with SSE2, on every x86-64; byte by byte elsewhere), so that
// the text between them costs nothing per byte.
class StructuralScan {
public:
  explicit StructuralScan(std::string_view text) : text_(text) {}

  /// The first quote, bracket or comma at or after `i`, or the text's size.
  std::size_t next(std::size_t i) { return find(i, false); }

  /// string_end(text, i): the closing quote of the string opening at `i`, or npos.
  std::size_t string_end(std::size_t i)
  {
    for (std::size_t at = i + 1;; ++at) {
      at = find(at, true);
      if (at == text_.size())
        return std::string_view::npos;
      std::size_t backslashes = 0;
      while (at - backslashes > i + 1 && text_[at - backslashes - 1] == '\\')
        ++backslashes;
      if (backslashes % 2 == 0)
        return at;
    }
  }

private:
  std::size_t find(std::size_t i, bool quotes_only)
  {
    std::size_t block = i & ~std::size_t{63};
    if (block != block_)
      load(block);
    for (std::uint64_t m = (quotes_only ? quotes_ : mask_) & (~std::uint64_t{0} << (i & 63));;
         m = quotes_only ? quotes_ : mask_) {
      if (m != 0)
        return std::min(text_.size(), block + static_cast<std::size_t>(__builtin_ctzll(m)));
      block += 64;
      if (block >= text_.size())
        return text_.size();
      load(block);
    }
  }

  void load(std::size_t block)
  {
    block_ = block;
    mask_ = quotes_ = 0;
    if (block + 64 > text_.size()) {  // the last bytes, not a whole block
      for (std::size_t i = block; i < text_.size(); ++i) {
        if (text_[i] != ':' && structural_bytes[static_cast<unsigned char>(text_[i])])
          mask_ |= std::uint64_t{1} << (i - block);
        if (text_[i] == '"')
          quotes_ |= std::uint64_t{1} << (i - block);
      }
      return;
    }
#if defined(__SSE2__)
    const __m128i lower_bit = _mm_set1_epi8(0x20), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'),
                  quote = _mm_set1_epi8('"'), comma = _mm_set1_epi8(',');
    for (int part = 0; part < 4; ++part) {  // brackets: the bytes b with b | 0x20 == '{' or '}'
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text_.data() + block + 16 * part));
      const __m128i folded = _mm_or_si128(b, lower_bit);
      const __m128i quotes = _mm_cmpeq_epi8(b, quote);
      const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)),
                                       _mm_or_si128(quotes, _mm_cmpeq_epi8(b, comma)));
      mask_ |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(hit))) << (16 * part);
      quotes_ |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(quotes))) << (16 * part);
    }
#else
    for (std::size_t i = 0; i < 64; ++i) {
      if (text_[block + i] != ':' && structural_bytes[static_cast<unsigned char>(text_[block + i])])
        mask_ |= std::uint64_t{1} << i;
      if (text_[block + i] == '"')
        quotes_ |= std::uint64_t{1} << i;
    }
#endif
  }

  std::string_view text_;
  std::size_t block_ = std::string_view::npos;
  std::uint64_t mask_ = 0, quotes_ = 0;
};

// Where the text's structure goes wrong, for the errors simdjson does not place (an unclosed
// bracket, a token after the value): the offset and the message, or npos when the brackets and
// strings are sound.
std::pair<std::size_t, std::string> structure_problem(std::string_view text)
{
  constexpr std::string_view space = " \t\r\n";
  const std::size_t start = text.find_first_not_of(space);
  if (start == std::string_view::npos)
    return {text.size(), "the text ends before any JSON value"};
  if (std::string_view("{[\"-0123456789tfn").find(text[start]) == std::string_view::npos)
    return {start, "unexpected character '" + std::string(1, text[start]) + "'"};
  std::size_t end = text.size();
  if (text[start] == '{' || text[start] == '[') {
    std::string closers;
    for (std::size_t i = start; i < text.size() && end == text.size(); ++i) {
      const char c = text[i];
      if (c == '"') {
        i = string_end(text, i);
        if (i == std::string_view::npos)
          return {text.size(), "the text ends inside a string (truncated?)"};
      } else if (c == '{' || c == '[') {
        closers.push_back(c == '{' ? '}' : ']');
      } else if (c == '}' || c == ']') {
        if (closers.empty() || closers.back() != c)
          return {i, "unexpected character '" + std::string(1, c) + "'"};
        closers.pop_back();
        if (closers.empty())
          end = i + 1;
      }
    }
    if (end == text.size() && !closers.empty())
      return {text.size(), "expected '" + std::string(1, closers.back()) + "', the text ends (truncated?)"};
  } else if (text[start] == '"') {
    end = string_end(text, start);
    if (end == std::string_view::npos)
      return {text.size(), "the text ends inside a string (truncated?)"};
    ++end;
  } else {
    end = std::min(text.size(), text.find_first_of(space, start));
  }
  if (const std::size_t next = text.find_first_not_of(space, end); next != std::string_view::npos)
    return {next, "unexpected text after the JSON value"};
  return {std::string_view::npos, {}};
}

// Parses one document of `padded` (size bytes, padded) whose bytes are text[offset..] of the
// original; errors name the original's positions (`at_original` maps an offset in `padded`).
JsonValue parse_document(od::parser& parser, const char* padded, std::size_t size, std::string_view original,
                         const std::string& origin, const std::function<std::size_t(std::size_t)>& at_original)
{
  od::document doc;
  if (const auto e = parser.iterate(padded, size, size + simdjson::SIMDJSON_PADDING).get(doc))
    fail(original, origin, at_original(size), describe(e, original, original.size()));
  auto where = [&] {
    const char* p = nullptr;
    return doc.current_location().get(p) == simdjson::SUCCESS ? at_original(static_cast<std::size_t>(p - padded))
                                                              : original.size();
  };
  try {
    JsonValue v = convert(doc, 0);
    const char* next = nullptr;
    if (doc.current_location().get(next) == simdjson::SUCCESS)  // a token after the value
      fail(original, origin, at_original(static_cast<std::size_t>(next - padded)),
           describe(simdjson::TRAILING_CONTENT, original, original.size()));
    return v;
  } catch (const simdjson::simdjson_error& e) {
    if (e.error() == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || e.error() == simdjson::TRAILING_CONTENT ||
        e.error() == simdjson::TAPE_ERROR)
      if (const auto [at, message] = structure_problem(std::string_view(padded, size)); at != std::string_view::npos)
        fail(original, origin, at_original(at), message);
    const std::size_t at = where();
    if (e.error() == simdjson::STRING_ERROR)  // simdjson stands after the string: name its bad escape
      for (std::size_t i = std::min(at, original.size()); i-- > 0 && original[i] != '\n';)
        if (original[i] == '\\' && i + 1 < original.size() &&
            std::string_view("\"\\/bfnrtu").find(original[i + 1]) == std::string_view::npos)
          fail(original, origin, i, "invalid escape '\\" + std::string(1, original[i + 1]) + "'");
    fail(original, origin, at, describe(e.error(), original, at));
  }
}

// The member `key` of the root object whose value is an array: the offsets of its '[' and ']'.
// Its separating commas become spaces, so that its elements read as a stream of documents. Only
// strings and brackets are followed here; simdjson checks everything else as it parses.
std::optional<std::pair<std::size_t, std::size_t>> open_array_member(std::string& text, std::string_view key,
                                                                     const std::string& origin)
{
  std::size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string::npos || text[i] != '{')
    return std::nullopt;
  int depth = 0;
  std::string_view last_key;
  for (; (i = next_structural(text, i)) < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const std::size_t end = string_end(text, i);
      if (end == std::string_view::npos)
        fail(text, origin, text.size(), "the text ends inside a string (truncated?)");
      last_key = std::string_view(text).substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0)
        return std::nullopt;
    } else if (c == ':' && depth == 1 && last_key == key) {
      const std::size_t open = text.find_first_not_of(" \t\r\n", i + 1);
      if (open == std::string::npos || text[open] != '[')
        return std::nullopt;
      std::string closers = "]";  // what each open bracket needs, innermost last
      StructuralScan scan(text);  // commas change to spaces, which the scan's masks do not see again
      for (std::size_t j = open + 1; (j = scan.next(j)) < text.size(); ++j) {
        const char d = text[j];
        if (d == '"') {
          j = scan.string_end(j);
          if (j == std::string_view::npos)
            fail(text, origin, text.size(), "the text ends inside a string (truncated?)");
        } else if (d == '{' || d == '[') {
          closers.push_back(d == '{' ? '}' : ']');
        } else if (d == '}' || d == ']') {
          if (d != closers.back())
            fail(text, origin, j, "unexpected character '" + std::string(1, d) + "'");
          closers.pop_back();
          if (closers.empty())
            return std::make_pair(open, j);
        } else if (d == ',' && closers.size() == 1) {
          text[j] = ' ';
        }
      }
      fail(text, origin, text.size(), "expected '" + std::string(1, closers.back()) + "', the text ends (truncated?)");
    }
  }
  return std::nullopt;
}

}  // namespace

std::size_t json_padding() { return simdjson::SIMDJSON_PADDING; }

namespace {

// `part`, which starts at byte `offset` of `original`, parsed from a padded copy.
JsonValue parse_part(std::string_view part, std::string_view original, std::size_t offset, const std::string& origin)
{
  std::string padded;
  padded.reserve(part.size() + simdjson::SIMDJSON_PADDING);
  padded.assign(part);
  od::parser parser;
  return parse_document(parser, padded.data(), padded.size(), original, origin,
                        [offset](std::size_t at) { return offset + at; });
}

}  // namespace

JsonValue parse_json(std::string_view text, const std::string& origin) { return parse_part(text, text, 0, origin); }

namespace detail {

void json_fail(std::string_view text, const std::string& origin, std::size_t at, const std::string& message)
{
  fail(text, origin, at, message);
}

std::string json_describe(simdjson::error_code e, std::string_view text, std::size_t at)
{
  return describe(e, text, at);
}

std::size_t json_string_end(std::string_view text, std::size_t i) { return string_end(text, i); }

JsonValue parse_json_part(std::string_view part, std::string_view original, std::size_t offset,
                          const std::string& origin)
{
  return parse_part(part, original, offset, origin);
}

std::optional<StreamedArray> open_streamed_array(std::string& text, const std::string& origin, std::string_view key,
                                                 JsonValue& root)
{
  if (text.capacity() < text.size() + simdjson::SIMDJSON_PADDING)
    text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  const auto span = open_array_member(text, key, origin);
  if (!span) {
    root = parse_json(text, origin);
    return std::nullopt;
  }
  const std::size_t open = span->first, close = span->second;  // not a structured binding: clang 14 cannot capture one
  // The root without the array's elements ("[]" in their place), parsed whole: it is small.
  std::string rest;
  rest.reserve(text.size() - (close - open) + simdjson::SIMDJSON_PADDING);
  rest.append(text, 0, open + 1).append(text, close, std::string::npos);
  od::parser parser;
  root = parse_document(parser, rest.data(), rest.size(), text, origin,
                        [&](std::size_t at) { return at <= open ? at : at + (close - open - 1); });
  return StreamedArray{.begin = open + 1, .close = close};
}

}  // namespace detail

JsonValue parse_json_streaming(std::string& text, const std::string& origin, std::string_view array_key,
                               const std::function<void(JsonValue&&)>& on_element, const JsonFilter* filter)
{
  JsonValue root;
  const auto array = detail::open_streamed_array(text, origin, array_key, root);
  if (!array)
    return root;
  detail::for_each_streamed_element(
      text, origin, array_key, *array, filter,
      [&](od::object& object, od::document_reference&, std::size_t) { on_element(detail::convert_object(object, 1)); },
      [&](JsonValue&& element) { on_element(std::move(element)); });
  return root;
}

const JsonValue* JsonValue::find(std::string_view key) const
{
  if (!is_object())
    return nullptr;
  for (const auto& [k, v] : as_object())
    if (k == key)
      return &v;
  return nullptr;
}

const double* JsonValue::number(std::string_view key) const
{
  const JsonValue* v = find(key);
  return v && v->is_number() ? &std::get<double>(v->value_) : nullptr;
}

const std::string* JsonValue::string(std::string_view key) const
{
  const JsonValue* v = find(key);
  return v && v->is_string() ? &std::get<std::string>(v->value_) : nullptr;
}

}  // namespace ddlsim::traces
