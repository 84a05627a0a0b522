#include "models/ModelLoader.hpp"

#include "common/DataPath.hpp"
#include "models/LayerGraph.hpp"
#include "models/Zoo.hpp"

#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace ddlsim::models {
namespace {

constexpr long long max_size = 1LL << 30;  // no sane layer, width or sequence is larger

int get_int(YamlMap& m, const std::string& key, int fallback, long long min = 1, long long max = max_size)
{
  return static_cast<int>(m.integer(key, fallback, min, max));
}
int required_int(YamlMap& m, const std::string& key, long long min = 1, long long max = max_size)
{
  return static_cast<int>(m.required_integer(key, min, max));
}

// A mixture of experts' load imbalance: the run's (ModelOptions) where a layer of `experts` experts can
// have it (1 to experts), else the model's own; the run reports its out-of-range value at its own key.
double run_imbalance(const ModelOptions& options, double own, int experts)
{
  const auto& run = options.load_imbalance;
  return run && *run >= 1 && *run <= experts ? *run : own;
}

// A generator's error (hidden not divisible by heads, an unknown depth) reported at its map.
template <typename Make> Model run_generator(YamlMap& g, std::size_t errors_before, Make make)
{
  g.check_unknown_keys();
  if (g.diagnostics().list().size() > errors_before)
    return {};
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    g.diagnostics().error(g.yaml(), g.path(), e.what());
    return {};
  }
}

