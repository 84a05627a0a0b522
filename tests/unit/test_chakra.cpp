// Chakra execution traces: the file layer (framing, attributes, errors naming file and node) and
// the import of a trace that ddlsim did not write (tests/support/ChakraForeign.hpp builds it with
// protobuf's generated classes): tasks, process groups, dependencies through CPU nodes, times.
#include "calibration/Profile.hpp"
#include "calibration/TableCostModel.hpp"
#include "common/Error.hpp"
#include "experiments/ChakraRankMap.hpp"
#include "experiments/ChakraSchema.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "support/ChakraForeign.hpp"
#include "traces/ChakraTrace.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::traces;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name)
{
  const fs::path dir = fs::temp_directory_path() / ("ddlsim_chakra_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string bytes_of(const fs::path& p)
{
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& bytes)
{
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string error_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const TraceError& e) {
    return e.what();
  }
  return "(no TraceError)";
}

}  // namespace

TEST_CASE("Chakra ET files: nodes, dependencies and every attribute type survive a write and a read")
{
  const fs::path dir = scratch("file");
  EtFile f;
  f.version = "0.0.4";
  f.attrs.push_back({"schema", std::string("test")});
  EtNode& a = f.nodes.emplace_back();
  a.id = 7;
  a.name = "F s0 mb0";
  a.type = EtNodeType::comp;
  a.duration_micros = 123;
  a.set("num_ops", std::uint64_t{1} << 50);
  a.set("ddlsim_duration_s", 1.2345678901234e-4);
  a.set("is_cpu_op", false);
  a.set("ddlsim_stage", std::int64_t{-1});
  a.set("pg_name", std::string("3"));
  a.set("involved_dim", std::vector<bool>{true, false, true});
  EtNode& b = f.nodes.emplace_back();
  b.id = 8;
  b.type = EtNodeType::coll;
  b.data_deps = {7};
  b.ctrl_deps = {7, 7};
  b.inputs_values = "[\"[]\"]";
  write_et_file((dir / "w.0.et").string(), f);

  const EtFile back = read_et_file((dir / "w.0.et").string());
  CHECK(back.version == "0.0.4");
  CHECK(back.text("schema") == "test");
  REQUIRE(back.nodes.size() == 2);
  const EtNode& x = back.nodes[0];
  CHECK(x.id == 7);
  CHECK(x.name == "F s0 mb0");
  CHECK(x.type == EtNodeType::comp);
  CHECK(x.duration_micros == 123);
  CHECK(std::get<std::uint64_t>(x.find("num_ops")->value) == std::uint64_t{1} << 50);
  CHECK(x.number("ddlsim_duration_s") == 1.2345678901234e-4);  // bit-exact: a double on the wire
  CHECK(x.number("is_cpu_op") == 0.0);
  CHECK(x.number("ddlsim_stage") == -1.0);
  CHECK(x.text("pg_name") == "3");
  CHECK(std::get<std::vector<bool>>(x.find("involved_dim")->value) == std::vector<bool>{true, false, true});
  CHECK(!x.number("absent"));
  CHECK(back.nodes[1].data_deps == std::vector<std::uint64_t>{7});
  CHECK(back.nodes[1].ctrl_deps == std::vector<std::uint64_t>{7, 7});
  CHECK(back.nodes[1].inputs_values == "[\"[]\"]");
  CHECK(back.nodes[1].type == EtNodeType::coll);
  fs::remove_all(dir);
}

