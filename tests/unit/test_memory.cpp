// The memory model against closed forms: bytes per parameter, activation growth with the number
// of micro-batches in flight under GPipe and 1F1B, and what recomputation saves.
#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"
#include "models/Zoo.hpp"
#include "sim/Schedules.hpp"
#include "tests/unit/LayerNamed.hpp"
#include "tests/unit/SmallLlama.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::models;

namespace {
// Blocks 1..L of a GPT (its transformer layers, without embedding and head).
StageRange gpt_layers(const Model& m) { return {1, m.blocks().size() - 1}; }
}  // namespace

TEST_CASE("weights, gradients and optimizer state follow the mixed-precision accounting")
{
  const Model toy = load_model("mlp-toy");
  const StageRange all{0, toy.blocks().size()};
  const double p = toy.parameter_count();
  auto state = [&](Dtype dtype, Optimizer opt) {
    const MemoryBreakdown m = StageMemoryModel(toy, {.dtype = dtype, .optimizer = opt}, 1).stage(all, 0);
    CHECK(m.activations == 0);
    return m.weights + m.gradients + m.optimizer_state;
  };
  // Rajbhandari et al. 2020: bf16 + Adam = 2 + 2 + 4 (fp32 master) + 8 (moments) = 16 bytes.
  CHECK(state(Dtype::bf16, Optimizer::adam) == doctest::Approx(16 * p));
  CHECK(state(Dtype::fp16, Optimizer::momentum) == doctest::Approx(12 * p));
  CHECK(state(Dtype::fp32, Optimizer::adam) == doctest::Approx(16 * p));
  CHECK(state(Dtype::fp32, Optimizer::sgd) == doctest::Approx(8 * p));
  const MemoryBreakdown reserved =
      StageMemoryModel(toy, {.dtype = Dtype::bf16, .optimizer = Optimizer::sgd, .reserve_bytes = 1e9}, 1).stage(all, 0);
  CHECK(reserved.reserve == 1e9);
  CHECK(reserved.total() == doctest::Approx(reserved.weights + reserved.gradients + reserved.optimizer_state +
                                            reserved.workspace + 1e9));
}

TEST_CASE("GPipe activations grow linearly with M; 1F1B stays flat at K - s micro-batches")
{
  const Model m = load_model("gpt2-small");
  const StageMemoryModel mem(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam}, 4);
  const int k = 4;
  const StageRange blocks{3, 6};
  const double one = mem.stage(blocks, 1).activations;
  CHECK(one > 0);
  for (int micro_batches : {1, 2, 4, 8, 16, 32}) {
    CAPTURE(micro_batches);
    const int gpipe = sim::in_flight_micro_batches(sim::ScheduleKind::gpipe, k, 1, micro_batches);
    const int ofob = sim::in_flight_micro_batches(sim::ScheduleKind::one_f_one_b, k, 1, micro_batches);
    CHECK(mem.stage(blocks, gpipe).activations == doctest::Approx(micro_batches * one));
    CHECK(mem.stage(blocks, ofob).activations == doctest::Approx(std::min(micro_batches, k - 1) * one));
  }
  // The first stage of 1F1B holds the most: K - s.
  CHECK(sim::in_flight_micro_batches(sim::ScheduleKind::one_f_one_b, 8, 0, 100) == 8);
  CHECK(sim::in_flight_micro_batches(sim::ScheduleKind::one_f_one_b, 8, 7, 100) == 1);
  // Activations also scale with the micro-batch size.
  const StageMemoryModel mem8(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam}, 8);
  CHECK(mem8.stage(blocks, 1).activations == doctest::Approx(2 * one));
}

