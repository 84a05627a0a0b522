// The fold's group (sim/Fold.hpp) and the folding of collectives, without an engine: orbits and
// their elements, the refusals (a generator that fixes a device, generators that do not commute),
// the cluster's symmetries, and decompose()'s messages folded (a ring and a hierarchical all-reduce)
// or refused (a binary tree, whose root is apart), and trees run apart (all their messages, on links
// of their own) where whole generators span the elements that keep their group.
#include "sim/Collectives.hpp"
#include "sim/Fold.hpp"
#include "sim/Schedules.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddlsim::sim;

namespace {

PipelinePlan layout(int pp, int dp, int tp)
{
  PipelinePlan plan;
  plan.dp = dp;
  plan.tp = tp;
  plan.stages.resize(static_cast<std::size_t>(pp));
  return plan;
}

ClusterSpec cluster(int nodes, int gpus_per_node)
{
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nics_per_node = gpus_per_node;
  c.intra_node = {.bandwidth = 300e9, .latency = 2e-6};
  c.nic = {.bandwidth = 50e9, .latency = 3e-6};
  return c;
}

std::size_t sends(const std::vector<Message>& messages)
{
  return static_cast<std::size_t>(std::count_if(messages.begin(), messages.end(), [](const Message& m) { return m.src >= 0; }));
}

}  // namespace

TEST_CASE("a fold's orbits: every device is its representative moved by its element")
{
  const PipelinePlan plan = layout(2, 4, 2);  // devices (s * 4 + r) * 2 + t
  const Fold fold(plan.devices(), {tensor_rotation(plan), replica_shift(plan, 1)});
  CHECK(fold.order() == 8);
  CHECK(fold.representatives() == std::vector<int>{0, 8});
  for (int d = 0; d < plan.devices(); ++d) {
    CHECK(fold.representative(d) == d / 8 * 8);
    CHECK(fold.apply(fold.element(d), fold.representative(d)) == d);
    CHECK(fold.apply(fold.inverse(fold.element(d)), d) == fold.representative(d));
  }
  // The tensor rotation moves (s, r, t) to (s, r, t + 1), the shift to (s, r + 1, t).
  CHECK(fold.apply(fold.generator_element(0), 2) == 3);
  CHECK(fold.apply(fold.generator_element(1), 6) == 0);
  CHECK(fold.compose(fold.generator_element(0), fold.generator_element(0)) == 0);
  CHECK(Fold(4).trivial());
}

TEST_CASE("a fold is refused unless its generators commute and move every device")
{
  // A swap of devices 0 and 1 that fixes 2 and 3: not free.
  CHECK_THROWS_AS(Fold(4, {{.name = "x", .image = {1, 0, 2, 3}, .order = 2}}), std::invalid_argument);
  // A 4-cycle and a swap that do not commute.
  CHECK_THROWS_AS(Fold(4, {{.name = "a", .image = {1, 2, 3, 0}, .order = 4}, {.name = "b", .image = {1, 0, 3, 2}, .order = 2}}),
                  std::invalid_argument);
  // Not of its stated order.
  CHECK_THROWS_AS(Fold(4, {{.name = "a", .image = {1, 2, 3, 0}, .order = 2}}), std::invalid_argument);
}

TEST_CASE("the cluster's symmetries: speeds, nodes and fat-tree leaves")
{
  const PipelinePlan plan = layout(1, 8, 2);  // 16 GPUs, two replicas per 4-GPU node
  ClusterSpec c = cluster(4, 4);
  CHECK(platform_asymmetry(c, tensor_rotation(plan)).empty());
  CHECK(platform_asymmetry(c, replica_shift(plan, 2)).empty());  // a node
  CHECK(platform_asymmetry(c, replica_shift(plan, 1)) == "moving the dp ranks splits node 0");
  c.speed.assign(16, 1.0);
  c.speed[5] = 0.5;
  CHECK(platform_asymmetry(c, tensor_rotation(plan)) == "GPU 4 runs at speed 1, GPU 5 at 0.5");
  c = cluster(4, 4);
  c.topology = FabricTopology::fat_tree;
  c.nodes_per_leaf = 2;
  CHECK(platform_asymmetry(c, replica_shift(plan, 2)).find("fat tree's leaves") != std::string::npos);
  CHECK(platform_asymmetry(c, replica_shift(plan, 4)).empty());  // a leaf
}

