// Exact symmetry folding: simulating one representative of every set of devices that are identical
// in work and in their place in the cluster (docs/scale.md has the argument and its limits).
//
// The data-parallel replicas of a stage run the same passes and send the same messages; so do the
// tensor ranks of a group. A Fold is a group G of device permutations that maps the task graph, the
// compute speeds and the platform onto themselves and moves every device (G acts freely). Its
// orbits have |G| devices each; the replay simulates the orbits' first devices, the
// representatives, and by symmetry every other device does the same at the same times:
//   - a representative's tasks exist in the graph, the others' do not (Schedules.hpp builds only
//     what a representative runs, and every collective that has a representative member);
//   - a link orbit O of a route carries, per link, |G| / |O| flows of each flow orbit that crosses it
//     (one per flow of the orbit: routes cross an orbit at most once), all at one rate; the replay
//     gives O one link of bandwidth B |O| / |G| carrying the representatives' flows: the same
//     max-min shares (CM02 with zero-latency links, weight 1 per flow and link; see Replay.hpp);
//   - a collective's messages (whatever decompose() returns) are folded the same way: the
//     representatives' messages are sent, each waiting for the representatives of the messages it
//     waits for (fold_collective). That a collective is mapped onto itself is checked, not assumed;
//   - a collective whose group the fold keeps but whose messages it does not (a tree) runs apart:
//     all its messages, on links of its own, checked during the replay to meet no other traffic
//     (FoldedMessages::isolated; docs/scale.md).
//
//   std::vector<FoldGenerator> gens{tensor_rotation(plan), replica_shift(plan, 1)};
//   Fold fold(plan.devices(), gens);              // throws std::invalid_argument if not a free group
//   fold.representative(d), fold.element(d), fold.apply(g, d)
#pragma once

#include "sim/ClusterSpec.hpp"
#include "sim/Collectives.hpp"
#include "sim/Metrics.hpp"
#include "sim/TaskGraph.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::sim {

struct PipelinePlan;  // Schedules.hpp

/// One generator of a fold: a permutation of the devices [0, n) and its order.
struct FoldGenerator {
  std::string name;        ///< what it moves, for messages: "tp" (tensor ranks), "dp" (replicas)
  std::vector<int> image;  ///< image[d]: where device d goes
  int order = 1;           ///< smallest k > 0 with image^k = identity
};

/// A finite abelian group acting freely on devices [0, n), spanned by commuting generators.
/// Elements are mixed-radix tuples (e_1, ..., e_k), e_i < order_i, coded as integers; 0 is the
/// identity. Orbits are listed by their smallest device, the representative.
class Fold {
public:
  /// The trivial fold: every device is its own representative.
  explicit Fold(int devices = 0);
  /// The group the generators span. Throws std::invalid_argument when an image is not a
  /// permutation of [0, devices), the generators do not commute or are not of their order, or some
  /// element other than the identity fixes a device.
  Fold(int devices, std::vector<FoldGenerator> generators);

  int devices() const { return devices_; }
  int order() const { return order_; }  ///< |G|: devices per orbit
  bool trivial() const { return order_ == 1; }
  const std::vector<FoldGenerator>& generators() const { return generators_; }
  /// Generator i as a group element.
  int generator_element(std::size_t i) const { return stride_[i]; }
  bool is_representative(int device) const { return element_[static_cast<std::size_t>(device)] == 0; }
  int representative(int device) const;
  /// The g with g(representative(device)) = device.
  int element(int device) const { return element_[static_cast<std::size_t>(device)]; }
  int apply(int g, int device) const;
  int compose(int g, int h) const;
  int inverse(int g) const;
  /// Representatives in increasing order.
  const std::vector<int>& representatives() const { return representatives_; }

private:
  int devices_ = 0;
  int order_ = 1;
  std::vector<FoldGenerator> generators_;
  std::vector<int> stride_;            // per generator: its digit's weight in the element code
  std::vector<int> digits_;            // element * generators + i: the element's digit i
  std::vector<int> rep_index_;         // per device: its orbit
  std::vector<int> element_;           // per device
  std::vector<int> members_;           // orbit * order + element -> device
  std::vector<int> representatives_;
};

/// Rotation of the tensor ranks of every group, t -> t + 1 mod tp (device (s, r, t) of the plan).
FoldGenerator tensor_rotation(const PipelinePlan& plan);
/// Shift of the replicas of every stage, r -> r + shift mod (dp x cp); `shift` divides dp x cp.
FoldGenerator replica_shift(const PipelinePlan& plan, int shift);
/// The smallest replica shift that maps the schedule onto itself: ring attention stays inside a
/// context group (a multiple of cp), and hybrid ZeRO groups map onto one another (a multiple of
/// the shard group).
int replica_shift_step(const PipelinePlan& plan);

