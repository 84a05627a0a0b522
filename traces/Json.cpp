#include "traces/Json.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ddlsim::traces {
namespace {

constexpr int max_depth = 512;

class Parser {
public:
  Parser(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  JsonValue document()
  {
    JsonValue v = value(0);
    skip_space();
    if (pos_ != text_.size())
      fail("unexpected text after the JSON value");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& message) const
  {
    // A multi-line document also gets the line: "trace.json:2: byte 46: ...".
    const auto upto = text_.substr(0, std::min(pos_, text_.size()));
    const auto newlines = std::count(upto.begin(), upto.end(), '\n');
    const bool multi_line = text_.find('\n') != std::string_view::npos;
    throw TraceError(origin_ + (multi_line ? ":" + std::to_string(newlines + 1) : std::string()) + ": byte " +
                     std::to_string(pos_) + ": " + message);
  }

  void skip_space()
  {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  bool consume(char c)
  {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c)
  {
    if (!consume(c))
      fail(pos_ < text_.size() ? std::string("expected '") + c + "', found '" + text_[pos_] + "'"
                               : std::string("expected '") + c + "', the text ends (truncated?)");
  }

  bool literal(std::string_view word)
  {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  JsonValue value(int depth)
  {
    if (depth > max_depth)
      fail("nesting deeper than " + std::to_string(max_depth));
    skip_space();
    if (pos_ >= text_.size())
      fail("expected a value, the text ends (truncated?)");
    const char c = text_[pos_];
    if (c == '{')
      return object(depth);
    if (c == '[')
      return array(depth);
    if (c == '"')
      return JsonValue(string());
    if (literal("true"))
      return JsonValue(true);
    if (literal("false"))
      return JsonValue(false);
    if (literal("null"))
      return JsonValue();
    if (c == '-' || (c >= '0' && c <= '9'))
      return JsonValue(number());
    fail(std::string("unexpected character '") + c + "'");
  }

  JsonValue object(int depth)
  {
    ++pos_;
    JsonValue::Object members;
    if (consume('}'))
      return JsonValue(std::move(members));
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        fail("expected a member name in quotes");
      std::string key = string();
      expect(':');
      members.emplace_back(std::move(key), value(depth + 1));
    } while (consume(','));
    expect('}');
    return JsonValue(std::move(members));
  }

  JsonValue array(int depth)
  {
    ++pos_;
    JsonValue::Array items;
    if (consume(']'))
      return JsonValue(std::move(items));
    do {
      items.push_back(value(depth + 1));
    } while (consume(','));
    expect(']');
    return JsonValue(std::move(items));
  }

  double number()
  {
    const std::size_t start = pos_;
    if (text_[pos_] == '-')
      ++pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      return pos_ > from;
    };
    if (!digits())
      fail("a number needs digits");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits())
        fail("a number needs digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (!digits())
        fail("a number needs digits in its exponent");
    }
    const std::string token(text_.substr(start, pos_ - start));
    errno = 0;
    const double v = std::strtod(token.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(v))
      fail("number " + token + " is out of range");
    return v;
  }

  static void append_utf8(std::string& out, unsigned code)
  {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  unsigned hex4()
  {
    if (pos_ + 4 > text_.size())
      fail("a \\u escape needs four hex digits");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9')
        code |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f')
        code |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        code |= static_cast<unsigned>(h - 'A' + 10);
      else
        fail("a \\u escape needs four hex digits");
    }
    return code;
  }

  std::string string()
  {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= text_.size())
        fail("unterminated string (truncated?)");
      const char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        fail("unterminated escape");
      switch (const char e = text_[pos_++]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        unsigned code = hex4();
        if (code >= 0xD800 && code < 0xDC00 && text_.substr(pos_, 2) == "\\u") {  // surrogate pair
          pos_ += 2;
          const unsigned low = hex4();
          if (low >= 0xDC00 && low < 0xE000)
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(out, code);
        break;
      }
      default: fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  std::string_view text_;
  const std::string& origin_;
  std::size_t pos_ = 0;
};

}  // namespace

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

JsonValue parse_json(std::string_view text, const std::string& origin) { return Parser(text, origin).document(); }

}  // namespace ddlsim::traces
