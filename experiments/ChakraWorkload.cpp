#include "experiments/ChakraWorkload.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "experiments/Evaluate.hpp"
#include "sim/OpCosts.hpp"
#include "traces/Json.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

namespace ddlsim::experiments {

namespace fs = std::filesystem;
using traces::EtAttr;
using traces::EtCommType;
using traces::EtFile;
using traces::EtNode;
using traces::EtNodeType;

namespace {

constexpr const char* column_prefix = "ddlsim_column.";

EtCommType comm_type_of(sim::CollectiveKind kind)
{
  switch (kind) {
  case sim::CollectiveKind::all_reduce: return EtCommType::all_reduce;
  case sim::CollectiveKind::all_gather: return EtCommType::all_gather;
  case sim::CollectiveKind::reduce_scatter: return EtCommType::reduce_scatter;
  case sim::CollectiveKind::broadcast: return EtCommType::broadcast;
  case sim::CollectiveKind::all_to_all: return EtCommType::all_to_all;
  }
  return EtCommType::all_reduce;
}

std::optional<sim::CollectiveKind> collective_of(double comm_type)
{
  switch (static_cast<int>(comm_type)) {
  case static_cast<int>(EtCommType::all_reduce): return sim::CollectiveKind::all_reduce;
  case static_cast<int>(EtCommType::all_gather): return sim::CollectiveKind::all_gather;
  case static_cast<int>(EtCommType::reduce_scatter): return sim::CollectiveKind::reduce_scatter;
  case static_cast<int>(EtCommType::broadcast): return sim::CollectiveKind::broadcast;
  case static_cast<int>(EtCommType::all_to_all): return sim::CollectiveKind::all_to_all;
  default: return std::nullopt;
  }
}

std::string ranks_json(const std::vector<int>& ranks)
{
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::int64_t to_int(double v) { return static_cast<std::int64_t>(v); }
std::uint64_t to_count(double v) { return v > 0 ? static_cast<std::uint64_t>(std::llround(v)) : 0; }

// Flop and bytes a compute task moves: its kernels' work, as the cost model priced them.
struct Work {
  double flop = 0;
  double bytes = 0;
};

class ExportWriter {
public:
  ExportWriter(const PointConfig& point, const PointWorkload& w) : point_(point), w_(w)
  {
    const sim::TaskGraph& g = w.graph;
    // Predecessors of every task, in the order the graph lists its edges; each compute task's place
    // on its GPU's stream.
    preds_.resize(g.size());
    for (sim::TaskId id = 0; id < g.size(); ++id)
      for (sim::TaskId s : g.successors(id))
        preds_[s].push_back(id);
    stream_pos_.assign(g.size(), 0);
    for (int d = 0; d < g.device_count(); ++d) {
      const auto& stream = g.stream(d);
      for (std::size_t i = 0; i < stream.size(); ++i)
        stream_pos_[stream[i]] = static_cast<std::uint32_t>(i + 1);
    }
  }

  /// Writes the files rank by rank: only one rank's nodes are held at a time. `on_rank(done, ranks)`
  /// sees each file written.
  ChakraExport write(const std::string& dir, const std::function<void(int, int)>& on_rank)
  {
    const sim::TaskGraph& g = w_.graph;
    const int ranks         = g.device_count();
    // Process groups: each distinct member list, numbered from 1 (0 and "" mean every rank in ASTRA-sim).
    for (sim::TaskId id = 0; id < g.size(); ++id)
      if (g.kind(id) == sim::TaskKind::collective)
        groups_.emplace(g.collective(id).group, 0);
    int next_group = 1;
    for (auto& [members, number] : groups_) {
      number = next_group++;
      group_list_.push_back(members);
    }
    // Each rank's tasks in graph order (a task's node id there is its place + 1: node 0 is the
    // metadata, and a task may wait for one created after it), and each transfer's tag.
    std::vector<std::vector<sim::TaskId>> tasks_of(static_cast<std::size_t>(ranks));
    std::uint64_t transfers = 0;
    for (sim::TaskId id = 0; id < g.size(); ++id) {
      for (int r : ranks_of(id))  // once per rank (a transfer within one GPU names it twice)
        if (auto& mine = tasks_of[static_cast<std::size_t>(r)]; mine.empty() || mine.back() != id)
          mine.push_back(id);
      if (g.kind(id) == sim::TaskKind::transfer)
        tags_.emplace(id, transfers++);
    }
    ChakraExport result;
    fs::create_directories(dir);
    ids_.assign(g.size(), no_node);
    for (int r = 0; r < ranks; ++r) {
      std::vector<sim::TaskId>& mine = tasks_of[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < mine.size(); ++i)
        ids_[mine[i]] = i + 1;
      const EtFile f         = rank_file(r, ranks, mine);
      const std::string path = (fs::path(dir) / (point_.experiment + "." + std::to_string(r) + ".et")).string();
      traces::write_et_file(path, f);
      result.files.push_back(path);
      result.nodes += f.nodes.size();
      for (sim::TaskId id : mine)
        ids_[id] = no_node;
      std::vector<sim::TaskId>().swap(mine);
      if (on_rank)
        on_rank(r + 1, ranks);
    }
    // ASTRA-sim's --comm-group-configuration: {"1": [0, 2], ...}
    std::string json = "{";
    for (std::size_t i = 0; i < group_list_.size(); ++i)
      json += std::string(i ? ",\n " : "") + "\"" + std::to_string(i + 1) + "\": " + ranks_json(group_list_[i]);
    json += "}\n";
    result.comm_groups = (fs::path(dir) / "comm_groups.json").string();
    write_file_atomically(result.comm_groups, "process groups", [&](std::ostream& o) { o << json; });
    return result;
  }

private:
  static constexpr std::uint64_t no_node = ~std::uint64_t{0};

  // Rank `rank`'s file: its metadata, its process groups (node 0), then a node per task of `mine`.
  EtFile rank_file(int rank, int ranks, const std::vector<sim::TaskId>& mine)
  {
    EtFile f;
    f.version = chakra_schema_version;
    metadata(f, rank, ranks);
    // Node 0: the rank's process groups, as PyTorch's trace writes them (ASTRA-sim's
    // issue_pytorch_pg_metadata strips the two outer characters on each side, then parses JSON).
    EtNode& pg = f.nodes.emplace_back();
    pg.id      = 0;
    pg.name    = "process_groups";
    pg.type    = EtNodeType::metadata;
    std::string list;
    for (std::size_t i = 0; i < group_list_.size(); ++i)
      if (std::find(group_list_[i].begin(), group_list_[i].end(), rank) != group_list_[i].end())
        list += std::string(list.empty() ? "" : ", ") + "{\"pg_name\": \"" + std::to_string(i + 1) +
                "\", \"ranks\": " + ranks_json(group_list_[i]) + "}";
    pg.inputs_values = "[\"[" + list + "]\"]";
    f.nodes.reserve(mine.size() + 1);
    std::uint64_t last_compute = no_node;
    for (sim::TaskId id : mine)
      add_node(f, rank, id, last_compute);
    return f;
  }

  // The node of task `id` on `rank` (a transfer between a rank and itself: its send and its receive).
  void add_node(EtFile& f, int rank, sim::TaskId id, std::uint64_t& last_compute)
  {
    const sim::TaskGraph& g = w_.graph;
    switch (g.kind(id)) {
    case sim::TaskKind::compute: {
      const sim::ComputeTask& c = g.compute(id);
      if (!c.on_stream)
        throw Error("task " + g.label(id) +
                    " runs off the GPU stream (a parameter server's queue): Chakra cannot "
                    "express it");
      EtNode& n            = add(f, rank, id, sim::TaskKind::compute);
      n.name               = g.label(id);
      n.type               = EtNodeType::comp;
      const double seconds = w_.compute_seconds[id];
      n.duration_micros    = to_count(seconds * 1e6);
      const Work work      = work_of(c);
      n.set("num_ops", to_count(work.flop));
      n.set("tensor_size", to_count(work.bytes));
      n.set("is_cpu_op", false);
      n.set("ddlsim_duration_s", seconds);
      n.set("ddlsim_phase", std::string(sim::phase_table.name(c.phase)));
      n.set("ddlsim_stage", std::int64_t{c.stage});
      n.set("ddlsim_micro_batch", std::int64_t{c.micro_batch});
      n.set("ddlsim_samples", std::int64_t{c.samples});
      n.set("ddlsim_layer_begin", std::int64_t{c.layer_begin});
      n.set("ddlsim_layer_end", std::int64_t{c.layer_end});
      n.set("ddlsim_share", c.share);
      if (c.part != sim::ComputePart::whole)
        n.set("ddlsim_part", std::string(sim::compute_part_table.name(c.part)));
      if (last_compute != no_node)
        n.ctrl_deps.push_back(last_compute);
      last_compute = n.id;
      return;
    }
    case sim::TaskKind::transfer: {
      const sim::TransferTask& t = g.transfer(id);
      for (const bool sender : {true, false}) {
        if ((sender ? t.src : t.dst) != rank)
          continue;
        EtNode& n = add(f, rank, id, sim::TaskKind::transfer);
        n.name    = g.label(id);
        n.type    = sender ? EtNodeType::send : EtNodeType::recv;
        n.set("comm_src", std::int64_t{t.src});
        n.set("comm_dst", std::int64_t{t.dst});
        n.set("comm_tag", static_cast<std::int64_t>(tags_.at(id)));
        n.set("comm_size", static_cast<std::int64_t>(to_count(t.bytes)));
        n.set("is_cpu_op", false);
        n.set("ddlsim_bytes", t.bytes);
        n.set("ddlsim_phase", std::string(sim::phase_table.name(t.phase)));
        n.set("ddlsim_stage", std::int64_t{t.stage});
        n.set("ddlsim_micro_batch", std::int64_t{t.micro_batch});
        n.set("ddlsim_transfer_kind", static_cast<std::int64_t>(t.kind));
        n.set("ddlsim_server", std::int64_t{t.server});
      }
      return;
    }
    case sim::TaskKind::collective: {
      const sim::CollectiveTask& c = g.collective(id);
      EtNode& n                    = add(f, rank, id, sim::TaskKind::collective);
      n.name                       = g.label(id);
      n.type                       = EtNodeType::coll;
      n.set("comm_type", static_cast<std::int64_t>(comm_type_of(c.kind)));
      n.set("comm_size", static_cast<std::int64_t>(to_count(c.bytes)));
      n.set("pg_name", std::to_string(groups_.at(c.group)));
      n.set("is_cpu_op", false);
      n.set("ddlsim_bytes", c.bytes);
      n.set("ddlsim_algorithm", std::string(sim::collective_algorithm_table.name(c.algorithm)));
      n.set("ddlsim_fidelity", std::string(sim::collective_fidelity_table.name(c.fidelity)));
      n.set("ddlsim_role", static_cast<std::int64_t>(c.role));
      n.set("ddlsim_phase", std::string(sim::phase_table.name(c.phase)));
      n.set("ddlsim_stage", std::int64_t{c.stage});
      n.set("ddlsim_micro_batch", std::int64_t{c.micro_batch});
      if (c.kind == sim::CollectiveKind::broadcast) // the rank whose buffer every member ends with
        n.set("root", std::int64_t{c.group.front()});
      if (!c.member_load.empty()) { // an expert all-to-all's uneven loads (Chakra has one comm_size)
        std::string loads;
        for (double l : c.member_load)
          loads += (loads.empty() ? "" : ",") + fmt::format("{:.17g}", l);
        n.set("ddlsim_member_load", loads);
        n.set("ddlsim_load_at_source", c.load_at_source);
      }
      return;
    }
    }
  }

  // A new node of task `id` on `rank`, with data_deps on the nodes of its predecessors there.
  EtNode& add(EtFile& f, int rank, sim::TaskId id, sim::TaskKind kind)
  {
    EtNode& n = f.nodes.emplace_back();
    n.id                    = ids_[id];
    const sim::TaskGraph& g = w_.graph;
    for (sim::TaskId p : preds_[id]) {
      const std::uint64_t there = ids_[p];
      const bool stream = kind == sim::TaskKind::compute && g.kind(p) == sim::TaskKind::compute &&
                          g.compute(p).device == rank && is_previous_on_stream(p, id);
      if (there != no_node && !stream)
        n.data_deps.push_back(there);
      else if (there == no_node && !shares_rank(p, id))
        throw Error("task '" + g.label(id) + "' waits for '" + g.label(p) +
                    "' and the two share no GPU: Chakra's dependencies stay within a rank");
    }
    n.set("ddlsim_task", static_cast<std::uint64_t>(id));
    return n;
  }

  // Whether compute task p runs just before id on id's GPU stream.
  bool is_previous_on_stream(sim::TaskId p, sim::TaskId id) const
  {
    return stream_pos_[p] != 0 && stream_pos_[id] == stream_pos_[p] + 1 &&
           w_.graph.compute(p).device == w_.graph.compute(id).device;
  }
  std::vector<int> ranks_of(sim::TaskId id) const
  {
    const sim::TaskGraph& g = w_.graph;
    switch (g.kind(id)) {
    case sim::TaskKind::compute: return {g.compute(id).device};
    case sim::TaskKind::transfer: return {g.transfer(id).src, g.transfer(id).dst};
    case sim::TaskKind::collective: return g.collective(id).group;
    }
    return {};
  }

  bool shares_rank(sim::TaskId a, sim::TaskId b) const
  {
    const std::vector<int> ra = ranks_of(a), rb = ranks_of(b);
    return std::any_of(ra.begin(), ra.end(), [&](int r) { return std::find(rb.begin(), rb.end(), r) != rb.end(); });
  }

  Work work_of(const sim::ComputeTask& c)
  {
    const auto key =
        std::make_tuple(c.layer_begin, c.layer_end, static_cast<int>(c.phase), c.samples, static_cast<int>(c.part));
    auto [it, fresh] = work_cache_.try_emplace(key);
    if (fresh) {
      sim::ComputeOptions options = compute_options(point_);
      for (const sim::KernelLaunch& l :
           sim::range_launches(point_.model, c.layer_begin, c.layer_end, c.phase, c.samples, options)) {
        if (!sim::in_part(l, c.part))
          continue;
        it->second.flop += l.work.flop;
        it->second.bytes += l.work.bytes;
      }
    }
    return {it->second.flop * c.share, it->second.bytes * c.share};
  }

  void metadata(EtFile& f, int rank, int ranks) const
  {
    f.attrs.push_back({"schema", std::string("ddlsim-chakra.") + chakra_schema_version});
    f.attrs.push_back({"ddlsim_rank", std::int64_t{rank}});
    f.attrs.push_back({"ddlsim_ranks", std::int64_t{ranks}});
    const WorkloadFlop flop = workload_flop(point_);
    f.attrs.push_back({"ddlsim_flop_per_sample", flop.per_sample});
    f.attrs.push_back({"ddlsim_model_flop_per_sample", flop.model_per_sample});
    f.attrs.push_back({"ddlsim_tokens_per_sample", flop.tokens});
    const auto& names = csv_columns();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (!w_.row.cells()[i].empty())
        f.attrs.push_back({column_prefix + names[i], w_.row.cells()[i]});
  }

  const PointConfig& point_;
  const PointWorkload& w_;
  std::vector<std::uint64_t> ids_; // the node id of each task on the rank being written, or no_node
  std::vector<std::vector<sim::TaskId>> preds_;
  std::vector<std::uint32_t> stream_pos_;  // a compute task's place on its stream + 1 (0: none)
  std::map<std::vector<int>, int> groups_; // process groups, numbered from 1
  std::vector<std::vector<int>> group_list_;
  std::unordered_map<sim::TaskId, std::uint64_t> tags_; // each transfer's comm_tag
  std::map<std::tuple<std::uint32_t, std::uint32_t, int, int, int>, Work> work_cache_;
};

}  // namespace

ChakraExport write_chakra(const PointConfig& point, const std::string& dir,
                          const std::function<void(int, int)>& on_rank)
{
  if (point.chakra)
    throw Error("point " + std::to_string(point.index) + " is already a Chakra workload (" + point.chakra->get_dir() +
                "): copy its files instead");
  if (point.parallelism.ps)
    throw Error("point " + std::to_string(point.index) + " uses parameter servers, which apply pushes in arrival "
                "order: Chakra's dependencies cannot express it");
  PointConfig per_rank = point;
  per_rank.parallelism.tp_aggregate = false;  // one file per GPU: tensor-parallel groups stay rank by rank
  std::optional<ChakraExport> written;
  std::string failure;
  EvaluateOptions options;
  options.on_workload = [&](const PointWorkload& w) {
    try {
      written = ExportWriter(per_rank, w).write(dir, on_rank);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  };
  const ResultRow row = evaluate_point(per_rank, options);
  if (!failure.empty())
    throw Error(failure);
  if (!written)
    throw Error("point " + std::to_string(point.index) + " of " + point.experiment + " cannot be exported: " +
                row.get("status") + ": " + row.get("message"));
  return *written;
}

// ---------------------------------------------------------------------------------------------
// Import

struct ChakraWorkload::Task {
  sim::TaskKind kind = sim::TaskKind::compute;
  std::vector<std::pair<int, std::size_t>> nodes;  // (rank, index in its file)
  std::vector<std::size_t> preds;                  // positions in tasks_, without the stream's own edge
  std::vector<int> group;                          // a collective's members, in ring order
};

namespace {

// "DIR/<prefix>.<rank>.et" -> (prefix, rank)
std::optional<std::pair<std::string, int>> trace_name(const fs::path& p)
{
  static const std::regex pattern(R"((.+)\.([0-9]+)\.et)");
  std::smatch m;
  const std::string name = p.filename().string();
  if (!std::regex_match(name, m, pattern) || m[2].str().size() > 7)
    return std::nullopt;
  return std::make_pair(m[1].str(), std::stoi(m[2].str()));
}

std::string node_ref(const std::string& path, const EtNode& n)
{
  return path + ": node id " + std::to_string(n.id) + (n.name.empty() ? "" : " ('" + n.name + "')");
}

}  // namespace

std::shared_ptr<const ChakraWorkload> ChakraWorkload::load(const std::string& dir)
{
  auto w = std::make_shared<ChakraWorkload>();
  w->dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw TraceError(dir + ": not a folder of Chakra execution traces (<prefix>.<rank>.et)");
  std::map<int, fs::path> by_rank;
  std::set<std::string> prefixes;
  for (const auto& entry : fs::directory_iterator(dir))
    if (auto name = trace_name(entry.path())) {
      prefixes.insert(name->first);
      by_rank[name->second] = entry.path();
    }
  if (by_rank.empty())
    throw TraceError(dir + ": holds no Chakra execution trace (<prefix>.<rank>.et)");
  if (prefixes.size() > 1) {
    std::string list;
    for (const auto& p : prefixes)
      list += (list.empty() ? "" : ", ") + p;
    throw TraceError(dir + ": holds the traces of several workloads (" + list + "): keep one per folder");
  }
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r)
    if (!by_rank.count(r))
      throw TraceError(dir + ": rank " + std::to_string(r) + "'s trace (" + *prefixes.begin() + "." +
                       std::to_string(r) + ".et) is missing: ranks must be 0.." + std::to_string(by_rank.size() - 1));
  for (const auto& [rank, path] : by_rank) {
    w->paths_.push_back(path.string());
    w->files_.push_back(traces::read_et_file(path.string()));
  }
  for (const EtAttr& a : w->files_.front().attrs) {
    if (a.name.rfind(column_prefix, 0) == 0 && std::holds_alternative<std::string>(a.value))
      w->columns_[a.name.substr(std::string(column_prefix).size())] = std::get<std::string>(a.value);
    else if (a.name.rfind("ddlsim_", 0) == 0 && std::holds_alternative<double>(a.value))
      w->numbers_[a.name] = std::get<double>(a.value);
  }
  w->match();
  return w;
}

void ChakraWorkload::match()
{
  const int n_ranks = ranks();
  // Process groups: the metadata nodes' lists (PyTorch's form) and comm_groups.json (ASTRA-sim's).
  std::map<std::string, std::vector<int>> groups;
  auto define = [&](const std::string& name, std::vector<int> ranks, const std::string& where) {
    for (int r : ranks)
      if (r < 0 || r >= n_ranks)
        throw TraceError(where + ": process group " + name + " names rank " + std::to_string(r) + " of " +
                         std::to_string(n_ranks));
    auto [it, fresh] = groups.emplace(name, ranks);
    if (!fresh && it->second != ranks)
      throw TraceError(where + ": process group " + name + " is " + ranks_json(ranks) + " here but " +
                       ranks_json(it->second) + " elsewhere");
  };
  auto read_groups = [&](const traces::JsonValue& list, const std::string& where) {
    if (!list.is_array())
      throw TraceError(where + ": process groups: expected a list of {pg_name, ranks}");
    for (const traces::JsonValue& g : list.as_array()) {
      const std::string* name = g.string("pg_name");
      const traces::JsonValue* ranks = g.find("ranks");
      if (name == nullptr || ranks == nullptr || !ranks->is_array())
        throw TraceError(where + ": process groups: each needs pg_name (text) and ranks (a list)");
      std::vector<int> members;
      for (const traces::JsonValue& r : ranks->as_array())
        if (r.is_number())
          members.push_back(static_cast<int>(r.as_number()));
      if (members.empty())  // PyTorch: the default group, every rank
        for (int r = 0; r < n_ranks; ++r)
          members.push_back(r);
      define(*name, members, where);
    }
  };
  for (std::size_t r = 0; r < files_.size(); ++r)
    for (const EtNode& n : files_[r].nodes)
      if (n.type == EtNodeType::metadata && n.inputs_values.size() > 4)
        read_groups(traces::parse_json(std::string_view(n.inputs_values).substr(2, n.inputs_values.size() - 4),
                                       node_ref(paths_[r], n)),
                    node_ref(paths_[r], n));
  if (const fs::path json = fs::path(dir_) / "comm_groups.json"; fs::exists(json)) {
    std::ifstream in(json);
    std::stringstream text;
    text << in.rdbuf();
    const traces::JsonValue root = traces::parse_json(text.str(), json.string());
    if (!root.is_object())
      throw TraceError(json.string() + ": expected {\"<pg_name>\": [ranks], ...}");
    for (const auto& [name, ranks] : root.as_object()) {
      std::vector<int> members;
      if (ranks.is_array())
        for (const traces::JsonValue& r : ranks.as_array())
          if (r.is_number())
            members.push_back(static_cast<int>(r.as_number()));
      define(name, members, json.string());
    }
  }
  std::vector<int> everyone;
  for (int r = 0; r < n_ranks; ++r)
    everyone.push_back(r);

  // Per rank: node id -> index; the task of each node (npos: takes no time, passes its dependencies on).
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::vector<std::map<std::uint64_t, std::size_t>> index(files_.size());
  std::vector<std::vector<std::size_t>> task_of(files_.size());
  std::vector<Task> found;
  using P2pKey = std::tuple<int, int, std::int64_t>;  // src, dst, tag
  std::map<P2pKey, std::vector<std::pair<int, std::size_t>>> sends, recvs;
  std::map<std::string, std::vector<std::vector<std::size_t>>> colls;  // pg -> per rank, node indices
  for (std::size_t r = 0; r < files_.size(); ++r) {
    const auto& nodes = files_[r].nodes;
    task_of[r].assign(nodes.size(), none);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const EtNode& n = nodes[i];
      if (!index[r].emplace(n.id, i).second)
        throw TraceError(node_ref(paths_[r], n) + ": a second node with this id");
      const int rank = static_cast<int>(r);
      switch (n.type) {
      case EtNodeType::invalid:
      case EtNodeType::metadata: break;
      case EtNodeType::comp:
        if (n.number("is_cpu_op").value_or(0) != 0)
          break;
        task_of[r][i] = found.size();
        found.push_back({.kind = sim::TaskKind::compute, .nodes = {{rank, i}}, .preds = {}, .group = {}});
        total_ops_ += n.number("num_ops").value_or(0);
        break;
      case EtNodeType::send:
      case EtNodeType::recv: {
        const bool send = n.type == EtNodeType::send;
        const auto src = n.number("comm_src"), dst = n.number("comm_dst");
        if (!(send ? dst : src) || !n.number("comm_size"))
          throw TraceError(node_ref(paths_[r], n) + ": " + traces::et_node_type_name(n.type) + " needs " +
                           (send ? "comm_dst" : "comm_src") + " and comm_size");
        const int peer = static_cast<int>(send ? *dst : *src);
        if (peer < 0 || peer >= n_ranks || peer == rank)
          throw TraceError(node_ref(paths_[r], n) + ": peer rank " + std::to_string(peer) + " is not another of the " +
                           std::to_string(n_ranks) + " ranks");
        if ((send && src && static_cast<int>(*src) != rank) || (!send && dst && static_cast<int>(*dst) != rank))
          throw TraceError(node_ref(paths_[r], n) + ": a " + (send ? "send's comm_src" : "receive's comm_dst") +
                           " must be its own rank " + std::to_string(rank));
        const P2pKey key{send ? rank : peer, send ? peer : rank, to_int(n.number("comm_tag").value_or(0))};
        (send ? sends : recvs)[key].emplace_back(rank, i);
        break;
      }
      case EtNodeType::coll: {
        const auto type = n.number("comm_type");
        if (!type || !n.number("comm_size"))
          throw TraceError(node_ref(paths_[r], n) + ": COMM_COLL_NODE needs comm_type and comm_size");
        if (!collective_of(*type))
          throw TraceError(node_ref(paths_[r], n) + ": collective " +
                           traces::et_comm_type_name(static_cast<EtCommType>(to_int(*type))) +
                           " is not simulated (ALL_REDUCE, ALL_GATHER and REDUCE_SCATTER are)");
        std::string pg = n.text("pg_name").value_or("");
        if (pg.empty())
          if (const auto number = n.number("pg_name"))
            pg = std::to_string(to_int(*number));
        auto& per_rank = colls[pg];
        per_rank.resize(files_.size());
        per_rank[r].push_back(i);
        break;
      }
      default:
        throw TraceError(node_ref(paths_[r], n) + ": " + traces::et_node_type_name(n.type) +
                         " is not simulated (compute, send, receive and collective nodes are)");
      }
    }
  }
  // Sends and receives: the k-th of each (src, dst, tag) pair up.
  for (const auto& [key, list] : sends) {
    const auto it = recvs.find(key);
    const std::size_t matched = it == recvs.end() ? 0 : it->second.size();
    for (std::size_t k = 0; k < list.size(); ++k) {
      const auto [rank, i] = list[k];
      if (k >= matched)
        throw TraceError(node_ref(paths_[static_cast<std::size_t>(rank)], files_[static_cast<std::size_t>(rank)].nodes[i]) +
                         ": this send (to rank " + std::to_string(std::get<1>(key)) + ", tag " +
                         std::to_string(std::get<2>(key)) + ") has no matching COMM_RECV_NODE there");
      const auto [peer, j] = it->second[k];
      const std::size_t t = found.size();
      task_of[static_cast<std::size_t>(rank)][i] = t;
      task_of[static_cast<std::size_t>(peer)][j] = t;
      found.push_back({.kind = sim::TaskKind::transfer, .nodes = {{rank, i}, {peer, j}}, .preds = {}, .group = {}});
    }
  }
  for (const auto& [key, list] : recvs) {
    const auto it = sends.find(key);
    if (it == sends.end() || it->second.size() < list.size()) {
      const auto [rank, i] = list[it == sends.end() ? 0 : it->second.size()];
      throw TraceError(node_ref(paths_[static_cast<std::size_t>(rank)], files_[static_cast<std::size_t>(rank)].nodes[i]) +
                       ": this receive (from rank " + std::to_string(std::get<0>(key)) + ", tag " +
                       std::to_string(std::get<2>(key)) + ") has no matching COMM_SEND_NODE there");
    }
  }
  // Collectives: the k-th of a process group on each of its members.
  for (const auto& [pg, per_rank] : colls) {
    const auto g = groups.find(pg);
    if (g == groups.end() && !pg.empty() && pg != "0") {
      const auto r = static_cast<std::size_t>(std::find_if(per_rank.begin(), per_rank.end(),
                                                           [](const auto& v) { return !v.empty(); }) -
                                              per_rank.begin());
      throw TraceError(node_ref(paths_[r], files_[r].nodes[per_rank[r].front()]) + ": process group '" + pg +
                       "' is defined nowhere (no metadata node lists it, no comm_groups.json in " + dir_ + ")");
    }
    const std::vector<int>& members = g == groups.end() ? everyone : g->second;
    std::size_t count = 0;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const bool member = std::find(members.begin(), members.end(), static_cast<int>(r)) != members.end();
      if (!member && !per_rank[r].empty())
        throw TraceError(node_ref(paths_[r], files_[r].nodes[per_rank[r].front()]) + ": rank " + std::to_string(r) +
                         " is not a member of process group '" + pg + "' " + ranks_json(members));
    }
    for (int m : members)
      count = std::max(count, per_rank[static_cast<std::size_t>(m)].size());
    for (std::size_t k = 0; k < count; ++k) {
      Task task{.kind = sim::TaskKind::collective, .nodes = {}, .preds = {}, .group = members};
      const EtNode* first = nullptr;
      for (int m : members) {
        const auto r = static_cast<std::size_t>(m);
        if (per_rank[r].size() <= k) {
          const EtNode& other = files_[static_cast<std::size_t>(task.nodes.front().first)].nodes[task.nodes.front().second];
          throw TraceError(paths_[r] + ": rank " + std::to_string(m) + " joins " + std::to_string(per_rank[r].size()) +
                           " collectives of process group '" + pg + "', its other members more (the next is " +
                           node_ref(paths_[static_cast<std::size_t>(task.nodes.front().first)], other) + ")");
        }
        const EtNode& n = files_[r].nodes[per_rank[r][k]];
        if (first != nullptr && (n.number("comm_type") != first->number("comm_type") ||
                                 n.number("comm_size") != first->number("comm_size")))
          throw TraceError(node_ref(paths_[r], n) + ": collective " + std::to_string(k) + " of process group '" + pg +
                           "' differs in comm_type or comm_size from the same collective on rank " +
                           std::to_string(task.nodes.front().first));
        first = first == nullptr ? &n : first;
        task_of[r][per_rank[r][k]] = found.size();
        task.nodes.emplace_back(m, per_rank[r][k]);
      }
      found.push_back(std::move(task));
    }
  }

