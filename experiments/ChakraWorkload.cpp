#include "experiments/ChakraWorkload.hpp"

#include "common/Error.hpp"
#include "experiments/ChakraRankMap.hpp"
#include "experiments/ChakraSchema.hpp"
#include "traces/Json.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

namespace ddlsim::experiments {

namespace fs = std::filesystem;
using traces::EtAttr;
using traces::EtCommType;
using traces::EtNode;
using traces::EtNodeType;
using namespace chakra_schema;

namespace {

std::int64_t to_int(double v)
{
  return static_cast<std::int64_t>(v);
}

}  // namespace

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
  if (rank_map::is_rank_mapped(dir)) { // templates and their bindings: the ranks' files rebuilt
    w->files_ = rank_map::read(dir, w->paths_);
    w->load_metadata();
    return w;
  }
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
  w->load_metadata();
  return w;
}

void ChakraWorkload::load_metadata()
{
  for (const EtAttr& a : files_.front().attrs) {
    if (a.name.rfind(column_prefix, 0) == 0 && std::holds_alternative<std::string>(a.value))
      columns_[a.name.substr(std::string(column_prefix).size())] = std::get<std::string>(a.value);
    else if (a.name.rfind("ddlsim_", 0) == 0 && std::holds_alternative<double>(a.value))
      numbers_[a.name] = std::get<double>(a.value);
  }
  match();
}

std::optional<std::vector<std::vector<int>>> ChakraWorkload::numbered_groups() const
{
  std::vector<std::vector<int>> out(groups_.size());
  for (const auto& [name, members] : groups_) {
    const std::size_t k = group_number(name);
    if (k < 1 || k > out.size())
      return std::nullopt;
    out[k - 1] = members;
  }
  return out;
}

// ChakraWorkload::match in its phases, over the state they share: the process groups, each node's
// index and task, and the tasks found, before they are put in creation order.
struct ChakraWorkload::Matching {
  explicit Matching(ChakraWorkload& workload) : w(workload), n_ranks(workload.ranks())
  {
    for (int r = 0; r < n_ranks; ++r)
      everyone.push_back(r);
    index.resize(w.files_.size());
    task_of.resize(w.files_.size());
  }
  ChakraWorkload& w;
  const int n_ranks;
  std::vector<int> everyone;
  std::map<std::string, std::vector<int>> groups; // process groups by name
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  // Per rank: node id -> index; the task of each node (none: takes no time, passes its dependencies on).
  std::vector<std::map<std::uint64_t, std::size_t>> index;
  std::vector<std::vector<std::size_t>> task_of;
  std::vector<Task> found;
  using P2pKey = std::tuple<int, int, std::int64_t>; // src, dst, tag
  std::map<P2pKey, std::vector<std::pair<int, std::size_t>>> sends, recvs;
  std::map<std::string, std::vector<std::vector<std::size_t>>> colls; // pg -> per rank, node indices

  void read_groups();
  void classify();
  void pair_transfers();
  void pair_collectives();
  void put_in_order();
  void dependencies();
};

