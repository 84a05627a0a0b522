#include "models/ModelLoader.hpp"

#include "common/DataPath.hpp"
#include "models/Transformer.hpp"

#include <limits>

namespace ddlsim::models {
namespace {

constexpr long long max_int = std::numeric_limits<int>::max();

Model parse_gpt(YamlMap& gpt, const std::string& name)
{
  GptConfig c;
  c.name = name;
  c.layers = static_cast<int>(gpt.required_integer("layers", 1, 100000));
  c.hidden = static_cast<int>(gpt.required_integer("hidden", 1, max_int));
  c.heads = static_cast<int>(gpt.required_integer("heads", 1, max_int));
  c.seq = static_cast<int>(gpt.required_integer("seq", 1, max_int));
  c.vocab = static_cast<int>(gpt.required_integer("vocab", 1, max_int));
  c.ffn_hidden = static_cast<int>(gpt.integer("ffn_hidden", 0, 0, max_int));
  c.tied_embeddings = gpt.boolean("tied_embeddings", true);
  gpt.check_unknown_keys();
  if (c.hidden % c.heads != 0) {
    gpt.report("heads", "hidden (" + std::to_string(c.hidden) + ") must be divisible by heads (" +
                            std::to_string(c.heads) + ")");
    return Model(name, {});
  }
  return make_gpt(c);
}

// One entry of a `layers:` list; appends `repeat` copies to `out`.
void parse_layer(YamlMap& entry, std::size_t index, std::vector<Layer>& out)
{
  Layer layer;
  layer.name = entry.string("name", "layer" + std::to_string(index));
  layer.kind = entry.choice("type", layer_kind_table, LayerKind::custom);
  const long long repeat = entry.integer("repeat", 1, 1, 100000);
  if (layer.kind == LayerKind::linear) {
    const double in = entry.required_quantity("in", Dimension::count);
    const double outf = entry.required_quantity("out", Dimension::count);
    const double tokens = entry.quantity("tokens", Dimension::count, 1.0);  // rows per sample (sequence length)
    const bool bias = entry.boolean("bias", true);
    layer.parameters = in * outf + (bias ? outf : 0.0);
    layer.forward_flop = 2 * tokens * in * outf;
    layer.backward_flop = 2 * layer.forward_flop;
    layer.output_elements = tokens * outf;
    layer.stashed_elements = tokens * in;
    layer.traffic_elements = tokens * (in + outf);
  } else if (layer.kind == LayerKind::custom) {
    layer.parameters = entry.quantity("parameters", Dimension::count, 0.0, Bound::non_negative);
    layer.forward_flop = entry.required_quantity("forward_flop", Dimension::flop, Bound::non_negative);
    layer.backward_flop =
        entry.quantity("backward_flop", Dimension::flop, 2 * layer.forward_flop, Bound::non_negative);
    layer.output_elements = entry.required_quantity("output_elements", Dimension::count, Bound::non_negative);
    layer.stashed_elements =
        entry.quantity("stashed_elements", Dimension::count, layer.output_elements, Bound::non_negative);
    layer.traffic_elements = entry.quantity("traffic_elements", Dimension::count,
                                            layer.stashed_elements + layer.output_elements, Bound::non_negative);
  } else {
    entry.report("type", "layer type '" + std::string(layer_kind_table.name(layer.kind)) +
                             "' is only made by generators; in a layer list use linear or custom");
  }
  entry.check_unknown_keys();
  for (long long r = 0; r < repeat; ++r) {
    out.push_back(layer);
    if (repeat > 1)
      out.back().name += "." + std::to_string(r);
  }
}

}  // namespace

Model parse_model(YamlMap& map)
{
  const std::string name = map.required_string("name");
  map.string("description");  // free text for people
  map.string("source");       // where the sizes come from
  const bool has_gpt = map.has("gpt");
  const bool has_layers = map.has("layers");
  Model model;
  if (has_gpt == has_layers) {
    map.diagnostics().error(map.yaml(), map.key_path(has_gpt ? "layers" : "gpt"),
                            has_gpt ? "give either 'gpt' or 'layers', not both"
                                    : "a model needs either a 'gpt' generator or a 'layers' list");
    map.node("gpt");
    map.node("layers");
  } else if (has_gpt) {
    if (auto gpt = map.map("gpt"))
      model = parse_gpt(*gpt, name);
  } else {
    YAML::Node list = map.node("layers");
    if (!list.IsSequence() || list.size() == 0) {
      map.report("layers", "expected a non-empty list of layers");
    } else {
      std::vector<Layer> layers;
      for (std::size_t i = 0; i < list.size(); ++i) {
        YamlMap entry(list[i], map.key_path("layers") + "[" + std::to_string(i) + "]", map.diagnostics());
        parse_layer(entry, i, layers);
      }
      model = Model(name, std::move(layers));
    }
  }
  map.check_unknown_keys();
  return model;
}

Model load_model_file(const std::filesystem::path& path)
{
  return parse_yaml_file(path.string(), [](YamlMap& map) { return parse_model(map); });
}

Model load_model(const std::string& name_or_path)
{
  return load_model_file(resolve_input_or_throw(name_or_path, "models/zoo", "model"));
}

}  // namespace ddlsim::models
