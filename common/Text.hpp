// Small text helpers shared by the readers: ASCII lower case for case-insensitive names (units,
// "did you mean", dtypes and kernel names in traces), and numbers read whole (command lines of the
// standalone GPU tools, which include only the standard library and this folder's headers).
#pragma once

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace ddlsim {

/// `c` in ASCII lower case (other bytes as they are, whatever the C locale).
constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

/// `s` in ASCII lower case.
inline std::string lower(std::string_view s)
{
  std::string out(s);
  for (char& c : out)
    c = ascii_lower(c);
  return out;
}

/// `text` read by `parse` (std::stoi, std::stol, std::stod) when all of it is the number; nothing
/// otherwise (empty, not a number, out of range, or characters after it).
template <typename T, typename Parse> std::optional<T> whole_number(const std::string& text, Parse parse)
{
  std::size_t used = 0;
  T number{};
  try {
    number = parse(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size())
    return std::nullopt;
  return number;
}

}  // namespace ddlsim
