// ChromeTrace::write_perfetto: the same timeline in Perfetto's own protobuf format (perfetto_trace.proto).
//
// Tracks first (a process track per pid, a thread track per (pid, tid) under it, a counter track per
// counter series), then every event in time order, each a TracePacket on one sequence: a slice is a
// begin/end pair of track events (at equal times ends come before begins, and a slice of no length
// ends before the next begins, so a lane's slices never nest); a flow event's id goes on the slice
// that encloses it (flow_ids, terminating_flow_ids at its end); a counter sample is a counter event;
// the trace's metadata is an instant at time 0 with one annotation per fact. Event names, categories
// and annotation names are interned: defined in the first packet that uses them, a number after.
#include "traces/ChromeTrace.hpp"

#include "perfetto_trace.pb.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace ddlsim::traces {
namespace {

namespace pb = perfetto::protos;

constexpr std::uint32_t sequence_id = 1; // every packet on one sequence

// Writes `packet` as one element of Trace.packet (field 1, length-delimited): a file of such
// elements is a Trace message, written without holding it whole.
void write_packet(std::ostream& out, const pb::TracePacket& packet)
{
  const std::string bytes = packet.SerializeAsString();
  std::string head(1, static_cast<char>((1 << 3) | 2));
  for (std::uint64_t n = bytes.size();; n >>= 7) {
    if (n < 0x80) {
      head.push_back(static_cast<char>(n));
      break;
    }
    head.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  out << head << bytes;
}

// Names interned on the sequence: each gets a number (iid, from 1) the first time a packet uses it,
// and that packet carries its definition.
class Interned {
public:
  std::uint64_t category(pb::TracePacket& p, const std::string& name)
  {
    return iid(categories_, name, p, [&](std::uint64_t id) {
      auto* c = p.mutable_interned_data()->add_event_categories();
      c->set_iid(id);
      c->set_name(name);
    });
  }
  std::uint64_t event_name(pb::TracePacket& p, const std::string& name)
  {
    return iid(event_names_, name, p, [&](std::uint64_t id) {
      auto* n = p.mutable_interned_data()->add_event_names();
      n->set_iid(id);
      n->set_name(name);
    });
  }
  std::uint64_t annotation_name(pb::TracePacket& p, const std::string& name)
  {
    return iid(annotation_names_, name, p, [&](std::uint64_t id) {
      auto* n = p.mutable_interned_data()->add_debug_annotation_names();
      n->set_iid(id);
      n->set_name(name);
    });
  }

private:
  template <typename Define>
  static std::uint64_t iid(std::map<std::string, std::uint64_t>& table, const std::string& name, pb::TracePacket& p,
                           Define define)
  {
    auto [it, added] = table.try_emplace(name, table.size() + 1);
    if (added)
      define(it->second);
    p.set_sequence_flags(p.sequence_flags() | 2); // SEQ_NEEDS_INCREMENTAL_STATE
    return it->second;
  }
  std::map<std::string, std::uint64_t> categories_, event_names_, annotation_names_;
};

void annotate(pb::TracePacket& p, Interned& interned, const std::string& name, const TraceValue& value)
{
  pb::DebugAnnotation* a = p.mutable_track_event()->add_debug_annotations();
  a->set_name_iid(interned.annotation_name(p, name));
  if (const double* number = std::get_if<double>(&value))
    a->set_double_value(*number);
  else
    a->set_string_value(std::get<std::string>(value));
}

// An event of the timeline in the order it is written: time, then `order` (0: the end of a slice
// with a length, 1: the begin and, right after it, the end of a slice of no length, 2: the begin of
// a slice with a length, 3: counters), then the index of its slice or sample. At one time, slices
// that end do so before any begins, and a slice of no length sits between them, inside none.
struct Entry {
  std::int64_t ns;
  int order;
  std::size_t index;
  int part; // 0: begin or sample, 1: end
  bool operator<(const Entry& o) const
  {
    return std::tie(ns, order, index, part) < std::tie(o.ns, o.order, o.index, o.part);
  }
};

} // namespace

void ChromeTrace::write_perfetto(std::ostream& out) const
{
  // The tracks, numbered in a fixed order: processes, threads, counter series.
  std::uint64_t next_uuid = 1;
  std::map<int, std::uint64_t> process_uuid;
  std::map<std::pair<int, int>, std::uint64_t> thread_uuid;
  std::map<std::pair<int, std::string>, std::uint64_t> counter_uuid; // (pid, "<name> <key>")
  auto process_track = [&](int pid) { return process_uuid.try_emplace(pid, process_uuid.size() + 1).first->second; };
  for (const auto& [pid, name] : process_names_)
    process_track(pid);
  for (const auto& e : events_)
    process_track(e.pid);
  for (const auto& c : counters_)
    process_track(c.pid);
  next_uuid         = process_uuid.size() + 1;
  auto thread_track = [&](int pid, int tid) {
    auto [it, added] = thread_uuid.try_emplace({pid, tid}, next_uuid);
    next_uuid += added ? 1 : 0;
    return it->second;
  };
  for (const auto& [ids, name] : thread_names_)
    thread_track(ids.first, ids.second);
  for (const auto& e : events_)
    thread_track(e.pid, e.tid);
  for (const auto& c : counters_)
    for (const auto& [key, value] : c.values) {
      auto [it, added] = counter_uuid.try_emplace({c.pid, c.name + " " + key}, next_uuid);
      next_uuid += added ? 1 : 0;
    }
  const std::uint64_t metadata_uuid = next_uuid;

  bool first  = true;
  auto packet = [&] {
    pb::TracePacket p;
    p.set_trusted_packet_sequence_id(sequence_id);
    if (first)
      p.set_sequence_flags(1); // SEQ_INCREMENTAL_STATE_CLEARED
    first = false;
    return p;
  };
  for (const auto& [pid, uuid] : process_uuid) {
    pb::TracePacket p      = packet();
    pb::TrackDescriptor* d = p.mutable_track_descriptor();
    d->set_uuid(uuid);
    d->mutable_process()->set_pid(pid);
    if (auto name = process_names_.find(pid); name != process_names_.end())
      d->mutable_process()->set_process_name(name->second);
    write_packet(out, p);
  }
  for (const auto& [ids, uuid] : thread_uuid) {
    pb::TracePacket p      = packet();
    pb::TrackDescriptor* d = p.mutable_track_descriptor();
    d->set_uuid(uuid);
    d->set_parent_uuid(process_uuid.at(ids.first));
    d->mutable_thread()->set_pid(ids.first);
    d->mutable_thread()->set_tid(ids.second);
    if (auto name = thread_names_.find(ids); name != thread_names_.end())
      d->mutable_thread()->set_thread_name(name->second);
    write_packet(out, p);
  }
  for (const auto& [key, uuid] : counter_uuid) {
    pb::TracePacket p      = packet();
    pb::TrackDescriptor* d = p.mutable_track_descriptor();
    d->set_uuid(uuid);
    d->set_parent_uuid(process_uuid.at(key.first));
    d->set_name(key.second);
    d->mutable_counter();
    write_packet(out, p);
  }
  if (!metadata_.empty()) {
    pb::TracePacket p = packet();
    p.mutable_track_descriptor()->set_uuid(metadata_uuid);
    p.mutable_track_descriptor()->set_name("trace metadata");
    write_packet(out, p);
  }

  // Each flow event's id on the slice that encloses it, on its track (the slices of a lane do not
  // overlap: the last one that starts at or before the event's time, if it has not ended).
  std::map<std::pair<int, int>, std::vector<std::size_t>> by_track; // slice indices by start
  for (std::size_t i = 0; i < events_.size(); ++i)
    by_track[{events_[i].pid, events_[i].tid}].push_back(i);
  for (auto& [track, slices] : by_track)
    std::stable_sort(slices.begin(), slices.end(), [&](std::size_t a, std::size_t b) {
      // by start; at one start the slice of no length first, so that a flow event
      // there binds to the slice with a length that encloses it
      return std::pair(events_[a].start_s, events_[a].end_s) < std::pair(events_[b].start_s, events_[b].end_s);
    });
  std::vector<std::vector<std::uint64_t>> flow_ids(events_.size()), ending_flow_ids(events_.size());
  for (const auto& f : flows_) {
    const auto track = by_track.find({f.pid, f.tid});
    if (track == by_track.end())
      continue;
    const std::int64_t t = nanoseconds(f.time_s);
    const auto& slices   = track->second;
    auto after           = std::upper_bound(slices.begin(), slices.end(), t, [&](std::int64_t time, std::size_t i) {
      return time < nanoseconds(events_[i].start_s);
    });
    if (after == slices.begin() || nanoseconds(events_[*(after - 1)].end_s) < t)
      continue; // no slice there: the flow event binds to nothing (as in the JSON)
    (f.phase == FlowPhase::end ? ending_flow_ids : flow_ids)[*(after - 1)].push_back(f.id);
  }

  Interned interned;
  std::vector<Entry> order;
  order.reserve(2 * events_.size() + counters_.size());
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const std::int64_t start = nanoseconds(events_[i].start_s), end = nanoseconds(events_[i].end_s);
    order.push_back({start, end > start ? 2 : 1, i, 0});
    order.push_back({end, end > start ? 0 : 1, i, 1});
  }
  for (std::size_t i = 0; i < counters_.size(); ++i)
    order.push_back({nanoseconds(counters_[i].time_s), 3, i, 0});
  std::sort(order.begin(), order.end());

