// Quantities with units, parsed at the edges of the program. Inside, everything is SI:
// seconds, bytes, flop, flop/s and bytes/s as plain doubles.
//
//   parse_quantity("25GBps", Dimension::bandwidth)  -> 25e9      (bytes per second)
//   parse_quantity("400Gbps", Dimension::bandwidth) -> 50e9      (bits are divided by 8)
//   parse_quantity("1.5us", Dimension::time)        -> 1.5e-6    (seconds)
//   parse_quantity("80GiB", Dimension::bytes)       -> 85899345920
//   parse_quantity("312TFlops", Dimension::flop_rate) -> 3.12e14
//   parse_quantity("80G", Dimension::bytes)         -> 8e10      (decimal, as "80GB")
//   parse_quantity("3", Dimension::time)            -> 3         (a bare number is already SI)
//
// Input files are stricter than parse_quantity (YamlMap::quantity): a size, time, bandwidth or
// compute rate must carry its unit, since "bandwidth: 400" (B/s) and "latency: 3" (s) are slips far
// more often than intent; needs_unit() says which, unit_hint() suggests what was probably meant.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddlsim {

enum class Dimension {
  count,      ///< dimensionless; accepts k, M, G, T suffixes ("1.5M")
  bytes,      ///< B, kB/KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB (powers of 1024)
  time,       ///< s, ms, us, ns, ps
  bandwidth,  ///< bytes/s: Bps, KBps, ..., "GB/s"; bits/s: bps, Kbps, Mbps, Gbps, Tbps
  flop,       ///< flop, kflop, Mflop, Gflop, Tflop, Pflop (case-insensitive "flop")
  flop_rate,  ///< flops, "flop/s", Gflops, TFlops, TFLOPS, "TFLOP/s", ...
};

/// Thrown by parse_quantity with a message that says which units are accepted.
class UnitError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// Human name of a dimension ("bandwidth") and the units it accepts, for error messages.
std::string_view dimension_name(Dimension dimension);
std::string_view dimension_units(Dimension dimension);

/// Parses a number with an optional unit into the SI value. Throws UnitError on malformed text, an
/// unknown unit, or a non-finite value. Whitespace between number and unit is allowed.
double parse_quantity(std::string_view text, Dimension dimension);

/// True for the dimensions whose values in input files must carry a unit (bytes, time, bandwidth,
/// flop rate); zero may stay bare.
bool needs_unit(Dimension dimension);
/// What a bare number probably meant, e.g. unit_hint("400", Dimension::bandwidth) == "400Gbps (bits
/// per second) or 400GBps (bytes per second)".
std::string unit_hint(std::string_view number, Dimension dimension);
/// The SI unit a value of `dimension` is written with so that it reads back exactly: "B", "s",
/// "Bps", "flop", "flops", or "" for a count.
std::string_view unit_suffix(Dimension dimension);
/// The value of a plain number with no unit ("400", "1e-6"), else nullopt.
std::optional<double> bare_number(std::string_view text);

/// Formats an SI value with a readable prefix: sizes in binary units (format_quantity(85899345920,
/// Dimension::bytes) == "80.00 GiB"), the rest in decimal ones ("1.50 GB/s", "312.00 Tflop/s").
std::string format_quantity(double value, Dimension dimension);

/// A count as text: whole numbers below 2^53 exactly ("108", "85899345920"), anything else (a
/// fraction, 1e300, nan) as %.17g. For numbers read from input, which may be any double: casting
/// those to an integer type would be undefined behaviour when out of range.
std::string format_count(double value);

}  // namespace ddlsim
