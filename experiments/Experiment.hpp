// Experiment files: one base configuration plus sweep axes, expanded into points.
//
//   name: gpipe-microbatch
//   model: gpt2-xl                   # shipped name, path to a model YAML, or an inline model mapping,
//                                    # or {chakra: DIR}: Chakra execution traces (ChakraWorkload.hpp)
//   cluster: dgx-h100x2              # shipped name, path, or inline mapping
//   calibration: h100-sxm            # shipped profile name or path
//   training: {global_batch: 512, micro_batch: 8, dtype: bf16, optimizer: adam,
//              recompute: none, memory_reserve: 1GiB,      # recompute: none | selective | full | selective-op
//              seq: 8192, attention: flash,                # override the model's sequence length and
//                                                          # attention kernel (transformers: eager | flash)
//              load_imbalance: 1.5, capacity_factor: 1.25} # and a mixture of experts' routing
//   parallelism: {schedule: 1f1b, pp: 4, dp: 4, tp: 1,     # dp: auto = GPUs / (pp x tp x cp)
//                 cp: 1,                                   # context parallelism (ring attention)
//                 cp_algorithm: ring,                      # ring | all_gather (Llama 3's; needs cp > 1)
//                 sequence_parallel: false,                # Megatron SP inside each tp group
//                 tp_comm_overlap: false,                  # TE userbuffers (framework megatron, SP)
//                 tp_backward_overlap: true,               # column layers' backward collectives beside
//                                                          #   their GEMMs (default: framework megatron)
//                 zero: 0,                                 # 0-3: sharded data parallelism (ZeRO/FSDP)
//                 zero_group: 0,                           # GPUs per shard group (HSDP); 0 = dp x cp
//                 ep: 8, ep_collective: auto,              # expert parallelism (mixtures of experts) and
//                 ep_fidelity: flow,                       #   its all-to-alls: auto | direct | hierarchical
//                 dp_collective: auto, dp_fidelity: flow,  # auto | ring | tree | double_tree |
//                                                          #   hierarchical | nvls | sharp; flow | analytic
//                 dp_bucket: 25MiB,                        # gradient buckets overlapped with backward
//                 overlap_param_gather: false,             # ZeRO 1-2: gather in the next forward
//                 overlap_p2p_comm: true,                  # pipeline sends beside the next compute
//                                                          #   (default: the framework's, overlaps_p2p)
//                 tp_collective: auto, tp_fidelity: flow,  # tensor-parallel collectives
//                 partition: optimal,   # optimal | balanced | uniform | explicit (with balance: [..])
//                 ps: {servers: 2, placement: dedicated, consistency: ssp, staleness: 2, iterations: 8}}
//                     # or hosts: [0, 9]: the servers' GPUs (workers are GPUs 0..dp-1)
//   sweep:                           # cartesian product, first axis varies slowest
//     parallelism.pp: [1, 2, 4, 8]
//     training.micro_batch: [1, 2, 4, 8, 16, 32]
//     zip:                           # one axis whose keys move together (lists of equal length);
//       parallelism.dp: [8, 4, 2, 1] #   a list of such mappings makes several zipped axes
//       training.global_batch: [256, 128, 64, 32]
//   where: pp * dp * tp == gpus && micro_batch <= 16   # keep only these points (Constraint.hpp)
//   output: {csv: results/gpipe_microbatch.csv, plot: plot_bm.py}   # plot: its figure (`run --plot`)
//   limits: {max_activities: 1e8, max_memory: 16GiB}  # resource guard (Resources.hpp): a point whose
//                                    # estimated cost is over a limit is invalid, not simulated
//
// `--set key=value` overrides a key (and fixes a swept key to one value); `--set sweep.KEY=[..]`
// replaces an axis. Structural problems (syntax, unknown keys, wrong types, unknown names) are
// ConfigErrors of the whole file; a point whose values are well formed but cannot be simulated
// (pp x dp x tp != GPUs, batch not divisible) resolves with its `problems` listed, and becomes a
// CSV row with status `invalid`.
//
//   Experiment exp = Experiment::load("experiments/demo.yaml", {"training.dtype=fp16"});
//   for (std::size_t i = 0; i < exp.point_count(); ++i) PointConfig p = exp.point(i);
#pragma once