TEST_CASE("a ring and a hierarchical all-reduce fold to their representatives' messages")
{
  const PipelinePlan plan = layout(1, 8, 1);
  const Fold fold(plan.devices(), {replica_shift(plan, 1)});
  CollectiveTask ring{.kind = CollectiveKind::all_reduce, .group = {0, 1, 2, 3, 4, 5, 6, 7}, .bytes = 8e6};
  std::string why;
  auto folded = fold_collective(ring, 4, fold, why);
  REQUIRE(folded);
  CHECK(folded->stabilizer == 8);
  CHECK(sends(folded->messages) * 8 == message_count(ring, 4));  // 2 (n - 1) of n 2 (n - 1)
  for (const Message& m : folded->messages) {
    CHECK(m.src == 0);
    CHECK(m.bytes == doctest::Approx(1e6));
  }
  // Step k waits for step k - 1 (sent, and received from the image of itself).
  for (std::uint32_t k = 1; k < folded->messages.size(); ++k)
    CHECK(folded->messages[k].after == std::vector<std::uint32_t>{k - 1});

  // Hierarchical over two nodes of four: nodes map onto nodes by a shift of four.
  const Fold nodes(plan.devices(), {replica_shift(plan, 4)});
  CollectiveTask hier = ring;
  hier.algorithm = CollectiveAlgorithm::hierarchical;
  folded = fold_collective(hier, 4, nodes, why);
  REQUIRE(folded);
  CHECK(folded->stabilizer == 2);
  CHECK(sends(folded->messages) * 2 == message_count(hier, 4));

  // A binary tree: its root is not like its leaves.
  CollectiveTask tree = ring;
  tree.algorithm = CollectiveAlgorithm::tree;
  CHECK_FALSE(fold_collective(tree, 4, fold, why));
  CHECK(why.find("tree all_reduce over 8 GPUs") == 0);
  CHECK(stabilizing_generators(tree, fold) == std::vector<std::string>{"dp"});
}

TEST_CASE("a collective not mapped onto itself by the fold is refused")
{
  const PipelinePlan plan = layout(1, 4, 1);
  const Fold fold(plan.devices(), {replica_shift(plan, 1)});
  // Half of the replicas: the shift sends it onto other devices, and its members 1 and 2 are not
  // images of a representative member under the elements that keep it (none but the identity).
  const CollectiveTask half{.kind = CollectiveKind::all_reduce, .group = {1, 2}, .bytes = 1e6};
  std::string why;
  CHECK(collective_stabilizer(half, fold, why) == 0);
  CHECK_FALSE(why.empty());
}

TEST_CASE("a tree that does not fold runs apart, with all its messages and the generators that move it")
{
  // dp 4 x tp 2 (device r * 2 + t), a node per replica: a binary tree over the replicas of tensor
  // rank 0 is kept as a group by the replica shift (H: order 4) but not mapped onto itself; the
  // tensor rotation moves it onto tensor rank 1's tree (K).
  const PipelinePlan plan = layout(1, 4, 2);
  const Fold fold(plan.devices(), {tensor_rotation(plan), replica_shift(plan, 1)});
  TaskGraph graph(plan.devices());
  const CollectiveTask tree{.kind = CollectiveKind::all_reduce, .algorithm = CollectiveAlgorithm::tree,
                            .group = {0, 2, 4, 6}, .bytes = 4e6};
  const TaskId id = graph.add_collective(tree);
  std::string why;
  REQUIRE_FALSE(fold_collective(tree, 2, fold, why));
  const FoldedCollectives folded(graph, 2, fold);
  CHECK(folded.any_isolated());
  REQUIRE(folded.isolated(id));
  CHECK(folded.stabilizer(id) == 4);
  CHECK(folded.folded(id).apart == std::vector<int>{0});  // the tensor rotation
  CHECK(folded.folded(id).why.find("tree all_reduce over 4 GPUs") == 0);
  // Every message of the tree, none folded away.
  const std::vector<Message> all = decompose(tree, 2);
  REQUIRE(folded.messages(id).size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(folded.messages(id)[i].src == all[i].src);
    CHECK(folded.messages(id)[i].dst == all[i].dst);
    CHECK(folded.messages(id)[i].bytes == all[i].bytes);
    CHECK(folded.messages(id)[i].after == all[i].after);
  }
  // A ring folds as before, and is not run apart.
  TaskGraph rings(plan.devices());
  CollectiveTask ring = tree;
  ring.algorithm = CollectiveAlgorithm::ring;
  const TaskId r = rings.add_collective(ring);
  const FoldedCollectives ring_folded(rings, 2, fold);
  CHECK_FALSE(ring_folded.any_isolated());
  CHECK_FALSE(ring_folded.isolated(r));
}

TEST_CASE("a tree whose group's stabilizer is not spanned by whole generators is refused")
{
  // Replicas 0, 2 and 4 of six: the shifts by two and four keep the three (H: order 3), but the
  // fold's generator is the shift by one, so no set of generators spans H and the tree cannot run
  // apart (its images under the rest of the group would not be a free orbit).
  const PipelinePlan plan = layout(1, 6, 1);
  const Fold fold(plan.devices(), {replica_shift(plan, 1)});
  TaskGraph graph(plan.devices());
  const CollectiveTask tree{.kind = CollectiveKind::all_reduce, .algorithm = CollectiveAlgorithm::tree,
                            .group = {0, 2, 4}, .bytes = 1e6};
  graph.add_collective(tree);
  std::string why;
  CHECK(collective_stabilizer(tree, fold, why) == 3);
  CHECK_FALSE(fold_collective(tree, 1, fold, why));
  CHECK_THROWS_AS(FoldedCollectives(graph, 1, fold), FoldError);
}
