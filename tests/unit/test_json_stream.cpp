// The streamed JSON path (parse_json_streaming) against the whole-tree path (parse_json): the same
// elements, errors at the file's own byte offsets. The Kineto importer's own reader
// (read_kineto_events, no tree per event) against both: the same events member by member, the same
// errors, the same import, on synthetic traces and on the real ones in ../shared when present.
#include "common/Error.hpp"
#include "traces/Gzip.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoEvent.hpp"
#include "traces/KinetoImporter.hpp"
#include "traces/SyntheticKineto.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// Every member of an event as text, to compare the two readers ("-" for absent).
std::string dump(const KinetoMember& m)
{
  std::ostringstream o;
  o.precision(17);
  o << static_cast<int>(m.type);
  if (m.type == KinetoMember::Type::number)
    o << ":" << m.number;
  if (m.type == KinetoMember::Type::string)
    o << ":\"" << m.text << "\"";
  return o.str();
}

std::string dump(const KinetoEvent& e)
{
  std::ostringstream o;
  o.precision(17);
  for (const KinetoMember* m : {&e.cat, &e.name, &e.ts, &e.dur, &e.pid, &e.tid, &e.args, &e.correlation, &e.external_id,
                                &e.device, &e.stream, &e.collective_name, &e.dtype, &e.group_size, &e.in_msg_nelems})
    o << dump(*m) << " ";
  for (const auto& dims : {e.grid, e.block})
    o << dims[0] << "," << dims[1] << "," << dims[2] << " ";
  o << e.input_dims_listed << " " << e.input_elements.ok << ":" << e.input_elements.elements << " "
    << (e.input_type ? "\"" + std::string(*e.input_type) + "\"" : "-") << " args ";
  // args whole, as a tree either way
  if (e.args_tree != nullptr)
    o << dump(*e.args_tree);
  else if (e.args.type != KinetoMember::Type::absent)
    o << dump(parse_json(e.args_json, "args"));
  return o.str();
}

bool kept_category(std::string_view cat) { return cat != "ac2g" && cat != "skipped"; }

// The events of a trace's text by each reader: read_kineto_events, and kineto_event() over
// parse_json_streaming's trees (the same filter).
std::pair<std::vector<std::string>, std::vector<std::string>> both_readers(const std::string& text)
{
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  std::string a = text, b = text;
  read_kineto_events(a, "t.json", kept_category, [&](const KinetoEvent& e) { out.first.push_back(dump(e)); });
  const JsonFilter filter{.key = "cat", .keep = kept_category};
  parse_json_streaming(
      b, "t.json", "traceEvents",
      [&](JsonValue&& e) {
        if (e.is_object())
          out.second.push_back(dump(kineto_event(e)));
      },
      &filter);
  return out;
}

// The error of each reader on `text` ("(no error)" when it reads).
std::pair<std::string, std::string> both_errors(const std::string& text)
{
  std::pair<std::string, std::string> out{"(no error)", "(no error)"};
  std::string a = text, b = text;
  try {
    read_kineto_events(a, "t.json", kept_category, [](const KinetoEvent&) {});
  } catch (const TraceError& e) {
    out.first = e.what();
  }
  const JsonFilter filter{.key = "cat", .keep = kept_category};
  try {
    parse_json_streaming(b, "t.json", "traceEvents", [](JsonValue&&) {}, &filter);
  } catch (const TraceError& e) {
    out.second = e.what();
  }
  return out;
}

// The real PyTorch profiler traces (../shared/data/traces/kineto, or DDLSIM_KINETO_DIR): none
// in a user's clone.
std::vector<std::string> real_traces()
{
  const char* env = std::getenv("DDLSIM_KINETO_DIR");
  const std::filesystem::path dir = env && *env ? std::filesystem::path(env)
                                                : std::filesystem::path(DDLSIM_TEST_FIXTURES) / "../../../shared/data/traces/kineto";
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().string().find(".json") != std::string::npos)
      out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
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

TEST_CASE("streamed elements across the 64-byte blocks of the structure scan: escapes, brackets and commas in strings")
{
  // Strings of every length to past two blocks, ending in escaped quotes and backslashes, and
  // holding brackets and commas, so that every block boundary falls on each kind of byte.
  std::string text = R"({"ev": [)";
  for (int n = 0; n < 140; ++n) {
    const std::string filler(static_cast<std::size_t>(n), n % 3 == 0 ? 'a' : n % 3 == 1 ? ',' : ']');
    text += R"({"s": ")" + filler + (n % 2 ? R"(\")" : R"(\\)") + R"(", "n": [)" + std::to_string(n) + "]},";
  }
  text += R"(0], "after": "[,]"})";
  const JsonValue whole = parse_json(text, "t");
  std::vector<std::string> streamed;
  std::string copy = text;
  const JsonValue root = parse_json_streaming(copy, "t", "ev", [&](const JsonValue& e) { streamed.push_back(dump(e)); });
  const auto& expected = whole.find("ev")->as_array();
  REQUIRE(streamed.size() == 141);
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(streamed[i] == dump(expected[i]));
  CHECK(*root.string("after") == "[,]");
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