Model parse_generator(YamlMap& root, const std::string& kind, const std::string& name, const ModelOptions& options)
{
  const std::size_t before = root.diagnostics().list().size();
  auto g = root.map(kind);
  if (!g)
    return {};
  // The run's options override the file's sequence length and attention kernel.
  auto seq = [&](int from_file) { return options.seq > 0 ? options.seq : from_file; };
  auto attention = [&](AttentionKind fallback) {
    const AttentionKind file = g->choice("attention", attention_kind_table, fallback);
    return options.attention ? *options.attention : file;
  };
  if (kind == "gpt") {
    GptConfig c{.name = name};
    c.layers = required_int(*g, "layers", 1, 100000);
    c.hidden = required_int(*g, "hidden");
    c.heads = required_int(*g, "heads");
    c.seq = seq(required_int(*g, "seq"));
    c.vocab = get_int(*g, "vocab", c.vocab);
    c.ffn_hidden = get_int(*g, "ffn_hidden", 0, 0);
    c.tied_embeddings = g->boolean("tied_embeddings", true);
    c.dropout = g->boolean("dropout", true);
    c.attention = attention(c.attention);
    return run_generator(*g, before, [&] { return make_gpt(c); });
  }
  if (kind == "llama") {
    LlamaConfig c{.name = name};
    c.layers = required_int(*g, "layers", 1, 100000);
    c.hidden = required_int(*g, "hidden");
    c.heads = required_int(*g, "heads");
    c.kv_heads = get_int(*g, "kv_heads", c.heads);
    c.ffn_hidden = required_int(*g, "ffn_hidden");
    c.seq = seq(required_int(*g, "seq"));
    c.vocab = required_int(*g, "vocab");
    c.ffn = g->choice("ffn", feed_forward_table, c.ffn);
    c.norm = g->choice("norm", normalization_table, c.norm);
    if (c.norm != Normalization::rms_norm && c.norm != Normalization::layer_norm)
      g->report("norm", "a transformer takes rms_norm or layer_norm");
    c.positions = g->choice("positions", positions_table, c.positions);
    c.tied_embeddings = g->boolean("tied_embeddings", false);
    c.bias = g->boolean("bias", false);
    c.dropout = g->boolean("dropout", false);
    c.attention = attention(c.attention);
    if (auto moe = g->map("moe")) {
      c.moe.experts = get_int(*moe, "experts", 0, 1);
      if (!moe->has("experts"))
        moe->report("experts", "missing required key");
      c.moe.top_k = get_int(*moe, "top_k", 2);
      c.moe.expert_ffn_hidden = required_int(*moe, "expert_ffn_hidden");
      c.moe.shared_experts = get_int(*moe, "shared_experts", 0, 0);
      c.moe.dense_layers = get_int(*moe, "dense_layers", 0, 0);
      c.moe.capacity_factor = options.capacity_factor.value_or(
          moe->quantity("capacity_factor", Dimension::count, 0.0, Bound::non_negative));
      c.moe.load_imbalance = run_imbalance(
          options, moe->quantity("load_imbalance", Dimension::count, 1.0, Bound::positive), c.moe.experts);
      if (c.moe.top_k > c.moe.experts && moe->has("experts"))
        moe->report("top_k", "top_k = " + std::to_string(c.moe.top_k) + " is more than the " +
                                 std::to_string(c.moe.experts) + " experts");
      if (c.moe.load_imbalance < 1)
        moe->report("load_imbalance", "the busiest expert's tokens over the mean is at least 1");
      else if (moe->has("experts") && c.moe.load_imbalance > c.moe.experts)
        moe->report("load_imbalance", "the busiest expert cannot take more than all the tokens: at most the " +
                                          std::to_string(c.moe.experts) + " experts");
      if (c.moe.dense_layers > c.layers)
        moe->report("dense_layers", "more dense layers than the model's " + std::to_string(c.layers));
      moe->check_unknown_keys();
    }
    if (g->has("kv_heads") && c.heads % c.kv_heads != 0)
      g->report("kv_heads", "kv_heads = " + std::to_string(c.kv_heads) + " does not divide heads = " +
                                std::to_string(c.heads) + " (each K/V head serves a whole group of query heads)");
    return run_generator(*g, before, [&] { return make_llama(c); });
  }
  if (kind == "bert") {
    BertConfig c{.name = name};
    c.layers = required_int(*g, "layers", 1, 100000);
    c.hidden = required_int(*g, "hidden");
    c.heads = required_int(*g, "heads");
    c.seq = seq(get_int(*g, "seq", c.seq));
    c.vocab = get_int(*g, "vocab", c.vocab);
    c.type_vocab = get_int(*g, "type_vocab", c.type_vocab, 0);
    c.ffn_hidden = get_int(*g, "ffn_hidden", 0, 0);
    c.attention = attention(c.attention);
    return run_generator(*g, before, [&] { return make_bert(c); });
  }
  if (kind == "resnet") {
    ResNetConfig c{.name = name};
    c.depth = required_int(*g, "depth");
    c.image = get_int(*g, "image", c.image);
    c.classes = get_int(*g, "classes", c.classes);
    c.width = get_int(*g, "width", c.width);
    c.normalization = g->choice("normalization", normalization_table, c.normalization);
    c.groups = get_int(*g, "groups", c.groups);
    return run_generator(*g, before, [&] { return make_resnet(c); });
  }
  if (kind == "vgg") {
    VggConfig c{.name = name};
    c.depth = required_int(*g, "depth");
    c.image = get_int(*g, "image", c.image);
    c.classes = get_int(*g, "classes", c.classes);
    c.batch_norm = g->boolean("batch_norm", false);
    return run_generator(*g, before, [&] { return make_vgg(c); });
  }
  if (kind == "alexnet") {
    AlexNetConfig c{.name = name};
    c.image = get_int(*g, "image", c.image);
    c.classes = get_int(*g, "classes", c.classes);
    return run_generator(*g, before, [&] { return make_alexnet(c); });
  }
  if (kind == "amoebanet") {
    AmoebaNetConfig c{.name = name};
    c.layers = required_int(*g, "layers", 1, 100000);
    c.filters = required_int(*g, "filters");
    c.image = get_int(*g, "image", c.image);
    c.classes = get_int(*g, "classes", c.classes);
    c.normalization = g->choice("normalization", normalization_table, c.normalization);
    c.groups = get_int(*g, "groups", c.groups);
    return run_generator(*g, before, [&] { return make_amoebanet(c); });
  }
  MlpConfig c{.name = name};
  c.input = required_int(*g, "input");
  c.hidden = required_int(*g, "hidden");
  c.layers = required_int(*g, "layers", 0, 100000);
  c.classes = get_int(*g, "classes", c.classes);
  c.activation = g->choice("activation", activation_table, c.activation);
  return run_generator(*g, before, [&] { return make_mlp(c); });
}

