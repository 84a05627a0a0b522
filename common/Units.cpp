#include "common/Units.hpp"

#include "common/Text.hpp"

#include <fmt/core.h>
#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>

namespace ddlsim {
namespace {

struct Prefix {
  std::string_view text;
  double factor;
};

// SI prefixes; binary prefixes only where a byte count is meant.
constexpr std::array decimal_prefixes{Prefix{"", 1.0},   Prefix{"k", 1e3},  Prefix{"K", 1e3},
                                      Prefix{"M", 1e6},  Prefix{"G", 1e9},  Prefix{"T", 1e12},
                                      Prefix{"P", 1e15}, Prefix{"E", 1e18}};
constexpr std::array binary_prefixes{Prefix{"Ki", 1024.0}, Prefix{"Mi", 1048576.0},
                                     Prefix{"Gi", 1073741824.0}, Prefix{"Ti", 1099511627776.0},
                                     Prefix{"Pi", 1125899906842624.0}};

std::string_view trim(std::string_view s)
{
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix)
{
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Factor of `prefix` among the decimal (and, if allowed, binary) prefixes; NaN when unknown.
double prefix_factor(std::string_view prefix, bool allow_binary)
{
  for (const auto& p : decimal_prefixes)
    if (p.text == prefix)
      return p.factor;
  if (allow_binary)
    for (const auto& p : binary_prefixes)
      if (p.text == prefix)
        return p.factor;
  return std::nan("");
}

// Factor for a unit written as <prefix><base>, trying each base in order. NaN when nothing matches.
double match_units(std::string_view unit, std::initializer_list<std::pair<std::string_view, double>> bases,
                   bool allow_binary)
{
  for (const auto& [base, base_factor] : bases) {
    if (!ends_with(unit, base))
      continue;
    double f = prefix_factor(unit.substr(0, unit.size() - base.size()), allow_binary);
    if (!std::isnan(f))
      return f * base_factor;
  }
  return std::nan("");
}

double unit_factor(std::string_view unit, Dimension dimension)
{
  switch (dimension) {
  case Dimension::count:
    return prefix_factor(unit, false);
  case Dimension::bytes:
    // "80G" is decimal, as "80GB" (GiB, MiB, ... are binary).
    return unit.empty() ? 1.0 : match_units(unit, {{"B", 1.0}, {"", 1.0}}, true);
  case Dimension::time: {
    constexpr std::array<std::pair<std::string_view, double>, 8> times{
        {{"", 1.0}, {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}, {"min", 60.0}, {"h", 3600.0}}};
    for (const auto& [text, factor] : times)
      if (text == unit)
        return factor;
    return std::nan("");
  }
  case Dimension::bandwidth:
    return unit.empty() ? 1.0
                        : match_units(unit, {{"Bps", 1.0}, {"B/s", 1.0}, {"bps", 0.125}, {"b/s", 0.125}}, true);
  case Dimension::flop:
    // Case-insensitive: "GFlop", "gflop" and "GFLOP" are all 1e9 (so "m" means mega here).
    return unit.empty() ? 1.0 : [&] {
      std::string u = lower(unit);
      if (!ends_with(u, "flop"))
        return std::nan("");
      std::string p = u.substr(0, u.size() - 4);
      return p.empty() ? 1.0 : prefix_factor(std::string(1, static_cast<char>(std::toupper(p[0]))) + p.substr(1), false);
    }();
  case Dimension::flop_rate:
    return unit.empty() ? 1.0 : [&] {
      std::string u = lower(unit);
      std::string p;
      if (ends_with(u, "flops"))
        p = u.substr(0, u.size() - 5);
      else if (ends_with(u, "flop/s"))
        p = u.substr(0, u.size() - 6);
      else
        return std::nan("");
      return p.empty() ? 1.0 : prefix_factor(std::string(1, static_cast<char>(std::toupper(p[0]))) + p.substr(1), false);
    }();
  }
  return std::nan("");
}

}  // namespace

std::string_view dimension_name(Dimension dimension)
{
  switch (dimension) {
  case Dimension::count: return "count";
  case Dimension::bytes: return "size in bytes";
  case Dimension::time: return "time";
  case Dimension::bandwidth: return "bandwidth";
  case Dimension::flop: return "amount of floating-point operations";
  case Dimension::flop_rate: return "compute rate";
  }
  return "quantity";
}

std::string_view dimension_units(Dimension dimension)
{
  switch (dimension) {
  case Dimension::count: return "a number, optionally with k, M, G or T";
  case Dimension::bytes: return "B, kB, MB, GB, TB (or k, M, G, T), KiB, MiB, GiB, TiB";
  case Dimension::time: return "s, ms, us, ns, ps";
  case Dimension::bandwidth: return "Bps, KBps, MBps, GBps, TBps, KiBps.. (bytes/s) or bps, Kbps, Mbps, Gbps, Tbps (bits/s)";
  case Dimension::flop: return "flop, kflop, Mflop, Gflop, Tflop, Pflop";
  case Dimension::flop_rate: return "flops, Gflops, TFlops, PFlops (or flop/s forms)";
  }
  return "";
}

double parse_quantity(std::string_view text, Dimension dimension)
{
  std::string_view s = trim(text);
  if (s.empty())
    throw UnitError("empty value; expected a " + std::string(dimension_name(dimension)));
  double number = 0;
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (*begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || ptr == begin)
    throw UnitError("'" + std::string(text) + "' is not a number with a unit (" +
                    std::string(dimension_units(dimension)) + ")");
  std::string_view unit = trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  double factor = unit_factor(unit, dimension);
  if (std::isnan(factor))
    throw UnitError("unknown unit '" + std::string(unit) + "' for a " + std::string(dimension_name(dimension)) +
                    " (accepted: " + std::string(dimension_units(dimension)) + ")");
  double value = number * factor;
  if (!std::isfinite(value))
    throw UnitError("'" + std::string(text) + "' is not a finite value");
  return value;
}

std::string_view unit_suffix(Dimension dimension)
{
  switch (dimension) {
  case Dimension::count: return "";
  case Dimension::bytes: return "B";
  case Dimension::time: return "s";
  case Dimension::bandwidth: return "Bps";
  case Dimension::flop: return "flop";
  case Dimension::flop_rate: return "flops";
  }
  return "";
}

bool needs_unit(Dimension dimension)
{
  return dimension == Dimension::bytes || dimension == Dimension::time || dimension == Dimension::bandwidth ||
         dimension == Dimension::flop_rate;
}

std::string unit_hint(std::string_view number, Dimension dimension)
{
  const std::string n(trim(number));
  switch (dimension) {
  case Dimension::bandwidth: return n + "Gbps (bits per second) or " + n + "GBps (bytes per second)";
  case Dimension::time: return n + "us or " + n + "ms";
  case Dimension::bytes: return n + "GiB or " + n + "MiB";
  case Dimension::flop_rate: return n + "TFlops";
  default: return n;
  }
}

std::optional<double> bare_number(std::string_view text)
{
  const std::string_view s = trim(text);
  double number = 0;
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (begin != end && *begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || ptr != end || ptr == begin)
    return std::nullopt;
  return number;
}

std::string format_quantity(double value, Dimension dimension)
{
  std::string_view unit;
  switch (dimension) {
  case Dimension::count: unit = ""; break;
  case Dimension::bytes: unit = "B"; break;
  case Dimension::time: unit = "s"; break;
  case Dimension::bandwidth: unit = "B/s"; break;
  case Dimension::flop: unit = "flop"; break;
  case Dimension::flop_rate: unit = "flop/s"; break;
  }
  if (dimension == Dimension::bytes) {  // sizes in binary units, as GPU memory is sold (80 GiB)
    constexpr std::array<std::pair<double, const char*>, 5> binary{
        {{1125899906842624.0, "PiB"}, {1099511627776.0, "TiB"}, {1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}}};
    for (const auto& [scale, name] : binary)
      if (std::fabs(value) >= scale) {
        return fmt::format("{:.2f} {}", value / scale, name);
      }
    return fmt::format("{:.4g} B", value);
  }
  if (dimension == Dimension::time) {
    constexpr std::array<std::pair<double, const char*>, 4> scales{{{1.0, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}}};
    for (const auto& [scale, name] : scales)
      if (std::fabs(value) >= scale || scale == 1e-9) {
        return fmt::format("{:.3g} {}", value / scale, name);
      }
  }
  constexpr std::array<std::pair<double, const char*>, 6> scales{
      {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}};
  for (const auto& [scale, name] : scales)
    if (std::fabs(value) >= scale) {
      return fmt::format("{:.2f} {}{}", value / scale, name, unit);
    }
  return fmt::format("{:.4g}{}{}", value, unit.empty() ? "" : " ", unit);
}

std::string format_count(double value)
{
  if (value == std::trunc(value) && std::fabs(value) < 9.0e15)
    return std::to_string(static_cast<long long>(value));
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace ddlsim