  // Creation order: ddlsim's own task order when every task carries it, else the order of first
  // appearance (rank by rank, each file in order).
  auto node = [&](const std::pair<int, std::size_t>& at) -> const EtNode& {
    return files_[static_cast<std::size_t>(at.first)].nodes[at.second];
  };
  const bool ordered = std::all_of(found.begin(), found.end(), [&](const Task& t) {
    return node(t.nodes.front()).number("ddlsim_task").has_value();
  });
  std::vector<std::size_t> order(found.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  auto first_seen = [&](const Task& t) { return *std::min_element(t.nodes.begin(), t.nodes.end()); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (ordered)
      return *node(found[a].nodes.front()).number("ddlsim_task") < *node(found[b].nodes.front()).number("ddlsim_task");
    return first_seen(found[a]) < first_seen(found[b]);
  });
  std::vector<std::size_t> position(found.size());
  for (std::size_t p = 0; p < order.size(); ++p)
    position[order[p]] = p;
  for (auto& per_rank : task_of)
    for (std::size_t& t : per_rank)
      if (t != none)
        t = position[t];
  tasks_.clear();
  for (std::size_t i : order)
    tasks_.push_back(std::move(found[i]));

  // Dependencies: a node's data and control dependencies, through nodes that take no time (their
  // own dependencies, found depth first without recursion: PyTorch traces chain thousands of CPU
  // operators). Each such node's set of tasks is kept; their total is bounded.
  constexpr std::size_t max_through = std::size_t{50'000'000};
  std::size_t through_total = 0;
  std::vector<std::vector<std::optional<std::vector<std::size_t>>>> through(files_.size());
  std::vector<std::vector<char>> visiting(files_.size());
  for (std::size_t r = 0; r < files_.size(); ++r) {
    through[r].resize(files_[r].nodes.size());
    visiting[r].assign(files_[r].nodes.size(), 0);
  }
  auto dep_count = [&](std::size_t r, std::size_t i) {
    return files_[r].nodes[i].data_deps.size() + files_[r].nodes[i].ctrl_deps.size();
  };
  auto dep_at = [&](std::size_t r, std::size_t i, std::size_t k) {
    const EtNode& n = files_[r].nodes[i];
    const std::uint64_t d = k < n.data_deps.size() ? n.data_deps[k] : n.ctrl_deps[k - n.data_deps.size()];
    const auto it = index[r].find(d);
    if (it == index[r].end())
      throw TraceError(node_ref(paths_[r], n) + ": depends on node id " + std::to_string(d) + ", which is not in the file");
    return it->second;
  };
  // The tasks that no-time node `root` of rank r stands for.
  auto through_of = [&](std::size_t r, std::size_t root) -> const std::vector<std::size_t>& {
    std::vector<std::pair<std::size_t, std::size_t>> stack;  // node, its next dependency
    if (!through[r][root]) {
      stack.emplace_back(root, 0);
      visiting[r][root] = 1;
    }
    while (!stack.empty()) {
      const std::size_t i = stack.back().first;
      if (const std::size_t k = stack.back().second++; k < dep_count(r, i)) {
        const std::size_t d = dep_at(r, i, k);
        if (task_of[r][d] != none || through[r][d])
          continue;
        if (visiting[r][d])
          throw TraceError(node_ref(paths_[r], files_[r].nodes[d]) +
                           ": dependencies through metadata or CPU nodes form a cycle");
        visiting[r][d] = 1;
        stack.emplace_back(d, 0);
        continue;
      }
      std::vector<std::size_t> tasks;
      for (std::size_t k = 0; k < dep_count(r, i); ++k) {
        const std::size_t d = dep_at(r, i, k);
        if (task_of[r][d] != none)
          tasks.push_back(task_of[r][d]);
        else
          tasks.insert(tasks.end(), through[r][d]->begin(), through[r][d]->end());
      }
      std::sort(tasks.begin(), tasks.end());
      tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
      through_total += tasks.size();
      if (through_total > max_through)
        throw TraceError(paths_[r] + ": over " + std::to_string(max_through) +
                         " dependencies through metadata or CPU nodes: too many to resolve");
      through[r][i] = std::move(tasks);
      visiting[r][i] = 0;
      stack.pop_back();
    }
    return *through[r][root];
  };
  auto deps_of = [&](std::size_t r, std::size_t i) {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < dep_count(r, i); ++k) {
      const std::size_t d = dep_at(r, i, k);
      if (task_of[r][d] != none)
        out.push_back(task_of[r][d]);
      else {
        const auto& more = through_of(r, d);
        out.insert(out.end(), more.begin(), more.end());
      }
    }
    return out;
  };
  std::vector<std::size_t> last_compute(files_.size(), none);
  std::vector<std::size_t> previous_on_stream(tasks_.size(), none);
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    if (tasks_[t].kind == sim::TaskKind::compute) {
      auto& last = last_compute[static_cast<std::size_t>(tasks_[t].nodes.front().first)];
      previous_on_stream[t] = last;
      last = t;
    }
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    std::vector<std::size_t> preds;
    for (const auto& [rank, i] : tasks_[t].nodes)
      for (std::size_t p : deps_of(static_cast<std::size_t>(rank), i))
        if (p != t && p != previous_on_stream[t])
          preds.push_back(p);
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    tasks_[t].preds = std::move(preds);
  }
}

