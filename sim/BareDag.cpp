#include "sim/BareDag.hpp"

#include "common/Error.hpp"
#include "sim/ActivitySlots.hpp"

#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

bool engine_used = false;

class Chains {
public:
  Chains(std::vector<sg4::Host*> hosts, std::uint64_t budget)
      : hosts_(std::move(hosts)), budget_(budget), pending_(hosts_.size(), 0), records_(4096 + 4 * hosts_.size())
  {
  }

  void start()
  {
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      exec(h);
  }

  void on_completion(const sg4::Activity& a)
  {
    const std::optional<Record> done = records_.finish(a);
    if (!done)
      return;
    const std::size_t h = done->host;
    if (done->exec) {  // Exec done: send to the next host
      comm(h);
    } else {  // Comm from h arrived at h + 1; h's own send is done too
      arrived(h);
      arrived((h + 1) % hosts_.size());
    }
  }

  std::uint64_t launched() const { return launched_; }

private:
  void exec(std::size_t h)
  {
    if (launched_ >= budget_)
      return;
    ++launched_;
    sg4::ExecPtr e = sg4::Exec::init();
    e->set_flops_amount(1e9 * (1 + h % 7));  // a few distinct durations
    e->set_host(hosts_[h]);
    records_.track(e, {h, true});
    e->start();
  }

  void comm(std::size_t h)
  {
    if (launched_ >= budget_)
      return;
    ++launched_;
    sg4::CommPtr c = sg4::Comm::sendto_init(hosts_[h], hosts_[(h + 1) % hosts_.size()]);
    c->set_payload_size(1'000'000 + 1000 * (h % 13));
    records_.track(c, {h, false});
    c->start();
  }

  // A host starts its next Exec once its own send and its predecessor's send have both finished.
  void arrived(std::size_t h)
  {
    if (++pending_[h] == 2) {
      pending_[h] = 0;
      exec(h);
    }
  }

  std::vector<sg4::Host*> hosts_;
  std::uint64_t budget_;
  std::uint64_t launched_ = 0;
  std::vector<int> pending_;
  // Every activity is held until it finishes (a host may have several Execs in flight: its
  // predecessor can deliver twice before its own send is done). A window of the latest activities,
  // as this once kept instead, freed slow hosts' Execs mid-run on 2,048 hosts.
  struct Record {
    std::size_t host = 0;
    bool exec = false;
  };
  detail::ActivitySlots<Record> records_;
};

}  // namespace

BareDagResult run_bare_dag(std::uint64_t activities, int hosts)
{
  if (engine_used)
    throw SimulationError("run_bare_dag() was already called in this process");
  if (hosts < 2)
    throw SimulationError("the bare DAG needs at least 2 hosts");
  engine_used = true;
  const auto start = std::chrono::steady_clock::now();
  xbt_log_control_set("root.thres:critical");
  int argc = 1;
  char program[] = "ddlsim-bare";
  char* argv[] = {program, nullptr};
  sg4::Engine engine(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::NetZone* zone = sg4::create_star_zone("bare");
  std::vector<sg4::Host*> list;
  for (int h = 0; h < hosts; ++h) {
    const std::string name = "host" + std::to_string(h);
    list.push_back(zone->create_host(name, 1e12));
    sg4::Link* link = zone->create_split_duplex_link(name + "_link", 50e9)->set_latency(0);
    zone->add_route(list.back()->get_netpoint(), nullptr, nullptr, nullptr,
                    {{link, sg4::LinkInRoute::Direction::UP}}, true);
  }
  zone->seal();
  Chains chains(list, activities);
  sg4::Activity::on_completion_cb([&chains](const sg4::Activity& a) { chains.on_completion(a); });
  chains.start();
  engine.run();
  BareDagResult r;
  r.activities = chains.launched();
  r.makespan_s = sg4::Engine::get_clock();
  r.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ddlsim::sim