TEST_CASE("recomputation saves what Korthikanti et al. predict")
{
  const double s = 1024, h = 1024, a = 16, layers = 8, b = 2, n = 6;
  const Model m = make_gpt({.name = "g", .layers = 8, .hidden = 1024, .heads = 16, .seq = 1024, .vocab = 32000});
  auto activations = [&](Recompute r) {
    return StageMemoryModel(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam, .recompute = r}, 2)
        .stage(gpt_layers(m), 6)
        .activations;
  };
  // No recomputation: 34 s h + 5 a s^2 bytes per layer, micro-batch sample and micro-batch in flight.
  CHECK(activations(Recompute::none) == doctest::Approx(n * b * layers * (34 * s * h + 5 * a * s * s)));
  // Selective: the 5 a s^2 attention terms go, one micro-batch's layer of them is rebuilt at a time.
  CHECK(activations(Recompute::selective) == doctest::Approx(n * b * layers * 34 * s * h + b * 5 * a * s * s));
  // Full: only each layer's input (s h, 2 bytes) is kept; one layer is rebuilt at a time.
  CHECK(activations(Recompute::full) ==
        doctest::Approx(n * b * layers * 2 * s * h + b * (34 * s * h + 5 * a * s * s)));
}

TEST_CASE("a stage holding only the tied LM head keeps its own copy of the embedding")
{
  const Model m = load_model("gpt2-small");
  const StageMemoryModel mem(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam}, 1);
  const std::size_t n = m.blocks().size();
  const double vocab_rows = 50257.0 * 768;
  const MemoryBreakdown head = mem.stage({n - 1, n}, 1);
  CHECK(head.parameters == doctest::Approx(vocab_rows + 2 * 768));  // tied copy + final norm
  CHECK(mem.parameters({0, n}) == doctest::Approx(m.parameter_count()));  // one device: one copy
}

TEST_CASE("workspace is the largest layer's scratch plus gradient buffers, per micro-batch")
{
  const Model r = load_model("resnet50");
  const StageMemoryModel one(r, {.dtype = Dtype::fp32, .optimizer = Optimizer::sgd}, 1);
  const StageMemoryModel four(r, {.dtype = Dtype::fp32, .optimizer = Optimizer::sgd}, 4);
  const StageRange all{0, r.blocks().size()};
  CHECK(one.stage(all, 1).workspace > 0);
  CHECK(four.stage(all, 1).workspace == doctest::Approx(4 * one.stage(all, 1).workspace));
  // The stem's 7x7 convolution lowers 3 x 49 x 112 x 112 input columns; its gradients are 3x224x224 + 64x112x112.
  const double stem = (3.0 * 49 * 112 * 112 + 3.0 * 224 * 224 + 64.0 * 112 * 112) * 4;
  CHECK(one.stage({0, 1}, 1).workspace >= stem);
}

TEST_CASE("ZeRO stages reproduce the ZeRO paper's example: 7.5B parameters on 64 GPUs")
{
  // Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N_d = 64, K = 12 (mixed-precision Adam):
  // baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB (decimal gigabytes, rounded).
  const double psi = 7.5e9;
  const std::vector<double> paper = {120e9, 31.4e9, 16.6e9, 1.9e9};
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const double bytes = training_state(psi, Dtype::bf16, Optimizer::adam, zero_stage(stage), 64).total();
    CHECK(std::abs(bytes - paper[static_cast<std::size_t>(stage)]) <= 0.05e9);
  }
  // A model of that size through the stage memory model: the same three terms.
  ModelBuilder b("zero", TensorShape::sequence(1, 1));
  b.custom({b.input()}, {.parameters = psi, .forward_flop = 1, .output_elements = 1}, "weights");
  const Model m = b.build();
  double previous = 1e300;
  const double base_workspace =
      StageMemoryModel(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam}, 1).stage({0, 1}, 1).workspace;
  for (int stage = 0; stage <= 3; ++stage) {
    const MemoryBreakdown mem =
        StageMemoryModel(
            m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam, .zero = zero_stage(stage), .shard = 64}, 1)
            .stage({0, 1}, 1);
    const double state = mem.weights + mem.gradients + mem.optimizer_state;
    CHECK(state == doctest::Approx(training_state(psi, Dtype::bf16, Optimizer::adam, zero_stage(stage), 64).total()));
    CHECK(state < previous);
    previous = state;
    // Buffers: stage 2 the largest block's unsharded gradients, stage 3 also its gathered weights and
    // the next block's (here the model is one block of 7.5B parameters, 2 bytes each).
    const double buffers = stage == 2 ? 2 * psi : stage == 3 ? 3 * 2 * psi : 0;
    CHECK(mem.workspace == doctest::Approx(base_workspace + buffers));
  }
  CHECK_THROWS_AS(training_state(psi, Dtype::bf16, Optimizer::adam, zero_stage(4), 64), std::invalid_argument);
}