TEST_CASE("malformed Chakra files give a TraceError naming the file and the message")
{
  const fs::path dir = scratch("bad");
  EtFile f;
  f.version = "0.0.4";
  for (std::uint64_t i = 0; i < 3; ++i) {
    EtNode& n = f.nodes.emplace_back();
    n.id = 100 + i;
    n.name = "node" + std::to_string(i);
    n.type = EtNodeType::comp;
  }
  const fs::path good = dir / "good.0.et";
  write_et_file(good.string(), f);
  const std::string bytes = bytes_of(good);

  const fs::path cut = dir / "cut.0.et";
  write_bytes(cut, bytes.substr(0, bytes.size() - 3));
  const std::string truncated = error_of([&] { read_et_file(cut.string()); });
  CHECK(truncated.find(cut.string()) != std::string::npos);
  CHECK(truncated.find("node 2") != std::string::npos);
  CHECK(truncated.find("runs past the end") != std::string::npos);

  const fs::path empty = dir / "empty.0.et";
  write_bytes(empty, "");
  CHECK(error_of([&] { read_et_file(empty.string()); }).find("empty file") != std::string::npos);

  // A length that fits but bytes that are no Node (field 1 as a length-delimited 200-byte blob).
  const fs::path junk = dir / "junk.0.et";
  std::string bad = bytes.substr(0, static_cast<std::size_t>(static_cast<unsigned char>(bytes[0])) + 1);
  bad += std::string("\x03\x0a\x7f\x01", 4);
  write_bytes(junk, bad);
  const std::string junk_error = error_of([&] { read_et_file(junk.string()); });
  CHECK(junk_error.find(junk.string()) != std::string::npos);
  CHECK(junk_error.find("node 0") != std::string::npos);

  CHECK(error_of([&] { read_et_file((dir / "absent.0.et").string()); }).find("absent.0.et") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a foreign Chakra trace imports: tasks, process group, send/receive pair, CPU nodes passed through")
{
  const fs::path dir = scratch("foreign");
  chakra_foreign::write_trace(dir, /*untimed=*/true);
  const auto w = experiments::ChakraWorkload::load(dir.string());
  CHECK(w->ranks() == 2);
  CHECK(!w->from_ddlsim());
  const auto profile = calibration::load_profile("h100-sxm");
  const auto cost = calibration::make_cost_model(profile);
  const auto built = w->build(*cost, Dtype::bf16);
  const sim::TaskGraph& g = built.graph;
  // rank 0: fwd, all-reduce, send; rank 1: fwd, bwd; the all-reduce and the transfer are shared.
  REQUIRE(g.size() == 5);
  int computes = 0, transfers = 0, collectives = 0;
  for (sim::TaskId id = 0; id < g.size(); ++id) {
    switch (g.kind(id)) {
    case sim::TaskKind::compute: ++computes; break;
    case sim::TaskKind::transfer: ++transfers; break;
    case sim::TaskKind::collective: ++collectives; break;
    }
  }
  CHECK(computes == 3);
  CHECK(transfers == 1);
  CHECK(collectives == 1);
  sim::TaskId ar = 0, tr = 0;
  for (sim::TaskId id = 0; id < g.size(); ++id) {
    if (g.kind(id) == sim::TaskKind::collective)
      ar = id;
    if (g.kind(id) == sim::TaskKind::transfer)
      tr = id;
  }
  CHECK(g.collective(ar).group == std::vector<int>{0, 1});
  CHECK(g.collective(ar).bytes == 1e8);
  CHECK(g.collective(ar).kind == sim::CollectiveKind::all_reduce);
  CHECK(g.transfer(tr).src == 0);
  CHECK(g.transfer(tr).dst == 1);
  CHECK(g.transfer(tr).bytes == 4e6);
  // The all-reduce waits for both forwards (rank 0's through its CPU node); the transfer for it.
  CHECK(g.dependency_count(ar) == 2);
  CHECK(g.dependency_count(tr) == 1);
  CHECK(std::vector<sim::TaskId>(g.successors(ar).begin(), g.successors(ar).end()) == std::vector<sim::TaskId>{tr});
  // Times: duration_micros, and the roofline for the node without one.
  const auto& s0 = g.stream(0);
  const auto& s1 = g.stream(1);
  REQUIRE(s0.size() == 1);
  REQUIRE(s1.size() == 2);
  CHECK(built.compute_seconds[s0[0]] == doctest::Approx(100e-6).epsilon(1e-12));
  CHECK(built.priced);
  CHECK(built.compute_seconds[s1[1]] ==
        cost->seconds({.flop = 1e12, .bytes = 1e9, .dtype = Dtype::bf16, .kind = calibration::WorkKind::unknown, .shape = {}}));
  CHECK(built.compute_seconds[s1[1]] > 0);
  CHECK(w->flop_per_sample(2) == doctest::Approx((2e9 + 1e12) / 2));
  fs::remove_all(dir);
}

TEST_CASE("foreign traces that do not add up are refused, naming the file and the node")
{
  const fs::path dir = scratch("broken");
  auto load_error = [&] { return error_of([&] { experiments::ChakraWorkload::load(dir.string()); }); };
  chakra_foreign::write_trace(dir);
  // A receive without its send: drop rank 0's send.
  {
    EtFile f = read_et_file((dir / "trace.0.et").string());
    f.nodes.pop_back();
    write_et_file((dir / "trace.0.et").string(), f);
    const std::string e = load_error();
    CHECK(e.find("trace.1.et: node id 2 ('recv')") != std::string::npos);
    CHECK(e.find("no matching COMM_SEND_NODE") != std::string::npos);
  }
  chakra_foreign::write_trace(dir);
  {  // a dependency on a node that is not there
    EtFile f = read_et_file((dir / "trace.1.et").string());
    f.nodes[3].data_deps = {42};
    write_et_file((dir / "trace.1.et").string(), f);
    const std::string e = load_error();
    CHECK(e.find("trace.1.et: node id 3 ('bwd')") != std::string::npos);
    CHECK(e.find("node id 42") != std::string::npos);
  }
  chakra_foreign::write_trace(dir);
  {  // a process group defined nowhere
    fs::remove(dir / "comm_groups.json");
    const std::string e = load_error();
    CHECK(e.find("node id 12 ('all_reduce')") != std::string::npos);
    CHECK(e.find("process group '7'") != std::string::npos);
  }
  chakra_foreign::write_trace(dir);
  {  // members disagree on the collective's size
    EtFile f = read_et_file((dir / "trace.1.et").string());
    for (auto& a : f.nodes[1].attrs)
      if (a.name == "comm_size")
        a.value = std::uint64_t{5};
    write_et_file((dir / "trace.1.et").string(), f);
    CHECK(load_error().find("differs in comm_type or comm_size") != std::string::npos);
  }
  chakra_foreign::write_trace(dir);
  {  // a missing rank
    fs::remove(dir / "trace.0.et");
    fs::rename(dir / "trace.1.et", dir / "trace.2.et");
    CHECK(load_error().find("rank 0's trace (trace.0.et) is missing") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("dependencies pass through a long chain of CPU nodes, and a cycle among them is refused")
{
  const fs::path dir = scratch("chain");
  constexpr std::uint64_t chain = 20000;  // PyTorch traces chain thousands of CPU operators
  EtFile f;
  f.version = "0.0.4";
  EtNode& first = f.nodes.emplace_back();
  first.id = 0;
  first.type = EtNodeType::comp;
  first.duration_micros = 10;
  for (std::uint64_t i = 1; i <= chain; ++i) {
    EtNode& cpu = f.nodes.emplace_back();
    cpu.id = i;
    cpu.type = EtNodeType::comp;
    cpu.set("is_cpu_op", true);
    cpu.ctrl_deps = {i - 1};
  }
  EtNode& coll = f.nodes.emplace_back();
  coll.id = chain + 1;
  coll.name = "all_reduce";
  coll.type = EtNodeType::coll;
  coll.set("comm_type", std::int64_t{0});
  coll.set("comm_size", std::int64_t{1000});
  coll.data_deps = {chain};
  write_et_file((dir / "c.0.et").string(), f);
  const auto cost = calibration::make_cost_model(calibration::load_profile("h100-sxm"));
  const auto built = experiments::ChakraWorkload::load(dir.string())->build(*cost, Dtype::bf16);
  REQUIRE(built.graph.size() == 2);  // the CPU nodes are no tasks
  CHECK(built.graph.kind(1) == sim::TaskKind::collective);
  CHECK(built.graph.dependency_count(1) == 1);
  CHECK(std::vector<sim::TaskId>(built.graph.successors(0).begin(), built.graph.successors(0).end()) == std::vector<sim::TaskId>{1});

  f.nodes[1].ctrl_deps = {2};  // CPU nodes 1 and 2 wait for each other
  write_et_file((dir / "c.0.et").string(), f);
  const std::string e = error_of([&] { experiments::ChakraWorkload::load(dir.string()); });
  CHECK(e.find("c.0.et: node id ") != std::string::npos);
  CHECK(e.find("form a cycle") != std::string::npos);
  fs::remove_all(dir);
}

namespace {

// Rank `rank` of a two-rank data-parallel pair: a forward, a send to the other rank, an all-reduce
// over group "1" and the metadata ddlsim writes; task numbers and the tag differ by rank.
EtFile pair_rank(int rank)
{
  EtFile f;
  f.version = "0.0.4";
  f.attrs.push_back({"ddlsim_rank", std::int64_t{rank}});
  EtNode& meta       = f.nodes.emplace_back();
  meta.type          = EtNodeType::metadata;
  meta.inputs_values = experiments::chakra_schema::process_groups_value(rank, {{0, 1}});
  EtNode& fwd        = f.nodes.emplace_back();
  fwd.id             = 1;
  fwd.type           = EtNodeType::comp;
  fwd.set("ddlsim_task", std::uint64_t(10 + rank));
  EtNode& send = f.nodes.emplace_back();
  send.id      = 2;
  send.type    = EtNodeType::send;
  send.set("comm_src", std::int64_t{rank});
  send.set("comm_dst", std::int64_t{1 - rank});
  send.set("comm_tag", std::int64_t{7 + rank});
  send.set("ddlsim_task", std::uint64_t{12});
  EtNode& coll = f.nodes.emplace_back();
  coll.id      = 3;
  coll.type    = EtNodeType::coll;
  coll.set("pg_name", std::string("1"));
  coll.set("ddlsim_task", std::uint64_t(20 + 3 * rank));
  return f;
}

} // namespace

TEST_CASE("a rank map's template, bound again, gives the rank's file byte for byte")
{
  namespace rm                               = experiments::rank_map;
  const std::vector<std::vector<int>> groups = {{0, 1}};
  rm::RankBinding b0, b1;
  const EtFile t0     = rm::make_template(pair_rank(0), 0, groups, b0);
  const EtFile t1     = rm::make_template(pair_rank(1), 1, groups, b1); // alike but for the rank's names
  CHECK(encode_et_file(t0) == encode_et_file(t1));
  CHECK(b0.groups == std::vector<std::string>{"1"});
  CHECK(b0.peers == std::vector<std::int64_t>{1});
  CHECK(b1.peers == std::vector<std::int64_t>{0});
  CHECK(b1.tasks == std::vector<std::uint64_t>{11, 12, 23});
  CHECK(b1.tags == std::vector<std::int64_t>{8});
  CHECK(t0.nodes[0].inputs_values == "@process_groups");
  for (int r : {0, 1}) {
    const rm::RankBinding& b = r == 0 ? b0 : b1;
    const EtFile back        = rm::bind_template(r == 0 ? t0 : t1, r, b, groups, "map");
    CHECK(encode_et_file(back) == encode_et_file(pair_rank(r)));
  }
  // A binding that does not fit its template is refused, naming where.
  rm::RankBinding short_tasks = b1;
  short_tasks.tasks.pop_back();
  CHECK_THROWS_WITH_AS(rm::bind_template(t1, 1, short_tasks, groups, "map.json: ranks[1]"),
                       doctest::Contains("map.json: ranks[1]: the template has more task numbers"), TraceError);
  rm::RankBinding no_peer = b1;
  no_peer.peers.clear();
  CHECK_THROWS_WITH_AS(rm::bind_template(t1, 1, no_peer, groups, "map.json: ranks[1]"),
                       doctest::Contains("peer slot 0 but the rank's binding has 0"), TraceError);
}