double ChakraWorkload::flop_per_sample(long long global_batch) const
{
  if (const auto it = numbers_.find("ddlsim_flop_per_sample"); it != numbers_.end())
    return it->second;
  return global_batch > 0 ? total_ops_ / static_cast<double>(global_batch) : 0.0;
}

double ChakraWorkload::model_flop_per_sample(long long global_batch) const
{
  if (const auto it = numbers_.find("ddlsim_model_flop_per_sample"); it != numbers_.end())
    return it->second;
  return flop_per_sample(global_batch);
}

double ChakraWorkload::tokens_per_sample() const
{
  const auto it = numbers_.find("ddlsim_tokens_per_sample");
  return it != numbers_.end() ? it->second : 0.0;
}

ChakraWorkload::Graph ChakraWorkload::build(const calibration::CostModel& cost, Dtype dtype) const
{
  Graph out;
  out.graph = sim::TaskGraph(ranks());
  sim::TaskGraph& g = out.graph;
  auto node = [&](const std::pair<int, std::size_t>& at) -> const EtNode& {
    return files_[static_cast<std::size_t>(at.first)].nodes[at.second];
  };
  auto integer = [](const EtNode& n, const char* name, int fallback) {
    return static_cast<int>(n.number(name).value_or(fallback));
  };
  auto phase = [](const EtNode& n, sim::Phase fallback) {
    const auto text = n.text("ddlsim_phase");
    const auto parsed = text ? sim::phase_table.parse(*text) : std::nullopt;
    return parsed ? *parsed : fallback;
  };
  // Edges of task t: from its predecessors created before it, and to its successors created
  // before it (added once both exist, in creation order, as build_schedule adds them).
  std::vector<std::vector<std::size_t>> later_succs(tasks_.size());
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    for (std::size_t p : tasks_[t].preds)
      if (p > t)
        later_succs[p].push_back(t);
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    const Task& task = tasks_[t];
    const EtNode& n = node(task.nodes.front());
    sim::TaskId id = 0;
    switch (task.kind) {
    case sim::TaskKind::compute: {
      sim::ComputeTask c{
          .device      = task.nodes.front().first,
          .phase       = phase(n, sim::Phase::forward),
          .stage       = integer(n, "ddlsim_stage", 0),
          .micro_batch = integer(n, "ddlsim_micro_batch", 0),
          .samples     = integer(n, "ddlsim_samples", 0),
          .layer_begin = static_cast<std::uint32_t>(integer(n, "ddlsim_layer_begin", 0)),
          .layer_end   = static_cast<std::uint32_t>(integer(n, "ddlsim_layer_end", 0)),
          .share       = n.number("ddlsim_share").value_or(1.0),
          .part =
              sim::compute_part_table.parse(n.text("ddlsim_part").value_or("whole")).value_or(sim::ComputePart::whole),
          .on_stream = true};
      id = g.add_compute(c);
      double seconds = 0;
      if (const auto exact = n.number("ddlsim_duration_s"))
        seconds = *exact;
      else if (n.duration_micros > 0)
        seconds = static_cast<double>(n.duration_micros) * 1e-6;
      else if (n.number("num_ops").value_or(0) > 0 || n.number("tensor_size").value_or(0) > 0) {
        seconds = cost.seconds({.flop = n.number("num_ops").value_or(0), .bytes = n.number("tensor_size").value_or(0),
                                .dtype = dtype, .kind = calibration::WorkKind::unknown, .shape = {}});
        out.priced = true;
      }
      out.compute_seconds.resize(id + 1, 0.0);
      out.compute_seconds[id] = seconds;
      break;
    }
    case sim::TaskKind::transfer: {
      const EtNode& send = node(task.nodes.front());
      id = g.add_transfer({.src = task.nodes.front().first, .dst = task.nodes.back().first,
                           .bytes = send.number("ddlsim_bytes").value_or(*send.number("comm_size")),
                           .phase = phase(send, sim::Phase::forward), .stage = integer(send, "ddlsim_stage", 0),
                           .micro_batch = integer(send, "ddlsim_micro_batch", 0),
                           .kind = static_cast<sim::TransferKind>(integer(send, "ddlsim_transfer_kind", 0)),
                           .server = integer(send, "ddlsim_server", 0)});
      break;
    }
    case sim::TaskKind::collective: {
      sim::CollectiveTask c;
      c.kind = *collective_of(*n.number("comm_type"));
      const auto algorithm = n.text("ddlsim_algorithm");
      c.algorithm = sim::collective_algorithm_table.parse(algorithm.value_or("ring")).value_or(sim::CollectiveAlgorithm::ring);
      const auto fidelity = n.text("ddlsim_fidelity");
      c.fidelity = sim::collective_fidelity_table.parse(fidelity.value_or("flow")).value_or(sim::CollectiveFidelity::flow);
      c.group = task.group;
      if (const auto root = n.number("root"); root && c.kind == sim::CollectiveKind::broadcast) {
        // ddlsim's broadcast sends from its first member: the group from the root on
        const auto at = std::find(c.group.begin(), c.group.end(), static_cast<int>(*root));
        if (at == c.group.end())
          throw TraceError(node_ref(paths_[static_cast<std::size_t>(task.nodes.front().first)], n) + ": broadcast root " +
                           std::to_string(to_int(*root)) + " is not a member of its process group " +
                           ranks_json(c.group));
        std::rotate(c.group.begin(), at, c.group.end());
      }
      c.bytes = n.number("ddlsim_bytes").value_or(*n.number("comm_size"));
      c.stage = integer(n, "ddlsim_stage", 0);
      c.micro_batch = integer(n, "ddlsim_micro_batch", -1);
      c.phase = phase(n, sim::Phase::backward);
      c.role = static_cast<sim::CollectiveRole>(integer(n, "ddlsim_role", 0));
      if (const auto loads = n.text("ddlsim_member_load")) {
        std::stringstream in(*loads);
        for (std::string l; std::getline(in, l, ',');)
          c.member_load.push_back(std::stod(l));
        if (c.member_load.size() != c.group.size())
          throw TraceError(node_ref(paths_[static_cast<std::size_t>(task.nodes.front().first)], n) +
                           ": ddlsim_member_load has " +
                           std::to_string(c.member_load.size()) + " loads for a group of " +
                           std::to_string(c.group.size()));
        c.load_at_source = n.number("ddlsim_load_at_source").value_or(0) != 0;
      }
      id = g.add_collective(std::move(c));
      break;
    }
    }
    if (id != t)
      throw SimulationError("Chakra import: task order mismatch");  // internal invariant
    for (std::size_t p : task.preds)
      if (p < t)
        g.add_dependency(static_cast<sim::TaskId>(p), id);
    for (std::size_t s : later_succs[t])
      g.add_dependency(id, static_cast<sim::TaskId>(s));
  }
  out.compute_seconds.resize(g.size(), 0.0);
  return out;
}

}  // namespace ddlsim::experiments

