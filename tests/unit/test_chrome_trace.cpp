#include "traces/ChromeTrace.hpp"
#include "traces/Json.hpp"

#include "perfetto_trace.pb.h"

#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <tuple>

using namespace ddlsim::traces;

TEST_CASE("Chrome trace events use microseconds and escape names")
{
  ChromeTrace trace;
  trace.set_track_name(1, 0, "gpu1", "compute");
  trace.add({.name     = "F \"s0\"",
             .category = "forward",
             .pid      = 1,
             .tid      = 0,
             .start_s  = 0.5,
             .end_s    = 0.75,
             .args     = {{"bytes", 12.0}, {"kind", std::string("activation")}}});
  std::ostringstream out;
  trace.write(out);
  const std::string json = out.str();
  CHECK(json.find(R"("name":"F \"s0\"")") != std::string::npos);
  CHECK(json.find(R"("ts":500000,"dur":250000)") != std::string::npos);
  CHECK(json.find(R"("thread_name","pid":1,"tid":0,"args":{"name":"compute"})") != std::string::npos);
  CHECK(json.find(R"("args":{"bytes":12,"kind":"activation"})") != std::string::npos);
  CHECK(json_escape("a\tb\x01") == "a\\tb\\u0001");
}

TEST_CASE("Chrome trace numbers are JSON numbers")
{
  CHECK(json_number(12) == "12");
  CHECK(json_number(-0.0) == "0");
  CHECK(json_number(6738415616.0) == "6738415616");
  CHECK(json_number(0.1) == "0.1");
  CHECK(json_number(1.0 / 3) == "0.333333333333");
  CHECK(json_number(1e300) == "1e+300");
  CHECK(json_number(1.0 / 0.0) == "null");
}

TEST_CASE("Chrome trace times are whole nanoseconds: slices that touch still touch")
{
  // 0.1 + 0.2 != 0.3 in binary, yet the second slice must start where the first ends.
  ChromeTrace trace;
  trace.add(
      {.name = "a", .category = "", .pid = 0, .tid = 0, .start_s = 0.1e-6, .end_s = (0.1 + 0.2) * 1e-6, .args = {}});
  trace.add({.name = "b", .category = "", .pid = 0, .tid = 0, .start_s = 0.3e-6, .end_s = 1.2345678e-3, .args = {}});
  CHECK(ChromeTrace::nanoseconds(1.2345678e-3) == 1234568);
  std::ostringstream out;
  trace.write(out);
  const JsonValue root = parse_json(out.str(), "trace");
  const auto& events   = root.find("traceEvents")->as_array();
  REQUIRE(events.size() == 2);
  CHECK(*events[0].number("ts") == doctest::Approx(0.1));
  CHECK(*events[0].number("dur") == doctest::Approx(0.2));
  CHECK(*events[1].number("ts") == doctest::Approx(0.3));
  CHECK(*events[1].number("dur") == doctest::Approx(1234.268));
  CHECK(out.str().find(R"("ts":0.3,"dur":1234.268)") != std::string::npos);
}

TEST_CASE("Chrome trace flows and counters")
{
  ChromeTrace trace;
  for (const auto& [phase, pid, time_s] : {std::tuple{FlowPhase::start, 1, 1e-6}, std::tuple{FlowPhase::end, 2, 2e-6}})
    trace.add_flow(
        {.phase = phase, .id = 7, .pid = pid, .tid = 2, .time_s = time_s, .name = "transfer", .category = "transfer"});
  trace.add_counter({.pid = 1, .name = "memory", .time_s = 0, .values = {{"bytes", 2.5e9}}});
  std::ostringstream out;
  trace.write(out);
  const std::string json = out.str();
  CHECK(json.find(R"({"ph":"s","id":7,"name":"transfer","cat":"transfer","pid":1,"tid":2,"ts":1})") !=
        std::string::npos);
  CHECK(json.find(R"({"ph":"f","id":7,"name":"transfer","cat":"transfer","pid":2,"tid":2,"ts":2,"bp":"e"})") !=
        std::string::npos);
  CHECK(json.find(R"({"ph":"C","name":"memory","pid":1,"ts":0,"args":{"bytes":2500000000}})") != std::string::npos);
}

TEST_CASE("the Perfetto protobuf trace carries every slice, flow, counter sample and fact of the JSON")
{
  ChromeTrace trace;
  trace.set_track_name(1, 1, "gpu0 (node 0)", "compute stream");
  trace.set_track_name(2, 1, "gpu1 (node 0)", "compute stream");
  // on gpu0: two slices that touch, then two of no length where the second ends and a third begins
  trace.add({.name     = "F mb0",
             .category = "forward",
             .pid      = 1,
             .tid      = 1,
             .start_s  = 1e-6,
             .end_s    = 3e-6,
             .args     = {{"samples", 8.0}, {"kind", std::string("compute")}}});
  trace.add({.name = "F mb1", .category = "forward", .pid = 1, .tid = 1, .start_s = 3e-6, .end_s = 5e-6, .args = {}});
  trace.add({.name = "empty", .category = "forward", .pid = 1, .tid = 1, .start_s = 5e-6, .end_s = 5e-6, .args = {}});
  trace.add({.name = "empty", .category = "forward", .pid = 1, .tid = 1, .start_s = 5e-6, .end_s = 5e-6, .args = {}});
  trace.add({.name = "G", .category = "forward", .pid = 1, .tid = 1, .start_s = 5e-6, .end_s = 7e-6, .args = {}});
  trace.add({.name = "recv", .category = "transfer", .pid = 2, .tid = 1, .start_s = 4e-6, .end_s = 6e-6, .args = {}});
  // a flow from F mb1 on gpu0 to recv on gpu1, and one event outside every slice (bound to nothing)
  trace.add_flow(
      {.phase = FlowPhase::start, .id = 7, .pid = 1, .tid = 1, .time_s = 4e-6, .name = "t", .category = "c"});
  trace.add_flow(
      {.phase = FlowPhase::end, .id = 7, .pid = 2, .tid = 1, .time_s = 5.5e-6, .name = "t", .category = "c"});
  trace.add_flow(
      {.phase = FlowPhase::start, .id = 9, .pid = 2, .tid = 1, .time_s = 9e-6, .name = "t", .category = "c"});
  // a flow from where G and the slices of no length begin: it binds to G, which encloses it
  trace.add_flow(
      {.phase = FlowPhase::start, .id = 11, .pid = 1, .tid = 1, .time_s = 5e-6, .name = "t", .category = "c"});
  trace.add_flow(
      {.phase = FlowPhase::end, .id = 11, .pid = 2, .tid = 1, .time_s = 5.9e-6, .name = "t", .category = "c"});
  trace.add_counter({.pid = 1, .name = "memory", .time_s = 2e-6, .values = {{"bytes", 2e9}}});
  trace.add_counter(
      {.pid = 2, .name = "link send", .time_s = 0, .values = {{"intra_node_Bps", 1e9}, {"inter_node_Bps", 0}}});
  trace.add_metadata("inter_node_link_Bps", 50e9);

  std::ostringstream out;
  trace.write_perfetto(out);
  perfetto::protos::Trace parsed;
  REQUIRE(parsed.ParseFromString(out.str()));

  std::map<std::uint64_t, perfetto::protos::TrackDescriptor> tracks;
  std::vector<std::tuple<std::uint64_t, std::string, std::uint64_t>> slices; // (begin ns, name, track)
  std::vector<std::string> on_gpu0; // begin and end events of gpu0's compute stream, in order
  std::map<std::string, double> counters;
  std::map<std::uint64_t, std::vector<std::string>> flows, ending_flows;
  std::uint64_t last_time = 0;
  std::size_t annotations = 0;
  std::map<std::uint64_t, std::string> names, categories, annotation_names; // interned, by iid
  for (const auto& packet : parsed.packet()) {
    CHECK(packet.trusted_packet_sequence_id() == 1);
    for (const auto& n : packet.interned_data().event_names())
      CHECK(names.emplace(n.iid(), n.name()).second); // each defined once
    for (const auto& c : packet.interned_data().event_categories())
      CHECK(categories.emplace(c.iid(), c.name()).second);
    for (const auto& n : packet.interned_data().debug_annotation_names())
      CHECK(annotation_names.emplace(n.iid(), n.name()).second);
    if (packet.has_track_descriptor()) {
      tracks[packet.track_descriptor().uuid()] = packet.track_descriptor();
      continue;
    }
    const auto& e = packet.track_event();
    CHECK(packet.timestamp() >= last_time); // in time order
    last_time = packet.timestamp();
    REQUIRE(tracks.count(e.track_uuid()));
    const auto& track      = tracks.at(e.track_uuid());
    const std::string name = e.has_name_iid() ? names.at(e.name_iid()) : e.name();
    if (track.has_thread() && track.thread().pid() == 1)
      on_gpu0.push_back((e.type() == perfetto::protos::TrackEvent::TYPE_SLICE_BEGIN ? "B " + name : "E") + " @" +
                        std::to_string(packet.timestamp()));
    if (e.type() == perfetto::protos::TrackEvent::TYPE_SLICE_BEGIN) {
      CHECK((packet.sequence_flags() & 2) != 0); // uses interned names
      slices.emplace_back(packet.timestamp(), name, e.track_uuid());
      REQUIRE(e.category_iids_size() == 1);
      CHECK(categories.at(e.category_iids(0)) == (name == "recv" ? "transfer" : "forward"));
      annotations += static_cast<std::size_t>(e.debug_annotations_size());
      for (const auto& a : e.debug_annotations())
        CHECK((annotation_names.at(a.name_iid()) == "samples" ? a.double_value() == 8 : a.string_value() == "compute"));
      for (auto id : e.flow_ids())
        flows[id].push_back(name);
      for (auto id : e.terminating_flow_ids())
        ending_flows[id].push_back(name);
    } else if (e.type() == perfetto::protos::TrackEvent::TYPE_COUNTER) {
      counters[std::to_string(tracks.at(track.parent_uuid()).process().pid()) + " " + track.name()] =
          e.double_counter_value();
    } else if (e.type() == perfetto::protos::TrackEvent::TYPE_INSTANT) {
      REQUIRE(e.debug_annotations_size() == 1);
      CHECK(annotation_names.at(e.debug_annotations(0).name_iid()) == "inter_node_link_Bps");
      CHECK(e.debug_annotations(0).double_value() == 50e9);
    }
  }
  // 2 processes, 2 threads, 3 counter series, the metadata track
  CHECK(tracks.size() == 8);
  CHECK(slices.size() == 6);
  CHECK(annotations == 2);
  CHECK(names.size() == 5); // F mb0, F mb1, empty, G, recv: each once
  // touching slices end before the next begins; slices of no length end at once: no nesting
  CHECK(on_gpu0 == std::vector<std::string>{"B F mb0 @1000", "E @3000", "B F mb1 @3000", "E @5000", "B empty @5000",
                                            "E @5000", "B empty @5000", "E @5000", "B G @5000", "E @7000"});
  CHECK(counters == std::map<std::string, double>{{"1 memory bytes", 2e9},
                                                  {"2 link send intra_node_Bps", 1e9},
                                                  {"2 link send inter_node_Bps", 0}});
  CHECK(flows == std::map<std::uint64_t, std::vector<std::string>>{{7, {"F mb1"}}, {11, {"G"}}});
  CHECK(ending_flows == std::map<std::uint64_t, std::vector<std::string>>{{7, {"recv"}}, {11, {"recv"}}});
  // names of processes and threads as the JSON gives them
  bool named = false;
  for (const auto& [uuid, t] : tracks)
    named = named || (t.has_thread() && t.thread().thread_name() == "compute stream" && t.thread().pid() == 2);
  CHECK(named);
}
