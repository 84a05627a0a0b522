#include "common/DataPath.hpp"
#include "experiments/Constraint.hpp"
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/SweepRunner.hpp"
#include "sim/ClusterSpec.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::experiments;

namespace {
const std::string fixtures = DDLSIM_TEST_FIXTURES;

// Writes `text` to a fresh file next to the fixtures' cluster so relative names resolve.
std::string write_temp(const std::string& text)
{
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixtures + "/node4.yaml", dir / "node4.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  const auto path = dir / ("exp" + std::to_string(counter++) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

const std::string base = "name: t\nmodel: gpt2-small\ncluster: node4.yaml\ncalibration: h100-sxm\n"
                         "training: {global_batch: 16, micro_batch: 2}\n";

std::vector<Diagnostic> load_errors(const std::string& text, const std::vector<std::string>& sets = {})
{
  try {
    auto exp = Experiment::load(write_temp(text), sets);
    for (std::size_t i = 0; i < exp.point_count(); ++i)
      exp.point(i);
  } catch (const ConfigError& e) {
    return e.diagnostics();
  }
  return {};
}
}  // namespace

TEST_CASE("sweeps expand as a cartesian product, first axis slowest")
{
  auto exp = Experiment::load(fixtures + "/sweep.yaml");
  REQUIRE(exp.point_count() == 6);
  CHECK(exp.axis_values(0) == std::vector<std::pair<std::string, std::string>>{{"parallelism.pp", "1"},
                                                                             {"training.micro_batch", "1"}});
  CHECK(exp.axis_values(5) == std::vector<std::pair<std::string, std::string>>{{"parallelism.pp", "3"},
                                                                             {"training.micro_batch", "2"}});
  PointConfig p3 = exp.point(3);
  CHECK(p3.parallelism.pp == 2);
  CHECK(p3.parallelism.dp == 2);  // dp: auto fills the 4 GPUs
  CHECK(p3.training.micro_batch == 2);
  CHECK(p3.micro_batches() == 4);
  CHECK(p3.is_valid());
  CHECK(p3.model_label == "gpt2-small");
  CHECK(p3.cluster.gpu_count() == 4);

  PointConfig p4 = exp.point(4);  // pp = 3 on 4 GPUs
  REQUIRE_FALSE(p4.is_valid());
  CHECK(p4.problems[0].key == "parallelism.pp");  // the swept key that made the point impossible
  CHECK(p4.problems[0].line == 9);                // the line of its value in the sweep
}

TEST_CASE("--set overrides a key, fixes a swept key, and replaces an axis")
{
  auto fixed = Experiment::load(fixtures + "/sweep.yaml", {"parallelism.pp=2", "training.dtype=fp16"});
  CHECK(fixed.point_count() == 2);
  CHECK(fixed.point(1).parallelism.pp == 2);
  CHECK(fixed.point(1).training.dtype == Dtype::fp16);
  auto axis = Experiment::load(fixtures + "/sweep.yaml", {"sweep.training.micro_batch=[1, 2, 4, 8]"});
  CHECK(axis.point_count() == 12);
  CHECK(axis.point(11).training.micro_batch == 8);

  auto d = load_errors(base, {"training.micro_batchh=3"});
  REQUIRE(d.size() == 1);
  CHECK(d[0].file == "--set training.micro_batchh=3");
  CHECK(d[0].message == "unknown key (did you mean 'micro_batch'?)");
  CHECK_THROWS_AS(Experiment::load(fixtures + "/sweep.yaml", {"novalue"}), ConfigError);
  CHECK_THROWS_AS(Experiment::load(fixtures + "/sweep.yaml", {"a.b=[1,"}), ConfigError);
}

TEST_CASE("structural problems are errors with file, line and key")
{
  auto d = load_errors(base + "parallelism: {pp: 2, dp: 2, schedul: gpipe}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "parallelism.schedul");
  CHECK(d[0].line == 6);

  d = load_errors(base + "parallelism: {pp: two}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "parallelism.pp");

  d = load_errors("name: t\nmodel: gpt9\ncluster: node4.yaml\ncalibration: h100-sxm\ntraining: {global_batch: 16, micro_batch: 2}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "model");
  CHECK(d[0].line == 2);
  CHECK(d[0].message.find("gpt2-xl") != std::string::npos);  // lists the shipped names

  d = load_errors(base + "sweep: {parallelism.pp: []}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "sweep.parallelism.pp");
}

TEST_CASE("well-formed but impossible points list their problems")
{
  auto exp = Experiment::load(write_temp(base + "parallelism: {pp: 2, dp: 3}\n"));
  auto p = exp.point(0);
  REQUIRE(p.problems.size() == 2);
  CHECK(p.problems[0].key == "parallelism.pp");
  CHECK(p.problems[0].message.find("does not match the 4 GPUs") != std::string::npos);
  CHECK(p.problems[1].key == "training.global_batch");
  CHECK(p.problems[1].message.find("not divisible by micro_batch x dp = 2 x 3 = 6") != std::string::npos);

  auto inline_model = Experiment::load(write_temp(
      "name: t\nmodel: {name: tiny, gpt: {layers: 2, hidden: 64, heads: 4, seq: 32, vocab: 100}}\n"
      "cluster: node4.yaml\ncalibration: h100-sxm\ntraining: {global_batch: 8, micro_batch: 2}\n"
      "parallelism: {pp: 4, dp: 1}\n"));
  auto q = inline_model.point(0);
  CHECK(q.model_label == "tiny");
  CHECK(q.is_valid());  // embedding, 2 layers, head: 4 blocks for 4 stages
  auto too_deep = Experiment::load(write_temp(
      "name: t\nmodel: {name: tiny, gpt: {layers: 2, hidden: 64, heads: 4, seq: 32, vocab: 100}}\n"
      "cluster: node4.yaml\ncalibration: h100-sxm\ntraining: {global_batch: 8, micro_batch: 2}\n"
      "parallelism: {pp: 4, dp: 1}\n"), {"parallelism.pp=2", "parallelism.dp=2"});
  CHECK(too_deep.point(0).is_valid());
}

TEST_CASE("partition options: explicit balance is checked against pp and the model's blocks")
{
  // gpt2-small has 14 blocks: embedding, 12 layers, head.
  auto ok = Experiment::load(write_temp(base + "parallelism: {pp: 2, dp: 2, balance: [6, 8]}\n"));
  auto p = ok.point(0);
  CHECK(p.is_valid());
  CHECK(p.parallelism.partition == models::Partitioner::explicit_balance);
  CHECK(p.parallelism.balance == std::vector<int>{6, 8});

  auto wrong_sum = Experiment::load(write_temp(base + "parallelism: {pp: 2, dp: 2, balance: [6, 7]}\n"));
  auto q = wrong_sum.point(0);
  REQUIRE(q.problems.size() == 1);
  CHECK(q.problems[0].key == "parallelism.balance");
  CHECK(q.problems[0].line == 6);
  CHECK(q.problems[0].message == "balance adds up to 13 blocks but model 'gpt2-small' has 14");

  auto wrong_count = Experiment::load(write_temp(base + "parallelism: {pp: 4, dp: 1, balance: [6, 8]}\n"));
  CHECK(wrong_count.point(0).problems.at(0).message == "balance lists 2 stages but pp = 4");

  auto too_many = Experiment::load(write_temp(base + "parallelism: {pp: 4, dp: 1}\n"), {"model=mlp-toy", "parallelism.pp=16"});
  bool blocks = false;
  for (const auto& d : too_many.point(0).problems)
    blocks = blocks || d.message.find("pp = 16 stages for a model of only 11 blocks") != std::string::npos;
  CHECK(blocks);

  auto d = load_errors(base + "parallelism: {pp: 2, dp: 2, balance: [6, x]}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "parallelism.balance");
  d = load_errors(base + "parallelism: {pp: 2, dp: 2, partition: uniform, balance: [6, 8]}\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].message == "balance is only used with partition: explicit");
  d = load_errors(base, {"training.recompute=sometimes"});
  REQUIRE(d.size() == 1);
  CHECK(d[0].key == "training.recompute");
  CHECK(d[0].message.find("unknown value 'sometimes' (expected one of: none, selective, full, selective-op)") !=
        std::string::npos);
}

TEST_CASE("cluster files: fat trees, heterogeneous nodes and stragglers; errors with file, line and key")
{
  const sim::ClusterSpec mixed = sim::load_cluster("h100-a100-mixed");
  CHECK(mixed.gpu_count() == 16);
  CHECK(mixed.speed_of(0) == 1.0);
  CHECK(mixed.speed_of(3) == 0.8);
  CHECK(mixed.speed_of(12) == 0.315);
  CHECK(mixed.memory_of(2) == 80.0 * (1 << 30));
  CHECK(mixed.memory_of(9) == 40.0 * (1 << 30));
  const sim::ClusterSpec tree = sim::load_cluster("dgx-a100x16-fattree");
  CHECK(tree.topology == sim::FabricTopology::fat_tree);
  CHECK(tree.nodes_per_leaf == 4);
  CHECK(tree.leaf_uplink_bandwidth() == doctest::Approx(4 * 8 * 25e9 / 2));
  for (const auto& name : shipped_names("sim/clusters"))
    CHECK_NOTHROW(sim::load_cluster(name));

  auto errors = [](const std::string& text) {
    try {
      Diagnostics diags("c.yaml");
      YAML::Node root = load_yaml_string(text, "c.yaml");
      YamlMap map(root, "", diags);
      sim::parse_cluster(map);
      diags.throw_if_any();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string head = "name: c\nnodes: 2\ngpus_per_node: 4\ngpu: {memory: 80GiB}\nintra_node: {bandwidth: 1GBps}\n"
                           "nic: {bandwidth: 1GBps}\n";
  CHECK(errors(head + "fabric: {topology: fat_tree}\n").find("c.yaml:7: fabric.nodes_per_leaf: missing") != std::string::npos);
  CHECK(errors(head + "fabric: {topology: torus}\n").find("c.yaml:7: fabric.topology: unknown value 'torus'") !=
        std::string::npos);
  CHECK(errors(head + "fabric: {}\nstragglers:\n  - {gpu: 8, speed: 0.5}\n").find("c.yaml:9: stragglers[0].gpu") !=
        std::string::npos);
  CHECK(errors(head + "fabric: {}\nnode_gpus:\n  - {nodes: [2], speed: 0.5}\n").find("c.yaml:9: node_gpus[0].nodes: node indices go from 0 to 1") !=
        std::string::npos);
  CHECK(errors(head + "fabric: {}\nstragglers:\n  - {gpu: 1, speed: 0}\n").find("stragglers[0].speed") != std::string::npos);
}

TEST_CASE("zipped axes move together; a where constraint keeps only the points it accepts")
{
  const std::string text = base + "parallelism: {pp: 1, dp: 4}\nsweep:\n  training.micro_batch: [1, 2]\n"
                                  "  zip:\n    parallelism.pp: [1, 2, 4]\n    parallelism.dp: [4, 2, 1]\n"
                                  "where: pp * dp == gpus && micro_batch * dp <= 4\n";
  const auto exp = Experiment::load(write_temp(text));
  REQUIRE(exp.point_count() == 6);  // 2 micro-batches x 3 zipped (pp, dp) pairs
  std::vector<std::tuple<int, int, int>> kept;
  for (std::size_t i = 0; i < exp.point_count(); ++i) {
    const PointConfig p = exp.point(i);
    CHECK(p.parallelism.pp * p.parallelism.dp == 4);  // zipped values stay paired
    if (exp.accepts(p))
      kept.emplace_back(p.training.micro_batch, p.parallelism.pp, p.parallelism.dp);
  }
  // micro_batch x dp <= 4: (1,1,4) (1,2,2) (1,4,1) (2,2,2) (2,4,1); (2,1,4) is rejected.
  CHECK(kept == std::vector<std::tuple<int, int, int>>{{1, 1, 4}, {1, 2, 2}, {1, 4, 1}, {2, 2, 2}, {2, 4, 1}});
  // point_list: the same points as points(), by index, with their validity (a long sweep's list)
  const std::vector<PointConfig> points = exp.points();
  const PointList list                  = exp.point_list();
  REQUIRE(list.index.size() == points.size());
  REQUIRE(list.valid.size() == points.size());
  for (std::size_t k = 0; k < points.size(); ++k) {
    CHECK(list.index[k] == points[k].index);
    CHECK(list.valid[k] == points[k].is_valid());
  }
  CHECK(list.index == std::vector<std::size_t>{0, 1, 2, 4, 5});
  const auto values = exp.axis_values(4);
  REQUIRE(values.size() == 3);
  CHECK(values[1] == std::pair<std::string, std::string>{"parallelism.pp", "2"});
  CHECK(values[2] == std::pair<std::string, std::string>{"parallelism.dp", "2"});
}

TEST_CASE("points built without the sweep's lists are the points of the whole file, at its lines")
{
  // A block mapping whose sweep defines no anchor: each point is parsed from the file with its sweep
  // blanked and its values alone (Experiment.cpp); with an anchor in the sweep, from the whole file.
  // Both give the same points, and a bad value is reported at its own line (10), past the sweep a
  // key keeps its line (12), and --set still overrides.
  const std::string sweep = "sweep:\n  training.micro_batch: [1, 2]\n  parallelism.pp: [1, 2]\n"
                            "  zip:\n    training.dtype: [bf16, fp7]\n    training.optimizer: [adam, sgd]\n";
  const std::string rest  = "description: after the sweep\nparallelism: {dp: auto}\n";
  const std::string fast  = base + sweep + rest;
  std::string slow        = fast;
  slow.replace(slow.find("[1, 2]"), 6, "&mb [1, 2]");
  const auto a = Experiment::load(write_temp(fast), {"training.global_batch=32"});
  const auto b = Experiment::load(write_temp(slow), {"training.global_batch=32"});
  REQUIRE(a.point_count() == 8);
  for (std::size_t i = 0; i < a.point_count(); ++i) {
    if (i % 2 == 1) { // fp7: the same error, at line 10 of either file
      for (const auto* exp : {&a, &b}) {
        try {
          exp->point(i);
          FAIL("point " << i << " has a bad dtype");
        } catch (const ConfigError& e) {
          REQUIRE(e.diagnostics().size() == 1);
          CHECK(e.diagnostics()[0].line == 10);
          CHECK(e.diagnostics()[0].key == "training.dtype");
        }
      }
      continue;
    }
    const PointConfig p = a.point(i), q = b.point(i);
    CHECK(p.training.micro_batch == q.training.micro_batch);
    CHECK(p.parallelism.pp == q.parallelism.pp);
    CHECK(p.parallelism.dp == q.parallelism.dp);
    CHECK(p.training.global_batch == 32);
    CHECK(q.training.global_batch == 32);
    CHECK(p.training.dtype == q.training.dtype);
    CHECK(p.training.optimizer == q.training.optimizer);
    CHECK(p.problems.size() == q.problems.size());
  }
  CHECK(a.point(6).training.micro_batch == 2);
  CHECK(a.point(6).parallelism.pp == 2);
  const auto late = load_errors(base + sweep + "parallelism: {dp: many}\n");
  REQUIRE(!late.empty());
  CHECK(late[0].line == 12);
  CHECK(late[0].key == "parallelism.dp");
}

TEST_CASE("--set sweep= replaces the whole sweep; a swept mapping keeps its parts' lines")
{
  const std::string text = base + "parallelism: {dp: 4}\nsweep:\n  training.micro_batch: [4, 8]\n";
  const auto replaced    = Experiment::load(write_temp(text), {"sweep={training.micro_batch: [1, 2, 4]}"});
  REQUIRE(replaced.point_count() == 3);
  CHECK(replaced.point(0).training.micro_batch == 1);
  CHECK(replaced.point(2).training.micro_batch == 4);
  CHECK(replaced.point(2).is_valid());
  const auto none = Experiment::load(write_temp(text), {"sweep={}"});
  REQUIRE(none.point_count() == 1);
  CHECK(none.point(0).training.micro_batch == 2);
  CHECK(none.point(0).is_valid());
  // a swept value that is a mapping over several lines: its bad key is named at its own line (10)
  const auto errors =
      load_errors(base + "sweep:\n  training:\n    - {global_batch: 16, micro_batch: 2}\n    - global_batch: 16\n\n"
                         "      micro_batch: 4\n      bogus: 1\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].line == 12);
  CHECK(errors[0].key == "training.bogus");
}

TEST_CASE("a point whose inputs changed since the sweep was checked becomes an invalid point")
{
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_gone_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(data_dir() / "models" / "zoo" / "gpt2-small.yaml", dir / "m.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  std::string text = base;
  text.replace(text.find("gpt2-small"), 10, (dir / "m.yaml").string());
  const auto exp =
      Experiment::load(write_temp(text + "parallelism: {dp: 4}\nsweep:\n  training.micro_batch: [1, 2]\n"));
  const PointList list = exp.point_list();
  REQUIRE(list.valid == std::vector<bool>{true, true});
  const PointSource source = point_source(exp, list);
  CHECK(source.point(0).is_valid());
  std::filesystem::remove(dir / "m.yaml");  // as if deleted during a long sweep
  const PointConfig gone = source.point(1);
  CHECK(gone.index == 1);
  CHECK(gone.experiment == "t");
  REQUIRE_FALSE(gone.is_valid());
  CHECK(gone.problems[0].to_string().find("m.yaml") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("zip groups of unequal lengths and bad constraints name file, line and key")
{
  auto errors = load_errors(base + "sweep:\n  zip:\n    parallelism.pp: [1, 2]\n    parallelism.dp: [4, 2, 1]\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].line == 9);
  CHECK(errors[0].key == "sweep.zip.parallelism.dp");
  CHECK(errors[0].message.find("has 3 values; the group's first list has 2") != std::string::npos);
  errors = load_errors(base + "where: pp * * 2\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].key == "where");
  CHECK(errors[0].line == 6);
  CHECK(errors[0].message.find("at character 6") != std::string::npos);
  errors = load_errors(base + "where: stages > 2\n");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message.find("unknown name 'stages'") != std::string::npos);
  errors = load_errors(base + "sweep:\n  zip: [1, 2]\n");
  REQUIRE(errors.size() == 2);  // each entry of the list is not a mapping
  CHECK(errors[0].key == "sweep.zip[0]");
  CHECK(errors[1].key == "sweep.zip[1]");
}

TEST_CASE("constraint expressions: precedence, logic words, comparisons, errors")
{
  const std::map<std::string, double> v{{"pp", 4}, {"dp", 2}, {"tp", 8}, {"micro_batch", 3}};
  CHECK(Constraint("pp * dp + tp == 16").accepts(v));
  CHECK(Constraint("pp + dp * tp == 20").accepts(v));
  CHECK(Constraint("(pp + dp) * tp == 48").accepts(v));
  CHECK(Constraint("-pp + 5 == 1").accepts(v));
  CHECK(Constraint("micro_batch % 2 == 1 and not (dp > 2)").accepts(v));
  CHECK_FALSE(Constraint("pp < 4 || dp >= 3").accepts(v));
  CHECK(Constraint("pp <= 4 && pp != 3 && 1").accepts(v));
  CHECK(Constraint("!0").accepts(v));
  CHECK_THROWS_WITH_AS(Constraint("pp / (dp - 2) > 1").accepts(v), "division by zero", std::invalid_argument);
  CHECK_THROWS_WITH_AS(Constraint("gpus > 1").accepts(v), "no value for 'gpus'", std::invalid_argument);
  CHECK_THROWS_WITH_AS(Constraint("pp == (dp"), "at character 10: expected ')'", std::invalid_argument);
  CHECK_THROWS_WITH_AS(Constraint("pp ==="), "at character 6: unexpected '='", std::invalid_argument);
  CHECK_THROWS_AS(Constraint(""), std::invalid_argument);
}

TEST_CASE("a point changed in code is the point the file would give with those keys set")
{
  // What `ddlsim search` does: a layout set on the experiment's point, derived and checked again
  // without reading the file: dp given, the framework's default for tp_backward_overlap, tp_fidelity:
  // auto resolved for the new tp, and every rule, as --set and a fresh load give them.
  const std::string path  = write_temp("name: t\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
                                        "training: {global_batch: 64, micro_batch: 2, seq: 2048}\n"
                                        "parallelism: {dp: auto, schedule: 1f1b}\n");
  const Experiment exp    = Experiment::load(path);
  const PointConfig start = exp.point(0);
  REQUIRE(start.is_valid());
  CHECK(start.parallelism.dp == 16);
  CHECK(!start.parallelism.tp_backward_overlap);
  const PointConfig changed = exp.with(
      start,
      [](TrainingSpec& t, ParallelismSpec& par) {
        t.framework           = sim::Framework::megatron;
        t.micro_batch         = 1;
        par.tp                = 8;
        par.dp                = 2;
        par.sequence_parallel = true;
      },
      "test");
  const PointConfig loaded =
      Experiment::load(path, {"training.framework=megatron", "training.micro_batch=1", "parallelism.tp=8",
                              "parallelism.dp=2", "parallelism.sequence_parallel=true"})
          .point(0);
  REQUIRE(loaded.is_valid());
  CHECK(changed.is_valid());
  CHECK(changed.parallelism.tp_backward_overlap); // Megatron-Core's default, derived for the new framework
  CHECK(changed.parallelism.tp_backward_overlap == loaded.parallelism.tp_backward_overlap);
  CHECK(changed.parallelism.tp_fidelity == loaded.parallelism.tp_fidelity);
  CHECK(changed.micro_batches() == loaded.micro_batches());
  CHECK(describe_point(changed).serialize() == describe_point(loaded).serialize());
  // A problem at a key the change set names the change, and a rule over several keys blames the one the
  // change set (global_batch not divisible by the new micro-batch x dp: micro_batch); a problem of the
  // file's own keys stays at its line.
  const PointConfig deep = exp.with(
      start,
      [](TrainingSpec&, ParallelismSpec& par) {
        par.pp = 64;
        par.dp = 1;
      },
      "the search's layout");
  REQUIRE(!deep.is_valid());
  CHECK(deep.problems.front().file == "the search's layout");
  CHECK(deep.problems.front().key.rfind("parallelism.", 0) == 0);
  const PointConfig odd = exp.with(
      start, [](TrainingSpec& t, ParallelismSpec&) { t.micro_batch = 3; }, "x");
  REQUIRE(!odd.is_valid());
  CHECK(odd.problems.front().key == "training.micro_batch");
  CHECK(odd.problems.front().file == "x");
  const std::string three        = write_temp("name: t\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
                                                     "training: {global_batch: 64, micro_batch: 2, seq: 2048}\n"
                                                     "parallelism: {dp: 4, tp: 3}\n");
  const Experiment bad           = Experiment::load(three);
  const PointConfig file_problem = bad.with(
      bad.point(0), [](TrainingSpec& t, ParallelismSpec&) { t.micro_batch = 1; }, "x");
  REQUIRE(!file_problem.is_valid());
  CHECK(file_problem.problems.front().key == "parallelism.tp");
  CHECK(file_problem.problems.front().file == three);
  CHECK(file_problem.problems.front().line == 6);
  // dp: auto in the file fills the cluster again when the change leaves dp: tp 8 on 16 GPUs, dp 2.
  const PointConfig filled = exp.with(
      start, [](TrainingSpec&, ParallelismSpec& par) { par.tp = 8; }, "x");
  CHECK(filled.is_valid());
  CHECK(filled.parallelism.dp == 2);
  // The resource guard blames the largest factor of the cost the change set.
  const std::string tight  = write_temp("name: t\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
                                         "training: {global_batch: 64, micro_batch: 2, seq: 2048}\n"
                                         "parallelism: {dp: auto}\nlimits: {max_activities: 10}\n");
  const Experiment guarded = Experiment::load(tight);
  const PointConfig over   = guarded.with(
        guarded.point(0),
        [](TrainingSpec&, ParallelismSpec& par) {
        par.pp = 2;
        par.dp = 8;
      },
        "x");
  REQUIRE(over.problems.size() == 1);
  CHECK(over.problems.front().key == "parallelism.dp");
  CHECK(over.problems.front().file == "x");
  // What shapes the model cannot change without building it again.
  CHECK_THROWS_AS(exp.with(
                      start, [](TrainingSpec& t, ParallelismSpec&) { t.seq = 4096; }, "x"),
                  std::logic_error);
}

TEST_CASE("rule_problems gives the messages the point's own checks give, without the resource guard")
{
  // What `search parallel` screens each layout with: the rules resolve() reports at the keys' lines.
  const std::string path  = write_temp("name: t\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
                                        "training: {global_batch: 64, micro_batch: 2, seq: 2048}\n"
                                        "parallelism: {dp: 8, pp: 2, schedule: 1f1b}\n"
                                        "limits: {max_activities: 10}\n");
  const Experiment exp    = Experiment::load(path);
  const PointConfig start = exp.point(0);
  REQUIRE(start.problems.size() == 1); // over the resource guard only
  CHECK(rule_problems(start).empty());
  const auto changed = [&](const std::function<void(TrainingSpec&, ParallelismSpec&)>& change) {
    const PointConfig p                  = exp.with(start, change, "x");
    const std::vector<std::string> rules = rule_problems(p);
    REQUIRE(!rules.empty());
    // The same first problem as the point's own checks, at the key its rule names first.
    CHECK(rules.front().find(p.problems.front().message) != std::string::npos);
    return rules.front();
  };
  // The two rules the search once checked by hand, and one it did not.
  CHECK(changed([](TrainingSpec&, ParallelismSpec& par) {
          par.zero       = ZeroStage::optimizer;
          par.zero_group = 3;
        }).rfind("parallelism.zero_group: zero_group = 3 does not divide dp x cp = 8", 0) == 0);
  CHECK(changed([](TrainingSpec& t, ParallelismSpec& par) {
          par.schedule       = sim::ScheduleKind::interleaved;
          par.virtual_stages = 2;
          t.micro_batch      = 8; // one micro-batch per replica: not divisible by pp 2
        }).find("divisible by pp (2)") != std::string::npos);
  CHECK(changed([](TrainingSpec&, ParallelismSpec& par) {
          par.virtual_stages = 2; // without the interleaved schedule
        }).rfind("parallelism.virtual_stages: virtual_stages > 1 needs schedule: interleaved", 0) == 0);
}

TEST_CASE("recompute: selective-op is refused where its collectives or framework are not modelled")
{
  const std::string llama = "name: t\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: pytorch-h200\n"
                            "training: {global_batch: 16, micro_batch: 1, seq: 2048, recompute: selective-op, ";
  const auto load     = [](const std::string& text) { return Experiment::load(write_temp(text)).point(0).problems; };
  const auto problems = [&](const std::string& rest) { return load(llama + rest); };
  CHECK(problems("framework: pytorch}\nparallelism: {dp: 16}\n").empty());
  CHECK(problems("framework: pytorch-compile}\nparallelism: {dp: 16}\n").empty());
  const auto megatron = problems("framework: megatron}\nparallelism: {dp: 16}\n");
  REQUIRE(megatron.size() == 1);
  CHECK(megatron.front().key == "training.recompute");
  CHECK(megatron.front().message.find("needs framework pytorch or pytorch-compile, not megatron") != std::string::npos);
  CHECK(problems("framework: pytorch}\nparallelism: {dp: 8, tp: 2, sequence_parallel: true}\n").empty());
  const auto ep = load("name: t\nmodel: mixtral-8x7b\ncluster: dgx-h100x2\ncalibration: pytorch-h200\ntraining: "
                       "{global_batch: 16, micro_batch: 1, seq: 2048, recompute: selective-op, framework: pytorch}\n"
                       "parallelism: {dp: 16, ep: 2}\n");
  REQUIRE(ep.size() == 1);
  CHECK(ep.front().message.find("selective-op with ep > 1") != std::string::npos);
  const auto resnet = load("name: t\nmodel: resnet50\ncluster: dgx-h100x2\ncalibration: pytorch-h200\ntraining: "
                           "{global_batch: 16, micro_batch: 1, recompute: selective-op, framework: pytorch}\n"
                           "parallelism: {dp: 16}\n");
  REQUIRE(resnet.size() == 1);
  CHECK(resnet.front().message.find("has no attention layer") != std::string::npos);
}