#include "calibration/Profile.hpp"
#include "experiments/Constraint.hpp"
#include "experiments/Resources.hpp"
#include "common/Dtype.hpp"
#include "models/Memory.hpp"
#include "models/Model.hpp"
#include "models/ModelBuilder.hpp"
#include "models/Partition.hpp"
#include "sim/ClusterSpec.hpp"
#include "sim/OpCosts.hpp"
#include "sim/ParameterServer.hpp"
#include "sim/Schedules.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::experiments {

class ChakraWorkload;  // ChakraWorkload.hpp: Chakra execution traces as the workload

struct TrainingSpec {
  long long global_batch = 0;  ///< samples per iteration, all replicas together
  int micro_batch = 1;         ///< samples per micro-batch
  Dtype dtype = Dtype::bf16;
  models::Optimizer optimizer = models::Optimizer::adam;
  models::Recompute recompute = models::Recompute::none;
  double memory_reserve = 1024.0 * 1024 * 1024;  ///< bytes per GPU kept for CUDA context, NCCL and the allocator
  /// A point that does not fit in its GPUs' memory: false, status oom and not simulated; true
  /// (`memory_check: warn`), simulated all the same, its message saying by how much (for timing runs that
  /// did fit, where the memory model is the one in doubt: experiments/validation.yaml)
  bool simulate_oom = false;
  /// Gradients accumulated and reduced in this dtype instead of the framework's (sim::step_dtypes):
  /// Megatron's --grad-reduce-in-bf16, or NeMo 1's distributed_fused_adam with grad_sync_dtype bf16
  std::optional<Dtype> grad_dtype;
  int seq = 0;  ///< tokens per sample set by the run (0: the model's own); the model is built with it
  std::optional<models::AttentionKind> attention;  ///< set by the run; else the model's own
  /// Whose step is simulated: the simulator's own kernel list, or eager PyTorch's with its host (sim/Framework.hpp)
  sim::Framework framework = sim::Framework::ideal;
  /// pytorch-compile: the compiled graphs replayed as CUDA graphs (torch.compile's mode="reduce-overhead")
  bool cuda_graphs = false;
  /// A mixture of experts' busiest expert over the mean, and capacity factor, set by the run (else the
  /// model's `moe:` values); the model is built with them
  std::optional<double> load_imbalance;
  std::optional<double> capacity_factor;
};

/// Parameter-server data parallelism instead of all-reduce (see sim/ParameterServer.hpp).
struct ParameterServerSpec {
  int servers = 1;
  bool dedicated = true;  ///< servers on their own GPUs (after the workers) or on the first workers' GPUs
  sim::Consistency consistency = sim::Consistency::bsp;
  int staleness = 0;      ///< ssp
  int iterations = 4;     ///< iterations simulated (the CSV reports their mean)
  std::vector<int> hosts; ///< chosen GPUs for the servers (overrides placement); workers are GPUs 0..dp-1
  /// GPU of server j.
  int server_gpu(int j, int workers) const
  {
    return !hosts.empty() ? hosts[static_cast<std::size_t>(j)] : dedicated ? workers + j : j;
  }
  /// GPUs the workers and servers occupy together.
  int gpus(int workers) const
  {
    if (hosts.empty())
      return dedicated ? workers + servers : workers;
    int extra = 0;
    for (int h : hosts)
      extra += h >= workers ? 1 : 0;
    return workers + extra;
  }
};