/// Why `g` is not a symmetry of the cluster for the devices it moves (empty when it is): a GPU it
/// sends to another speed, or nodes, NICs or fat-tree leaves it does not map one to one, so that
/// some route would not map onto a route.
std::string platform_asymmetry(const ClusterSpec& cluster, const FoldGenerator& g);

/// A collective's messages under a fold: those its representative members send (the rest are their
/// images), each waiting for the representatives of the messages it waits for.
struct FoldedMessages {
  std::vector<Message> messages;
  int stabilizer = 1;  ///< |H|: the elements that map the collective's group onto itself
  /// A collective that H does not map onto itself (a tree's root is apart) but whose group H does,
  /// H being spanned by some of the generators: `messages` are all of its messages, run on links of
  /// their own (the orbits of its real links under the other generators, K), and the replay checks
  /// that nothing else uses its links while it runs (docs/scale.md, "Collectives run apart").
  bool isolated = false;
  std::vector<int> apart;  ///< isolated: the indices of the generators spanning K
  std::string why;         ///< isolated: why it does not fold (said when the check fails)
};

/// |H| for `c` (see FoldedMessages), or 0 when some member is not the image of a representative
/// member under H (the collective cannot be folded on its own); `why` then says which.
int collective_stabilizer(const CollectiveTask& c, const Fold& fold, std::string& why);

/// Folds decompose(c): checks that every element of H maps the messages onto messages of the same
/// bytes and waits (a message is known by its sender, receiver and rank among their messages), and
/// keeps the representatives' messages. nullopt, with `why`, when the check fails.
std::optional<FoldedMessages> fold_collective(const CollectiveTask& c, int gpus_per_node, const Fold& fold,
                                              std::string& why);

/// A message that carries no data (Collectives.hpp: src and dst -1).
inline bool is_join(const Message& m) { return m.src == -1 && m.dst == -1; }
/// A message endpoint moved by `offset` GPUs, a whole number of nodes: a GPU by offset, a node's
/// switch (nvls) by offset / gpus_per_node nodes; joins and the fabric's switch (sharp) stay.
int shift_endpoint(int endpoint, int offset, int gpus_per_node);

/// The names of the fold's generators that map c's group onto itself (the ones to drop when c does
/// not fold).
std::vector<std::string> stabilizing_generators(const CollectiveTask& c, const Fold& fold);

/// The whole graph a folded graph stands for, with every task's timing: each task's images under
/// the fold (a collective once per distinct group), in the folded graph's order. For timelines.
std::pair<TaskGraph, Timings> unfold(const TaskGraph& folded, const Timings& timings,
                                                     const Fold& fold);

/// A collective of a folded graph that does not fold: `generators` are the fold's generators to
/// drop before trying again.
class FoldError : public std::runtime_error {
public:
  FoldError(const std::string& what, std::vector<std::string> generators)
      : std::runtime_error(what), generators_(std::move(generators)) {}
  const std::vector<std::string>& generators() const { return generators_; }

private:
  std::vector<std::string> generators_;
};

/// Every collective of a folded graph, folded: the stabilizer of each, and the folded messages of
/// the flow-level ones. Collectives of one shape (kind, algorithm, bytes, and a group that is the
/// same up to a translation by whole nodes, on which the fold acts alike) are decomposed and
/// checked once; decompose() sees devices only through the group's order and their nodes.
class FoldedCollectives {
public:
  FoldedCollectives() = default;
  /// Throws FoldError when some collective does not fold.
  FoldedCollectives(const TaskGraph& graph, int gpus_per_node, const Fold& fold);
  /// The folded messages of flow-level collective `id`, their devices less offset(id).
  const std::vector<Message>& messages(TaskId id) const { return shapes_[shape_of(id)].messages; }
  int offset(TaskId id) const { return offset_[id]; }
  int stabilizer(TaskId id) const { return shapes_[shape_of(id)].stabilizer; }
  /// Whether collective `id` runs apart (FoldedMessages::isolated); then messages(id) are all its
  /// messages.
  bool isolated(TaskId id) const { return shape_[id] >= 0 && shapes_[shape_of(id)].isolated; }
  const FoldedMessages& folded(TaskId id) const { return shapes_[shape_of(id)]; }
  /// Whether some collective runs apart.
  bool any_isolated() const { return any_isolated_; }
  /// The shape of collective `id` (collectives of one shape are alike up to offset(id)); -1 for
  /// other tasks and empty groups.
  int shape(TaskId id) const { return shape_[id]; }

private:
  std::size_t shape_of(TaskId id) const { return static_cast<std::size_t>(shape_[id]); }
  std::vector<FoldedMessages> shapes_;
  std::vector<int> shape_;   // per task (-1: not a collective)
  std::vector<int> offset_;  // per task
  bool any_isolated_ = false;
};

}  // namespace ddlsim::sim