  if (!metadata_.empty()) {
    pb::TracePacket p = packet();
    p.set_timestamp(0);
    pb::TrackEvent* e = p.mutable_track_event();
    e->set_type(pb::TrackEvent::TYPE_INSTANT);
    e->set_track_uuid(metadata_uuid);
    e->set_name("trace metadata");
    for (const auto& [key, value] : metadata_)
      annotate(p, interned, key, value);
    write_packet(out, p);
  }
  for (const Entry& entry : order) {
    if (entry.order == 3) {
      const TraceCounter& c = counters_[entry.index];
      for (const auto& [key, value] : c.values) {
        pb::TracePacket p = packet();
        p.set_timestamp(static_cast<std::uint64_t>(entry.ns));
        pb::TrackEvent* e = p.mutable_track_event();
        e->set_type(pb::TrackEvent::TYPE_COUNTER);
        e->set_track_uuid(counter_uuid.at({c.pid, c.name + " " + key}));
        e->set_double_counter_value(value);
        write_packet(out, p);
      }
      continue;
    }
    const TraceEvent& s = events_[entry.index];
    pb::TracePacket p   = packet();
    p.set_timestamp(static_cast<std::uint64_t>(entry.ns));
    pb::TrackEvent* e = p.mutable_track_event();
    e->set_track_uuid(thread_uuid.at({s.pid, s.tid}));
    if (entry.part == 1) {
      e->set_type(pb::TrackEvent::TYPE_SLICE_END);
    } else {
      e->set_type(pb::TrackEvent::TYPE_SLICE_BEGIN);
      e->set_name_iid(interned.event_name(p, s.name));
      e->add_category_iids(interned.category(p, s.category));
      for (const auto& [key, value] : s.args)
        annotate(p, interned, key, value);
      for (std::uint64_t id : flow_ids[entry.index])
        e->add_flow_ids(id);
      for (std::uint64_t id : ending_flow_ids[entry.index])
        e->add_terminating_flow_ids(id);
    }
    write_packet(out, p);
  }
}

} // namespace ddlsim::traces