TEST_CASE("streamed structure errors past the first 64-byte blocks name the same bytes")
{
  // The wrong bracket, the missing one and the open string at every offset across two blocks,
  // after strings with and without escapes, so that both the block path and the byte path find them.
  for (std::size_t pad = 0; pad < 140; ++pad) {
    CAPTURE(pad);
    for (const std::string& filler : {std::string(pad, 'a'), std::string(pad, ',') + "\\\"", std::string(pad, '[')}) {
      const std::string head = R"({"ev": [{"s": ")" + filler + R"("}, [1, {"k": 2)";
      CHECK(stream_error(head + "]]}") ==
            "s.json: byte " + std::to_string(head.size()) + ": unexpected character ']'");
      CHECK(stream_error(head + "}") ==
            "s.json: byte " + std::to_string(head.size() + 1) + ": expected ']', the text ends (truncated?)");
      CHECK(stream_error(head + R"(, "x)") ==
            "s.json: byte " + std::to_string(head.size() + 4) + ": the text ends inside a string (truncated?)");
    }
  }
}

TEST_CASE("streamed elements in several windows: the same elements, and one over a window is an error at its byte")
{
  // Elements of 1 MB and a few small ones between them: windows end at different separators.
  std::string text = R"({"ev": [)";
  std::vector<std::string> expected;
  for (int n = 0; n < 11; ++n) {
    const std::string element = n % 3 == 2 ? std::to_string(n) : R"({"s": ")" + std::string(1'000'000, 'a' + n) + R"("})";
    text += element + (n % 2 ? " , " : ",");
    expected.push_back(dump(parse_json(element, "e")));
  }
  text.back() = ']';
  text += "}";
  std::vector<std::string> streamed;
  parse_json_streaming(text, "t", "ev", [&](const JsonValue& e) { streamed.push_back(dump(e)); });
  CHECK(streamed == expected);

  const std::string head = R"({"ev": [1, {"s": "x"},  )";
  const std::string big = head + R"({"s": ")" + std::string(5'000'000, 'b') + R"("}, 2]})";
  CHECK(stream_error(big) == "s.json: byte " + std::to_string(head.size()) + ": an element of 'ev' over 4 MB");
}