const std::vector<std::string> generator_keys = {"gpt", "llama", "bert", "resnet", "vgg", "alexnet", "amoebanet", "mlp"};

// ---------------------------------------------------------------------------------------------
// Layer lists

struct Entry {
  explicit Entry(YamlMap m) : map(std::move(m)) {}
  YamlMap map;
  std::string name;
  LayerKind kind = LayerKind::custom;
  std::string block;
  std::vector<std::string> inputs;  // names; empty = the model input
  bool explicit_inputs = false;
};

std::vector<std::string> read_names(YamlMap& m, const std::string& key)
{
  YAML::Node n = m.node(key);
  std::vector<std::string> out;
  if (n.IsScalar()) {
    out.push_back(n.as<std::string>());
  } else if (n.IsSequence() && n.size() > 0) {
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        m.report(key, "expected a layer name or a list of layer names");
        return {};
      }
      out.push_back(item.as<std::string>());
    }
  } else {
    m.report(key, "expected a layer name or a non-empty list of layer names");
  }
  return out;
}

// An integer or a [height, width] pair.
std::pair<int, int> int_pair(YamlMap& m, const std::string& key, int fallback, long long min)
{
  if (!m.has(key))
    return {fallback, fallback};
  YAML::Node n = m.node(key);
  if (n.IsSequence()) {
    if (n.size() == 2) {
      try {
        long long h = n[0].as<long long>();
        long long w = n[1].as<long long>();
        if (h >= min && w >= min && h <= max_size && w <= max_size)
          return {static_cast<int>(h), static_cast<int>(w)};
      } catch (const YAML::Exception&) {
      }
    }
    m.report(key, "expected an integer >= " + std::to_string(min) + " or a pair [height, width] of them");
    return {fallback, fallback};
  }
  const int v = get_int(m, key, fallback, min);
  return {v, v};
}

// The keys each layer type takes besides name, type, inputs, block and repeat.
std::vector<std::string> type_keys(LayerKind kind)
{
  switch (kind) {
  case LayerKind::linear: return {"out", "bias", "in"};
  case LayerKind::conv2d: return {"out_channels", "kernel", "stride", "padding", "groups", "bias"};
  case LayerKind::pooling: return {"mode", "global", "kernel", "stride", "padding"};
  case LayerKind::attention: return {"heads", "kv_heads", "dropout", "kernel", "causal"};
  case LayerKind::rotary: return {"heads", "kv_heads"};
  case LayerKind::moe: return {"experts", "top_k", "expert_ffn_hidden", "swiglu", "capacity_factor", "load_imbalance"};
  case LayerKind::embedding: return {"vocab", "hidden", "positions"};
  case LayerKind::group_norm: return {"groups"};
  case LayerKind::activation: return {"function"};
  case LayerKind::dropout: return {"rate"};
  case LayerKind::custom:
    return {"parameters", "forward_flop", "backward_flop", "output_elements", "stashed_elements", "traffic_elements"};
  default: return {};
  }
}

