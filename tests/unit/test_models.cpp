// The model zoo against published numbers, the generators against closed forms, and the layer
// graph and layer-list loader against hand-built cases.
#include "common/YamlReader.hpp"
#include "models/LayerGraph.hpp"
#include "models/ModelLoader.hpp"
#include "models/Zoo.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::models;

namespace {

// Multiply-accumulates of the GEMMs and convolutions of a forward pass, per sample.
double forward_macs(const Model& m)
{
  double macs = 0;
  for (const auto& l : m.layers())
    for (const auto& k : l.kernels)
      if (k.kind == KernelKind::gemm || k.kind == KernelKind::batched_gemm || k.kind == KernelKind::conv2d)
        macs += k.forward_flop / 2;
  return macs;
}

Model model_from_text(const std::string& text)
{
  Diagnostics diags("inline.yaml");
  YAML::Node root = load_yaml_string(text, "inline.yaml");
  YamlMap map(root, "", diags);
  Model m = parse_model(map);
  diags.throw_if_any();
  return m;
}

std::string diagnostics_of(const std::string& text)
{
  try {
    model_from_text(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("zoo parameter counts are within 1% of the published ones")
{
  struct Published {
    const char* name;
    double parameters;
  };
  // Papers and model cards: ResNet (torchvision), VGG-16, AlexNet (torchvision), BERT-large (~335M),
  // GPT-2 XL (1.56B, Hugging Face), GPT-3 175B (174.6B, Brown et al. 2020).
  const Published published[] = {{"resnet50", 25.6e6},  {"resnet101", 44.5e6},  {"vgg16", 138.4e6},
                                 {"alexnet", 61.1e6},   {"bert-large", 335e6},  {"gpt2-xl", 1.56e9},
                                 {"gpt3-175b", 174.6e9}, {"resnet152", 60.2e6}, {"vgg19", 143.7e6}};
  for (const auto& p : published) {
    CAPTURE(p.name);
    const double count = load_model(p.name).parameter_count();
    CHECK(std::abs(count - p.parameters) / p.parameters < 0.01);
  }
  // Exact torchvision and Hugging Face counts where the architecture is fully specified.
  CHECK(load_model("resnet50").parameter_count() == 25'557'032);
  CHECK(load_model("vgg16").parameter_count() == 138'357'544);
  CHECK(load_model("alexnet").parameter_count() == 61'100'840);
  CHECK(load_model("gpt2-small").parameter_count() == 124'439'808);
  CHECK(load_model("gpt2-medium").parameter_count() == 354'823'168);
  CHECK(load_model("gpt2-large").parameter_count() == 774'030'080);
  CHECK(load_model("gpt2-xl").parameter_count() == 1'557'611'200);
}

TEST_CASE("ResNet-50 forward is ~4.1 GMAC per 224x224 image")
{
  const double macs = forward_macs(load_model("resnet50"));
  CHECK(std::abs(macs - 4.1e9) / 4.1e9 < 0.03);
}

TEST_CASE("GPT flop per iteration matches Megatron's 72 B s l h^2 (1 + s/6h + V/12lh) within 1%")
{
  struct Case {
    int layers, hidden, heads, seq, vocab;
  };
  const Case cases[] = {{96, 12288, 96, 2048, 51200}, {48, 1600, 25, 1024, 50257}, {24, 2048, 16, 2048, 50257}};
  for (const Case& c : cases) {
    CAPTURE(c.hidden);
    const Model m = make_gpt({.name = "g", .layers = c.layers, .hidden = c.hidden, .heads = c.heads, .seq = c.seq,
                              .vocab = c.vocab});
    const double batch = 512;
    const double s = c.seq, l = c.layers, h = c.hidden, v = c.vocab;
    const double megatron = 72 * batch * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
    const double ours = batch * (m.forward_flop_per_sample() + m.backward_flop_per_sample());
    CHECK(std::abs(ours - megatron) / megatron < 0.01);
  }
}

TEST_CASE("a GPT layer has Megatron's parameters and Korthikanti's activation stash")
{
  const double s = 2048, h = 4096, a = 32;
  const Model m = make_gpt({.name = "g", .layers = 3, .hidden = 4096, .heads = 32, .seq = 2048, .vocab = 51200});
  REQUIRE(m.blocks().size() == 5);  // embedding, 3 layers, head
  const Block& layer = m.blocks()[2];
  CHECK(layer.name == "layer1");
  double params = 0, stash_bytes = 0;
  for (std::size_t i = layer.layers.begin; i < layer.layers.end; ++i) {
    params += m.layers()[i].parameters;
    stash_bytes += m.owned_stash_elements(i) * 2 + m.layers()[i].stashed_mask_bytes;
  }
  CHECK(params == doctest::Approx(12 * h * h + 13 * h));
  CHECK(stash_bytes == doctest::Approx(34 * s * h + 5 * a * s * s));  // 16-bit activations, 1-byte masks
  // What crosses a cut between two layers is the residual stream, s x h.
  CHECK(m.crossing_elements(layer.layers.begin) == doctest::Approx(s * h));
  // Attention runs as batched GEMMs of a heads of s x s x h/a.
  bool found = false;
  for (std::size_t i = layer.layers.begin; i < layer.layers.end; ++i)
    for (const auto& k : m.layers()[i].kernels)
      if (k.kind == KernelKind::batched_gemm) {
        found = true;
        CHECK(k.gemm.batch == a);
        CHECK(k.gemm.k * k.gemm.n * k.gemm.m == doctest::Approx(s * s * h / a));
      }
  CHECK(found);
  CHECK_THROWS(make_gpt({.name = "g", .layers = 2, .hidden = 100, .heads = 3}));
}

TEST_CASE("convolution kernels carry executable shapes")
{
  const Model r = load_model("resnet50");
  const Kernel& stem = r.layers().front().kernels.front();
  CHECK(stem.kind == KernelKind::conv2d);
  CHECK(stem.conv.c == 3);
  CHECK(stem.conv.h == 224);
  CHECK(stem.conv.k == 64);
  CHECK(stem.conv.r == 7);
  CHECK(stem.conv.stride_h == 2);
  CHECK(stem.conv.out_h() == 112);
  CHECK(stem.shape_string() == "conv 3x224x224 k=64 7x7/2");
  // A residual unit's input crosses into it once and is read twice (main path and shortcut).
  const Block& unit = r.blocks()[1];
  CHECK(r.crossing_elements(unit.layers.begin) == doctest::Approx(64.0 * 56 * 56));
}

TEST_CASE("normalization choices: same parameters, SyncBN marks its channels")
{
  const double bn = make_resnet({.name = "r", .depth = 50}).parameter_count();
  const Model gn = make_resnet({.name = "r", .depth = 50, .normalization = Normalization::group_norm});
  const Model sync = make_resnet({.name = "r", .depth = 50, .normalization = Normalization::sync_batch_norm});
  CHECK(gn.parameter_count() == bn);
  CHECK(sync.parameter_count() == bn);
  CHECK(gn.has(LayerKind::group_norm));
  CHECK_FALSE(gn.has(LayerKind::batch_norm));
  int sync_layers = 0;
  for (const auto& l : sync.layers())
    if (l.kind == LayerKind::sync_batch_norm) {
      ++sync_layers;
      CHECK(l.norm_channels == l.output.features);
    }
  CHECK(sync_layers == 53);  // 1 stem + 16 x 3 + 4 downsample
  CHECK_THROWS(make_resnet({.name = "r", .depth = 50, .normalization = Normalization::group_norm, .groups = 7}));
}

TEST_CASE("AmoebaNet-D cells read the two cells before them")
{
  const Model m = make_amoebanet({.name = "a", .layers = 6, .filters = 64, .image = 224});
  // stem conv, 2 stem reduction cells, 3 x 2 normal cells, 2 reductions, classifier
  CHECK(m.blocks().size() == 1 + 2 + 6 + 2 + 1);
  // A cut before the second normal cell of the first group sends two tensors: the outputs of the
  // two cells before it.
  std::size_t b = 0;
  while (m.blocks()[b].name != "cell1_normal2")
    ++b;
  const Layer& prev_out = m.layers()[m.blocks()[b - 1].layers.end - 1];
  const Layer& prev_prev_out = m.layers()[m.blocks()[b - 2].layers.end - 1];
  CHECK(m.crossing_elements(m.blocks()[b].layers.begin) ==
        doctest::Approx(prev_out.output_elements() + prev_prev_out.output_elements()));
  // Parameters grow with the square of the filters.
  const double small = make_amoebanet({.name = "a", .layers = 6, .filters = 128}).parameter_count();
  const double large = make_amoebanet({.name = "a", .layers = 6, .filters = 256}).parameter_count();
  CHECK(large / small > 3.5);
  CHECK(large / small < 4.0);
  CHECK_THROWS(make_amoebanet({.name = "a", .layers = 5, .filters = 64}));
  // GPipe (Huang et al. 2019), Table 1 and its text: AmoebaNet-D (18, 208) has 82M parameters (the
  // largest that fits one 8 GB TPU without GPipe), (18, 416) 318M.
  CHECK(make_amoebanet({.name = "a", .layers = 18, .filters = 208}).parameter_count() == doctest::Approx(82e6).epsilon(0.01));
  CHECK(make_amoebanet({.name = "a", .layers = 18, .filters = 416}).parameter_count() == doctest::Approx(318e6).epsilon(0.01));
}

TEST_CASE("layer graph: topological order and cycles")
{
  LayerGraph g(4);
  g.add_edge(2, 0);
  g.add_edge(0, 1);
  g.add_edge(3, 1);
  CHECK(g.topological_order() == std::vector<std::size_t>{2, 0, 3, 1});
  CHECK(g.find_cycle().empty());
  LayerGraph in_order(3);
  in_order.add_edge(0, 1);
  in_order.add_edge(1, 2);
  CHECK(in_order.topological_order() == std::vector<std::size_t>{0, 1, 2});
  LayerGraph cyclic(4);
  cyclic.add_edge(0, 1);
  cyclic.add_edge(1, 2);
  cyclic.add_edge(2, 3);
  cyclic.add_edge(3, 1);
  CHECK(cyclic.topological_order().empty());
  auto cycle = cyclic.find_cycle();
  REQUIRE(cycle.size() == 3);
  std::sort(cycle.begin(), cycle.end());
  CHECK(cycle == std::vector<std::size_t>{1, 2, 3});
  CHECK_THROWS_AS(g.add_edge(0, 9), std::out_of_range);
}

TEST_CASE("layer-list models: shapes inferred, branches in any order, blocks")
{
  const Model toy = load_model("mlp-toy");
  REQUIRE(toy.size() == 11);
  CHECK(toy.layers()[1].name == "hidden.0");
  CHECK(toy.layers()[8].name == "hidden.7");
  CHECK(toy.layers()[1].parameters == 4096.0 * 4096 + 4096);
  CHECK(toy.layers()[1].forward_flop() == 2.0 * 4096 * 4096);
  CHECK(toy.parameter_count() == 1024.0 * 4096 + 4096 + 8 * (4096.0 * 4096 + 4096) + 4096.0 * 1000 + 1000);

  // The skip branch is listed after the add that reads it; the loader orders it first.
  const Model res = model_from_text(R"(
name: tiny-res
input: {channels: 8, height: 16, width: 16}
layers:
  - {name: stem, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: add, type: add, inputs: [body, skip], block: res}
  - {name: body, type: conv2d, inputs: stem, out_channels: 16, kernel: 3, padding: 1, block: res}
  - {name: skip, type: activation, function: relu, inputs: stem, block: res}
  - {name: pool, type: pooling, mode: avg, global: true}
  - {name: fc, type: linear, out: 10}
  - {name: loss, type: softmax_loss}
)");
  REQUIRE(res.size() == 7);
  CHECK(res.layers()[3].name == "add");
  CHECK(res.blocks().size() == 5);  // stem, res, pool, fc, loss
  CHECK(res.blocks()[1].name == "res");
  CHECK(res.layers()[5].parameters == 16.0 * 10 + 10);
  CHECK(res.layers()[0].parameters == 16.0 * 8 * 9);
  // The stem's output is read by both branches, and crosses the cut into the block once.
  CHECK(res.crossing_elements(1) == 16.0 * 16 * 16);
  // Asymmetric kernels and strides ([height, width]).
  const Model asym = model_from_text(R"(
name: asym
input: {channels: 4, height: 32, width: 32}
layers:
  - {name: c, type: conv2d, out_channels: 4, kernel: [1, 7], stride: [1, 2], padding: [0, 3]}
)");
  CHECK(asym.layers()[0].output == TensorShape::picture(4, 32, 16));
}

TEST_CASE("bad model files name the file, line and key")
{
  try {
    load_model_file(std::string(DDLSIM_TEST_FIXTURES) + "/bad_model.yaml");
    FAIL("no exception");
  } catch (const ConfigError& e) {
    std::string all = e.what();
    CHECK(all.find("bad_model.yaml:4: layers[0].type: unknown value 'convolution'") != std::string::npos);
    bool found_unknown = false;
    for (const auto& d : e.diagnostics())
      found_unknown = found_unknown || (d.key == "layers[1].widht" && d.line == 5 && d.message == "unknown key");
    CHECK(found_unknown);
  }
  CHECK_THROWS_AS(load_model("no-such-model"), ConfigError);

  // Shape errors, unknown inputs and cycles are reported at the layer that has them.
  CHECK(diagnostics_of("name: x\ninput: {features: 8}\nlayers:\n  - {name: a, type: linear, out: 4}\n"
                       "  - {name: b, type: add, inputs: [a, a2]}\n") ==
        "inline.yaml:5: layers[1].inputs: no layer is named 'a2'");
  CHECK(diagnostics_of("name: x\ninput: {features: 8}\nlayers:\n  - {name: a, type: linear, out: 4}\n"
                       "  - {name: c, type: linear, out: 5}\n  - {name: b, type: add, inputs: [a, c]}\n") ==
        "inline.yaml:6: layers[2].type: layer 'b': add 'b': input shapes differ (1x4 and 1x5)");
  CHECK(diagnostics_of("name: x\nlayers:\n  - {name: a, type: linear, out: 4, inputs: b}\n"
                       "  - {name: b, type: linear, out: 4, inputs: a}\n") ==
        "inline.yaml:3: layers[0].inputs: the layers form a cycle: a -> b -> a");
  CHECK(diagnostics_of("name: x\ninput: {features: 8}\nlayers:\n  - {name: a, type: conv2d, out_channels: 4}\n")
            .find("inline.yaml:4: layers[0].type: layer 'a': conv2d 'a' needs an image input") != std::string::npos);
  CHECK(diagnostics_of("name: x\nresnet: {depth: 51}\n").find("inline.yaml:2: resnet: x: ResNet depth must be") !=
        std::string::npos);
  CHECK(diagnostics_of("name: x\ngpt: {layers: 2, hidden: 64, heads: 4, seq: 8}\nvgg: {depth: 16}\n")
            .find("give one of") != std::string::npos);
}

TEST_CASE("the Llama zoo has Hugging Face's exact parameter counts and context lengths")
{
  // Counts of the models' Hugging Face checkpoints (safetensors metadata, config.json).
  const std::vector<std::tuple<const char*, double, double>> zoo = {
      {"llama2-7b", 6'738'415'616, 4096},    {"llama2-13b", 13'015'864'320, 4096},
      {"llama2-70b", 68'976'648'192, 4096},  {"llama3-8b", 8'030'261'248, 8192},
      {"llama3-70b", 70'553'706'496, 8192},  {"llama3.1-405b", 405'853'388'800, 8192},
  };
  for (const auto& [name, params, seq] : zoo) {
    CAPTURE(name);
    const Model m = load_model(name);
    CHECK(m.parameter_count() == params);
    CHECK(m.input_shape().tokens == seq);
    CHECK(m.has(LayerKind::rms_norm));
    CHECK_FALSE(m.has(LayerKind::layer_norm));
  }
}

TEST_CASE("a Llama layer: grouped-query QKV, RoPE, SwiGLU and RMSNorm without biases")
{
  // Llama 3 8B's shape, 2 layers: a = 32 query heads, kv = 8, d = 128, f = 14336.
  const double h = 4096, a = 32, kv = 8, d = 128, f = 14336, s = 1024;
  const Model m = make_llama({.name = "l", .layers = 2, .hidden = 4096, .heads = 32, .kv_heads = 8,
                              .ffn_hidden = 14336, .seq = 1024, .vocab = 128256});
  const Block& layer = m.blocks()[1];
  double params = 0;
  bool rope = false, swiglu = false;
  for (std::size_t i = layer.layers.begin; i < layer.layers.end; ++i) {
    const Layer& l = m.layers()[i];
    params += l.parameters;
    if (l.name == "layer0.qkv") {
      CHECK(l.kernels.front().gemm.n == (a + 2 * kv) * d);  // K and V at kv heads
      CHECK(l.kernels.front().gemm.k == h);
      CHECK(l.tp == TpRole::column);
    }
    if (l.kind == LayerKind::rotary) {
      rope = true;
      CHECK(l.parameters == 0);
      CHECK(l.kernels.front().forward_sample_elements == 2 * s * (a + kv) * d);  // Q and K read and written
    }
    if (l.kind == LayerKind::swiglu) {
      swiglu = true;
      CHECK(l.output.features == f);
    }
    if (l.kind == LayerKind::attention) {
      CHECK(l.heads == 32);
      CHECK(l.kv_heads == 8);
      CHECK(l.stashed_elements == 0);  // FlashAttention keeps no s x s tensor
    }
  }
  CHECK(rope);
  CHECK(swiglu);
  // q, o: h^2 each; k, v: h x kv d each; gate, up, down: h f each; two RMSNorm scales of h.
  CHECK(params == 2 * h * h + 2 * h * kv * d + 3 * h * f + 2 * h);
  // Untied: embedding and LM head both vocab x h.
  CHECK(m.parameter_count() == 2 * params + 2 * 128256 * h + h);
  CHECK_THROWS_AS(make_llama({.name = "bad", .heads = 32, .kv_heads = 12}), std::invalid_argument);
}

TEST_CASE("FlashAttention: the eager core's flop, half with a causal mask, QK^T recomputed in backward")
{
  const double s = 2048, a = 16, d = 64;
  auto core = [&](AttentionKind kind, bool causal) {
    ModelBuilder b("t", TensorShape::sequence(s, 3 * a * d));
    b.attention(b.input(), {.heads = 16, .kv_heads = 16, .kind = kind, .causal = causal}, "attention");
    return b.build().layers().front();
  };
  const Layer eager = core(AttentionKind::eager, true);
  const Layer flash = core(AttentionKind::flash, false);
  const Layer causal = core(AttentionKind::flash, true);
  const double gemms = 2 * (2 * a * s * s * d);  // QK^T and PV
  CHECK(flash.forward_flop() == gemms);
  CHECK(flash.backward_flop() == 2.5 * gemms);  // dV, dP, dQ, dK and QK^T again (Dao 2023)
  CHECK(causal.forward_flop() == gemms / 2);
  CHECK(causal.backward_flop() == 2.5 * gemms / 2);
  CHECK(eager.forward_flop() > gemms);  // plus the softmax over the whole square
  CHECK(eager.stashed_elements == a * s * s);
  CHECK(flash.stashed_mask_bytes == 4 * a * s);  // one fp32 log-sum-exp per head and row
}

TEST_CASE("a run's sequence length and attention kernel rebuild the model")
{
  const Model base = load_model("llama3-8b");
  const Model longer = load_model("llama3-8b", {.seq = 131072, .attention = AttentionKind::eager});
  CHECK(longer.input_shape().tokens == 131072);
  CHECK(longer.parameter_count() == base.parameter_count());  // RoPE: no position table to grow
  bool eager = false;
  for (const Layer& l : longer.layers())
    eager = eager || (l.kind == LayerKind::attention && l.stashed_elements > 0);
  CHECK(eager);
  // A learned position table grows with the sequence: GPT-2's 1,024 rows become 2,048.
  const Model gpt = load_model("gpt2-small", {.seq = 2048});
  CHECK(gpt.parameter_count() - load_model("gpt2-small").parameter_count() == 1024.0 * 768);
}

TEST_CASE("the MoE zoo: Hugging Face's counts, active parameters per token")
{
  // mistralai/Mixtral-8x7B-v0.1 and -8x22B-v0.1 (safetensors metadata); Mixtral's paper: 12.9B active.
  const Model m7 = load_model("mixtral-8x7b");
  CHECK(m7.parameter_count() == 46'702'792'704.0);
  CHECK(m7.active_parameter_count() == 12'879'925'248.0);
  CHECK(load_model("mixtral-8x22b").parameter_count() == 140'620'634'112.0);
  // DeepSeek-MoE 16B (Dai et al. 2024, Table 1): 16.4B parameters, 2.8B active, within 1%.
  const Model ds = load_model("deepseek-moe-16b");
  CHECK(std::abs(ds.parameter_count() / 16.4e9 - 1) < 0.01);
  CHECK(std::abs(ds.active_parameter_count() / 2.8e9 - 1) < 0.015);
  // A dense model's active parameters are all of them.
  const Model dense = load_model("llama3-8b");
  CHECK(dense.active_parameter_count() == dense.parameter_count());
}

TEST_CASE("an MoE layer is a router and experts on s x top_k rows and a combine with every expert's parameters")
{
  const double s = 1024, h = 512, e = 8, k = 2, f = 1024;
  ModelBuilder b("m", TensorShape::sequence(s, h));
  b.moe(b.input(), {.experts = 8, .top_k = 2, .expert_ffn_hidden = f}, "moe");
  const Model m = b.build();
  REQUIRE(m.layers().size() == 3);
  const Layer& router = m.layers()[0];
  const Layer& experts = m.layers()[1];
  const Layer& combine = m.layers()[2];
  CHECK(router.kind == LayerKind::moe_router);
  CHECK(experts.kind == LayerKind::moe);
  CHECK(combine.kind == LayerKind::moe_combine);
  CHECK(router.parameters == h * e);
  CHECK(experts.parameters == e * 3 * h * f);
  CHECK(m.parameter_count() == h * e + e * 3 * h * f);
  CHECK(m.active_parameter_count() == h * e + k * 3 * h * f);
  // The dispatch sends the permuted copies: s x top_k rows of hidden; the combine returns s x hidden.
  CHECK(router.output.elements() == s * k * h);
  CHECK(experts.output.elements() == s * k * h);
  CHECK(combine.output.elements() == s * h);
  double gemm_flop = 0;
  for (const Layer& l : m.layers())
    for (const Kernel& kernel : l.kernels)
      if (kernel.kind == KernelKind::gemm)
        gemm_flop += kernel.forward_flop;
  // Router 2 s h e, and each routed token through one expert's SwiGLU: 2 x 3 h f per copy.
  CHECK(gemm_flop == 2 * s * h * e + s * k * 2 * 3 * h * f);
  CHECK_THROWS_AS(ModelBuilder("x", TensorShape::sequence(s, h)).moe({}, {.experts = 2, .top_k = 3, .expert_ffn_hidden = f}, "bad"),
                  std::invalid_argument);
  CHECK_THROWS_AS(ModelBuilder("x", TensorShape::sequence(s, h))
                      .moe({}, {.experts = 2, .top_k = 1, .expert_ffn_hidden = f, .load_imbalance = 3}, "bad"),
                  std::invalid_argument);
}
