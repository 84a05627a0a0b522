#include "experiments/Experiment.hpp"

#include "sim/Framework.hpp"

#include "common/DataPath.hpp"
#include "common/Suggest.hpp"
#include "common/Units.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/DocumentKeys.hpp"
#include "experiments/Rules.hpp"
#include "models/ModelLoader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

namespace ddlsim::experiments {

sim::CollectiveFidelity auto_tp_fidelity(const ParallelismSpec& par, const sim::ClusterSpec& cluster,
                                         double comm_compute_slowdown)
{
  // A ring over a whole node, whose GPUs' links carry nothing else (every other pair of devices is
  // in another node: pipeline, data-parallel and context traffic leave through the NICs): its
  // messages run in lockstep at the links' bandwidth, so the closed form is the flow-level time.
  // With `auto`, NCCL's tuner may run a chain (double_tree) or NVLS inside the node instead, whose
  // closed forms are not proven equal to their flows: flows then.
  const bool ring = par.tp_collective == sim::CollectiveAlgorithm::ring;
  const bool exact = par.tp > 1 && par.tp == cluster.gpus_per_node && ring && comm_compute_slowdown <= 0;
  return exact ? sim::CollectiveFidelity::analytic : sim::CollectiveFidelity::flow;
}
namespace {

// training.memory_check: whether a point that does not fit in its GPUs is simulated all the same.
constexpr EnumTable<bool, 2> memory_check_table{{{
    {"refuse", false, "a point that does not fit is oom, not simulated"},
    {"warn", true, "simulated all the same, its message saying by how much"},
}}};

// A model, cluster or profile given by name/path (loaded from its file) or inline (parsed here).
template <typename T, typename LoadFile, typename ParseInline>
std::optional<T> resolve_component(YamlMap& top, const std::string& key, const std::string& shipped_dir,
                                   const std::filesystem::path& dir, std::string& label, LoadFile load_file,
                                   ParseInline parse_inline)
{
  YAML::Node node = top.node(key);
  if (!node.IsDefined()) {
    top.report(key, "missing required key");
    return std::nullopt;
  }
  if (node.IsMap()) {
    YamlMap inline_map(node, key, top.diagnostics());
    T value = parse_inline(inline_map);
    label = inline_map.yaml()["name"] ? inline_map.yaml()["name"].Scalar() : key;
    return value;
  }
  if (!node.IsScalar()) {
    top.report(key, "expected a shipped name, a path to a YAML file, or a mapping");
    return std::nullopt;
  }
  label = node.Scalar();
  auto path = resolve_input(label, shipped_dir, dir);
  if (!path) {
    top.report(key, "unknown name '" + label + "'" + did_you_mean(label, shipped_names(shipped_dir)) +
                        " (shipped: " + shipped_names_text(shipped_dir) +
                        "; or give a path to a YAML file)");
    return std::nullopt;
  }
  try {
    return load_file(*path);
  } catch (const ConfigError& e) {
    // Problems inside the file name their own line; a file that cannot be read at all is
    // reported at the key that names it.
    for (const Diagnostic& d : e.diagnostics())
      if (d.line == 0 && d.key.empty())
        top.report(key, "'" + label + "' (" + d.file + "): " + d.message);
      else
        top.diagnostics().append({d});
    return std::nullopt;
  }
}

}  // namespace

Experiment Experiment::load(const std::string& path, const std::vector<std::string>& overrides)
{
  Experiment exp;
  exp.file_ = path;
  exp.text_ = read_text_file(path);
  exp.dir_ = std::filesystem::path(path).parent_path();
  YAML::Node doc = load_yaml_string(exp.text_, path);
  Diagnostics diags(path);
  if (!doc.IsMap()) {
    diags.error(doc, "", "an experiment file must be a mapping (name:, model:, cluster:, ...)", 1);
    diags.throw_if_any();
  }

  for (const auto& text : overrides) {
    const auto eq = text.find('=');
    const std::string origin = "--set " + text;
    if (eq == std::string::npos || !valid_key(text.substr(0, eq))) {
      diags.error_at_line(0, text, "expected --set dotted.key=value");
      diags.set_origin(text, origin);
      continue;
    }
    Override o{text.substr(0, eq), text.substr(eq + 1), origin};
    try {
      load_yaml_string(o.value, origin);
    } catch (const ConfigError& e) {
      diags.append(e.diagnostics());
      continue;
    }
    exp.overrides_.push_back(std::move(o));
  }
  diags.throw_if_any();

  // Axes come from the document with the overrides applied (they can add, replace or fix axes).
  YAML::Node base = exp.document_for(std::numeric_limits<std::size_t>::max(), diags);
  YAML::Node sweep = base["sweep"];
  if (sweep.IsDefined() && !sweep.IsNull()) {
    if (!sweep.IsMap()) {
      diags.error(sweep, "sweep", "expected a mapping of dotted.key: [values]");
    } else {
      std::set<std::string> seen;
      for (auto it = sweep.begin(); it != sweep.end(); ++it) {
        const std::string key = it->first.Scalar();
        if (!seen.insert(key).second) {  // yaml-cpp keeps both entries; lookups would see only the first
          diags.error(it->first, "sweep." + key, "duplicate key");
          continue;
        }
        if (key == "zip") {
          exp.load_zip(it->second, diags, yaml_line(it->first));
          continue;
        }
        if (!valid_key(key) || key == "name" || key.rfind("sweep", 0) == 0 || key.rfind("output", 0) == 0) {
          diags.error(it->first, "sweep." + key, "cannot sweep over '" + key + "'");
          continue;
        }
        if (!it->second.IsSequence() || it->second.size() == 0) {
          diags.error(it->second, "sweep." + key, "expected a non-empty list of values", yaml_line(it->first));
          continue;
        }
        exp.axes_.push_back({{key}, it->second.size(), -1, false});
      }
    }
  }
  YamlMap top(base, "", diags);
  if (auto where = top.string("where")) {
    try {
      exp.where_ = std::make_shared<const Constraint>(*where);
    } catch (const std::invalid_argument& e) {
      top.report("where", e.what());
    }
  }
  exp.name_ = top.required_string("name");
  exp.description_ = top.string("description", "");
  if (auto output = top.map("output")) {
    exp.output_csv_ = output->string("csv");
    if (auto plot = output->string("plot")) {
      const bool known = std::filesystem::exists(data_dir() / "plots" / *plot);
      std::vector<std::string> scripts;
      for (const auto& entry : std::filesystem::directory_iterator(data_dir() / "plots"))
        if (entry.path().extension() == ".py" && entry.path().filename() != "ddlsim_csv.py")
          scripts.push_back(entry.path().filename().string());
      std::sort(scripts.begin(), scripts.end());
      if (!known || plot->find('/') != std::string::npos || *plot == "ddlsim_csv.py") {
        std::string list;
        for (const auto& name : scripts)
          list += (list.empty() ? "" : ", ") + name;
        output->report("plot", "unknown plot script '" + *plot + "'" + did_you_mean(*plot, scripts) + " (plots/: " + list + ")");
      } else {
        exp.output_plot_ = *plot;
      }
    }
    output->check_unknown_keys();
  }
  diags.throw_if_any();
  if (exp.point_count() > 10'000'000)
    throw ConfigError(path, yaml_line(sweep), "sweep", "the sweep has more than 10^7 points");
  exp.prepare_point_documents(base);
  return exp;
}

void Experiment::check_resources(const PointConfig& p, const YAML::Node& doc, Diagnostics& diags,
                                 const std::set<std::string>& varied) const
{
  // The best case (Resources.hpp): evaluate_point checks the point again with its planned stages.
  const ResourceEstimate cost = estimate_resources(p);
  const std::string message   = over_limits(p, cost);
  if (message.empty())
    return;
  // Blame the key this point sweeps, else the largest factor of the cost that the file sets.
  std::vector<std::pair<double, std::string>> factors = {
      {static_cast<double>(p.micro_batches()), "training.global_batch"},
      {static_cast<double>(p.parallelism.dp), "parallelism.dp"},
      {static_cast<double>(p.parallelism.pp) * p.parallelism.virtual_stages, "parallelism.pp"},
      {static_cast<double>(p.parallelism.tp), "parallelism.tp"}};
  std::stable_sort(factors.begin(), factors.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string key = cost.activities > p.limits.max_activities ? "limits.max_activities" : "limits.max_memory";
  for (const auto& [factor, name] : factors)
    if (find_path(doc, name).IsDefined()) {
      key = name;
      break;
    }
  const auto swept = std::find_if(factors.begin(), factors.end(), [&](const auto& factor) {
    return std::any_of(axes_.begin(), axes_.end(), [&](const Axis& axis) {
      return std::find(axis.keys.begin(), axis.keys.end(), factor.second) != axis.keys.end();
    });
  });
  if (swept != factors.end() && find_path(doc, swept->second).IsDefined())
    key = swept->second;
  // A key a search changed (Experiment::with) before any: the largest factor it set.
  const auto changed = std::find_if(factors.begin(), factors.end(),
                                    [&](const auto& factor) { return varied.count(factor.second) != 0; });
  if (changed != factors.end())
    key = changed->second;
  diags.error_at_line(yaml_line(find_path(doc, key)), key, message);
}

bool overlaps_p2p(const PointConfig& point)
{
  const auto& par = point.parallelism;
  if (par.overlap_p2p_comm)
    return *par.overlap_p2p_comm;
  switch (point.training.framework) {
  case sim::Framework::megatron:
    return par.schedule == sim::ScheduleKind::interleaved && par.virtual_stages > 1;
  case sim::Framework::megatron_2021:
    return false;
  case sim::Framework::pytorch:
  case sim::Framework::pytorch_compile:
    return par.schedule != sim::ScheduleKind::one_f_one_b;
  case sim::Framework::ideal:
    break;
  }
  return true;
}

sim::P2pSends p2p_sends(const PointConfig& point)
{
  const auto& par = point.parallelism;
  if (overlaps_p2p(point))
    return sim::P2pSends::overlapped;
  if (sim::is_megatron(point.training.framework) && par.schedule == sim::ScheduleKind::interleaved &&
      par.virtual_stages > 1)
    return sim::P2pSends::paired;
  return sim::P2pSends::blocking;
}

namespace {

// training.seq, training.attention and the routing keys shape the model: read before the model is
// built (the training: block checks them again, at their keys). `doc` by value, not const: yaml-cpp's
// const operator[] gives an invalid node for a missing key (a Chakra experiment has no training:),
// which throws when asked IsMap().
models::ModelOptions peek_model_options(YAML::Node doc, const std::string& file)
{
  models::ModelOptions model_options;
  if (const YAML::Node t = doc["training"]; t.IsMap()) {
    Diagnostics quiet(file);
    YamlMap peek(t, "training", quiet);
    model_options.seq = static_cast<int>(peek.integer("seq", 0, 1, 1 << 26));
    if (peek.has("attention"))
      model_options.attention = peek.choice("attention", models::attention_kind_table, models::AttentionKind::flash);
    if (peek.has("load_imbalance"))
      model_options.load_imbalance = peek.quantity("load_imbalance", Dimension::count, 1.0, Bound::positive);
    if (peek.has("capacity_factor"))
      model_options.capacity_factor = peek.quantity("capacity_factor", Dimension::count, 0.0, Bound::non_negative);
    if (!quiet.empty())
      model_options = {}; // reported below, at its key
  }
  return model_options;
}

// `cluster: {use: NAME_OR_PATH, gpus: N}` (or nodes: K): the first N GPUs of a cluster file, labelled
// in `subset_label`; a size the cluster cannot give is `subset_problem` (key, message), the point
// invalid. Any other inline mapping is a cluster.
sim::ClusterSpec parse_cluster_or_subset(YamlMap& m, const std::filesystem::path& dir, std::string& subset_label,
                                         std::pair<std::string, std::string>& subset_problem)
{
  if (!m.has("use"))
    return sim::parse_cluster(m);
  const std::string use = m.required_string("use");
  const auto gpus       = m.integer("gpus", 1, 1 << 24);
  const auto nodes      = m.integer("nodes", 1, 1 << 24);
  m.check_unknown_keys();
  auto path = resolve_input(use, "sim/clusters", dir);
  if (!path) {
    m.report("use", "unknown cluster '" + use + "'" + did_you_mean(use, shipped_names("sim/clusters")) +
                        " (shipped: " + shipped_names_text("sim/clusters") + "; or give a path to a YAML file)");
    return sim::ClusterSpec{};
  }
  if (gpus && nodes) {
    m.report("nodes", "give either gpus or nodes");
    return sim::ClusterSpec{};
  }
  sim::ClusterSpec whole;
  try {
    whole = sim::load_cluster_file(*path);
  } catch (const ConfigError& e) {
    m.diagnostics().append(e.diagnostics());
    return sim::ClusterSpec{};
  }
  const int n  = gpus    ? static_cast<int>(*gpus)
                 : nodes ? static_cast<int>(*nodes) * whole.gpus_per_node
                         : whole.gpu_count();
  subset_label = use + " (" + std::to_string(n) + " GPUs)";
  try {
    return sim::first_gpus(whole, n);
  } catch (const std::invalid_argument& e) {
    // Well formed, but not this cluster's: the point is invalid, the sweep goes on.
    subset_problem = {gpus ? "cluster.gpus" : "cluster.nodes", e.what()};
    return whole;
  }
}

void read_training(YamlMap& training, TrainingSpec& t)
{
  t.global_batch   = training.required_integer("global_batch", 1, 1'000'000'000);
  t.micro_batch    = static_cast<int>(training.required_integer("micro_batch", 1, 1'000'000));
  t.dtype          = training.choice("dtype", dtype_table, Dtype::bf16);
  t.optimizer      = training.choice("optimizer", models::optimizer_table, models::Optimizer::adam);
  t.recompute      = training.choice("recompute", models::recompute_table, models::Recompute::none);
  t.memory_reserve = training.quantity("memory_reserve", Dimension::bytes, t.memory_reserve, Bound::non_negative);
  if (training.has("grad_dtype"))
    t.grad_dtype = training.choice("grad_dtype", dtype_table, Dtype::fp32);
  t.simulate_oom = training.choice("memory_check", memory_check_table, false);
  t.seq          = static_cast<int>(training.integer("seq", 0, 1, 1 << 26));
  t.framework    = training.choice("framework", sim::framework_table, sim::Framework::ideal);
  t.cuda_graphs  = training.boolean("cuda_graphs", false);
  if (training.has("attention"))
    t.attention = training.choice("attention", models::attention_kind_table, models::AttentionKind::flash);
  if (training.has("load_imbalance")) {
    t.load_imbalance = training.quantity("load_imbalance", Dimension::count, 1.0, Bound::positive);
    if (*t.load_imbalance < 1)
      training.report("load_imbalance", "the busiest expert's tokens over the mean is at least 1");
  }
  if (training.has("capacity_factor"))
    t.capacity_factor = training.quantity("capacity_factor", Dimension::count, 0.0, Bound::non_negative);
  training.check_unknown_keys();
}

// `parallelism.ps`: parameter servers (sim/ParameterServer.hpp).
ParameterServerSpec read_parameter_server(YamlMap& ps)
{
  ParameterServerSpec spec;
  spec.servers                = static_cast<int>(ps.integer("servers", 1, 1, 1 << 16));
  const std::string placement = ps.string("placement", "dedicated");
  if (placement != "dedicated" && placement != "colocated")
    ps.report("placement", "unknown value '" + placement + "' (expected one of: dedicated, colocated)");
  spec.dedicated   = placement != "colocated";
  spec.consistency = ps.choice("consistency", sim::consistency_table, sim::Consistency::bsp);
  spec.staleness   = static_cast<int>(ps.integer("staleness", 0, 0, 1 << 16));
  spec.iterations  = static_cast<int>(ps.integer("iterations", 4, 1, 10000));
  if (ps.has("hosts")) {
    const auto hosts = ps.integer_list("hosts", 0, (1 << 20) - 1);
    const bool ok    = hosts.has_value();
    if (ok)
      spec.hosts.assign(hosts->begin(), hosts->end());
    std::vector<int> sorted = spec.hosts;
    std::sort(sorted.begin(), sorted.end());
    if (!ok)
      ps.report("hosts", "expected a list of GPU indices (>= 0)");
    else if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      ps.report("hosts", "a GPU can host one server");
    else if (ps.has("servers") && static_cast<std::size_t>(spec.servers) != spec.hosts.size())
      ps.report("hosts", "lists " + std::to_string(spec.hosts.size()) + " GPUs for " + std::to_string(spec.servers) +
                             " servers");
    if (ok)
      spec.servers = static_cast<int>(spec.hosts.size());
    if (ps.has("placement"))
      ps.report("placement", "give either placement or hosts");
  }
  ps.check_unknown_keys();
  return spec;
}

// The parallelism: block; dp: auto and tp_fidelity: auto are resolved once the cluster is known.
void read_parallelism(YamlMap& par, ParallelismSpec& out)
{
  out.schedule             = par.choice("schedule", sim::schedule_table, sim::ScheduleKind::gpipe);
  out.pp                   = static_cast<int>(par.integer("pp", 1, 1, 1 << 20));
  const YAML::Node dp_node = par.yaml()["dp"];
  if (dp_node.IsDefined() && dp_node.IsScalar() && dp_node.Scalar() == "auto") {
    par.node("dp");
    out.dp_auto = true; // resolved below, once the cluster's GPU count is known
  } else {
    out.dp = static_cast<int>(par.integer("dp", 1, 1, 1 << 20));
  }
  out.tp                = static_cast<int>(par.integer("tp", 1, 1, 1 << 20));
  out.cp                = static_cast<int>(par.integer("cp", 1, 1, 1 << 20));
  out.cp_algorithm      = par.choice("cp_algorithm", sim::cp_algorithm_table, sim::CpAlgorithm::ring);
  out.zero              = zero_stage(static_cast<int>(par.integer("zero", 0, 0, 3)));
  out.zero_group        = static_cast<int>(par.integer("zero_group", 0, 0, 1 << 20));
  out.sequence_parallel = par.boolean("sequence_parallel", false);
  out.tp_comm_overlap   = par.boolean("tp_comm_overlap", false);
  if (par.has("tp_backward_overlap")) // else the framework's default (Experiment::resolve)
    out.tp_backward_overlap_set = par.boolean("tp_backward_overlap", false);
  out.overlap_param_gather = par.boolean("overlap_param_gather", false);
  if (par.has("overlap_p2p_comm"))
    out.overlap_p2p_comm = par.boolean("overlap_p2p_comm", true);
  out.ep            = static_cast<int>(par.integer("ep", 1, 1, 1 << 20));
  out.ep_collective = par.choice("ep_collective", sim::collective_algorithm_table, sim::CollectiveAlgorithm::automatic);
  if (out.ep_collective != sim::CollectiveAlgorithm::direct &&
      out.ep_collective != sim::CollectiveAlgorithm::hierarchical &&
      out.ep_collective != sim::CollectiveAlgorithm::automatic)
    par.report("ep_collective", "the expert all-to-alls are auto, direct or hierarchical");
  out.ep_fidelity    = par.choice("ep_fidelity", sim::collective_fidelity_table, sim::CollectiveFidelity::flow);
  out.virtual_stages = static_cast<int>(par.integer("virtual_stages", 1, 1, 1024));
  out.dp_collective = par.choice("dp_collective", sim::collective_algorithm_table, sim::CollectiveAlgorithm::automatic);
  out.dp_fidelity   = par.choice("dp_fidelity", sim::collective_fidelity_table, sim::CollectiveFidelity::flow);
  out.dp_bucket     = par.quantity("dp_bucket", Dimension::bytes, 0.0, Bound::non_negative);
  out.tp_collective = par.choice("tp_collective", sim::collective_algorithm_table, sim::CollectiveAlgorithm::automatic);
  // tp_fidelity: auto (the default) is resolved once the cluster is known (below).
  const YAML::Node tp_fidelity = par.has("tp_fidelity") ? par.yaml()["tp_fidelity"] : YAML::Node();
  out.tp_fidelity_auto         = !tp_fidelity.IsDefined() || (tp_fidelity.IsScalar() && tp_fidelity.Scalar() == "auto");
  if (out.tp_fidelity_auto && tp_fidelity.IsDefined())
    par.node("tp_fidelity");
  else
    out.tp_fidelity = par.choice("tp_fidelity", sim::collective_fidelity_table, sim::CollectiveFidelity::flow);
  out.tp_aggregate  = par.boolean("tp_aggregate", true);
  out.fold_replicas = par.boolean("fold_replicas", true);
  for (const auto& [key, algorithm] :
       {std::pair{"dp_collective", out.dp_collective}, std::pair{"tp_collective", out.tp_collective}})
    if (algorithm == sim::CollectiveAlgorithm::direct)
      par.report(key, "direct is the all-to-all algorithm of expert parallelism (ep_collective); expected one "
                      "of: auto, ring, tree, double_tree, hierarchical, nvls, sharp");
  // `ps: null` (e.g. one value of a sweep over parameter-server settings) means no parameter server.
  const bool no_ps = par.has("ps") && par.yaml()["ps"].IsNull();
  if (no_ps)
    par.node("ps");
  if (auto ps = no_ps ? std::nullopt : par.map("ps"))
    out.ps = read_parameter_server(*ps);
  const bool has_balance = par.has("balance");
  out.partition          = par.choice("partition", models::partitioner_table,
                             has_balance ? models::Partitioner::explicit_balance : models::Partitioner::optimal);
  if (has_balance) {
    const auto balance = par.integer_list("balance", 1, 1'000'000);
    if (balance)
      out.balance.assign(balance->begin(), balance->end());
    if (!balance)
      par.report("balance", "expected a list of blocks per stage, each an integer >= 1");
    else if (out.partition != models::Partitioner::explicit_balance)
      par.report("balance", "balance is only used with partition: explicit");
  }
  par.check_unknown_keys();
}

} // namespace

PointConfig Experiment::point(std::size_t index) const
{
  Diagnostics diags(file_);
  YAML::Node doc = document_for(index, diags);
  diags.throw_if_any();
  PointConfig p;
  p.index      = index;
  p.experiment = name_;

  YamlMap top(doc, "", diags);
  top.required_string("name");
  top.string("description");
  // training.seq and training.attention shape the model: read them first (training: checks them again).
  const models::ModelOptions model_options = peek_model_options(doc, file_);
  // `model: {chakra: DIR}`: Chakra execution traces are the workload (ChakraWorkload.hpp).
  const bool chakra_model = doc["model"].IsMap() && doc["model"]["chakra"].IsDefined();
  std::optional<models::Model> model;
  if (chakra_model)
    read_chakra_model(top, dir_, p);
  else
    model = resolve_component<models::Model>(
        top, "model", "models/zoo", dir_, p.model_label,
        [&](const auto& path) { return models::load_model_file(path, model_options); },
        [&](YamlMap& m) { return models::parse_model(m, model_options); });
  // A cluster file in part: `cluster: {use: NAME_OR_PATH, gpus: N}` (or nodes: K), the first N GPUs.
  std::string subset_label;
  std::pair<std::string, std::string> subset_problem;  // key, message: a size the cluster cannot give
  auto cluster = resolve_component<sim::ClusterSpec>(
      top, "cluster", "sim/clusters", dir_, p.cluster_label,
      [](const auto& path) { return sim::load_cluster_file(path); },
      [&](YamlMap& m) { return parse_cluster_or_subset(m, dir_, subset_label, subset_problem); });
  if (!subset_label.empty())
    p.cluster_label = subset_label;
  std::optional<calibration::CalibrationProfile> profile;
  if (top.has("calibration") && !top.node("calibration").IsScalar())
    top.report("calibration", "expected a shipped profile name or a path to a profile YAML");
  else
    profile = resolve_component<calibration::CalibrationProfile>(
        top, "calibration", "calibration/profiles", dir_, p.calibration_label,
        [](const auto& path) { return calibration::load_profile_file(path); },
        [](YamlMap&) { return calibration::CalibrationProfile{}; });

  if (chakra_model) {
    read_chakra_keys(top, p);  // training, parallelism, output and limits: the traces fix the work
    top.check_unknown_keys();
    diags.throw_if_any();
    p.cluster = std::move(*cluster);
    p.profile = std::move(*profile);
    if (!subset_problem.first.empty())
      diags.error_at_line(yaml_line(find_path(doc, subset_problem.first)), subset_problem.first, subset_problem.second);
    else if (p.chakra->ranks() != p.cluster.gpu_count())
      diags.error_at_line(yaml_line(find_path(doc, "cluster")), "cluster",
                          "the Chakra traces have " + std::to_string(p.chakra->ranks()) + " ranks but cluster '" +
                              p.cluster.name + "' has " + std::to_string(p.cluster.gpu_count()) + " GPUs");
    p.problems = diags.list();
    return p;
  }
  if (auto training = top.map("training")) {
    read_training(*training, p.training);
  } else {
    top.report("training", "missing required key");
  }
  if (auto par = top.map("parallelism"))
    read_parallelism(*par, p.parallelism);
  if (auto output = top.map("output")) {
    output->string("csv");
    output->string("plot");
    output->check_unknown_keys();
  }
  if (auto limits = top.map("limits")) {
    p.limits.max_activities =
        limits->quantity("max_activities", Dimension::count, p.limits.max_activities, Bound::positive);
    p.limits.max_memory_bytes = limits->quantity("max_memory", Dimension::bytes, p.limits.max_memory_bytes, Bound::positive);
    limits->check_unknown_keys();
  }
  top.check_unknown_keys();
  diags.throw_if_any();
  p.model = std::move(*model);
  p.cluster = std::move(*cluster);
  p.profile = std::move(*profile);
  p.cluster_problem = subset_problem;
  resolve(p, doc, diags, p.parallelism.dp_auto);
  p.problems = diags.list();
  return p;
}

PointConfig Experiment::with(const PointConfig& base,
                             const std::function<void(TrainingSpec&, ParallelismSpec&)>& change,
                             const std::string& origin) const
{
  if (base.chakra)
    throw std::logic_error("Experiment::with: a Chakra point's layout is its traces'");
  Diagnostics diags(file_);
  const YAML::Node doc = document_for(base.index, diags); // for the lines of the keys only
  PointConfig p        = base;
  p.problems.clear();
  change(p.training, p.parallelism);
  const TrainingSpec& t = p.training;
  if (t.seq != base.training.seq || t.attention != base.training.attention ||
      t.load_imbalance != base.training.load_imbalance || t.capacity_factor != base.training.capacity_factor)
    throw std::logic_error("Experiment::with: training.seq, attention, load_imbalance and capacity_factor shape the "
                           "model: load the file with them set");
  // A problem at a key the change set is the change's, not the file's; a rule over several keys blames
  // the one the change set, as it blames a swept one.
  std::set<std::string> varied;
  const auto changed = [&](const char* key, const auto& get) {
    if (get(base) != get(p)) {
      diags.set_origin(key, origin);
      varied.insert(key);
    }
  };
  changed("parallelism.pp", [](const PointConfig& q) { return q.parallelism.pp; });
  changed("parallelism.tp", [](const PointConfig& q) { return q.parallelism.tp; });
  changed("parallelism.dp", [](const PointConfig& q) { return q.parallelism.dp; });
  changed("parallelism.cp", [](const PointConfig& q) { return q.parallelism.cp; });
  changed("parallelism.ep", [](const PointConfig& q) { return q.parallelism.ep; });
  changed("parallelism.zero", [](const PointConfig& q) { return q.parallelism.zero; });
  changed("parallelism.zero_group", [](const PointConfig& q) { return q.parallelism.zero_group; });
  changed("parallelism.sequence_parallel", [](const PointConfig& q) { return q.parallelism.sequence_parallel; });
  changed("parallelism.schedule", [](const PointConfig& q) { return q.parallelism.schedule; });
  changed("parallelism.virtual_stages", [](const PointConfig& q) { return q.parallelism.virtual_stages; });
  changed("training.global_batch", [](const PointConfig& q) { return q.training.global_batch; });
  changed("training.micro_batch", [](const PointConfig& q) { return q.training.micro_batch; });
  changed("training.dtype", [](const PointConfig& q) { return q.training.dtype; });
  changed("training.framework", [](const PointConfig& q) { return q.training.framework; });
  resolve(p, doc, diags, p.parallelism.dp_auto && p.parallelism.dp == base.parallelism.dp, varied);
  p.problems = diags.list();
  return p;
}

void Experiment::resolve(PointConfig& p, const YAML::Node& doc, Diagnostics& diags, bool dp_auto,
                         const std::set<std::string>& varied) const
{
  // Megatron-Core always overlaps the column layers' backward collectives; Megatron-LM as of SC'21 did
  // not (added 2021-09).
  p.parallelism.tp_backward_overlap =
      p.parallelism.tp_backward_overlap_set.value_or(p.training.framework == sim::Framework::megatron);
  // Cross-field checks: the point is well formed but may not be simulable.
  auto problem = [&](const std::string& key, const std::string& message) {
    diags.error_at_line(yaml_line(find_path(doc, key)), key, message);
  };
  // A problem that involves several keys is reported at the one this point sweeps, if any:
  // that is the value that made this point impossible.
  auto blame = [&](std::initializer_list<std::string> keys) {
    for (const auto& key : keys)
      if (varied.count(key) != 0)
        return key;
    for (const auto& key : keys)
      for (const auto& axis : axes_)
        if (std::find(axis.keys.begin(), axis.keys.end(), key) != axis.keys.end())
          return key;
    return *keys.begin();
  };
  const auto& par = p.parallelism;
  if (dp_auto && par.ps && !par.ps->hosts.empty()) {
    p.parallelism.dp = p.cluster.gpu_count();  // every GPU a worker; listed servers share theirs
    for (int h : par.ps->hosts)
      if (h >= p.cluster.gpu_count())
        problem("parallelism.ps.hosts", "GPU " + std::to_string(h) + " is not in cluster '" + p.cluster.name + "'");
  } else if (dp_auto && par.ps) {
    const int workers = p.cluster.gpu_count() - (par.ps->dedicated ? par.ps->servers : 0);
    if (workers >= 1)
      p.parallelism.dp = workers;
    else
      problem("parallelism.ps.servers", "dp: auto leaves no GPU for workers beside " + std::to_string(par.ps->servers) +
                                            " dedicated servers");
  } else if (dp_auto) {
    const int per_replica = p.parallelism.pp * p.parallelism.tp * p.parallelism.cp;
    if (p.cluster.gpu_count() % per_replica == 0)
      p.parallelism.dp = p.cluster.gpu_count() / per_replica;
    else
      problem(blame({"parallelism.pp", "parallelism.tp", "parallelism.cp", "parallelism.dp"}),
              "dp: auto cannot fill the " + std::to_string(p.cluster.gpu_count()) + " GPUs of cluster '" +
                  p.cluster.name + "' with replicas of pp x tp x cp = " + std::to_string(per_replica) + " GPUs");
  }
  if (p.parallelism.tp_fidelity_auto)
    p.parallelism.tp_fidelity = auto_tp_fidelity(
        p.parallelism, p.cluster,
        p.profile.find("comm_compute_slowdown") != nullptr ? p.profile.find("comm_compute_slowdown")->value : 0.0);
  check_rules(p, problem, blame, [&] { return diags.empty(); });
  if (diags.empty())
    check_resources(p, doc, diags, varied);
}

}  // namespace ddlsim::experiments
