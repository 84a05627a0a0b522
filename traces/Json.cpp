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

// The array member's elements, from the byte after its '[' to its ']': the offset of that ']', and
// those of the commas between its elements, in order. Only strings and brackets are followed (the
// same errors as a byte-by-byte walk, at the same bytes); simdjson checks the rest as it parses.
//
// 64 bytes at a time: bit masks of quotes, backslashes, brackets and commas (SSE2 on every x86-64,
// byte by byte elsewhere); the bytes inside strings are the prefix XOR of the quotes, so that only
// the brackets outside strings cost anything one by one, and the commas between two of them are
// kept (or not) all at once. A block with a backslash, or the text's last bytes, go byte by byte.
class ArrayScan {
public:
  ArrayScan(std::string_view text, const std::string& origin, std::vector<std::size_t>& separators)
      : text_(text), origin_(origin), separators_(separators)
  {
  }

  std::size_t close(std::size_t from)
  {
    const std::size_t size = text_.size();
    std::size_t i = from;
    for (; i + 64 <= size; i += 64) {
      const Masks m = masks(text_.data() + i);
      if (m.backslash != 0 || escaped_) {
        if (const std::size_t at = bytes(i, i + 64); at != npos)
          return at;
        continue;
      }
      const std::uint64_t inside = prefix_xor(m.quote) ^ (in_string_ ? ~std::uint64_t{0} : 0);
      in_string_ = (inside >> 63) != 0;
      std::uint64_t brackets = m.bracket & ~inside, commas = m.comma & ~inside;
      for (; brackets != 0; brackets &= brackets - 1) {
        const std::uint64_t bit = brackets & (~brackets + 1), before = bit - 1;
        if (closers_.size() == 1)
          keep(i, commas & before);
        commas &= ~before;
        if (const std::size_t at = bracket(i + static_cast<std::size_t>(__builtin_ctzll(bit))); at != npos)
          return at;
      }
      if (closers_.size() == 1)
        keep(i, commas);
    }
    if (const std::size_t at = bytes(i, size); at != npos)
      return at;
    if (in_string_)
      fail(text_, origin_, size, "the text ends inside a string (truncated?)");
    fail(text_, origin_, size, "expected '" + std::string(1, closers_.back()) + "', the text ends (truncated?)");
  }

private:
  static constexpr std::size_t npos = std::string_view::npos;
  struct Masks {
    std::uint64_t quote = 0, backslash = 0, bracket = 0, comma = 0;
  };

  static Masks masks(const char* p)
  {
    Masks m;
#if defined(__SSE2__)
    const __m128i lower_bit = _mm_set1_epi8(0x20), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'),
                  quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), comma = _mm_set1_epi8(',');
    for (int part = 0; part < 4; ++part) {  // brackets: the bytes b with b | 0x20 == '{' or '}'
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
      const __m128i folded = _mm_or_si128(b, lower_bit);
      const auto bits = [&](__m128i hit) {
        return static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(hit))) << (16 * part);
      };
      m.quote |= bits(_mm_cmpeq_epi8(b, quote));
      m.backslash |= bits(_mm_cmpeq_epi8(b, backslash));
      m.bracket |= bits(_mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)));
      m.comma |= bits(_mm_cmpeq_epi8(b, comma));
    }
#else
    for (int i = 0; i < 64; ++i) {
      const std::uint64_t bit = std::uint64_t{1} << i;
      const char c = p[i];
      m.quote |= c == '"' ? bit : 0;
      m.backslash |= c == '\\' ? bit : 0;
      m.bracket |= c == '{' || c == '}' || c == '[' || c == ']' ? bit : 0;
      m.comma |= c == ',' ? bit : 0;
    }
#endif
    return m;
  }

  // Bit i set when an odd number of quotes lie at or before byte i.
  static std::uint64_t prefix_xor(std::uint64_t x)
  {
    for (int shift = 1; shift < 64; shift *= 2)
      x ^= x << shift;
    return x;
  }

  void keep(std::size_t block, std::uint64_t commas)
  {
    for (; commas != 0; commas &= commas - 1)
      separators_.push_back(block + static_cast<std::size_t>(__builtin_ctzll(commas)));
  }

  // The bracket at `at`, outside strings: the array's ']' (its offset), or npos.
  std::size_t bracket(std::size_t at)
  {
    const char c = text_[at];
    if (c == '{' || c == '[') {
      closers_.push_back(c == '{' ? '}' : ']');
      return npos;
    }
    if (c != closers_.back())
      fail(text_, origin_, at, "unexpected character '" + std::string(1, c) + "'");
    closers_.pop_back();
    return closers_.empty() ? at : npos;
  }

  // text[from, to) byte by byte: the array's ']' when it is there, or npos.
  std::size_t bytes(std::size_t from, std::size_t to)
  {
    for (std::size_t i = from; i < to; ++i) {
      const char c = text_[i];
      if (in_string_) {
        if (escaped_)
          escaped_ = false;
        else if (c == '\\')
          escaped_ = true;
        else if (c == '"')
          in_string_ = false;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[' || c == '}' || c == ']') {
        if (const std::size_t at = bracket(i); at != npos)
          return at;
      } else if (c == ',' && closers_.size() == 1) {
        separators_.push_back(i);
      }
    }
    return npos;
  }

  std::string_view text_;
  const std::string& origin_;
  std::vector<std::size_t>& separators_;
  std::string closers_ = "]";  // what each open bracket needs, innermost last
  bool in_string_ = false, escaped_ = false;
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

// The member `key` of the root object whose value is an array: where its elements lie, and the
// commas between them. Only strings and brackets are followed here; simdjson checks everything
// else as it parses.
std::optional<detail::StreamedArray> open_array_member(std::string_view text, std::string_view key,
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
      detail::StreamedArray array;
      array.begin = open + 1;
      array.close = ArrayScan(text, origin, array.separators).close(open + 1);
      return array;
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

std::optional<StreamedArray> open_streamed_array(std::string_view text, const std::string& origin, std::string_view key,
                                                 JsonValue& root)
{
  auto array = open_array_member(text, key, origin);
  if (!array) {
    root = parse_json(text, origin);
    return std::nullopt;
  }
  const std::size_t open = array->begin - 1, close = array->close;
  // The root without the array's elements ("[]" in their place), parsed whole: it is small.
  std::string rest;
  rest.reserve(text.size() - (close - open) + simdjson::SIMDJSON_PADDING);
  rest.append(text.substr(0, open + 1)).append(text.substr(close));
  od::parser parser;
  root = parse_document(parser, rest.data(), rest.size(), text, origin,
                        [&](std::size_t at) { return at <= open ? at : at + (close - open - 1); });
  return array;
}

}  // namespace detail

JsonValue parse_json_streaming(std::string_view text, const std::string& origin, std::string_view array_key,
                               const std::function<void(JsonValue&&)>& on_element, const JsonFilter* filter)
{
  JsonValue root;
  const auto array = detail::open_streamed_array(text, origin, array_key, root);
  if (!array)
    return root;
  detail::for_each_streamed_element(
      text, origin, array_key, std::move(*array), filter,
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
