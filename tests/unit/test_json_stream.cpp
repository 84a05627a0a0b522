// The streamed JSON path (parse_json_streaming, which the Kineto importer reads big traces with)
// against the whole-tree path (parse_json): the same elements, the same import, errors at the
// file's own byte offsets.
#include "common/Error.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoImporter.hpp"
#include "traces/SyntheticKineto.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::traces;

namespace {

// A value as canonical text, to compare trees.
std::string dump(const JsonValue& v)
{
  if (v.is_null())
    return "null";
  if (v.is_bool())
    return v.as_bool() ? "true" : "false";
  if (v.is_number()) {
    std::ostringstream o;
    o.precision(17);
    o << v.as_number();
    return o.str();
  }
  if (v.is_string())
    return "\"" + v.as_string() + "\"";
  std::string out = v.is_array() ? "[" : "{";
  if (v.is_array())
    for (const auto& e : v.as_array())
      out += dump(e) + ",";
  else
    for (const auto& [k, e] : v.as_object())
      out += k + ":" + dump(e) + ",";
  return out + (v.is_array() ? "]" : "}");
}

std::string jsonl(const TraceSet& set)
{
  std::ostringstream out;
  write_jsonl(set, out);
  return out.str();
}

std::string stream_error(std::string text)
{
  try {
    parse_json_streaming(text, "s.json", "ev", [](const JsonValue&) {});
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("streamed array elements equal the whole tree's, brackets and commas inside strings included")
{
  const std::string text =
      R"({"a": {"ev": [9]}, "ev": [ {"s": "x,]}[{", "n": [1, [2, 3], {"k": ","}]}, 4, "q\"]", [], {} ,null],)"
      R"( "z": [1, 2], "u": "\u00e9"})";
  const JsonValue whole = parse_json(text, "t");
  std::vector<std::string> streamed;
  std::string copy = text;
  const JsonValue root = parse_json_streaming(copy, "t", "ev", [&](const JsonValue& e) { streamed.push_back(dump(e)); });
  const auto& expected = whole.find("ev")->as_array();
  REQUIRE(streamed.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(streamed[i] == dump(expected[i]));
  CHECK(root.find("ev")->as_array().empty());
  CHECK(dump(*root.find("a")) == dump(*whole.find("a")));  // a nested "ev" is not the member
  CHECK(dump(*root.find("z")) == "[1,2,]");
  CHECK(*root.string("u") == "\xc3\xa9");
  // A document without the member, or not an object: the whole tree.
  std::string other = R"([1, 2])";
  CHECK(dump(parse_json_streaming(other, "t", "ev", [](const JsonValue&) { FAIL("no element expected"); })) == "[1,2,]");
}

TEST_CASE("streamed errors name the byte of the whole file")
{
  CHECK(stream_error(R"({"ev": [1, 2)") == "s.json: byte 12: expected ']', the text ends (truncated?)");
  CHECK(stream_error(R"({"ev": [1, {"a": tru}]})") == "s.json: byte 17: unexpected character 't'");
  CHECK(stream_error(R"({"ev": [1, 2], "x": tru})") == "s.json: byte 20: unexpected character 't'");
  CHECK(stream_error(R"({"ev": [1, 2], "x": "abc)").find("the text ends inside a string") != std::string::npos);
  CHECK(stream_error(R"({"ev": [1, 1e999]})") == "s.json: byte 11: number 1e999 is out of range");
  CHECK(stream_error("# a README, not JSON\n") == "s.json:1: byte 0: unexpected character '#'");
}

TEST_CASE("Kineto import streams its events to the same records as the whole-tree import")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_stream_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths = {std::string(DDLSIM_TEST_FIXTURES) + "/kineto_small.json"};
  for (const bool gzip : {false, true}) {
    const auto path = (dir / (gzip ? "s.json.gz" : "s.json")).string();
    write_synthetic_kineto(path, 3'000'000, gzip);  // a few windows of 4 MB? no: one, but thousands of events
    paths.push_back(path);
  }
  for (const auto& path : paths) {
    CAPTURE(path);
    const TraceSet streamed = import_kineto(path);
    const TraceSet whole = import_kineto(parse_json(read_maybe_gzip(path), path), path);
    CHECK(!streamed.kernels.empty());
    CHECK(jsonl(streamed) == jsonl(whole));
    CHECK(streamed.skipped == whole.skipped);
  }
  std::filesystem::remove_all(dir);
}