Tensor build_layer(ModelBuilder& b, Entry& e, const std::vector<Tensor>& xs, const ModelOptions& options)
{
  YamlMap& m = e.map;
  auto one = [&]() -> Tensor {
    if (xs.size() != 1)
      throw std::invalid_argument(std::string(layer_kind_table.name(e.kind)) + " takes one input, got " +
                                  std::to_string(xs.size()));
    return xs.front();
  };
  switch (e.kind) {
  case LayerKind::linear: {
    const double out = m.required_quantity("out", Dimension::count);
    const bool bias = m.boolean("bias", true);
    if (auto in = m.quantity("in", Dimension::count)) {
      const TensorShape& s = one().shape;
      if (*in != s.features * s.height * s.width)
        m.report("in", "says " + format_count(*in) + " input features, but the input is " +
                           s.to_string());
    }
    return b.linear(one(), out, bias, e.name);
  }
  case LayerKind::conv2d: {
    ConvOptions o;
    o.out_channels = required_int(m, "out_channels");
    std::tie(o.kernel_h, o.kernel_w) = int_pair(m, "kernel", 1, 1);
    std::tie(o.stride_h, o.stride_w) = int_pair(m, "stride", 1, 1);
    std::tie(o.pad_h, o.pad_w) = int_pair(m, "padding", 0, 0);
    o.groups = get_int(m, "groups", 1);
    o.bias = m.boolean("bias", false);
    return b.conv2d(one(), o, e.name);
  }
  case LayerKind::pooling: {
    PoolOptions o;
    o.mode = m.choice("mode", pool_mode_table, PoolMode::max);
    o.global = m.boolean("global", false);
    o.kernel = get_int(m, "kernel", 2);
    o.stride = get_int(m, "stride", 0, 0);
    o.padding = get_int(m, "padding", 0, 0);
    return b.pool(one(), o, e.name);
  }
  case LayerKind::attention: {
    const int heads = required_int(m, "heads");
    const AttentionKind kernel = m.choice("kernel", attention_kind_table, AttentionKind::eager);
    return b.attention(one(), {.heads = heads, .kv_heads = get_int(m, "kv_heads", heads),
                               .dropout = m.boolean("dropout", false),
                               .kind = options.attention ? *options.attention : kernel,  // the run's choice first
                               .causal = m.boolean("causal", false)},
                       e.name);
  }
  case LayerKind::rotary: {
    const int heads = required_int(m, "heads");
    return b.rotary(one(), heads, get_int(m, "kv_heads", heads), e.name);
  }
  case LayerKind::swiglu: return b.swiglu(one(), e.name);
  case LayerKind::moe: {
    const int experts = required_int(m, "experts");
    return b.moe(one(), {.experts = experts, .top_k = get_int(m, "top_k", 2),
                         .expert_ffn_hidden = m.required_quantity("expert_ffn_hidden", Dimension::count),
                         .swiglu = m.boolean("swiglu", true),
                         .capacity_factor = options.capacity_factor.value_or(
                             m.quantity("capacity_factor", Dimension::count, 0.0, Bound::non_negative)),
                         .load_imbalance = run_imbalance(
                             options, m.quantity("load_imbalance", Dimension::count, 1.0, Bound::positive), experts)},
                 e.name);
  }
  case LayerKind::moe_router:
  case LayerKind::moe_combine:
    throw std::invalid_argument(std::string(layer_kind_table.name(e.kind)) +
                                " is one of the three layers that type: moe makes; write type: moe");
  case LayerKind::rms_norm: return b.norm(one(), Normalization::rms_norm, e.name);
  case LayerKind::embedding: {
    const double vocab = m.required_quantity("vocab", Dimension::count);
    const double hidden = m.required_quantity("hidden", Dimension::count);
    const double positions = m.quantity("positions", Dimension::count, 0.0, Bound::non_negative);
    return b.embedding(one(), vocab, hidden, positions, e.name);
  }
  case LayerKind::layer_norm: return b.norm(one(), Normalization::layer_norm, e.name);
  case LayerKind::batch_norm: return b.norm(one(), Normalization::batch_norm, e.name);
  case LayerKind::sync_batch_norm: return b.norm(one(), Normalization::sync_batch_norm, e.name);
  case LayerKind::group_norm: return b.norm(one(), Normalization::group_norm, e.name, get_int(m, "groups", 32));
  case LayerKind::activation:
    return b.activation(one(), m.choice("function", activation_table, Activation::relu), e.name);
  case LayerKind::dropout: m.quantity("rate", Dimension::count, 0.1, Bound::non_negative); return b.dropout(one(), e.name);
  case LayerKind::add: return b.add(xs, e.name);
  case LayerKind::concat: return b.concat(xs, e.name);
  case LayerKind::softmax_loss: return b.softmax_loss(one(), e.name);
  case LayerKind::custom: {
    CustomCosts c;
    c.parameters = m.quantity("parameters", Dimension::count, 0.0, Bound::non_negative);
    c.forward_flop = m.required_quantity("forward_flop", Dimension::flop, Bound::non_negative);
    c.backward_flop = m.quantity("backward_flop", Dimension::flop, 2 * c.forward_flop, Bound::non_negative);
    c.output_elements = m.required_quantity("output_elements", Dimension::count);
    c.stashed_elements = m.quantity("stashed_elements", Dimension::count, c.output_elements, Bound::non_negative);
    c.traffic_elements =
        m.quantity("traffic_elements", Dimension::count, c.stashed_elements + c.output_elements, Bound::non_negative);
    return b.custom(xs, c, e.name);
  }
  }
  return {};
}

