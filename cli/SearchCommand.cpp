// ddlsim search microbatch|grid|parallel: the searches of experiments/Search.hpp over one point, their
// rankings printed and every point tried written as a CSV.
#include "cli/Commands.hpp"
#include "experiments/ChakraWorkload.hpp"
#include "experiments/Experiment.hpp"
#include "experiments/Search.hpp"
#include "models/Layer.hpp"
#include "sim/Schedules.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ddlsim::cli {

namespace {

constexpr double gib = 1024.0 * 1024 * 1024;

// An experiment that resolves to one point, for the searches.
experiments::Experiment load_one_point(const std::string& file, const std::vector<std::string>& sets,
                                       const std::string& search)
{
  auto exp = experiments::Experiment::load(file, sets);
  if (exp.point_count() != 1)
    throw UsageError{"search " + search + " searches one configuration: fix the swept keys with --set (the file has " +
                     std::to_string(exp.point_count()) + " points)"};
  return exp;
}

// ---- search: what every search takes --------------------------------------------------------

struct SearchArgs {
  std::string file; // resolving to one point
  std::optional<std::string> output;
  std::vector<std::string> sets;
  experiments::ColumnSelection columns;
};

void add_search_options(CLI::App* app, SearchArgs& a, int& jobs, const std::string& csv_help)
{
  add_experiment(app, a.file);
  add_output(app, a.output, csv_help);
  cli::add_int(app, "-j,--jobs", jobs, 1, 1024, "parallel simulations");
  add_sets(app, a.sets, "as for run (the file must resolve to one point)");
  add_columns(app, a.columns);
}

// ---- search grid: every pp x tp x dp shape of the cluster's GPUs, ranked (experiments/Search.hpp)

struct SearchGridArgs : SearchArgs {
  experiments::GridSearchOptions options;
};

int cmd_search_grid(const SearchGridArgs& a)
{
  const auto exp                      = load_one_point(a.file, a.sets, "grid");
  const experiments::PointConfig base = exp.point(0);
  if (base.chakra)
    throw Error(experiments::chakra_refusal("search grid"));
  // The experiment's context parallelism, ZeRO stage and sequence parallelism stay: the grid is
  // the cluster's GPUs over cp, written as pp x tp x dp.
  const int gpus  = base.cluster.gpu_count() / base.parallelism.cp;
  auto make_point = [&](int pp, int tp, int dp) {
    return exp.with(
        base,
        [&](experiments::TrainingSpec&, experiments::ParallelismSpec& par) {
          par.pp = pp;
          par.tp = tp;
          par.dp = dp;
        },
        fmt::format("search grid's shape pp {} x tp {} x dp {}", pp, tp, dp));
  };
  const experiments::GridSearch search = experiments::search_grid(gpus, make_point, a.options);
  const std::string csv                = a.output ? *a.output : "results/" + exp.get_name() + "-grid.csv";
  experiments::write_csv(csv, search.rows, a.columns);
  fmt::print("grid search: {} on {} ({} GPUs), {}; pp x tp (P_r) x dp (P_c) = {}{}\n", base.model_label,
             base.cluster_label, base.cluster.gpu_count(), sim::schedule_table.name(base.parallelism.schedule), gpus,
             base.parallelism.cp > 1 ? fmt::format(" (x cp {})", base.parallelism.cp) : "");
  fmt::print("{:>5} {:>5} {:>5} {:>5} {:>14} {:>10} {:>16} {:>14} {:>10}  \n", "rank", "pp", "tp", "dp", "samples/s",
             "vs best", "comm_bytes/GPU", "exposed_comm_s", "memory");
  const double best =
      search.ranking.empty() ? 0 : *search.rows[search.ranking.front()].number("throughput_samples_per_s");
  auto label = [&](std::size_t r) {
    const experiments::GridShape& s = search.shapes[r];
    if (s.dp == gpus)
      return "pure data parallel";
    if (s.tp == gpus)
      return "pure model parallel (tensor)";
    if (s.pp == gpus)
      return "pure model parallel (pipeline)";
    return "";
  };
  const double nan = std::nan(""); // an ok row fills these; were one empty, it would print as nan
  int rank         = 0;
  for (std::size_t r : search.ranking) {
    const auto& row = search.rows[r];
    const double t  = *row.number("throughput_samples_per_s");
    fmt::print("{:5} {:>5} {:>5} {:>5} {:14.6g} {:9.1f}% {:16.4g} {:14.4g} {:7.1f}GiB  {}\n", ++rank, row.get("pp"),
               row.get("tp"), row.get("dp"), t, 100 * (t / best - 1), row.number("comm_bytes_per_gpu").value_or(nan),
               row.number("exposed_comm_time_s").value_or(nan), row.number("peak_memory_bytes").value_or(nan) / gib,
               label(r));
  }
  std::size_t others = 0;
  for (std::size_t r = 0; r < search.rows.size(); ++r)
    if (const auto& row = search.rows[r]; !row.is_ok()) {
      ++others;
      fmt::print("{:>5} {:>5} {:>5} {:>5} {:>14}  {}\n", "-", row.get("pp"), row.get("tp"), row.get("dp"),
                 row.get("status"), label(r));
    }
  fmt::print("{} shapes, {} ok; every shape: {}\n", search.rows.size(), search.rows.size() - others, csv);
  return exit_ok;
}

// ---- search parallel: every layout of the cluster, screened, the best simulated ---------------

struct SearchParallelArgs : SearchArgs {
  experiments::ParallelSearchOptions options;
  std::optional<std::string> zero, ep, schedules, virtual_stages, recompute, dtype, framework;
  int top     = 16;
  int confirm = 0;
};

// The comma-separated items of `text`, each parsed by `parse` (which throws UsageError).
template <typename T, typename Parse>
std::vector<T> parse_list(const std::string& text, Parse parse)
{
  std::vector<T> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(parse(item));
  return out;
}

// A list of names of `table`'s enum, for `option`.
template <typename E, std::size_t N>
std::vector<E> parse_names(const std::optional<std::string>& text, const EnumTable<E, N>& table,
                           const std::string& option)
{
  if (!text)
    return {};
  return parse_list<E>(*text, [&](const std::string& name) {
    const auto value = table.parse(name);
    if (!value)
      throw UsageError{option + ": '" + name + "' is not one of " + table.names()};
    return *value;
  });
}

experiments::ParallelSearchOptions parallel_options(const SearchParallelArgs& a)
{
  experiments::ParallelSearchOptions options = a.options;
  options.top                                = static_cast<std::size_t>(a.top);
  options.confirm                            = static_cast<std::size_t>(a.confirm);
  auto ints = [](const std::optional<std::string>& text, const std::string& option, int min, int max) {
    return text ? parse_list<int>(*text, [&](const std::string& n) { return cli::parse_int(n, option, min, max); })
                : std::vector<int>{};
  };
  if (a.zero) {
    options.zero_stages.clear();
    for (const int level : ints(a.zero, "--zero", 0, 3))
      options.zero_stages.push_back(zero_stage(level));
  }
  options.expert_parallel = ints(a.ep, "--ep", 1, 1 << 20);
  options.virtual_stages  = ints(a.virtual_stages, "--virtual-stages", 2, 1024);
  options.schedules       = parse_names(a.schedules, sim::schedule_table, "--schedules");
  options.recomputes      = parse_names(a.recompute, models::recompute_table, "--recompute");
  options.dtypes          = parse_names(a.dtype, dtype_table, "--dtype");
  options.frameworks      = parse_names(a.framework, sim::framework_table, "--framework");
  return options;
}

// "1st", "2nd", "3rd", "4th", ... "11th", "21st".
std::string ordinal(std::size_t n)
{
  const std::size_t tens = n % 100, ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

// "1f1b", "gpipe" or "interleaved:v4" (virtual stages): one word, for scripts that split the table.
std::string schedule_label(const experiments::ParallelLayout& l)
{
  const std::string name(sim::schedule_table.name(l.schedule));
  return l.virtual_stages > 1 ? name + ":v" + std::to_string(l.virtual_stages) : name;
}

// The ranked table: each layout, its memory, estimate and simulated time, throughput, MFU and where
// its time goes (compute, bubble, exposed communication and its part per dimension: tp_s, dp_s, pp_s,
// cp_s, and a2a_s, the exposed all-to-all, for experts).
void print_ranking(const experiments::PointConfig& base, const experiments::ParallelSearch& search,
                   const std::vector<experiments::ResultRow>& rows, const std::vector<std::size_t>& ranking,
                   const std::vector<std::size_t>& layouts)
{
  const bool tokens  = base.model.has(models::LayerKind::attention);
  const bool experts = base.model.has(models::LayerKind::moe);
  const bool dtypes  = std::any_of(layouts.begin(), layouts.end(), [&](std::size_t i) {
    return search.simulated[i].layout.dtype || search.simulated[i].layout.framework;
  });
  fmt::print("{:>4} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>3} {:>4} {:>5} {:>14} {:>9}{} {:>10} {:>11} {:>11} {:>13} "
             "{:>6} {:>9} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8}{}\n",
             "rank", "tp", "pp", "dp", "cp", "ep", "zero", "sp", "mb", "M", "schedule", "recompute",
             dtypes ? fmt::format(" {:>5} {:>13}", "dtype", "framework") : "", "memory", "estimate_s", "simulated_s",
             tokens ? "tokens/s" : "samples/s", "mfu", "compute_s", "bubble", "exposed_s", "tp_s", "dp_s", "pp_s",
             "cp_s",
             experts ? fmt::format(" {:>9}", "a2a_s") : "");
  int rank = 0;
  for (std::size_t r : ranking) {
    const auto& row       = rows[r];
    const auto& c         = search.simulated[layouts[r]];
    const auto& l         = c.layout;
    // A column a row leaves empty (a parameter-server point's dimensions) prints as nan.
    const auto number     = [&](const char* column) { return row.number(column).value_or(std::nan("")); };
    const std::string mfu = row.get("mfu").empty() ? "-" : fmt::format("{:.1f}%", 100 * number("mfu"));
    fmt::print("{:4} {:3} {:3} {:4} {:3} {:3} {:4} {:>3} {:4} {:>5} {:>14} {:>9}{} {:7.1f}GiB {:11.4g} {:11.4g} "
               "{:13.6g} {:>6} {:9.4g} {:5.1f}% {:9.4g} {:8.3g} {:8.3g} {:8.3g} {:8.3g}{}\n",
               ++rank, l.tp, l.pp, l.dp, l.cp, l.ep, zero_level(l.zero), l.sequence_parallel ? "yes" : "no",
               l.micro_batch, row.get("num_micro_batches"), schedule_label(l),
               models::recompute_table.name(l.recompute),
               dtypes ? fmt::format(" {:>5} {:>13}", row.get("dtype"), row.get("framework")) : "",
               number("peak_memory_bytes") / gib, c.estimate_s, number("iteration_time_s"),
               number(tokens ? "tokens_per_s" : "throughput_samples_per_s"), mfu, number("compute_time_s"),
               100 * number("bubble_fraction"), number("exposed_comm_time_s"), number("exposed_tp_s"),
               number("exposed_dp_s"), number("exposed_pp_s"), number("exposed_cp_s"),
               experts ? fmt::format(" {:9.4g}", number("all_to_all_time_s")) : "");
  }
  for (const auto& row : rows)
    if (!row.is_ok())
      fmt::print("   - {}: {}\n", row.get("status"), row.get("message"));
}

// --confirm: the best K again with every collective as flows, and whether their order holds.
void print_confirmation(const experiments::PointConfig& base, const experiments::ParallelSearch& search)
{
  fmt::print("confirmed at flow fidelity (every collective as flows), the {} best in {:.1f} s:\n",
             search.confirmed.size(), search.confirm_s);
  std::vector<std::size_t> layouts;  // confirmed row i is the layout of ranking[i]
  for (std::size_t i = 0; i < search.confirmed.size(); ++i)
    layouts.push_back(search.ranking[i]);
  print_ranking(base, search, search.confirmed, search.confirmed_ranking, layouts);
  std::vector<std::string> moved;
  // The order of the ok confirmed rows against theirs in the first ranking (a row that failed at flow
  // fidelity is named, and the others keep their places around it).
  std::vector<std::size_t> expected;
  for (std::size_t i = 0; i < search.confirmed.size(); ++i)
    if (search.confirmed[i].is_ok())
      expected.push_back(i);
    else
      moved.push_back(fmt::format("#{} is {} at flow fidelity", i + 1, search.confirmed[i].get("status")));
  for (std::size_t i = 0; i < search.confirmed_ranking.size(); ++i)
    if (search.confirmed_ranking[i] != expected[i])
      moved.push_back(fmt::format("#{} ranks {} of them at flow fidelity", search.confirmed_ranking[i] + 1,
                                  ordinal(i + 1)));
  if (moved.empty())
    fmt::print("the order holds at flow fidelity\n");
  else
    fmt::print("the order changes at flow fidelity: {}\n", fmt::join(moved, "; "));
}

void print_parallel_search(const experiments::PointConfig& base, const experiments::ParallelSearch& search,
                           const experiments::ParallelSearchOptions& options)
{
  fmt::print("parallel search: {} on {} ({} GPUs), global batch {}\n", base.model.get_name(), base.cluster_label,
             base.cluster.gpu_count(), base.training.global_batch);
  fmt::print("{} layouts, {} valid, {} fit in memory; screened in {:.1f} s; the {} best estimates simulated in "
             "{:.1f} s\n",
             search.enumerated, search.valid, search.fitting, search.screen_s, search.rows.size(), search.simulate_s);
  std::vector<std::size_t> layouts(search.rows.size());
  for (std::size_t i = 0; i < layouts.size(); ++i)
    layouts[i] = i;
  print_ranking(base, search, search.rows, search.ranking, layouts);
  if (options.confirm > 0)
    print_confirmation(base, search);
}

int cmd_search_parallel(const SearchParallelArgs& a)
{
  const experiments::ParallelSearchOptions options = parallel_options(a);
  const auto exp                      = load_one_point(a.file, a.sets, "parallel");
  const experiments::PointConfig base = exp.point(0);
  // Each layout is the experiment's point with its layout set, derived and checked again (no --set strings,
  // no file read again). The shape is checked with 1F1B; each layout's schedule and virtual stages are set
  // on a copy.
  auto make_point = [&](const experiments::ParallelLayout& l) {
    return exp.with(
        base,
        [&](experiments::TrainingSpec& t, experiments::ParallelismSpec& par) {
          if (l.dtype)
            t.dtype = *l.dtype;
          if (l.framework)
            t.framework = *l.framework;
          par.tp                = l.tp;
          par.pp                = l.pp;
          par.dp                = l.dp;
          par.cp                = l.cp;
          par.zero              = l.zero;
          par.sequence_parallel = l.sequence_parallel;
          t.micro_batch         = l.micro_batch;
          par.ep                = l.ep;
          par.schedule          = sim::ScheduleKind::one_f_one_b;
          par.virtual_stages    = 1;
          if (!shards_optimizer(l.zero))
            par.zero_group = 0;
        },
        "search parallel's layout");
  };
  const experiments::ParallelSearch search = experiments::search_parallel(base, make_point, options);
  const std::string csv                    = a.output ? *a.output : "results/" + exp.get_name() + "-parallel.csv";
  std::vector<experiments::ResultRow> written = search.rows;  // then the --confirm rows (collective_fidelity flow)
  written.insert(written.end(), search.confirmed.begin(), search.confirmed.end());
  experiments::write_csv(csv, written, a.columns);
  print_parallel_search(base, search, options);
  fmt::print("every simulated layout: {}\n", csv);
  return exit_ok;
}

// ---- search microbatch: the memory-aware micro-batch size search (experiments/Search.hpp) ------

struct SearchMicrobatchArgs : SearchArgs {
  experiments::MicrobatchSearchOptions options;
};

int cmd_search_microbatch(const SearchMicrobatchArgs& a)
{
  const auto exp    = load_one_point(a.file, a.sets, "microbatch");
  const auto points = exp.points();
  if (nothing_valid(points))
    return exit_bad_input;
  const experiments::PointConfig& base       = points.front();
  auto make_point                            = [&](long long global_batch, int micro_batch) {
    return exp.with(
                                   base,
                                   [&](experiments::TrainingSpec& t, experiments::ParallelismSpec&) {
          t.global_batch = global_batch;
          t.micro_batch  = micro_batch;
        },
                                   fmt::format("search microbatch's point (global batch {}, micro-batch {})", global_batch, micro_batch));
  };
  const experiments::MicrobatchSearch search = experiments::search_microbatch(base, make_point, a.options);
  const std::string csv                      = a.output ? *a.output : "results/" + exp.get_name() + "-microbatch.csv";
  experiments::write_csv(csv, search.rows, a.columns);

  const int pp = base.parallelism.pp, dp = base.parallelism.dp;
  fmt::print("micro-batch search: {} on {}, {}, pp {}, dp {}, tp {}; baseline M = {} x pp = {}\n", base.model_label,
             base.cluster_label, sim::schedule_table.name(base.parallelism.schedule), pp, dp, base.parallelism.tp,
             a.options.baseline_factor, a.options.baseline_factor * pp);
  fmt::print("{:>12} | {:>8} {:>8} {:>14} {:>10} | {:>8} {:>8} {:>14} {:>10} | {:>8}\n", "mini-batch", "best b", "M",
             "samples/s", "memory", "base b", "M", "samples/s", "memory", "gain");
  auto cells = [&](const std::optional<std::size_t>& r) {
    if (!r)
      return fmt::format("{:>8} {:>8} {:>14} {:>10}", "-", "-", "-", "-");
    const auto& row          = search.rows[*r];
    const std::optional<double> memory = row.number("peak_memory_bytes");
    const double mem_gib               = memory.value_or(0.0) / gib;
    if (!row.is_ok()) // an invalid point has no memory figure
      return !memory ? fmt::format("{:>8} {:>8} {:>14} {:>10}", row.get("micro_batch"), row.get("num_micro_batches"),
                                   row.get("status"), "-")
                     : fmt::format("{:>8} {:>8} {:>14} {:7.1f}GiB", row.get("micro_batch"),
                                   row.get("num_micro_batches"), row.get("status"), mem_gib);
    return fmt::format("{:>8} {:>8} {:14.6g} {:7.1f}GiB", row.get("micro_batch"), row.get("num_micro_batches"),
                       row.number("throughput_samples_per_s").value_or(std::nan("")), mem_gib);
  };
  for (const auto& b : search.batches) {
    std::string gain = "-";
    if (b.best && b.baseline && search.rows[*b.baseline].is_ok())
      gain =
          fmt::format("{:+.1f}%", 100 * (search.rows[*b.best].number("throughput_samples_per_s").value_or(0) /
                                             search.rows[*b.baseline].number("throughput_samples_per_s").value_or(0) -
                                         1));
    fmt::print("{:12} | {} | {} | {:>8}\n", b.global_batch, cells(b.best), cells(b.baseline), gain);
  }
  const int baseline_m      = a.options.baseline_factor * pp;
  const bool baseline_tried = std::any_of(search.batches.begin(), search.batches.end(),
                                          [](const auto& b) { return b.baseline.has_value(); });
  if (search.batches.empty())
    fmt::print("no mini-batch tried (--max-batch is below the experiment's global batch)");
  else if (search.largest_batch == 0)
    fmt::print("no mini-batch tried trains: nothing fits from {}", search.batches.front().global_batch);
  else if (search.largest_baseline_batch > 0)
    fmt::print(
        "largest trainable mini-batch: {} with the search, {} with the baseline ({:+.0f}%)", search.largest_batch,
        search.largest_baseline_batch,
        100.0 * (static_cast<double>(search.largest_batch) / static_cast<double>(search.largest_baseline_batch) - 1));
  else if (baseline_tried)
    fmt::print("largest trainable mini-batch: {} with the search; the baseline's {} micro-batches fit none of the "
               "mini-batches tried (from {})",
               search.largest_batch, baseline_m, search.batches.front().global_batch);
  else
    fmt::print("largest trainable mini-batch: {} with the search; the baseline's {} micro-batches divide none of the "
               "mini-batches tried",
               search.largest_batch, baseline_m);
  if (search.stopped_at_max)
    fmt::print(" (the search stopped at --max-batch with points still fitting)");
  fmt::print("\n{} points simulated; every point: {}\n", search.rows.size(), csv);
  return exit_ok;
}

} // namespace

void add_search_commands(CommandTable& table)
{
  CLI::App& root   = table.root();
  CLI::App* search = root.add_subcommand("search", "find the best micro-batch, grid or parallel layout");
  search->require_subcommand(1);
  auto m = table.add<SearchMicrobatchArgs>(
      *search, "microbatch", "the best micro-batch size and count per mini-batch, and the largest trainable mini-batch",
      cmd_search_microbatch);
  m.app->footer("The memory-aware micro-batch size search: per mini-batch (doubling from the experiment's), the "
                "fastest micro-batch size and count against GPipe's M = 4 x pp, and the largest trainable "
                "mini-batch of each. docs/search.md");
  add_search_options(m.app, m.args, m.args.options.jobs, "every point tried (default results/NAME-microbatch.csv)");
  cli::add_int(m.app, "--max-batch", m.args.options.max_batch, 1, 1 << 30,
               "the largest mini-batch tried (default 16 x the experiment's)");

  auto g = table.add<SearchGridArgs>(
      *search, "grid", "every pp x tp x dp shape of the cluster's GPUs, ranked by throughput", cmd_search_grid);
  g.app->footer("Every pp x tp (P_r) x dp (P_c) shape of the cluster's GPUs, ranked by throughput, with pure data "
                "and pure model parallelism marked (the experiment's cp, zero and sequence_parallel stay: dp = GPUs "
                "/ (pp tp cp)). docs/search.md");
  add_search_options(g.app, g.args, g.args.options.jobs, "every shape (default results/NAME-grid.csv)");
  g.app->add_flag_callback(
      "--no-pipeline", [&o = g.args.options] { o.pipeline = false; }, "only pp = 1: the P_r x P_c grid");

  auto p = table.add<SearchParallelArgs>(
      *search, "parallel", "every tp, pp, dp, cp, ep, ZeRO stage, micro-batch and schedule: screened, the best simulated",
      cmd_search_parallel);
  p.app->footer("Every tp x pp x dp x cp, ep (mixtures of experts), ZeRO stage, micro-batch, schedule and virtual "
                "stages of the cluster for the experiment's model and global batch, each with the cheapest "
                "recomputation that fits: those that fit in memory ranked by a closed form, the best simulated and "
                "ranked by throughput, with where their time goes. docs/search.md");
  add_search_options(p.app, p.args, p.args.options.jobs, "the simulated layouts (default results/NAME-parallel.csv)");
  cli::add_int(p.app, "--top", p.args.top, 1, 100000, "layouts simulated in full (default 16)");
  p.app->add_option("--zero", p.args.zero, "ZeRO stages tried, e.g. 1,3 (default 0,1,2,3)")->type_name("LIST");
  p.app->add_option("--ep", p.args.ep, "expert-parallel sizes tried, e.g. 1,8 (default: every one that fits)")
      ->type_name("LIST");
  p.app->add_option("--schedules", p.args.schedules,
                    "pipeline schedules tried with pp > 1, e.g. 1f1b,interleaved (default: the experiment's, and "
                    "1f1b and interleaved unless it is gpipe)")
      ->type_name("LIST");
  p.app->add_option("--virtual-stages", p.args.virtual_stages,
                    "virtual stages tried with interleaved, e.g. 2,4 (default: every v from 2 to 8 that splits the "
                    "layers evenly)")
      ->type_name("LIST");
  p.app
      ->add_option("--recompute", p.args.recompute,
                   "recomputation tried, the first that fits kept, e.g. none,full (default "
                   "none,selective,selective-op,full)")
      ->type_name("LIST");
  p.app->add_option("--dtype", p.args.dtype, "dtypes tried, e.g. bf16,fp8 (default: the experiment's)")
      ->type_name("LIST");
  p.app->add_option("--framework", p.args.framework, "frameworks tried, e.g. megatron,pytorch (default: the "
                    "experiment's)")
      ->type_name("LIST");
  cli::add_int(p.app, "--confirm", p.args.confirm, 0, 100000,
               "simulate the best K again with every collective as flows and say whether the order holds");
}

} // namespace ddlsim::cli