struct ParallelismSpec {
  sim::ScheduleKind schedule = sim::ScheduleKind::gpipe;
  int pp = 1;
  int dp = 1;
  int tp = 1;
  int cp = 1;              ///< context parallelism: each sample's sequence split over cp GPUs (ring attention)
  sim::CpAlgorithm cp_algorithm = sim::CpAlgorithm::ring;  ///< how the cp GPUs exchange K/V: ring | all_gather
  ZeroStage zero                = ZeroStage::none;         ///< sharded data parallelism (sim/ZeroStage.hpp; YAML 0-3)
  int zero_group = 0;      ///< GPUs a ZeRO shard group spans (hybrid sharding); 0 means dp x cp
  /// Expert parallelism: a mixture of experts' experts spread over ep GPUs carved out of the dp x cp
  /// replicas (Megatron-Core's order: ep consecutive replicas); their gradients are reduced over the
  /// dp x cp / ep replicas that hold the same experts
  int ep = 1;
  sim::CollectiveAlgorithm ep_collective = sim::CollectiveAlgorithm::automatic;  ///< auto | direct | hierarchical
  sim::CollectiveFidelity ep_fidelity = sim::CollectiveFidelity::flow;
  bool sequence_parallel = false;  ///< Megatron sequence parallelism inside each tensor-parallel group
  /// Transformer Engine's userbuffers overlap each linear layer's tensor-parallel all-gather and
  /// reduce-scatter with its GEMM (Megatron's --tp-comm-overlap; sim::PipelinePlan::tp_comm_overlap)
  bool tp_comm_overlap = false;
  /// A column layer's backward collectives beside its input- and weight-gradient GEMMs (Megatron's
  /// asynchronous backward; sim::PipelinePlan::tp_backward_overlap): by default with framework megatron
  bool tp_backward_overlap = false;
  /// ZeRO 1-2: gather the parameters bucket by bucket during the next forward instead of after the
  /// step (Megatron's --overlap-param-gather; sim::PipelinePlan::overlap_param_gather)
  bool overlap_param_gather = false;
  /// tp_backward_overlap as the file wrote it (unset: the framework's default, derived again when a
  /// search changes the framework: Experiment::with)
  std::optional<bool> tp_backward_overlap_set;
  /// tp_fidelity unset or `auto` in the file: resolved for the point's tp and cluster (auto_tp_fidelity)
  bool tp_fidelity_auto = true;
  /// dp `auto` in the file: the replicas that fill the cluster, derived again when a search changes the
  /// layout but not dp (Experiment::with)
  bool dp_auto = false;
  /// Pipeline sends beside the next compute (Megatron's --overlap-p2p-communication), or the stream
  /// waiting for each one; unset: the framework's own (overlaps_p2p())
  std::optional<bool> overlap_p2p_comm;
  int virtual_stages = 1;  ///< model chunks per device (interleaved schedule)
  sim::CollectiveAlgorithm dp_collective = sim::CollectiveAlgorithm::automatic;
  sim::CollectiveFidelity dp_fidelity = sim::CollectiveFidelity::flow;
  sim::CollectiveAlgorithm tp_collective = sim::CollectiveAlgorithm::automatic;
  sim::CollectiveFidelity tp_fidelity = sim::CollectiveFidelity::flow;  ///< `auto` resolved: auto_tp_fidelity()
  bool tp_aggregate = true;  ///< simulate each tp group as one device where its ranks are symmetric (Fold.hpp)
  /// Simulate one representative of each set of symmetric ranks (replicas, tp ranks): docs/scale.md
  bool fold_replicas = true;
  double dp_bucket = 0;  ///< bytes per gradient bucket overlapped with backward; 0 = one all-reduce after it
  models::Partitioner partition = models::Partitioner::optimal;
  std::vector<int> balance;  ///< blocks per stage when partition is explicit
  std::optional<ParameterServerSpec> ps;  ///< set: workers = dp, synchronised through parameter servers
  int gpus() const { return ps ? ps->gpus(dp) : pp * dp * tp * cp; }
  /// GPUs that hold the same weights and average their gradients: dp x cp.
  int replicas() const { return dp * cp; }
  /// GPUs a ZeRO shard group spans (1 without ZeRO).
  int shard_group() const { return !shards_optimizer(zero) ? 1 : zero_group > 0 ? zero_group : dp * cp; }
  /// GPUs that hold the same experts: dp x cp / ep (the expert-data-parallel group).
  int expert_replicas() const { return dp * cp / std::max(1, ep); }
  /// GPUs a ZeRO shard group of the experts' state spans: the shard group's members that hold the
  /// same experts (1 without ZeRO).
  int expert_shard_group() const { return !shards_optimizer(zero) ? 1 : std::max(1, shard_group() / std::max(1, ep)); }
};