TensorShape parse_input(YamlMap& root, YAML::Node first_layer)
{
  if (auto in = root.map("input")) {
    TensorShape s;
    if (in->has("channels") || in->has("height") || in->has("width")) {
      s = TensorShape::picture(required_int(*in, "channels"), required_int(*in, "height"), required_int(*in, "width"));
    } else {
      s = TensorShape::sequence(get_int(*in, "tokens", 1), required_int(*in, "features"));
    }
    in->check_unknown_keys();
    return s;
  }
  // Without `input`, a first linear layer's `in` gives the features.
  if (first_layer.IsMap() && first_layer["in"] && first_layer["in"].IsScalar()) {
    try {
      const double features = parse_quantity(first_layer["in"].as<std::string>(), Dimension::count);
      if (features >= 1 && features <= static_cast<double>(max_size))  // else the layer reports its `in`
        return TensorShape::sequence(1, features);
    } catch (const std::exception&) {
    }
  }
  return TensorShape::sequence(1, 1);
}

Model parse_layer_list(YamlMap& root, const std::string& name, const ModelOptions& options)
{
  YAML::Node list = root.node("layers");
  if (!list.IsSequence() || list.size() == 0) {
    root.report("layers", "expected a non-empty list of layers");
    return {};
  }
  const TensorShape input = parse_input(root, list[0]);
  Diagnostics& diags = root.diagnostics();
  const std::size_t errors_before = diags.list().size();

  // Read every entry, expanding `repeat` into a chain of copies.
  std::vector<Entry> entries;
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < list.size(); ++i) {
    YamlMap m(list[i], root.key_path("layers") + "[" + std::to_string(i) + "]", diags);
    if (!list[i].IsMap()) {
      diags.error(list[i], m.path(), "expected a mapping with the layer's name, type and sizes");
      continue;
    }
    const std::string base = m.string("name", "layer" + std::to_string(i));
    const LayerKind kind = m.choice("type", layer_kind_table, LayerKind::custom);
    if (!m.has("type"))
      m.report("type", "missing key (one of: " + layer_kind_table.names() + ")");
    const auto block = m.string("block");
    const bool explicit_inputs = m.has("inputs");
    std::vector<std::string> inputs = explicit_inputs ? read_names(m, "inputs") : std::vector<std::string>{};
    const long long repeat = m.integer("repeat", 1, 1, 100000);
    const YAML::Node type_node = list[i]["type"];
    if (type_node && type_node.IsScalar() && layer_kind_table.parse(type_node.Scalar())) {
      for (const std::string& key : type_keys(kind))
        m.node(key);  // read when the layer is built
      m.node("tp");
      m.check_unknown_keys();  // (with an unknown type, its keys cannot be judged)
    }
    for (long long r = 0; r < repeat; ++r) {
      Entry e{m};
      e.name = repeat > 1 ? base + "." + std::to_string(r) : base;
      e.kind = kind;
      e.block = block ? *block : e.name;
      if (r > 0) {
        e.inputs = {entries.back().name};
        e.explicit_inputs = true;
      } else {
        e.inputs = inputs;
        e.explicit_inputs = explicit_inputs;
      }
      if (!e.explicit_inputs && !entries.empty())
        e.inputs = {entries.back().name};
      if (!index_of.emplace(e.name, entries.size()).second)
        m.report("name", "layer name '" + e.name + "' is used twice");
      entries.push_back(std::move(e));
    }
  }
  if (diags.list().size() > errors_before)
    return {};

  // Order the layers by their dependencies.
  LayerGraph graph(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i)
    for (const std::string& in : entries[i].inputs) {
      auto it = index_of.find(in);
      if (it == index_of.end()) {
        entries[i].map.report("inputs", "no layer is named '" + in + "'");
        continue;
      }
      if (it->second == i)
        entries[i].map.report("inputs", "layer '" + in + "' cannot read its own output");
      else
        graph.add_edge(it->second, i);
    }
  if (diags.list().size() > errors_before)
    return {};
  const std::vector<std::size_t> order = graph.topological_order();
  if (order.empty()) {
    const auto cycle = graph.find_cycle();
    std::string names;
    for (std::size_t v : cycle)
      names += entries[v].name + " -> ";
    names += entries[cycle.front()].name;
    entries[cycle.front()].map.report("inputs", "the layers form a cycle: " + names);
    return {};
  }

  // Build in that order; blocks must stay contiguous.
  if (!(input.elements() > 0)) {
    root.report("input", "the model input must have at least one element");
    return {};
  }
  ModelBuilder builder(name, input);
  std::vector<Tensor> outputs(entries.size());
  std::set<std::string> finished_blocks;
  std::string current_block;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    Entry& e = entries[order[pos]];
    if (pos == 0 || e.block != current_block) {
      if (!finished_blocks.insert(e.block).second) {
        e.map.report("block", "block '" + e.block + "' is split: other layers come between its layers in the order");
        return {};
      }
      current_block = e.block;
      builder.block(e.block);
    }
    std::vector<Tensor> xs;
    for (const std::string& in : e.inputs)
      xs.push_back(outputs[index_of.at(in)]);
    if (xs.empty())
      xs.push_back(builder.input());
    try {
      outputs[order[pos]] = build_layer(builder, e, xs, options);
      if (e.map.has("tp"))
        builder.set_tp(e.map.choice("tp", tp_role_table, TpRole::replicated));
    } catch (const std::invalid_argument& err) {
      e.map.report("type", "layer '" + e.name + "': " + err.what());
      return {};
    }
  }
  if (diags.list().size() > errors_before)
    return {};
  return builder.build();
}

}  // namespace