void ChakraWorkload::Matching::read_groups()
{
  // Process groups: the metadata nodes' lists (PyTorch's form) and comm_groups.json (ASTRA-sim's).
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
  for (std::size_t r = 0; r < w.files_.size(); ++r)
    for (const EtNode& n : w.files_[r].nodes)
      if (n.type == EtNodeType::metadata && n.inputs_values.size() > 4)
        read_groups(traces::parse_json(std::string_view(n.inputs_values).substr(2, n.inputs_values.size() - 4),
                                       node_ref(w.paths_[r], n)),
                    node_ref(w.paths_[r], n));
  if (const fs::path json = fs::path(w.dir_) / "comm_groups.json"; fs::exists(json)) {
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
}

// Each node to its task: a compute node its own, sends and receives and collectives listed for pairing.
void ChakraWorkload::Matching::classify()
{
  for (std::size_t r = 0; r < w.files_.size(); ++r) {
    const auto& nodes = w.files_[r].nodes;
    task_of[r].assign(nodes.size(), none);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const EtNode& n = nodes[i];
      if (!index[r].emplace(n.id, i).second)
        throw TraceError(node_ref(w.paths_[r], n) + ": a second node with this id");
      const int rank = static_cast<int>(r);
      switch (n.type) {
      case EtNodeType::invalid:
      case EtNodeType::metadata: break;
      case EtNodeType::comp:
        if (n.number("is_cpu_op").value_or(0) != 0)
          break;
        task_of[r][i] = found.size();
        found.push_back({.kind = sim::TaskKind::compute, .nodes = {{rank, i}}, .preds = {}, .group = {}});
        w.total_ops_ += n.number("num_ops").value_or(0);
        break;
      case EtNodeType::send:
      case EtNodeType::recv: {
        const bool send = n.type == EtNodeType::send;
        const auto src = n.number("comm_src"), dst = n.number("comm_dst");
        if (!(send ? dst : src) || !n.number("comm_size"))
          throw TraceError(node_ref(w.paths_[r], n) + ": " + traces::et_node_type_name(n.type) + " needs " +
                           (send ? "comm_dst" : "comm_src") + " and comm_size");
        const int peer = static_cast<int>(send ? *dst : *src);
        if (peer < 0 || peer >= n_ranks || peer == rank)
          throw TraceError(node_ref(w.paths_[r], n) + ": peer rank " + std::to_string(peer) +
                           " is not another of the " + std::to_string(n_ranks) + " ranks");
        if ((send && src && static_cast<int>(*src) != rank) || (!send && dst && static_cast<int>(*dst) != rank))
          throw TraceError(node_ref(w.paths_[r], n) + ": a " + (send ? "send's comm_src" : "receive's comm_dst") +
                           " must be its own rank " + std::to_string(rank));
        const P2pKey key{send ? rank : peer, send ? peer : rank, to_int(n.number("comm_tag").value_or(0))};
        (send ? sends : recvs)[key].emplace_back(rank, i);
        break;
      }
      case EtNodeType::coll: {
        const auto type = n.number("comm_type");
        if (!type || !n.number("comm_size"))
          throw TraceError(node_ref(w.paths_[r], n) + ": COMM_COLL_NODE needs comm_type and comm_size");
        if (!collective_of(*type))
          throw TraceError(node_ref(w.paths_[r], n) + ": collective " +
                           traces::et_comm_type_name(static_cast<EtCommType>(to_int(*type))) +
                           " is not simulated (ALL_REDUCE, ALL_GATHER and REDUCE_SCATTER are)");
        std::string pg = n.text("pg_name").value_or("");
        if (pg.empty())
          if (const auto number = n.number("pg_name"))
            pg = std::to_string(to_int(*number));
        auto& per_rank = colls[pg];
        per_rank.resize(w.files_.size());
        per_rank[r].push_back(i);
        break;
      }
      default:
        throw TraceError(node_ref(w.paths_[r], n) + ": " + traces::et_node_type_name(n.type) +
                         " is not simulated (compute, send, receive and collective nodes are)");
      }
    }
  }
}

void ChakraWorkload::Matching::pair_transfers()
{
  // Sends and receives: the k-th of each (src, dst, tag) pair up.
  for (const auto& [key, list] : sends) {
    const auto it = recvs.find(key);
    const std::size_t matched = it == recvs.end() ? 0 : it->second.size();
    for (std::size_t k = 0; k < list.size(); ++k) {
      const auto [rank, i] = list[k];
      if (k >= matched)
        throw TraceError(
            node_ref(w.paths_[static_cast<std::size_t>(rank)], w.files_[static_cast<std::size_t>(rank)].nodes[i]) +
            ": this send (to rank " + std::to_string(std::get<1>(key)) + ", tag " + std::to_string(std::get<2>(key)) +
            ") has no matching COMM_RECV_NODE there");
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
      throw TraceError(
          node_ref(w.paths_[static_cast<std::size_t>(rank)], w.files_[static_cast<std::size_t>(rank)].nodes[i]) +
          ": this receive (from rank " + std::to_string(std::get<0>(key)) + ", tag " +
          std::to_string(std::get<2>(key)) + ") has no matching COMM_SEND_NODE there");
    }
  }
}

