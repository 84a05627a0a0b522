// Internal to sim/ (Replay.cpp, BareDag.cpp): the SimGrid activities in flight and what each
// stands for.
//
// An activity's user data names its slot (slot + 1; 0 is left for activities not tracked here).
// The slot holds a reference until the activity finishes, so that nothing running is freed however
// many activities are in flight, and a finished activity's reference is kept a while longer:
// SimGrid still uses the activity after its completion callbacks.
#pragma once

#include <simgrid/s4u/Activity.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace ddlsim::sim::detail {

template <typename Info> class ActivitySlots {
public:
  /// `keep_finished`: how many finished activities keep their last reference (more than can end
  /// at one instant).
  explicit ActivitySlots(std::size_t keep_finished) : keep_finished_(keep_finished) {}

  /// Holds `activity` until it finishes, and tags it with its slot.
  void track(simgrid::s4u::ActivityPtr activity, Info info)
  {
    std::size_t slot = slots_.size();
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slots_.emplace_back();
    }
    activity->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot + 1)));
    slots_[slot] = {info, std::move(activity)};
  }

  /// What a finished activity stood for; nothing for one not tracked here.
  std::optional<Info> finish(const simgrid::s4u::Activity& activity)
  {
    const auto tag = reinterpret_cast<std::uintptr_t>(activity.get_data<void>());
    if (tag == 0)
      return std::nullopt;
    Slot& slot = slots_[tag - 1];
    free_.push_back(tag - 1);
    finished_.push_back(std::move(slot.activity));
    if (finished_.size() > keep_finished_)
      finished_.pop_front();
    return slot.info;
  }

private:
  struct Slot {
    Info info{};
    simgrid::s4u::ActivityPtr activity;
  };
  std::size_t keep_finished_;
  std::vector<Slot> slots_;  // in flight, and free ones
  std::vector<std::size_t> free_;
  std::deque<simgrid::s4u::ActivityPtr> finished_;
};

}  // namespace ddlsim::sim::detail
