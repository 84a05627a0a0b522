// The JSON reader and the Kineto importer on small fixtures, including corrupt and truncated input, and
// the synthetic trace the import benchmark makes.
#include "common/Error.hpp"
#include "traces/Json.hpp"
#include "traces/KinetoImporter.hpp"
#include "traces/NcclTestsImporter.hpp"
#include "traces/SyntheticKineto.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>
#include <zlib.h>

using namespace ddlsim;
using namespace ddlsim::traces;

namespace {
const std::string fixtures = DDLSIM_TEST_FIXTURES;

std::string temp_path(const std::string& name)
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_traces_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string gzip_file(const std::string& text, const std::string& name, std::size_t keep_bytes = std::string::npos)
{
  const std::string path = temp_path(name);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  if (keep_bytes != std::string::npos)
    std::filesystem::resize_file(path, keep_bytes);
  return path;
}

std::string read(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::string& text)
{
  try {
    parse_json(text, "t.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("JSON values, escapes and lookups")
{
  const JsonValue v = parse_json(R"( {"a": [1, -2.5e3, true, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00", "o": {"k": "v"}} )", "t");
  REQUIRE(v.is_object());
  CHECK(v.find("a")->as_array().size() == 4);
  CHECK(v.find("a")->as_array()[1].as_number() == -2500);
  CHECK(v.find("a")->as_array()[2].as_bool());
  CHECK(v.find("a")->as_array()[3].is_null());
  CHECK(*v.string("s") == "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(*v.find("o")->string("k") == "v");
  CHECK(v.find("missing") == nullptr);
  CHECK(v.number("s") == nullptr);
}

TEST_CASE("bad JSON is refused with the byte offset, never a crash")
{
  CHECK(error_of(R"({"a": [1, 2)") == "t.json: byte 11: expected ']', the text ends (truncated?)");
  CHECK(error_of(R"({"a": tru})") == "t.json: byte 6: unexpected character 't'");
  CHECK(error_of(R"({"a": 1e999})") == "t.json: byte 6: number 1e999 is out of range");
  CHECK(error_of(R"({"a": "\q"})") == "t.json: byte 7: invalid escape '\\q'");
  CHECK(error_of(R"({"a": 1} x)") == "t.json: byte 9: unexpected text after the JSON value");
  CHECK(error_of(std::string(600, '[') + std::string(600, ']')).find("nesting deeper than 512") != std::string::npos);
  CHECK(error_of("").find("the text ends") != std::string::npos);
  CHECK(error_of("{\"a\": \"x\ny\"}").find("control character") != std::string::npos);
  CHECK(error_of(R"({"a": 1}})") == "t.json: byte 8: unexpected text after the JSON value");
  CHECK(error_of(R"({"a" 1})").rfind("t.json: byte ", 0) == 0);
  CHECK(error_of(R"({"a": [1, 2}})") == "t.json: byte 11: unexpected character '}'");
  CHECK(error_of(R"({"a": 1}})") == "t.json: byte 8: unexpected text after the JSON value");
  CHECK(error_of(R"({"a" 1})").rfind("t.json: byte ", 0) == 0);
  CHECK(error_of(R"({"a": [1, 2}})") == "t.json: byte 11: unexpected character '}'");
}

TEST_CASE("Kineto import: kernels, NCCL sizes from kernel arguments and annotations, skipped events counted")
{
  const TraceSet set = import_kineto(fixtures + "/kineto_small.json");
  CHECK(set.provenance.at("device") == "Test GPU");
  CHECK(set.provenance.at("sm_count") == "132");
  CHECK(set.provenance.at("nccl_version") == "2.21.5");
  CHECK(set.provenance.at("world_size") == "4");
  REQUIRE(set.kernels.size() == 3);
  CHECK(set.kernels[0].name == "sm90_xmma_gemm_bf16");
  CHECK(set.kernels[0].duration_s == doctest::Approx(12.25e-6));
  CHECK(set.kernels[0].start_s == doctest::Approx(1000.5e-6));
  CHECK(set.kernels[0].grid == std::array<int, 3>{132, 1, 1});
  CHECK(set.kernels[0].stream == 7);
  REQUIRE(set.collectives.size() == 4);
  CHECK(set.collectives[0].collective == "all_reduce");
  CHECK(set.collectives[0].bytes == 1048576.0 * 2);  // BFloat16
  CHECK(set.collectives[0].group_size == 4);
  CHECK(set.collectives[0].source == "kernel");
  CHECK(set.collectives[1].collective == "send_recv");
  CHECK(set.collectives[1].bytes == 0);  // the kernel does not say
  CHECK(set.collectives[2].collective == "all_gather");
  CHECK(set.collectives[2].source == "annotation");
  CHECK(set.collectives[2].bytes == 1024.0 * 8 * 2);  // c10::Half: 2 bytes
  CHECK(set.skipped_total() == 2);
  CHECK(set.skipped.begin()->second == 2);

  // Gzip-compressed: the same; truncated: an error naming the file.
  const std::string text = read(fixtures + "/kineto_small.json");
  const std::string gz = gzip_file(text, "small.json.gz");
  CHECK(import_kineto(gz).kernels.size() == 3);
  const std::string cut = gzip_file(text, "cut.json.gz", 200);
  CHECK_THROWS_AS(import_kineto(cut), TraceError);
  // Not a trace, cut JSON, missing file.
  std::ofstream(temp_path("list.json")) << "[1, 2, 3]";
  CHECK_THROWS_WITH_AS(import_kineto(temp_path("list.json")),
                       doctest::Contains("not a Kineto/Chrome trace (no 'traceEvents' list)"), TraceError);
  std::ofstream(temp_path("cut.json")) << text.substr(0, text.size() / 2);
  CHECK_THROWS_WITH_AS(import_kineto(temp_path("cut.json")), doctest::Contains("truncated"), TraceError);
  CHECK_THROWS_WITH_AS(import_kineto(temp_path("absent.json")), doctest::Contains("cannot open"), TraceError);
}

TEST_CASE("collective names and element sizes")
{
  CHECK(collective_from_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") ==
        "all_reduce");
  CHECK(collective_from_name("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL") == "reduce_scatter");
  CHECK(collective_from_name("ncclKernel_Broadcast_RING_LL_Sum_int8_t") == "broadcast");
  CHECK(collective_from_name("nccl:_all_gather_base") == "all_gather");
  CHECK(collective_from_name("volta_sgemm_128x64_nn").empty());
  CHECK(element_bytes("Float") == 4);
  CHECK(element_bytes("BFloat16") == 2);
  CHECK(element_bytes("Long") == 8);
  CHECK(element_bytes("int8") == 1);
  CHECK(element_bytes("c10::BFloat16") == 2);
  CHECK(element_bytes("mystery") == 0);
}

TEST_CASE("nccl-tests text tables and -J JSON become collective records")
{
  const TraceSet text = import_nccl_tests(fixtures + "/nccl_tests_all_reduce.txt");
  REQUIRE(text.collectives.size() == 5);
  CHECK(text.collectives[0].collective == "all_reduce");
  CHECK(text.collectives[0].bytes == 1024);
  CHECK(text.collectives[0].dtype == "float");
  CHECK(text.collectives[0].group_size == 4);
  CHECK(text.collectives[0].nodes == 1);  // every rank on host node-a
  CHECK(text.collectives[3].duration_s == doctest::Approx(55.2e-6));
  CHECK(text.collectives[4].bytes == 16777216);
  CHECK(text.skipped_total() == 1);  // the garbage line
  CHECK(text.provenance.at("device") == "NVIDIA H100 80GB HBM3");

  const TraceSet json = import_nccl_tests(fixtures + "/nccl_tests_all_gather.json");
  REQUIRE(json.collectives.size() == 3);
  CHECK(json.collectives[0].collective == "all_gather");
  CHECK(json.collectives[2].bytes == 67108864);
  CHECK(json.collectives[2].duration_s == doctest::Approx(210e-6));
  CHECK(json.collectives[2].group_size == 2);
  CHECK(json.collectives[2].nodes == 1);
  CHECK(json.skipped_total() == 1);
  CHECK(json.provenance.at("device") == "NVIDIA H200");
  CHECK(json.provenance.at("nccl_version") == "22105");

  // Ranks on two hosts: a group that spans two nodes, and the JSON-lines round trip keeps it.
  {
    std::ifstream in(fixtures + "/nccl_tests_all_reduce.txt");
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* rank : {"#  Rank  2 Group  0 Pid  40003 on    node-a", "#  Rank  3 Group  0 Pid  40004 on    node-a"})
      log.replace(log.find(rank), std::string(rank).size(), std::string(rank).replace(std::string(rank).size() - 6, 6, "node-b"));
    std::ofstream(temp_path("two_nodes.txt")) << log;
    const TraceSet two = import_nccl_tests(temp_path("two_nodes.txt"));
    CHECK(two.collectives[0].group_size == 4);
    CHECK(two.collectives[0].nodes == 2);
    std::ofstream out(temp_path("two_nodes.jsonl"));
    write_jsonl(two, out);
    out.close();
    CHECK(read_jsonl(temp_path("two_nodes.jsonl")).collectives[0].nodes == 2);
  }

  // import_trace tells the three formats apart.
  CHECK(import_trace(fixtures + "/nccl_tests_all_reduce.txt").collectives.size() == 5);
  CHECK(import_trace(fixtures + "/nccl_tests_all_gather.json").collectives.size() == 3);
  CHECK(import_trace(fixtures + "/kineto_small.json").kernels.size() == 3);
  std::ofstream(temp_path("empty.txt")) << "# nothing here\n";
  CHECK_THROWS_WITH_AS(import_nccl_tests(temp_path("empty.txt")), doctest::Contains("no nccl-tests result rows"),
                       TraceError);
  std::ofstream(temp_path("other.json")) << "{\"a\": 1}";
  CHECK_THROWS_WITH_AS(import_trace(temp_path("other.json")), doctest::Contains("neither a Kineto trace"), TraceError);
}

TEST_CASE("a record of several kernels keeps its busy time and kernel count through JSONL; bad ones are refused")
{
  TraceSet set;
  KernelRecord k;
  k.name       = "nchwToNhwc+conv+nhwcToNchw";
  k.duration_s = 15.7e-6;
  k.busy_s     = 11.25e-6;
  k.kernels    = 3;
  k.op         = "conv2d";
  set.kernels.push_back(k);
  KernelRecord one;  // one kernel: no busy time written, none read back
  one.name       = "gemm";
  one.duration_s = 3e-6;
  set.kernels.push_back(one);
  {
    std::ofstream out(temp_path("busy.jsonl"));
    write_jsonl(set, out);
  }
  const TraceSet back = read_jsonl(temp_path("busy.jsonl"));
  REQUIRE(back.kernels.size() == 2);
  CHECK(back.kernels[0].busy_s == k.busy_s);
  CHECK(back.kernels[0].kernels == 3);
  CHECK(back.kernels[1].busy_s == 0);
  CHECK(back.kernels[1].kernels == 0);
  CHECK(read(temp_path("busy.jsonl")).find("\"busy_s\"") == read(temp_path("busy.jsonl")).rfind("\"busy_s\""));
  std::ofstream(temp_path("busy_bad.jsonl")) << "{\"type\":\"kernel\",\"name\":\"k\",\"duration_s\":1e-6,\"busy_s\":2e-6,"
                                                "\"kernels\":2}\n";
  CHECK_THROWS_WITH_AS(read_jsonl(temp_path("busy_bad.jsonl")), doctest::Contains("busy_s"), TraceError);
}

TEST_CASE("every truncation of a trace is refused cleanly, and so are flipped bytes")
{
  const std::string text = read(fixtures + "/kineto_small.json");
  int refused = 0;
  for (std::size_t n = 0; n < text.size(); ++n) {
    try {
      parse_json(text.substr(0, n), "cut.json");
    } catch (const TraceError&) {
      ++refused;
    }
  }
  // Every prefix that stops before the final closing brace is refused; the ones that include it parse.
  CHECK(refused == static_cast<int>(text.rfind('}')) + 1);
  // Replace each byte in turn with characters that break JSON: parse or refuse, never crash.
  for (std::size_t i = 0; i < text.size(); i += 3)
    for (char c : {'"', '{', ']', '\\', '\0', 'e'}) {
      std::string broken = text;
      broken[i] = c;
      try {
        const JsonValue v = parse_json(broken, "flip.json");
        (void)v.find("traceEvents");
      } catch (const TraceError&) {
      }
    }
}

TEST_CASE("a synthetic Kineto trace has the size asked for, imports fully and is the same every time")
{
  for (const bool gzip : {false, true}) {
    CAPTURE(gzip);
    const std::string path     = temp_path(gzip ? "synthetic.json.gz" : "synthetic.json");
    const SyntheticKineto made = write_synthetic_kineto(path, 2'000'000, gzip);
    CHECK(made.json_bytes >= 2'000'000);
    CHECK(made.json_bytes < 2'010'000);
    CHECK(made.file_bytes == std::filesystem::file_size(path));
    CHECK((gzip ? made.file_bytes < made.json_bytes / 4 : made.file_bytes == made.json_bytes));
    const TraceSet set = import_trace(path);
    CHECK(set.kernels.size() == made.kernels);
    CHECK(set.collectives.size() == made.collectives);
    CHECK(set.skipped_total() == 0);
    CHECK(made.kernels > 500);
    CHECK(made.collectives > 20);
    CHECK(made.events > 4 * made.kernels);
    CHECK(set.provenance.at("device") == "NVIDIA H100 80GB HBM3");
    for (const auto& c : set.collectives)
      CHECK((c.bytes > 0 && c.group_size != 0) == (c.source == "kernel")); // annotations carry no group size
  }
  const std::string a = temp_path("a.json"), b = temp_path("b.json");
  write_synthetic_kineto(a, 300'000, false);
  write_synthetic_kineto(b, 300'000, false);
  CHECK(read(a) == read(b));
}
