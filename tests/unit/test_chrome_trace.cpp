#include "traces/ChromeTrace.hpp"

#include <doctest/doctest.h>

#include <sstream>

using namespace ddlsim::traces;

TEST_CASE("Chrome trace events use microseconds and escape names")
{
  ChromeTrace trace;
  trace.set_track_name(1, 0, "gpu1", "compute");
  trace.add({.name = "F \"s0\"", .category = "forward", .pid = 1, .tid = 0, .start_s = 0.5, .duration_s = 0.25,
             .args = {{"bytes", "12"}}});
  std::ostringstream out;
  trace.write(out);
  const std::string json = out.str();
  CHECK(json.find(R"("name":"F \"s0\"")") != std::string::npos);
  CHECK(json.find(R"("ts":500000.000000,"dur":250000.000000)") != std::string::npos);
  CHECK(json.find(R"("thread_name","pid":1,"tid":0,"args":{"name":"compute"})") != std::string::npos);
  CHECK(json.find(R"("args":{"bytes":"12"})") != std::string::npos);
  CHECK(json_escape("a\tb\x01") == "a\\tb\\u0001");
}