namespace ddlsim::experiments {

std::string chakra_refusal(const std::string& command)
{
  return "ddlsim " + command + " needs a model to change or run: a Chakra workload (model: {chakra: DIR}) fixes the "
         "layout, the batch and the kernels; simulate it with ddlsim run";
}

void read_chakra_model(YamlMap& top, const std::filesystem::path& experiment_dir, PointConfig& point)
{
  auto model = top.map("model");
  if (!model)
    return;
  const std::string dir = model->required_string("chakra");
  model->check_unknown_keys();
  if (dir.empty())
    return;
  fs::path path(dir);
  if (path.is_relative() && fs::exists(experiment_dir / path))
    path = experiment_dir / path;
  try {
    point.chakra = ChakraWorkload::load(path.string());
  } catch (const Error& e) {
    model->report("chakra", e.what());
    return;
  }
  const auto name = point.chakra->columns().find("model");
  point.model_label = name != point.chakra->columns().end() ? name->second : fs::path(dir).lexically_normal().filename().string();
  if (point.model_label.empty())
    point.model_label = dir;
}

void read_chakra_keys(YamlMap& top, PointConfig& point)
{
  if (!point.chakra)
    return;
  const ChakraWorkload& w = *point.chakra;
  const auto& columns = w.columns();
  // Each key whose value the export records, and its CSV column.
  static const std::map<std::string, std::string> recorded = {
      {"training.global_batch", "global_batch"}, {"training.micro_batch", "micro_batch"},
      {"training.dtype", "dtype"},               {"training.optimizer", "optimizer"},
      {"training.recompute", "recompute"},       {"training.seq", "seq"},
      {"training.attention", "attention"},       {"parallelism.schedule", "schedule"},
      {"parallelism.pp", "pp"},                  {"parallelism.dp", "dp"},
      {"parallelism.tp", "tp"},                  {"parallelism.cp", "cp"},
      {"parallelism.zero", "zero"},              {"parallelism.zero_group", "zero_group"},
      {"parallelism.sequence_parallel", "sequence_parallel"},
      {"parallelism.virtual_stages", "virtual_stages"},
      {"parallelism.dp_collective", "dp_collective"},
      {"parallelism.partition", "partition"}};
  auto column = [&](const std::string& name) {
    const auto it = columns.find(name);
    return it == columns.end() ? std::string() : it->second;
  };
  for (const std::string section : {"training", "parallelism"}) {
    auto map = top.map(section);
    if (!map)
      continue;
    for (const auto& entry : map->yaml()) {
      const std::string key = entry.first.Scalar();
      const std::string dotted = section + "." + key;
      const bool foreign_ok = !w.from_ddlsim() && (dotted == "training.global_batch" || dotted == "training.dtype");
      if (foreign_ok)
        continue;  // read below
      map->node(key);
      const auto rec = recorded.find(dotted);
      const std::string value = rec == recorded.end() ? std::string() : column(rec->second);
      const std::string given = entry.second.IsScalar() ? entry.second.Scalar() : std::string();
      if (!value.empty() && given == value)
        continue;
      if (!value.empty())
        map->report(key, "the Chakra traces in " + w.get_dir() + " were made with " + dotted + " = " + value +
                             ": a trace fixes the layout and the work (remove the key or give " + value + ")");
      else
        map->report(key, "a Chakra workload (" + w.get_dir() + ") fixes the layout and the work: " + dotted +
                             " cannot change it (remove the key)");
    }
    if (!w.from_ddlsim() && section == "training") {
      point.training.global_batch = map->integer("global_batch", 0, 1, 1'000'000'000);
      point.training.dtype = map->choice("dtype", dtype_table, Dtype::bf16);
    }
    map->check_unknown_keys();
  }
  top.node("output");
  top.node("limits");
  // The traces' own values, for the CSV's throughput columns and the roofline of untimed nodes.
  auto integer = [&](const std::string& name, long long fallback) {
    const std::string v = column(name);
    return v.empty() ? fallback : std::stoll(v);
  };
  point.parallelism.pp = static_cast<int>(integer("pp", 1));
  point.parallelism.dp = static_cast<int>(integer("dp", w.ranks()));
  point.parallelism.tp = static_cast<int>(integer("tp", 1));
  point.parallelism.cp = static_cast<int>(integer("cp", 1));
  point.parallelism.tp_aggregate = false;
  if (const auto s = sim::schedule_table.parse(column("schedule")))
    point.parallelism.schedule = *s;
  if (w.from_ddlsim()) {
    point.training.global_batch = integer("global_batch", 0);
    point.training.micro_batch = static_cast<int>(integer("micro_batch", 1));
    if (const auto d = dtype_table.parse(column("dtype")))
      point.training.dtype = *d;
  }
}

}  // namespace ddlsim::experiments
