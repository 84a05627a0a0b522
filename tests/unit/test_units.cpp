#include "common/Suggest.hpp"
#include "common/Text.hpp"
#include "common/Units.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;

TEST_CASE("quantities with units become SI values")
{
  CHECK(parse_quantity("25GBps", Dimension::bandwidth) == doctest::Approx(25e9));
  CHECK(parse_quantity("400Gbps", Dimension::bandwidth) == doctest::Approx(50e9));
  CHECK(parse_quantity("1 GB/s", Dimension::bandwidth) == doctest::Approx(1e9));
  CHECK(parse_quantity("1KiBps", Dimension::bandwidth) == doctest::Approx(1024));
  CHECK(parse_quantity("1.5us", Dimension::time) == doctest::Approx(1.5e-6));
  CHECK(parse_quantity("3", Dimension::time) == doctest::Approx(3.0));
  CHECK(parse_quantity("2ms", Dimension::time) == doctest::Approx(2e-3));
  CHECK(parse_quantity("80GiB", Dimension::bytes) == doctest::Approx(85899345920.0));
  CHECK(parse_quantity("80GB", Dimension::bytes) == doctest::Approx(80e9));
  CHECK(parse_quantity("312TFlops", Dimension::flop_rate) == doctest::Approx(3.12e14));
  CHECK(parse_quantity("312 TFLOP/s", Dimension::flop_rate) == doctest::Approx(3.12e14));
  CHECK(parse_quantity("2GFlop", Dimension::flop) == doctest::Approx(2e9));
  CHECK(parse_quantity("1.5M", Dimension::count) == doctest::Approx(1.5e6));
  CHECK(parse_quantity("1e3", Dimension::count) == doctest::Approx(1000));
}

TEST_CASE("malformed quantities are refused with the accepted units")
{
  CHECK_THROWS_AS(parse_quantity("", Dimension::time), UnitError);
  CHECK_THROWS_AS(parse_quantity("fast", Dimension::bandwidth), UnitError);
  CHECK_THROWS_AS(parse_quantity("3 parsecs", Dimension::time), UnitError);
  CHECK_THROWS_AS(parse_quantity("25GB", Dimension::bandwidth), UnitError);  // a size, not a rate
  CHECK_THROWS_AS(parse_quantity("1e400", Dimension::count), UnitError);
  try {
    parse_quantity("25Gbit", Dimension::bandwidth);
    FAIL("no exception");
  } catch (const UnitError& e) {
    CHECK(std::string(e.what()).find("Gbps") != std::string::npos);
  }
}

TEST_CASE("formatting picks a readable prefix")
{
  CHECK(format_quantity(1.5e9, Dimension::bytes) == "1.40 GiB");  // sizes in binary units
  CHECK(format_quantity(80.0 * (1 << 30), Dimension::bytes) == "80.00 GiB");
  CHECK(format_quantity(2e-6, Dimension::time) == "2 us");
  CHECK(format_quantity(12, Dimension::count) == "12");
}

TEST_CASE("did you mean: the closest valid name within a third of its length")
{
  CHECK(edit_distance("pipline", "pipeline") == 1);
  CHECK(edit_distance("shedule", "schedule") == 1);
  CHECK(edit_distance("tpp", "tp") == 1);
  CHECK(edit_distance("ab", "ba") == 1);  // neighbours swapped
  CHECK(edit_distance("LLAMA3-8B", "llama3-8b") == 0);
  CHECK(did_you_mean("ppp", {"dp", "pp", "tp"}) == " (did you mean 'pp'?)");
  CHECK(did_you_mean("optimiser", {"global_batch", "micro_batch", "optimizer"}) == " (did you mean 'optimizer'?)");
  CHECK(did_you_mean("llama3-8B", {"llama2-7b", "llama3-8b"}) == " (did you mean 'llama3-8b'?)");
  CHECK(did_you_mean("llama3", {"gpt2-xl", "llama3-70b"}) == " (did you mean 'llama3-70b'?)");  // a prefix
  CHECK(did_you_mean("bandwidth", {"nodes", "gpus_per_node"}).empty());  // nothing close: no guess
  CHECK(did_you_mean("pp", {"pp"}).empty());
  CHECK_FALSE(closest_name("x", {}).has_value());
}

TEST_CASE("sizes: 80G and 80GB are decimal, 80GiB binary; input files need a unit for sizes, times and rates")
{
  CHECK(parse_quantity("80G", Dimension::bytes) == 80e9);
  CHECK(parse_quantity("80GB", Dimension::bytes) == 80e9);
  CHECK(parse_quantity("80GiB", Dimension::bytes) == 80.0 * (1ULL << 30));
  CHECK(needs_unit(Dimension::bandwidth));
  CHECK(needs_unit(Dimension::time));
  CHECK(needs_unit(Dimension::bytes));
  CHECK(needs_unit(Dimension::flop_rate));
  CHECK_FALSE(needs_unit(Dimension::count));
  CHECK(bare_number("400") == 400.0);
  CHECK(bare_number(" 1e-6 ") == 1e-6);
  CHECK_FALSE(bare_number("400Gbps").has_value());
  CHECK(unit_hint("400", Dimension::bandwidth) == "400Gbps (bits per second) or 400GBps (bytes per second)");
  // What a writer emits with unit_suffix reads back to the same value.
  for (Dimension d : {Dimension::bytes, Dimension::time, Dimension::bandwidth, Dimension::flop, Dimension::flop_rate})
    CHECK(parse_quantity("1.25e+13" + std::string(unit_suffix(d)), d) == 1.25e13);
}

TEST_CASE("whole_number: the number only when all of the text is one (the GPU tools' command lines)")
{
  auto as_int = [](const std::string& t) {
    return whole_number<int>(t, [](const std::string& x, std::size_t* used) { return std::stoi(x, used); });
  };
  auto as_double = [](const std::string& t) {
    return whole_number<double>(t, [](const std::string& x, std::size_t* used) { return std::stod(x, used); });
  };
  CHECK(as_int("8") == 8);
  CHECK(as_int("-3") == -3);
  CHECK_FALSE(as_int("").has_value());
  CHECK_FALSE(as_int("8x").has_value());      // characters after the number
  CHECK_FALSE(as_int("x8").has_value());      // not a number
  CHECK_FALSE(as_int("99999999999").has_value());  // out of range for int
  CHECK(as_double("2.5") == 2.5);
  CHECK_FALSE(as_double("2.5s").has_value());
}
