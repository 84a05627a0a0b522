#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"
#include "models/Partition.hpp"
#include "models/Transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

using namespace ddlsim;
using namespace ddlsim::models;

TEST_CASE("shipped GPT-2 models have the published parameter counts")
{
  // Hugging Face checkpoints gpt2, gpt2-medium, gpt2-large, gpt2-xl (tied embeddings).
  CHECK(load_model("gpt2-small").parameter_count() == 124'439'808);
  CHECK(load_model("gpt2-medium").parameter_count() == 354'823'168);
  CHECK(load_model("gpt2-large").parameter_count() == 774'030'080);
  CHECK(load_model("gpt2-xl").parameter_count() == 1'557'611'200);
}

TEST_CASE("transformer block flop and parameters follow Megatron's closed forms")
{
  const double s = 2048, h = 4096, a = 32;
  Model m = make_gpt({.name = "g", .layers = 2, .hidden = 4096, .heads = 32, .seq = 2048, .vocab = 51200});
  const Layer& block = m.layers()[1];
  CHECK(block.kind == LayerKind::transformer_block);
  CHECK(block.forward_flop == doctest::Approx(24 * s * h * h * (1 + s / (6 * h))).epsilon(1e-12));
  CHECK(block.backward_flop == doctest::Approx(2 * block.forward_flop));
  CHECK(block.parameters == doctest::Approx(12 * h * h + 13 * h));
  // Korthikanti et al. 2022: 34 s h + 5 a s^2 bytes per layer and sample in 16-bit formats.
  CHECK(block.stashed_elements * 2 == doctest::Approx(34 * s * h + 5 * a * s * s));
  // The LM head's forward is one s x h x V GEMM.
  CHECK(m.layers().back().forward_flop == doctest::Approx(2 * s * h * 51200));
  CHECK_THROWS(make_gpt({.name = "g", .layers = 2, .hidden = 100, .heads = 3}));
}

TEST_CASE("layer-list model files")
{
  Model toy = load_model("mlp-toy");
  REQUIRE(toy.size() == 10);
  CHECK(toy.layers()[1].name == "hidden.0");
  CHECK(toy.layers()[8].name == "hidden.7");
  CHECK(toy.layers()[1].parameters == 4096.0 * 4096 + 4096);
  CHECK(toy.layers()[1].forward_flop == 2.0 * 4096 * 4096);
  CHECK(toy.parameter_count() == 1024.0 * 4096 + 4096 + 8 * (4096.0 * 4096 + 4096) + 4096.0 * 1000 + 1000);
}

TEST_CASE("bad model files name the file, line and key")
{
  try {
    load_model_file(std::string(DDLSIM_TEST_FIXTURES) + "/bad_model.yaml");
    FAIL("no exception");
  } catch (const ConfigError& e) {
    std::string all = e.what();
    CHECK(all.find("bad_model.yaml:4: layers[0].type: unknown value 'convolution'") != std::string::npos);
    bool found_type = false, found_unknown = false;
    for (const auto& d : e.diagnostics()) {
      found_type = found_type || (d.key == "layers[0].type" && d.line == 4);
      found_unknown = found_unknown || (d.key == "layers[1].widht" && d.line == 5 && d.message == "unknown key");
    }
    CHECK(found_type);
    CHECK(found_unknown);
  }
  CHECK_THROWS_AS(load_model("no-such-model"), ConfigError);
}

TEST_CASE("min-max partition equals brute force")
{
  const std::vector<double> costs{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  for (int k = 1; k <= 5; ++k) {
    auto ranges = partition_min_max(costs, k);
    REQUIRE(ranges.size() == static_cast<std::size_t>(k));
    CHECK(ranges.front().begin == 0);
    CHECK(ranges.back().end == costs.size());
    double worst = 0;
    for (std::size_t s = 0; s < ranges.size(); ++s) {
      CHECK(ranges[s].size() >= 1);
      if (s > 0)
        CHECK(ranges[s].begin == ranges[s - 1].end);
      double sum = 0;
      for (std::size_t i = ranges[s].begin; i < ranges[s].end; ++i)
        sum += costs[i];
      worst = std::max(worst, sum);
    }
    // Brute force over all cut positions (bitmask of the 9 gaps with k-1 bits set).
    double best = std::numeric_limits<double>::infinity();
    for (unsigned mask = 0; mask < (1u << 9); ++mask) {
      if (__builtin_popcount(mask) != k - 1)
        continue;
      double cur = 0, stage = 0;
      for (std::size_t i = 0; i < costs.size(); ++i) {
        stage += costs[i];
        if (i == costs.size() - 1 || (mask >> i) & 1u) {
          cur = std::max(cur, stage);
          stage = 0;
        }
      }
      best = std::min(best, cur);
    }
    CHECK(worst == best);
  }
  CHECK_THROWS(partition_min_max(costs, 11));
  CHECK_THROWS(partition_min_max(costs, 0));
}

TEST_CASE("memory per parameter follows the mixed-precision accounting")
{
  Model toy = load_model("mlp-toy");
  const StageRange all{0, toy.size()};
  const double p = toy.parameter_count();
  // bf16 + Adam: 2 (weights) + 2 (gradients) + 4 (fp32 master) + 8 (moments) = 16 bytes.
  CHECK(estimate_stage_memory(toy, all, Dtype::bf16, Optimizer::adam, 0).total() == doctest::Approx(16 * p));
  // fp32 + SGD: 4 + 4.
  CHECK(estimate_stage_memory(toy, all, Dtype::fp32, Optimizer::sgd, 0).total() == doctest::Approx(8 * p));
  // Activations scale with the samples in flight.
  const auto m = estimate_stage_memory(toy, all, Dtype::bf16, Optimizer::sgd, 10);
  CHECK(m.activations == doctest::Approx(10 * 2 * toy.stashed_elements_per_sample()));
}
