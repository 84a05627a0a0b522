// `ddlsim export chakra`: a point's task graph written as Chakra execution traces, one file per rank,
// streamed rank by rank (docs/chakra.md). The reader is ChakraWorkload.cpp.
#include "experiments/ChakraWorkload.hpp"

#include "common/AtomicFile.hpp"
#include "common/Error.hpp"
#include "experiments/ChakraRankMap.hpp"
#include "experiments/ChakraSchema.hpp"
#include "experiments/Evaluate.hpp"
#include "sim/OpCosts.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

namespace ddlsim::experiments {

namespace fs = std::filesystem;
using traces::EtFile;
using traces::EtNode;
using traces::EtNodeType;
using namespace chakra_schema;

namespace {

std::uint64_t to_count(double v)
{
  return v > 0 ? static_cast<std::uint64_t>(std::llround(v)) : 0;
}

// Flop and bytes a compute task moves: its kernels' work, as the cost model priced them.
struct Work {
  double flop  = 0;
  double bytes = 0;
};

// An export into a folder that holds another's traces would mix them (a rank map found first, ranks
// left over from a larger export): refused, before anything is written.
void refuse_traces_in(const std::string& dir)
{
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".et" || name == rank_map::map_file || name == rank_map::numbers_file)
      throw Error(dir + " already holds Chakra traces (" + name +
                  "): export into an empty or new folder, or remove them first");
  }
}

// Where the rank files go: one .et per rank, or templates and a rank map (ChakraRankMap.hpp); then
// the process groups as ASTRA-sim's --comm-group-configuration, {"1": [0, 2], ...}.
class FileSink {
public:
  FileSink(const std::string& dir, const std::string& prefix, const std::vector<std::vector<int>>& groups,
           const ChakraExportOptions& options)
      : dir_(dir), prefix_(prefix), groups_(groups)
  {
    refuse_traces_in(dir);
    fs::create_directories(dir);
    if (options.rank_map)
      map_.emplace(dir, prefix, groups);
  }
  void add(const EtFile& f)
  {
    const int rank = result_.ranks++;
    result_.nodes += f.nodes.size();
    if (map_) {
      map_->add(f);
      return;
    }
    const std::string path = (fs::path(dir_) / (prefix_ + "." + std::to_string(rank) + ".et")).string();
    traces::write_et_file(path, f);
    result_.files.push_back(path);
  }
  ChakraExport finish()
  {
    std::string json = "{";
    for (std::size_t i = 0; i < groups_.size(); ++i)
      json += std::string(i ? ",\n " : "") + "\"" + std::to_string(i + 1) + "\": " + ranks_json(groups_[i]);
    json += "}\n";
    result_.comm_groups = (fs::path(dir_) / "comm_groups.json").string();
    write_file_atomically(result_.comm_groups, "process groups", [&](std::ostream& o) { o << json; });
    if (map_) {
      result_.files    = map_->finish();
      result_.rank_map = (fs::path(dir_) / rank_map::map_file).string();
    }
    return result_;
  }

private:
  std::string dir_, prefix_;
  const std::vector<std::vector<int>>& groups_;
  std::optional<rank_map::Writer> map_;
  ChakraExport result_;
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
  ChakraExport write(const std::string& dir, const ChakraExportOptions& options)
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
      for (int r : ranks_of(id)) // once per rank (a transfer within one GPU names it twice)
        if (auto& mine = tasks_of[static_cast<std::size_t>(r)]; mine.empty() || mine.back() != id)
          mine.push_back(id);
      if (g.kind(id) == sim::TaskKind::transfer)
        tags_.emplace(id, transfers++);
    }
    FileSink sink(dir, point_.experiment, group_list_, options);
    ids_.assign(g.size(), no_node);
    for (int r = 0; r < ranks; ++r) {
      std::vector<sim::TaskId>& mine = tasks_of[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < mine.size(); ++i)
        ids_[mine[i]] = i + 1;
      sink.add(rank_file(r, ranks, mine));
      for (sim::TaskId id : mine)
        ids_[id] = no_node;
      std::vector<sim::TaskId>().swap(mine);
      if (options.on_rank)
        options.on_rank(r + 1, ranks);
    }
    return sink.finish();
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
    pg.inputs_values = process_groups_value(rank, group_list_);
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
    EtNode& n               = f.nodes.emplace_back();
    n.id                    = ids_[id];
    const sim::TaskGraph& g = w_.graph;
    for (sim::TaskId p : preds_[id]) {
      const std::uint64_t there = ids_[p];
      const bool stream         = kind == sim::TaskKind::compute && g.kind(p) == sim::TaskKind::compute &&
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
    case sim::TaskKind::compute:
      return {g.compute(id).device};
    case sim::TaskKind::transfer:
      return {g.transfer(id).src, g.transfer(id).dst};
    case sim::TaskKind::collective:
      return g.collective(id).group;
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

} // namespace

namespace {

// A Chakra workload written out again as loaded (a rank map rank by rank, or the other way).
ChakraExport rewrite_chakra(const ChakraWorkload& w, const std::string& dir, const std::string& prefix,
                            const ChakraExportOptions& options)
{
  const auto groups = w.numbered_groups();
  if (!groups)
    throw Error(w.get_dir() + ": its process groups are not numbered 1..N as ddlsim numbers them: copy its files "
                              "instead");
  FileSink sink(dir, prefix, *groups, options);
  for (int r = 0; r < w.ranks(); ++r) {
    sink.add(w.file(r));
    if (options.on_rank)
      options.on_rank(r + 1, w.ranks());
  }
  return sink.finish();
}

} // namespace

ChakraExport write_chakra(const PointConfig& point, const std::string& dir, const ChakraExportOptions& options)
{
  if (point.chakra) {
    if (fs::weakly_canonical(point.chakra->get_dir()) == fs::weakly_canonical(dir))
      throw Error(dir + " is the folder the workload was read from: write it elsewhere");
    return rewrite_chakra(*point.chakra, dir, point.experiment, options);
  }
  if (point.parallelism.ps)
    throw Error("point " + std::to_string(point.index) +
                " uses parameter servers, which apply pushes in arrival "
                "order: Chakra's dependencies cannot express it");
  PointConfig per_rank              = point;
  per_rank.parallelism.tp_aggregate = false; // one file per GPU: tensor-parallel groups stay rank by rank
  std::optional<ChakraExport> written;
  std::string failure;
  EvaluateOptions evaluate;
  evaluate.on_workload = [&](const PointWorkload& w) {
    try {
      written = ExportWriter(per_rank, w).write(dir, options);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  };
  const ResultRow row = evaluate_point(per_rank, evaluate);
  if (!failure.empty())
    throw Error(failure);
  if (!written)
    throw Error("point " + std::to_string(point.index) + " of " + point.experiment +
                " cannot be exported: " + row.get("status") + ": " + row.get("message"));
  return *written;
}

} // namespace ddlsim::experiments