void ChakraWorkload::Matching::pair_collectives()
{
  // Collectives: the k-th of a process group on each of its members.
  for (const auto& [pg, per_rank] : colls) {
    const auto g = groups.find(pg);
    if (g == groups.end() && !pg.empty() && pg != "0") {
      const auto r = static_cast<std::size_t>(std::find_if(per_rank.begin(), per_rank.end(),
                                                           [](const auto& v) { return !v.empty(); }) -
                                              per_rank.begin());
      throw TraceError(node_ref(w.paths_[r], w.files_[r].nodes[per_rank[r].front()]) + ": process group '" + pg +
                       "' is defined nowhere (no metadata node lists it, no comm_groups.json in " + w.dir_ + ")");
    }
    const std::vector<int>& members = g == groups.end() ? everyone : g->second;
    std::size_t count = 0;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      const bool member = std::find(members.begin(), members.end(), static_cast<int>(r)) != members.end();
      if (!member && !per_rank[r].empty())
        throw TraceError(node_ref(w.paths_[r], w.files_[r].nodes[per_rank[r].front()]) + ": rank " + std::to_string(r) +
                         " is not a member of process group '" + pg + "' " + ranks_json(members));
    }
    for (int m : members)
      count = std::max(count, per_rank[static_cast<std::size_t>(m)].size());
    for (std::size_t k = 0; k < count; ++k) {
      Task task{.kind = sim::TaskKind::collective, .nodes = {}, .preds = {}, .group = members};
      const EtNode* first = nullptr;
      for (int m : members) {
        const auto r = static_cast<std::size_t>(m);
        if (per_rank[r].size() <= k) {  // name a member that has collective k (the first may lack it too)
          const auto& lists = per_rank; // (a lambda may not capture a structured binding before C++20's clang 16)
          const auto has    = static_cast<std::size_t>(*std::find_if(
                 members.begin(), members.end(), [&](int o) { return lists[static_cast<std::size_t>(o)].size() > k; }));
          throw TraceError(w.paths_[r] + ": rank " + std::to_string(m) + " joins " +
                           std::to_string(per_rank[r].size()) + " collectives of process group '" + pg +
                           "', its other members more (the next is " +
                           node_ref(w.paths_[has], w.files_[has].nodes[per_rank[has][k]]) + ")");
        }
        const EtNode& n = w.files_[r].nodes[per_rank[r][k]];
        if (first != nullptr && (n.number("comm_type") != first->number("comm_type") ||
                                 n.number("comm_size") != first->number("comm_size")))
          throw TraceError(node_ref(w.paths_[r], n) + ": collective " + std::to_string(k) + " of process group '" + pg +
                           "' differs in comm_type or comm_size from the same collective on rank " +
                           std::to_string(task.nodes.front().first));
        first = first == nullptr ? &n : first;
        task_of[r][per_rank[r][k]] = found.size();
        task.nodes.emplace_back(m, per_rank[r][k]);
      }
      found.push_back(std::move(task));
    }
  }
}

void ChakraWorkload::Matching::put_in_order()
{
  // Creation order: ddlsim's own task order when every task carries it, else the order of first
  // appearance (rank by rank, each file in order).
  auto node = [&](const std::pair<int, std::size_t>& at) -> const EtNode& {
    return w.files_[static_cast<std::size_t>(at.first)].nodes[at.second];
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
  w.tasks_.clear();
  for (std::size_t i : order)
    w.tasks_.push_back(std::move(found[i]));
}

void ChakraWorkload::Matching::dependencies()
{
  // Dependencies: a node's data and control dependencies, through nodes that take no time (their
  // own dependencies, found depth first without recursion: PyTorch traces chain thousands of CPU
  // operators). Each such node's set of tasks is kept; their total is bounded.
  constexpr std::size_t max_through = std::size_t{50'000'000};
  std::size_t through_total = 0;
  std::vector<std::vector<std::optional<std::vector<std::size_t>>>> through(w.files_.size());
  std::vector<std::vector<char>> visiting(w.files_.size());
  for (std::size_t r = 0; r < w.files_.size(); ++r) {
    through[r].resize(w.files_[r].nodes.size());
    visiting[r].assign(w.files_[r].nodes.size(), 0);
  }
  auto dep_count = [&](std::size_t r, std::size_t i) {
    return w.files_[r].nodes[i].data_deps.size() + w.files_[r].nodes[i].ctrl_deps.size();
  };
  auto dep_at = [&](std::size_t r, std::size_t i, std::size_t k) {
    const EtNode& n       = w.files_[r].nodes[i];
    const std::uint64_t d = k < n.data_deps.size() ? n.data_deps[k] : n.ctrl_deps[k - n.data_deps.size()];
    const auto it = index[r].find(d);
    if (it == index[r].end())
      throw TraceError(node_ref(w.paths_[r], n) + ": depends on node id " + std::to_string(d) +
                       ", which is not in the file");
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
          throw TraceError(node_ref(w.paths_[r], w.files_[r].nodes[d]) +
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
        throw TraceError(w.paths_[r] + ": over " + std::to_string(max_through) +
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
  std::vector<std::size_t> last_compute(w.files_.size(), none);
  std::vector<std::size_t> previous_on_stream(w.tasks_.size(), none);
  for (std::size_t t = 0; t < w.tasks_.size(); ++t)
    if (w.tasks_[t].kind == sim::TaskKind::compute) {
      auto& last            = last_compute[static_cast<std::size_t>(w.tasks_[t].nodes.front().first)];
      previous_on_stream[t] = last;
      last = t;
    }
  for (std::size_t t = 0; t < w.tasks_.size(); ++t) {
    std::vector<std::size_t> preds;
    for (const auto& [rank, i] : w.tasks_[t].nodes)
      for (std::size_t p : deps_of(static_cast<std::size_t>(rank), i))
        if (p != t && p != previous_on_stream[t])
          preds.push_back(p);
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    w.tasks_[t].preds = std::move(preds);
  }
}

void ChakraWorkload::match()
{
  Matching m(*this);
  m.read_groups();
  groups_ = m.groups;
  m.classify();
  m.pair_transfers();
  m.pair_collectives();
  m.put_in_order();
  m.dependencies();
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