/// What `parallelism.tp_fidelity: auto` (the default) means on `cluster`: the closed form where it
/// provably equals the flow-level ring (tp is a whole node's GPUs, whose links nothing else uses, the
/// algorithm a ring, and no comm_compute_slowdown: a closed-form tensor-parallel collective is
/// stream work, a flow-level one slows overlapping compute, sim/CommOverlap.hpp), flows otherwise.
sim::CollectiveFidelity auto_tp_fidelity(const ParallelismSpec& par, const sim::ClusterSpec& cluster,
                                         double comm_compute_slowdown = 0);

/// One fully resolved configuration, ready to simulate.
struct PointConfig {
  std::size_t index = 0;
  std::string experiment;
  std::string model_label;        ///< as the user named it (zoo name, path, or the inline model's name)
  std::string cluster_label;
  std::string calibration_label;
  models::Model model;
  sim::ClusterSpec cluster;
  calibration::CalibrationProfile profile;
  TrainingSpec training;
  ParallelismSpec parallelism;
  ResourceLimits limits;
  /// `model: {chakra: DIR}`: the work comes from these traces (model is then empty; training and
  /// parallelism hold the traces' values, for the CSV)
  std::shared_ptr<const ChakraWorkload> chakra;
  /// Why this point cannot be simulated as written (pp x dp x tp != GPUs, ...); empty when it can.
  std::vector<Diagnostic> problems;
  /// A cluster subset the cluster cannot give (`cluster: {use: ..., gpus: N}`): key and message
  std::pair<std::string, std::string> cluster_problem;
  bool is_valid() const { return problems.empty(); }
  int micro_batches() const
  {
    return static_cast<int>(training.global_batch / (static_cast<long long>(training.micro_batch) * parallelism.dp));
  }
};

/// Whether a point's pipeline sends overlap the compute after them (`parallelism.overlap_p2p_comm`,
/// sim::PipelinePlan::overlap_p2p_comm). Unset, as its framework runs them: Megatron-Core overlaps
/// them in the interleaved schedule only (its 1F1B waits for each batched send and receive),
/// Megatron-LM 2021 never did (a device synchronize after each); PyTorch's Schedule1F1B waits for
/// each send with the next receive, its GPipe and interleaved schedules later; `ideal` never waits.
bool overlaps_p2p(const PointConfig& point);
/// How the point's pipeline sends meet its compute: overlapped (overlaps_p2p), else as its framework
/// waits for them (sim::P2pSends: Megatron's interleaved schedule pairs a forward's send with the next
/// backward's, the rest wait for every send).
sim::P2pSends p2p_sends(const PointConfig& point);

/// Every cross-field rule's problem for a derived point, as "key: message" (Experiment::point and with()
/// report the same at the keys' lines; the resource guard aside): empty when the point passes them all.
/// `ddlsim search parallel` screens each layout's changed fields with it before estimating the layout.
std::vector<std::string> rule_problems(const PointConfig& point);

/// A sweep's points as Experiment::points() checks them, without the points: the sweep index of each
/// point the `where:` constraint keeps, in sweep order, and whether it can be simulated. A long sweep
/// keeps this list and builds each point again where it is simulated (experiments/SweepRunner.hpp).
struct PointList {
  std::vector<std::size_t> index;
  std::vector<bool> valid;
  std::size_t valid_count() const { return static_cast<std::size_t>(std::count(valid.begin(), valid.end(), true)); }
};

class Experiment {
public:
  /// Reads and checks the file. `overrides` are "dotted.key=yaml-value" strings from --set.
  /// Throws ConfigError (every structural problem, with file:line: key) when the file is unusable.
  static Experiment load(const std::string& path, const std::vector<std::string>& overrides = {});

