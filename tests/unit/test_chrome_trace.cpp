#include "traces/ChromeTrace.hpp"
#include "traces/Json.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <tuple>

using namespace ddlsim::traces;

TEST_CASE("Chrome trace events use microseconds and escape names")
{
  ChromeTrace trace;
  trace.set_track_name(1, 0, "gpu1", "compute");
  trace.add({.name     = "F \"s0\"",
             .category = "forward",
             .pid      = 1,
             .tid      = 0,
             .start_s  = 0.5,
             .end_s    = 0.75,
             .args     = {{"bytes", 12.0}, {"kind", std::string("activation")}}});
  std::ostringstream out;
  trace.write(out);
  const std::string json = out.str();
  CHECK(json.find(R"("name":"F \"s0\"")") != std::string::npos);
  CHECK(json.find(R"("ts":500000,"dur":250000)") != std::string::npos);
  CHECK(json.find(R"("thread_name","pid":1,"tid":0,"args":{"name":"compute"})") != std::string::npos);
  CHECK(json.find(R"("args":{"bytes":12,"kind":"activation"})") != std::string::npos);
  CHECK(json_escape("a\tb\x01") == "a\\tb\\u0001");
}

TEST_CASE("Chrome trace numbers are JSON numbers")
{
  CHECK(json_number(12) == "12");
  CHECK(json_number(-0.0) == "0");
  CHECK(json_number(6738415616.0) == "6738415616");
  CHECK(json_number(0.1) == "0.1");
  CHECK(json_number(1.0 / 3) == "0.333333333333");
  CHECK(json_number(1e300) == "1e+300");
  CHECK(json_number(1.0 / 0.0) == "null");
}

TEST_CASE("Chrome trace times are whole nanoseconds: slices that touch still touch")
{
  // 0.1 + 0.2 != 0.3 in binary, yet the second slice must start where the first ends.
  ChromeTrace trace;
  trace.add(
      {.name = "a", .category = "", .pid = 0, .tid = 0, .start_s = 0.1e-6, .end_s = (0.1 + 0.2) * 1e-6, .args = {}});
  trace.add({.name = "b", .category = "", .pid = 0, .tid = 0, .start_s = 0.3e-6, .end_s = 1.2345678e-3, .args = {}});
  CHECK(ChromeTrace::nanoseconds(1.2345678e-3) == 1234568);
  std::ostringstream out;
  trace.write(out);
  const JsonValue root = parse_json(out.str(), "trace");
  const auto& events   = root.find("traceEvents")->as_array();
  REQUIRE(events.size() == 2);
  CHECK(*events[0].number("ts") == doctest::Approx(0.1));
  CHECK(*events[0].number("dur") == doctest::Approx(0.2));
  CHECK(*events[1].number("ts") == doctest::Approx(0.3));
  CHECK(*events[1].number("dur") == doctest::Approx(1234.268));
  CHECK(out.str().find(R"("ts":0.3,"dur":1234.268)") != std::string::npos);
}

TEST_CASE("Chrome trace flows and counters")
{
  ChromeTrace trace;
  for (const auto& [phase, pid, time_s] : {std::tuple{FlowPhase::start, 1, 1e-6}, std::tuple{FlowPhase::end, 2, 2e-6}})
    trace.add_flow(
        {.phase = phase, .id = 7, .pid = pid, .tid = 2, .time_s = time_s, .name = "transfer", .category = "transfer"});
  trace.add_counter({.pid = 1, .name = "memory", .time_s = 0, .values = {{"bytes", 2.5e9}}});
  std::ostringstream out;
  trace.write(out);
  const std::string json = out.str();
  CHECK(json.find(R"({"ph":"s","id":7,"name":"transfer","cat":"transfer","pid":1,"tid":2,"ts":1})") !=
        std::string::npos);
  CHECK(json.find(R"({"ph":"f","id":7,"name":"transfer","cat":"transfer","pid":2,"tid":2,"ts":2,"bp":"e"})") !=
        std::string::npos);
  CHECK(json.find(R"({"ph":"C","name":"memory","pid":1,"ts":0,"args":{"bytes":2500000000}})") != std::string::npos);
}
