// Small text helpers shared by the readers: ASCII lower case for case-insensitive names (units,
// "did you mean", dtypes and kernel names in traces).
#pragma once

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

}  // namespace ddlsim