  const std::string& get_name() const { return name_; }
  const std::string& get_file() const { return file_; }
  const std::string& get_description() const { return description_; }
  std::size_t point_count() const;
  /// False when the file's `where:` constraint rejects this point (such points are left out of the
  /// sweep: no row). Throws ConfigError (file:line: where) when the constraint cannot be evaluated.
  bool accepts(const PointConfig& point) const;
  /// The constraint as written, or empty.
  std::string where() const { return where_ ? where_->text() : std::string(); }
  /// Values of the sweep axes at point `index`, in axis order (empty without a sweep).
  std::vector<std::pair<std::string, std::string>> axis_values(std::size_t index) const;
  /// Resolves point `index`. Throws ConfigError when the file or a swept value is malformed; a point
  /// that is well formed but cannot be simulated comes back with PointConfig::problems filled.
  PointConfig point(std::size_t index) const;
  /// Point `base` of this experiment with its training and parallelism changed by `change` (what
  /// `ddlsim search` varies), derived and checked again as point() does (dp: auto where the change
  /// leaves dp, tp_backward_overlap from tp_backward_overlap_set and the framework, tp_fidelity: auto,
  /// every cross-field rule, the resource guard), without reading the file or building the model
  /// again. A problem at a key the change set names `origin` ("search grid"), and a rule over several
  /// keys blames the one it set; any other problem is at its line in the file. Throws std::logic_error
  /// for a Chakra point or a change of what shapes the model (training.seq, attention, load_imbalance,
  /// capacity_factor): load the file with those keys set instead.
  PointConfig with(const PointConfig& base, const std::function<void(TrainingSpec&, ParallelismSpec&)>& change,
                   const std::string& origin) const;
  /// Every point the `where:` constraint keeps, resolved, in sweep order. Throws ConfigError with
  /// the problems of every malformed point, or when the constraint keeps none.
  std::vector<PointConfig> points() const;
  /// What points() checks and throws, keeping only the list (memory of a few bytes a point).
  PointList point_list() const;

  const std::optional<std::string>& output_csv() const { return output_csv_; }
  /// The experiment's default figure: a script of plots/ (`output: {plot: plot_bm.py}`) that reads
  /// the CSV; plot_throughput.py when the file names none.
  const std::string& output_plot() const { return output_plot_; }

private:
  struct Axis {
    std::vector<std::string> keys;  ///< one key, or the keys of a zip group (their values move together)
    std::size_t size = 0;
    int zip = -1;                   ///< -1: a plain axis; else its group in sweep.zip (a list of groups)
    bool zip_mapping = false;       ///< sweep.zip is one mapping, not a list of them
  };
  YAML::Node axis_list(const YAML::Node& sweep, const Axis& axis, std::size_t key) const;
  void load_zip(const YAML::Node& zip, Diagnostics& diags, int line);
  struct Override {
    std::string key;
    std::string value;
    std::string origin;
  };
  YAML::Node document_for(std::size_t index, Diagnostics& diags) const;
  /// Sets point_text_ and axis_snippets_ (Experiment.cpp says how they are used).
  void prepare_point_documents(const YAML::Node& base);
  /// Calls `keep` with every point the constraint keeps, in sweep order; then throws ConfigError with
  /// every malformed point's problems, or when the constraint keeps none.
  void scan_points(const std::function<void(PointConfig&&)>& keep) const;
  /// The resource guard: reports a point whose estimated cost is over its limits (Resources.hpp).
  void check_resources(const PointConfig& p, const YAML::Node& doc, Diagnostics& diags,
                       const std::set<std::string>& varied = {}) const;
  /// Derives what depends on other keys (dp: auto, the framework's defaults, tp_fidelity: auto) and checks
  /// every cross-field rule of a parsed point, each problem at its key's line in `doc`; a rule over several
  /// keys blames a `varied` or swept one first.
  void resolve(PointConfig& p, const YAML::Node& doc, Diagnostics& diags, bool dp_auto,
               const std::set<std::string>& varied = {}) const;

  std::string file_;
  std::string text_;
  std::filesystem::path dir_;
  std::string name_;
  std::string description_;
  std::vector<Axis> axes_;
  std::vector<Override> overrides_;
  std::optional<std::string> output_csv_;
  std::string output_plot_ = "plot_throughput.py";
  std::shared_ptr<const Constraint> where_;
  std::string point_text_; ///< the file with its sweep block blanked; empty: parse text_ per point
  std::vector<std::vector<std::vector<std::string>>> axis_snippets_; ///< [axis][key][value]: YAML text
};

}  // namespace ddlsim::experiments