TEST_CASE("sequence parallelism and context parallelism divide a GPT layer's activations (Korthikanti et al.)")
{
  const double s = 1024, h = 1024, a = 16, t = 4;
  const Model m = make_gpt({.name = "g", .layers = 4, .hidden = 1024, .heads = 16, .seq = 1024, .vocab = 32000});
  auto per_layer = [&](int tp, bool sp, int cp) {
    return StageMemoryModel(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam, .tp = tp,
                                .sequence_parallel = sp, .cp = cp},
                            1)
               .stage({2, 3}, 1)
               .activations;
  };
  // Korthikanti et al. 2022, Table 2: tensor parallelism s h (10 + 24/t) + 5 a s^2 / t bytes per layer
  // and sample; with sequence parallelism s h 34/t + 5 a s^2 / t.
  CHECK(per_layer(4, false, 1) == doctest::Approx(s * h * (10 + 24 / t) + 5 * a * s * s / t));
  CHECK(per_layer(4, true, 1) == doctest::Approx(s * h * 34 / t + 5 * a * s * s / t));
  // Context parallelism: each GPU keeps its s / cp tokens of everything.
  CHECK(per_layer(1, false, 4) == doctest::Approx((34 * s * h + 5 * a * s * s) / 4));
}

TEST_CASE("FP8 GEMMs keep their inputs a byte per element (Transformer Engine), the LM head's in bf16")
{
  const double s = 1024, h = 1024, a = 16, t = 4;
  const Model m    = make_gpt({.name = "g", .layers = 4, .hidden = 1024, .heads = 16, .seq = 1024, .vocab = 32000});
  auto activations = [&](StageRange blocks, int tp, bool sp, double gemm_input_bytes) {
    return StageMemoryModel(m,
                            {.dtype             = Dtype::bf16,
                             .optimizer         = Optimizer::adam,
                             .tp                = tp,
                             .sequence_parallel = sp,
                             .gemm_input_bytes  = gemm_input_bytes},
                            1)
        .stage(blocks, 1)
        .activations;
  };
  // Of a layer's 34 s h bytes, the four GEMMs' inputs are 14 s h in bf16: the QKV and FC1 inputs (the
  // layer norms' outputs, s h each), the projection's (s h) and FC2's (4 s h). In FP8 they take half.
  CHECK(activations({2, 3}, 1, false, 1) == doctest::Approx(27 * s * h + 5 * a * s * s));
  CHECK(activations({2, 3}, 1, false, 0) == doctest::Approx(34 * s * h + 5 * a * s * s));
  // Tensor parallelism without sequence parallelism: the two norms' outputs stay whole (10 -> 8 s h),
  // the split inputs 24 / t -> 19 / t; with it, 34 / t -> 27 / t.
  CHECK(activations({2, 3}, 4, false, 1) == doctest::Approx(s * h * (8 + 19 / t) + 5 * a * s * s / t));
  CHECK(activations({2, 3}, 4, true, 1) == doctest::Approx(s * h * 27 / t + 5 * a * s * s / t));
  // The head: the LM head is Megatron's own linear layer, outside Transformer Engine, so its input
  // (the final norm's output) stays bf16; nothing of the head changes.
  const StageRange head{m.blocks().size() - 1, m.blocks().size()};
  CHECK(activations(head, 1, false, 1) == doctest::Approx(activations(head, 1, false, 0)));
  CHECK(activations(head, 1, false, 0) > 2 * s * h); // it does stash that input
}

