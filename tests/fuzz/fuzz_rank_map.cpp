// Fuzz target: rank maps (experiments/ChakraRankMap.hpp, read through ChakraWorkload::load). The
// input is DIR/rank_map.json, a NUL byte, then DIR/rank_map.numbers; the template and the process
// groups beside them are fixed: one template of a two-rank exchange (a compute node, a send to and
// a receive from its peer, a collective over group "1"), which the seed binds to ranks 0 and 1.
#include "calibration/Profile.hpp"
#include "calibration/TableCostModel.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "tests/fuzz/FuzzInput.hpp"
#include "traces/ChakraTrace.hpp"

#include <cstring>
#include <filesystem>
#include <string>

namespace {

// The fixed template: names already slots (peer 0, group @0), task numbers and tags zero.
std::string exchange_template()
{
  using namespace ddlsim::traces;
  EtFile f;
  f.version = "0.0.4";
  f.attrs.push_back({"ddlsim_rank", std::int64_t{-1}});
  EtNode& meta       = f.nodes.emplace_back();
  meta.type          = EtNodeType::metadata;
  meta.inputs_values = "@process_groups";
  EtNode& comp       = f.nodes.emplace_back();
  comp.id            = 1;
  comp.type          = EtNodeType::comp;
  comp.set("ddlsim_duration_s", 1e-3);
  comp.set("ddlsim_task", std::uint64_t{0});
  for (const bool send : {true, false}) {
    EtNode& n = f.nodes.emplace_back();
    n.id      = send ? 2 : 3;
    n.type    = send ? EtNodeType::send : EtNodeType::recv;
    n.data_deps.push_back(1);
    n.set("comm_src", std::int64_t{send ? -1 : 0});
    n.set("comm_dst", std::int64_t{send ? 0 : -1});
    n.set("comm_tag", std::int64_t{0});
    n.set("comm_size", std::int64_t{1 << 20});
    n.set("ddlsim_task", std::uint64_t{0});
  }
  EtNode& coll = f.nodes.emplace_back();
  coll.id      = 4;
  coll.type    = EtNodeType::coll;
  coll.set("comm_type", std::int64_t{0});
  coll.set("comm_size", std::int64_t{1 << 20});
  coll.set("pg_name", std::string("@0"));
  coll.set("ddlsim_task", std::uint64_t{0});
  return encode_et_file(f);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  static const std::string tmpl = exchange_template();
  return fuzz::refusing_is_fine([&] {
    const auto* bytes = reinterpret_cast<const char*>(data);
    // The replay passes a null data pointer for an empty file: memchr must not see it.
    const auto* nul        = size > 0 ? static_cast<const char*>(std::memchr(bytes, 0, size)) : nullptr;
    const std::size_t json = nul ? static_cast<std::size_t>(nul - bytes) : size;
    const std::string path = fuzz::as_file(data, json, "rank_map.json");
    fuzz::as_file(nul ? data + json + 1 : data, nul ? size - json - 1 : 0, "rank_map.numbers");
    fuzz::as_file(reinterpret_cast<const std::uint8_t*>(tmpl.data()), tmpl.size(), "w.t0.et");
    const std::string groups = "{\"1\": [0, 1]}";
    fuzz::as_file(reinterpret_cast<const std::uint8_t*>(groups.data()), groups.size(), "comm_groups.json");
    const auto workload = experiments::ChakraWorkload::load(std::filesystem::path(path).parent_path().string());
    calibration::CalibrationProfile profile;
    workload->build(*calibration::make_cost_model(profile), Dtype::bf16);
  });
}
