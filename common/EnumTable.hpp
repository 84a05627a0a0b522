// One table per enum gives its YAML spelling, its help text and its parser, so that the names
// users type, the names the CSV prints and the names `--help` lists can never drift apart.
//
//   constexpr EnumTable<Dtype, 4> dtype_table{{{{"fp32", Dtype::fp32, "IEEE single"}, ...}}};
//   Dtype d = *dtype_table.parse("bf16");  dtype_table.name(d) == "bf16";  dtype_table.names() == "fp32, ..."
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddlsim {

template <typename E> struct EnumEntry {
  std::string_view name;
  E value;
  std::string_view help;
};

template <typename E, std::size_t N> struct EnumTable {
  std::array<EnumEntry<E>, N> entries;

  std::optional<E> parse(std::string_view text) const
  {
    for (const auto& e : entries)
      if (e.name == text)
        return e.value;
    return std::nullopt;
  }
  std::string_view name(E value) const
  {
    for (const auto& e : entries)
      if (e.value == value)
        return e.name;
    return "?";
  }
  /// "a, b, c": the accepted spellings, for error messages and help.
  std::string names() const
  {
    std::string out;
    for (const auto& e : entries) {
      if (!out.empty())
        out += ", ";
      out += e.name;
    }
    return out;
  }
};

}  // namespace ddlsim
