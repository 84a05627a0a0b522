// experiments/Timeline.hpp on a hand-made graph with hand-made timings (no replay): lanes for
// concurrent transfers, flows, memory and link counters.
#include "experiments/Timeline.hpp"
#include "traces/Json.hpp"

#include <doctest/doctest.h>

#include <map>
#include <sstream>

using namespace ddlsim;

namespace {

struct Written {
  std::vector<const traces::JsonValue*> slices, flows, counters;
  std::map<std::pair<int, int>, std::string> threads;
  traces::JsonValue root;
};

Written write(const traces::ChromeTrace& trace)
{
  std::ostringstream out;
  trace.write(out);
  Written w;
  w.root = traces::parse_json(out.str(), "timeline");
  for (const auto& e : w.root.find("traceEvents")->as_array()) {
    const std::string& ph = *e.string("ph");
    if (ph == "X")
      w.slices.push_back(&e);
    else if (ph == "s" || ph == "t" || ph == "f")
      w.flows.push_back(&e);
    else if (ph == "C")
      w.counters.push_back(&e);
    else if (*e.string("name") == "thread_name")
      w.threads[{static_cast<int>(*e.number("pid")), static_cast<int>(*e.number("tid"))}] =
          *e.find("args")->string("name");
  }
  return w;
}

}  // namespace

TEST_CASE("Timeline: concurrent transfers on lanes, flows from sender to receiver, counters")
{
  // GPU 0 on node 0 sends two overlapping transfers to GPU 1 on node 1; both join an all-reduce.
  sim::TaskGraph g(2);
  auto pass = [&](sim::Phase phase) {
    return g.add_compute({.device = 0, .phase = phase, .stage = 0, .micro_batch = 0, .samples = 4, .layer_end = 3});
  };
  const sim::TaskId f0 = pass(sim::Phase::forward);
  const sim::TaskId t0 = g.add_transfer({.src = 0, .dst = 1, .bytes = 1e6});
  const sim::TaskId t1 = g.add_transfer({.src = 0, .dst = 1, .bytes = 3e6, .micro_batch = 1});
  const sim::TaskId b0 = pass(sim::Phase::backward);
  const sim::TaskId ar = g.add_collective({.group = {0, 1}, .bytes = 8e6});
  sim::Timings timings(g.size());
  timings[f0] = {0, 1e-3};
  timings[t0] = {1e-3, 2e-3};
  timings[t1] = {1.5e-3, 2.5e-3};
  timings[b0] = {2.5e-3, 4e-3};
  timings[ar] = {4e-3, 6e-3};
  sim::ClusterSpec cluster;
  cluster.nodes         = 2;
  cluster.gpus_per_node = 1;
  const experiments::TimelineMemory memory{.peak_bytes = {10e9, 7e9}, .stash_bytes = {2e9}, .peak_in_flight = {1}};
  const Written w = write(experiments::build_timeline(g, timings, 6e-3, cluster, memory));

  // GPU d is process d + 1; the compute stream thread 1, then the link lanes.
  CHECK(w.threads.at({1, 1}) == "compute stream");
  CHECK(w.threads.at({1, 2}) == "intra-node links");
  CHECK(w.threads.at({1, 3}) == "inter-node links");
  CHECK(w.threads.at({1, 4}) == "inter-node links #2");
  CHECK(w.threads.at({2, 4}) == "inter-node links #2");
  CHECK(w.slices.size() == 2 + 2 * 2 + 2);
  std::map<std::string, std::vector<int>> tids;  // slice name -> its threads
  for (const auto* s : w.slices)
    tids[*s->string("name")].push_back(static_cast<int>(*s->number("tid")));
  const std::string second = g.label(t1);
  CHECK(tids[g.label(t0)] == std::vector<int>{3, 3});
  CHECK(tids[second] == std::vector<int>{4, 4});
  const auto* transfer = w.slices[1];
  CHECK(*transfer->find("args")->number("bytes") == 1e6);
  CHECK(*transfer->find("args")->number("to") == 1);
  CHECK(*transfer->find("args")->string("kind") == "activation");

  // One flow per transfer (sender -> receiver) and one through the all-reduce's two members.
  REQUIRE(w.flows.size() == 6);
  CHECK(*w.flows[0]->string("ph") == "s");
  CHECK(*w.flows[0]->number("pid") == 1);
  CHECK(*w.flows[1]->string("ph") == "f");
  CHECK(*w.flows[1]->number("pid") == 2);
  CHECK(*w.flows[1]->string("bp") == "e");
  CHECK(*w.flows[0]->number("id") == t0);
  CHECK(*w.flows[0]->number("ts") > 1000);
  CHECK(*w.flows[1]->number("ts") > *w.flows[0]->number("ts"));
  CHECK(*w.flows[1]->number("ts") < 2000);

  // Memory of GPU 0: the stash from the forward's start to the backward's end; GPU 1 flat.
  std::vector<std::pair<double, double>> mem0, mem1, link0;
  for (const auto* c : w.counters) {
    const double ts = *c->number("ts");
    if (*c->string("name") == "memory")
      (*c->number("pid") == 1 ? mem0 : mem1).emplace_back(ts, *c->find("args")->number("bytes"));
    else if (*c->number("pid") == 1)
      link0.emplace_back(ts, *c->find("args")->number("inter_node_Bps"));
  }
  CHECK(mem0 == std::vector<std::pair<double, double>>{{0, 10e9}, {4000, 8e9}});
  CHECK(mem1 == std::vector<std::pair<double, double>>{{0, 7e9}});
  // GPU 0 sends 1 MB over [1, 2] ms, 3 MB over [1.5, 2.5] ms, and 2 (n - 1) / n x 8 MB of the ring
  // all-reduce over [4, 6] ms.
  const std::vector<std::pair<double, double>> want{{0, 0},    {1000, 1e9}, {1500, 4e9}, {2000, 3e9},
                                                    {2500, 0}, {4000, 4e9}, {6000, 0}};
  REQUIRE(link0.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(link0[i].first == want[i].first);
    CHECK(link0[i].second == doctest::Approx(want[i].second).epsilon(1e-12));
  }
}

TEST_CASE("Timeline: without memory numbers, no memory counters")
{
  sim::TaskGraph g(1);
  const sim::TaskId f = g.add_compute({.device = 0, .phase = sim::Phase::forward, .samples = 1});
  sim::Timings timings(g.size());
  timings[f]      = {0, 1e-3};
  const Written w = write(experiments::build_timeline(g, timings, 1e-3, sim::ClusterSpec{}, {}));
  CHECK(w.slices.size() == 1);
  for (const auto* c : w.counters)
    CHECK(*c->string("name") == "link send");
}