TEST_CASE("per-op checkpointing keeps every other matmul's output and SDPA's, and rebuilds one block")
{
  // torchtitan's policy over a Llama block: wq, wk, wv, wo, w1, w3, w2 are mm 1-7; the odd ones and
  // SDPA's output (with its fp32 log-sum-exp per head and token) are kept, the rest is recomputed.
  const double s = 1024, h = 1024, kv = 256, f = 2816, heads = 8, layers = 4, b = 2, n = 3;
  const Model m          = small_llama(4);
  const StageRange block = m.blocks()[1].layers;
  CHECK_FALSE(op_checkpointed(m, m.blocks()[0].layers)); // the embedding keeps its stash
  REQUIRE(op_checkpointed(m, block));
  const std::vector<double> kept = op_checkpoint_kept(m, block);
  auto share = [&](const std::string& name) { return kept[layer_named(m, "layer0." + name) - block.begin]; };
  CHECK(share("qkv") == doctest::Approx((h + kv) / (h + 2 * kv))); // wq and wv of wq, wk, wv
  CHECK(share("proj") == 0);                                       // wo: the fourth
  CHECK(share("mlp_up") == doctest::Approx(0.5));                  // w1, not w3
  CHECK(share("mlp_down") == 1);                                   // w2: the seventh
  CHECK(share("attention") == 1);
  CHECK(share("mlp_norm") == 0);
  // A linear with a bias runs addmm, which the policy neither keeps nor counts.
  const Model biased             = small_llama(1, true);
  const std::vector<double> none = op_checkpoint_kept(biased, biased.blocks()[1].layers);
  CHECK(std::count(none.begin(), none.end(), 0.0) == static_cast<long>(none.size()) - 1); // SDPA's alone

  auto activations = [&](Recompute r) {
    return StageMemoryModel(m, {.dtype = Dtype::bf16, .optimizer = Optimizer::adam, .recompute = r}, 2)
        .stage(gpt_layers(m), 3)
        .activations;
  };
  // Per sample and block, in bytes: the block's input and the kept outputs; one micro-batch's block
  // rebuilt, less what the checkpoint holds of its stash: the input (the norm's), SDPA's output (the
  // projection's input) and w1's half of the up projection (SwiGLU's input); wq's, wv's and w2's
  // outputs are kept but stashed by no layer (RoPE and the residual add keep nothing).
  const double outputs = 2 * s * (h + kv) + 2 * s * h + heads * s * 4 + 2 * s * f + 2 * s * h;
  const double input   = 2 * s * h;
  const double whole   = activations(Recompute::none) / (n * b * layers); // a block's stash (its input among it)
  CHECK(activations(Recompute::selective_op) ==
        doctest::Approx(n * b * layers * (input + outputs) + b * (whole - input - 2 * s * h - 2 * s * f)));
  CHECK(activations(Recompute::selective_op) < activations(Recompute::none));
  CHECK(activations(Recompute::selective_op) > activations(Recompute::full));

  // With tensor and sequence parallelism (tp 2): a column layer's kept output and SDPA's are halves,
  // a row layer's mm output whole (its partial sums), the block's input s/tp, and the policy also keeps
  // the reduce-scatters' outputs (after wo and w2: s/tp each). What n micro-batches in flight keep per
  // block and sample is the difference between n = 3 and n = 2 (the block rebuilt does not depend on n).
  auto kept_per_block = [&](int n_in_flight, bool sp) {
    return StageMemoryModel(m,
                            {.dtype             = Dtype::bf16,
                             .optimizer         = Optimizer::adam,
                             .recompute         = Recompute::selective_op,
                             .tp                = 2,
                             .sequence_parallel = sp},
                            2)
        .stage(gpt_layers(m), n_in_flight)
        .activations;
  };
  const double tp_kept = (2 * s * (h + kv) + 2 * s * h + heads * s * 4 + 2 * s * f) / 2 + 2 * s * h; // kept
  CHECK((kept_per_block(3, true) - kept_per_block(2, true)) / (b * layers) ==
        doctest::Approx(tp_kept + input / 2 + 2 * (2 * s * h / 2))); // input s/tp, the reduce-scatters' outputs
  // Without sequence parallelism the row layers all-reduce: nothing of theirs kept, the input whole.
  CHECK((kept_per_block(3, false) - kept_per_block(2, false)) / (b * layers) == doctest::Approx(tp_kept + input));
}
