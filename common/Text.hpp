// Small text helpers shared by the readers: ASCII lower case for case-insensitive names (units,
// "did you mean", dtypes and kernel names in traces).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace ddlsim {

/// `s` in ASCII lower case.
inline std::string lower(std::string_view s)
{
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace ddlsim