Model parse_model(YamlMap& map, const ModelOptions& options)
{
  const std::string name = map.required_string("name");
  map.string("description");  // free text for people
  map.string("source");       // where the sizes come from
  std::vector<std::string> given;
  for (const auto& key : generator_keys)
    if (map.has(key))
      given.push_back(key);
  if (map.has("layers"))
    given.push_back("layers");
  Model model;
  if (given.size() != 1) {
    std::string all;
    for (const auto& key : generator_keys)
      all += key + ", ";
    map.diagnostics().error(map.yaml(), map.key_path(given.empty() ? "layers" : given[1]),
                            given.empty() ? "a model needs a generator (" + all + "with its sizes) or a 'layers' list"
                                          : "give one of '" + given[0] + "' and '" + given[1] + "', not both");
    for (const auto& key : given)
      map.node(key);
  } else if (given[0] == "layers") {
    model = parse_layer_list(map, name, options);
  } else {
    if (map.has("input"))
      map.report("input", "'input' belongs to a layer list; a generator sets its own input");
    model = parse_generator(map, given[0], name, options);
  }
  map.check_unknown_keys();
  return model;
}

Model load_model_file(const std::filesystem::path& path, const ModelOptions& options)
{
  return parse_yaml_file(path.string(), [&](YamlMap& map) { return parse_model(map, options); });
}

Model load_model(const std::string& name_or_path, const ModelOptions& options)
{
  return load_model_file(resolve_input_or_throw(name_or_path, "models/zoo", "model"), options);
}

}  // namespace ddlsim::models
