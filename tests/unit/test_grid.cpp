// Tensor parallelism against closed forms it does not compute itself:
//   the integrated P_r x P_c grid (Gholami et al. 2018): per process and fully connected layer
//   d_in x d_out with batch B, bytes sent = dtype x [ (P_r-1)/P_r d_out B/P_c        (forward all-gather)
//                                                   + 2 (P_r-1)/P_r d_in B/P_c       (backward all-reduce)
//                                                   + 2 (P_c-1)/P_c (d_in d_out + d_out)/P_r ]  (weight gradients)
//   and on AlexNet's fully connected layers the cheapest grid at P = 64 and 512 is neither 1 x P nor P x 1;
//   Megatron tensor parallelism moves 8 s b h (t-1)/t x dtype bytes per GPT layer and micro-batch, and
//   a layer stashes s h (10 + 24/t) + 5 a s^2 / t bytes (Korthikanti et al. 2022).
#include "calibration/RooflineCostModel.hpp"
#include "experiments/Plan.hpp"
#include "experiments/Experiment.hpp"
#include "models/Memory.hpp"
#include "models/Zoo.hpp"
#include "sim/Metrics.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::experiments;

namespace {

std::string write_experiment(const std::string& text)
{
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim_grid_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / ("exp" + std::to_string(counter++) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

// AlexNet's classifier as a fully connected stack: 9216 -> 4096 -> 4096 -> 1000.
const std::string alexnet_fc = R"(model:
  name: alexnet-fc
  input: {features: 9216}
  layers:
    - {name: fc6, type: linear, out: 4096}
    - {name: relu6, type: activation, function: relu}
    - {name: fc7, type: linear, out: 4096}
    - {name: relu7, type: activation, function: relu}
    - {name: fc8, type: linear, out: 1000}
    - {name: loss, type: softmax_loss}
)";

// Bytes each GPU sends in one iteration of the grid P_r x P_c (pp = 1, one micro-batch per replica).
std::vector<double> grid_bytes(int p, int p_r, long long batch, const std::string& model_text = alexnet_fc)
{
  const int nodes = p >= 8 ? p / 8 : 1;
  const int per_node = p >= 8 ? 8 : p;
  const std::string text = "name: grid\n" + model_text + "cluster: {name: c, nodes: " + std::to_string(nodes) +
                           ", gpus_per_node: " + std::to_string(per_node) +
                           ", gpu: {memory: 1TB}, intra_node: {bandwidth: 100GBps}, nic: {count: 8, bandwidth: 100GBps}, "
                           "fabric: {latency: 1us}}\ncalibration: h100-sxm\n"
                           "training: {global_batch: " + std::to_string(batch) + ", micro_batch: " +
                           std::to_string(batch / (p / p_r)) + ", dtype: fp32, optimizer: sgd}\n"
                           "parallelism: {pp: 1, tp: " + std::to_string(p_r) + ", dp: auto}\n";
  const PointConfig point = Experiment::load(write_experiment(text)).point(0);
  REQUIRE(point.is_valid());
  const calibration::RooflineCostModel cost(point.profile);
  const PointPlan plan = plan_point(point, cost);
  return sim::bytes_sent_per_device(sim::build_schedule(plan.pipeline), point.cluster.gpus_per_node);
}

double closed_form(int p, int p_r, double batch)
{
  const double p_c = static_cast<double>(p) / p_r;
  const double r = p_r, b = batch / p_c;
  const double layers[][2] = {{9216, 4096}, {4096, 4096}, {4096, 1000}};
  double words = 0;
  bool first = true;
  for (const auto& l : layers) {
    const double d_in = l[0], d_out = l[1];
    words += (r - 1) / r * d_out * b;
    if (!first)
      words += 2 * (r - 1) / r * d_in * b;
    words += 2 * (p_c - 1) / p_c * (d_in * d_out + d_out) / r;
    first = false;
  }
  return 4 * words;  // fp32
}

}  // namespace

TEST_CASE("grid P_r x P_c: bytes per process equal Gholami's closed form")
{
  const struct {
    int p, p_r;
  } grids[] = {{8, 1}, {8, 2}, {8, 8}, {16, 4}, {64, 8}, {64, 1}, {64, 64}};
  for (const auto& g : grids) {
    CAPTURE(g.p);
    CAPTURE(g.p_r);
    const auto bytes = grid_bytes(g.p, g.p_r, 512);
    for (double sent : bytes)
      CHECK(sent == doctest::Approx(closed_form(g.p, g.p_r, 512)).epsilon(1e-9));
  }
}

TEST_CASE("grid P_r x P_c: on AlexNet's fully connected layers the cheapest grid is neither pure data nor pure model parallel")
{
  for (int p : {64, 512}) {
    CAPTURE(p);
    int best = 0;
    double best_bytes = std::numeric_limits<double>::infinity();
    for (int p_r = 1; p_r <= p; p_r *= 2) {
      const double sent = grid_bytes(p, p_r, 2048).front();
      if (sent < best_bytes) {
        best_bytes = sent;
        best = p_r;
      }
    }
    CHECK(best > 1);
    CHECK(best < p);
  }
}

TEST_CASE("Megatron tensor parallelism: 8 s b h (t-1)/t bytes per layer, stash s h (10 + 24/t) + 5 a s^2 / t")
{
  const double s = 512, h = 1024, a = 16;
  const std::string gpt = "model: {name: g, gpt: {layers: 4, hidden: 1024, heads: 16, seq: 512, vocab: 1024}}\n";
  for (int t : {2, 4, 8}) {
    CAPTURE(t);
    // One stage, one replica, t GPUs: the embedding (vocabulary-parallel, all-reduce of s h), 4
    // layers of 4 all-reduces of s h each (2 forward, 2 backward), the head (column-parallel
    // logits: all-reduce of the s h input gradient). fp32 here: 4 bytes per element.
    const auto bytes = grid_bytes(t, t, 1, gpt);
    const double per_all_reduce = 2.0 * (t - 1) / t * s * h * 4;
    CHECK(bytes.front() == doctest::Approx((1 + 4 * 4 + 1) * per_all_reduce).epsilon(1e-9));

    const models::Model m = models::make_gpt({.name = "g", .layers = 3, .hidden = 1024, .heads = 16, .seq = 512, .vocab = 1024});
    const models::StageMemoryModel mem(m, {.dtype = Dtype::bf16, .optimizer = models::Optimizer::adam, .tp = t}, 1);
    CHECK(mem.stage({2, 3}, 1).activations == doctest::Approx(s * h * (10 + 24.0 / t) + 5 * a * s * s / t));
  }
}
