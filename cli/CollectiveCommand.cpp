// ddlsim collective: nccl-tests' table from a simulation, or beside a real log (experiments/CollectiveBench.hpp).
#include "calibration/Profile.hpp"
#include "cli/Commands.hpp"
#include "experiments/CollectiveBench.hpp"
#include "traces/NcclTestsImporter.hpp"

#include <fmt/core.h>

#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

namespace ddlsim::cli {

namespace {

struct CollectiveArgs {
  std::string cluster;
  std::optional<int> gpus;
  std::optional<std::string> op, log, calibration, algorithm, protocol;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M", dtype = "float", redop = "sum",
              fidelity = "auto", ignored;
  int factor = 1, root = 0;
};

int cmd_collective(const CollectiveArgs& a)
{
  experiments::CollectiveSweep sweep;
  sweep.dtype = a.dtype;
  sweep.redop = a.redop;
  sweep.root  = a.root;
  auto size   = [](const std::string& text, const char* what) {
    try {
      return experiments::parse_nccl_tests_size(text);
    } catch (const std::invalid_argument& e) {
      throw UsageError{fmt::format("{}: {}", what, e.what())};
    }
  };
  const double min_bytes = size(a.min_bytes, "--minbytes"), max_bytes = size(a.max_bytes, "--maxbytes"),
               step = size(a.step_bytes, "--stepbytes");
  if (a.algorithm) {
    const auto algorithm = sim::collective_algorithm_table.parse(*a.algorithm);
    if (!algorithm)
      throw UsageError{fmt::format("--algo '{}': expected {}", *a.algorithm, sim::collective_algorithm_table.names())};
    sweep.algorithm = *algorithm;
  }
  if (a.protocol) {
    sweep.protocol = sim::collective_protocol_table.parse(*a.protocol);
    if (!sweep.protocol)
      throw UsageError{fmt::format("--proto '{}': expected {}", *a.protocol, sim::collective_protocol_table.names())};
  }
  sweep.fidelity                = a.fidelity == "flow"       ? experiments::CollectiveFidelityChoice::flow
                                  : a.fidelity == "analytic" ? experiments::CollectiveFidelityChoice::analytic
                                                             : experiments::CollectiveFidelityChoice::automatic;
  std::optional<std::string> op = a.op;
  std::optional<int> gpus       = a.gpus;
  traces::TraceSet measured;
  if (a.log) {
    measured          = traces::import_nccl_tests(*a.log);
    const auto& first = measured.collectives.front();
    if (!op)
      op = first.collective;
    if (!gpus && first.group_size > 0)
      gpus = first.group_size;
    if (!first.dtype.empty())
      sweep.dtype = first.dtype;
  }
  sweep.op                     = op.value_or("all_reduce");
  const sim::ClusterSpec whole = sim::load_cluster(a.cluster);
  sweep.gpus                   = gpus.value_or(whole.gpu_count());
  sweep.cluster_label          = a.cluster;
  std::optional<calibration::CalibrationProfile> profile;
  if (a.calibration) {
    profile             = calibration::load_profile(*a.calibration);
    sweep.profile       = &*profile;
    sweep.profile_label = *a.calibration;
  }
  try {
    sweep.cluster = sim::first_gpus(whole, sweep.gpus);
    if (a.log) {
      const std::string logged = measured.collectives.front().collective;
      if (experiments::nccl_tests_program(sweep.op) != experiments::nccl_tests_program(logged))
        throw std::invalid_argument(fmt::format("--op {}: the log measured {}", sweep.op, logged));
      std::set<double> seen;
      for (const auto& r : measured.collectives)
        if (seen.insert(r.bytes).second)
          sweep.sizes.push_back(r.bytes);
    } else {
      sweep.sizes = experiments::nccl_tests_sizes(min_bytes, max_bytes, a.factor, a.factor > 1 ? 0 : step);
    }
    const auto rows = experiments::simulate_collective_sweep(sweep);
    if (a.log)
      experiments::print_comparison(std::cout, *a.log, sweep, experiments::compare_with_log(measured, sweep, rows));
    else
      experiments::print_nccl_tests(std::cout, sweep, rows);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  }
  return exit_ok;
}

} // namespace

void add_collective_command(CommandTable& table)
{
  CLI::App& root = table.root();
  auto c         = table.add<CollectiveArgs>(
      root, "collective", "one collective over a range of sizes, printed as nccl-tests prints it", cmd_collective);
  auto& a = c.args;
  c.app->footer("Size, count, type, redop, root, time, algbw, busbw, out-of-place then in-place (the same simulated "
                "time), so that it stands beside an all_reduce_perf log; sizes and bus bandwidth as nccl-tests "
                "defines them (all_to_all: count per peer, busbw = algbw (n-1)/n). --compare LOG simulates a real "
                "log's sizes (text or -J JSON) and prints the error per size. docs/collectives.md");
  c.app->add_option("--cluster", a.cluster, "a shipped cluster or a cluster file")->required()->type_name("C");
  c.app
      ->add_option_function<std::string>(
          "-g,--gpus", [&a](const std::string& v) { a.gpus = cli::parse_int(v, "--gpus", 1, 1 << 24); },
          "ranks: the cluster's first N GPUs (default: all; with --compare, the log's)")
      ->type_name("N");
  c.app
      ->add_option("--op", a.op,
                   "all_reduce (default), all_gather, reduce_scatter, broadcast, all_to_all, send_recv "
                   "(or the nccl-tests program's name)")
      ->type_name("OP");
  c.app->add_option("-b,--minbytes", a.min_bytes, "smallest size (default 32M; 8, 64K, 1G = 2^30, or 1GiB)")
      ->type_name("SIZE");
  c.app->add_option("-e,--maxbytes", a.max_bytes, "largest size (default 32M)")->type_name("SIZE");
  cli::add_int(c.app, "-f,--stepfactor", a.factor, 1, 1 << 20, "multiply the size by N (default: add -i)");
  c.app->add_option("-i,--stepbytes", a.step_bytes, "add SIZE (default 1M)")->type_name("SIZE");
  c.app->add_option("-d,--datatype,--dtype", a.dtype, "nccl-tests type: float (default), half, bfloat16, int8, ...")
      ->type_name("T");
  c.app->add_option("--redop", a.redop, "the reduction name printed (default sum)")->type_name("OP");
  cli::add_int(c.app, "-r,--root", a.root, 0, 1 << 24, "broadcast's root (default 0)");
  c.app
      ->add_option("--algo", a.algorithm,
                   "force NCCL's algorithm: ring, tree, double_tree, hierarchical, nvls, sharp, direct (all-to-all); "
                   "default auto")
      ->type_name("ALGO");
  c.app->add_option("--proto", a.protocol, "force NCCL's protocol: ll, ll128 or simple")->type_name("PROTO");
  c.app->add_option("--fidelity", a.fidelity, "flow, analytic or auto (default: flow up to 200,000 messages a size)")
      ->check(CLI::IsMember({"auto", "flow", "analytic"}))
      ->type_name("F");
  c.app->add_option("--calibration", a.calibration, "time it by the profile's measured curves where they match")
      ->type_name("PROFILE");
  c.app->add_option("--compare", a.log, "a real nccl-tests log: simulate its sizes and print the error per size")
      ->type_name("LOG");
  for (const char* ignored : {"-n,--iters", "-w,--warmup_iters", "-c,--check"})
    c.app->add_option(ignored, a.ignored, "accepted and ignored (a simulation needs no repetitions or checks)")
        ->type_name("N");
}

} // namespace ddlsim::cli