TEST_CASE("a trace file's text, mapped or read, is its bytes")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_text_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string plain = (dir / "t.json").string(), gz = (dir / "t.json.gz").string(),
                    empty = (dir / "e.json").string(), one = (dir / "1.json").string();
  write_synthetic_kineto(plain, 100'000, false);
  write_synthetic_kineto(gz, 100'000, true);
  std::ofstream(empty).flush();
  std::ofstream(one) << "7";
  for (const auto& path : {plain, gz, empty, one}) {
    CAPTURE(path);
    CHECK(TraceText(path).view() == read_maybe_gzip(path));
  }
  CHECK(TraceText(gz).view() == read_maybe_gzip(plain));
  CHECK_THROWS_AS(TraceText((dir / "missing.json").string()), TraceError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a gzip trailer's size is a hint no larger than deflate can expand the file to")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_hint_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string plain = (dir / "t.json").string(), gz = (dir / "t.json.gz").string(),
                    crafted = (dir / "c.json.gz").string();
  write_synthetic_kineto(plain, 200'000, false);
  write_synthetic_kineto(gz, 200'000, true);
  CHECK(uncompressed_size_hint(plain) == std::filesystem::file_size(plain));
  CHECK(uncompressed_size_hint(gz) == std::filesystem::file_size(plain));  // the trailer's ISIZE, exact
  // 20 bytes found by fuzz_chakra (tests/fuzz/regressions/chakra): a gzip header, a few deflate
  // bytes, and a trailer whose ISIZE claims 4,244,663,041 bytes (the fuzzer's 4 GB allocation).
  const unsigned char bytes[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x23, 0x20, 0x60, 0x00,
                                 0x00, 0x5d, 0x00, 0x08, 0x00, 0x00, 0x00, 0x6b, 0x00, 0xfd};
  std::ofstream(crafted, std::ios::binary).write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  CHECK(uncompressed_size_hint(crafted) == sizeof bytes * 1032);
  CHECK_THROWS_AS(read_maybe_gzip(crafted), TraceError);
  CHECK(uncompressed_size_hint((dir / "missing.json.gz").string()) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Kineto import streams its events to the same records as the whole-tree import")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_stream_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths = {std::string(DDLSIM_TEST_FIXTURES) + "/kineto_small.json"};
  for (const bool gzip : {false, true}) {
    const auto path = (dir / (gzip ? "s.json.gz" : "s.json")).string();
    write_synthetic_kineto(path, gzip ? 3'000'000 : 9'000'000, gzip);  // thousands of events; plain: three windows
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

TEST_CASE("Kineto events read without trees equal the tree's, member by member")
{
  // Repeated keys (the first wins), args of every type, grid and block entries that are not
  // numbers, Input Dims and Input type in every shape, escapes, deep values, and elements that are
  // not objects or are filtered out.
  const std::string text = R"({"traceEvents": [
    {"cat": "kernel", "name": "k\u00e9\"q", "ts": 1.5, "dur": 2, "pid": 3, "tid": "x", "args": {"device": 1,
     "stream": -7, "grid": [1, "2", 3.5, 4], "block": [5], "correlation": 9, "External id": 11, "deep": [[[{"a": [1]}]]]},
     "cat": "ignored", "args": {"device": 99}},
    {"name": 5, "cat": "kernel", "ts": "1", "dur": null, "args": [1, 2]},
    {"cat": "kernel", "name": "ncclDevKernel_AllGather", "ts": 0, "dur": 0, "args": {"Collective name": "_allgather_base",
     "dtype": "Float", "Group size": 8.5, "In msg nelems": 1e300, "grid": {"x": 1}, "block": [true, null, 1e9, 7],
     "grid": [1, 1, 1]}},
    {"cat": "user_annotation", "name": "nccl:all_reduce", "ts": 1, "dur": 1, "args": {"Input Dims": [[2, 3, 4], [9]],
     "Input type": ["float", "int"]}},
    {"cat": "user_annotation", "name": "nccl:all_reduce", "ts": 1, "dur": 1, "args": {"Input Dims": [[2, -3]],
     "Input type": [7]}},
    {"cat": "user_annotation", "name": "nccl:x", "ts": 1, "dur": 1, "args": {"Input Dims": [[1e200, 1e200]],
     "Input type": "float", "Input Dims": [[1]]}},
    {"cat": "user_annotation", "name": "nccl:x", "ts": 1, "dur": 1, "args": {"Input Dims": [3, [1]], "Input type": []}},
    {"cat": "user_annotation", "name": "nccl:x", "ts": 1, "dur": 1, "args": {"Input Dims": [], "Input type": [[]]}},
    {"cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "args"  :  {"Input Dims": [[4, 8], [8, 16]]}  ,
     "pid": 1},
    {"cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "args": "flat"},
    {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "args": {"correlation": 5, "correlation": 6}},
    {"cat": "ac2g", "name": "flow", "args": {"x": 1}},
    {"cat": 7, "name": "no category"},
    {}, [1, {"a": 2}], "text", 12, null, true,
    {"args": {"Input Dims": [[1, 2]]}, "cat": "user_annotation", "name": "nccl:all_gather", "ts": 1, "dur": 1}
  ], "after": 1})";
  const auto [fast, tree] = both_readers(text);
  REQUIRE(fast.size() == 14);  // the objects the filter keeps, and only them
  REQUIRE(tree.size() == fast.size());
  for (std::size_t i = 0; i < fast.size(); ++i) {
    CAPTURE(i);
    CHECK(fast[i] == tree[i]);
  }
  // A few members checked against the text by hand, so that the comparison cannot pass by both
  // readers dropping everything.
  CHECK(fast[0].rfind("4:\"kernel\" 4:\"k\xc3\xa9\"q\" 3:1.5 3:2 3:3 4:\"x\" 6 3:9 3:11 3:1 3:-7 ", 0) == 0);
  CHECK(fast[0].find(" 1,-1,3.5 5,-1,-1 ") != std::string::npos);
  CHECK(fast[3].find(" 1 1:24 \"float\" ") != std::string::npos);
}

TEST_CASE("Kineto events read without trees: the same errors at the same bytes as the tree reader")
{
  const std::string good = R"({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"grid": [1, 2, 3],)"
                           R"( "x": [true, false, null, "s\n"]}}, {"cat": "ac2g", "x": [1, 2]}, [3], "s", 4], "y": {}})";
  REQUIRE(both_errors(good).first == "(no error)");
  std::size_t errors = 0;
  // Every byte replaced by characters that break JSON in different ways, and every truncation.
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (const char c : std::string_view("x}]\"1,:\\ -e")) {
      std::string bad = good;
      bad[i] = c;
      const auto [fast, tree] = both_errors(bad);
      CAPTURE(bad);
      CHECK(fast == tree);
      errors += fast != "(no error)";
    }
    const auto [fast, tree] = both_errors(good.substr(0, i));
    CHECK(fast == tree);
  }
  CHECK(errors > good.size());  // most changes break it
  CHECK(both_errors(R"({"traceEvents": [{"cat": "kernel", "args": {"a": [1e999]}}]})").first ==
        "t.json: byte 50: number 1e999 is out of range");
}

TEST_CASE("Kineto import without trees equals the tree import on the real traces")
{
  const auto paths = real_traces();
  if (paths.empty()) {
    MESSAGE("no real Kineto traces (../shared/data/traces/kineto): skipped");
    return;
  }
  for (const auto& path : paths) {
    CAPTURE(path);
    const std::string text = read_maybe_gzip(path);
    const auto [fast, tree] = both_readers(text);
    CHECK(fast.size() > 100);
    CHECK(fast == tree);
    const TraceSet streamed = import_kineto(path);
    const TraceSet whole = import_kineto(parse_json(text, path), path);
    CHECK(!streamed.kernels.empty());
    CHECK(jsonl(streamed) == jsonl(whole));
    CHECK(streamed.skipped == whole.skipped);
  }
}
