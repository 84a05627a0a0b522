// ddlsim model: a model's blocks or layers and its totals (parameters, flop, activations, state).
#include "cli/Commands.hpp"
#include "common/DataPath.hpp"
#include "common/Dtype.hpp"
#include "common/Units.hpp"
#include "models/Memory.hpp"
#include "models/ModelLoader.hpp"

#include <fmt/core.h>

#include <optional>
#include <string>

namespace ddlsim::cli {

namespace {

struct ModelArgs {
  std::optional<std::string> name;
  std::string dtype = "bf16";
  bool layers = false, list = false;
};

int cmd_model(const ModelArgs& a)
{
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  if (a.list) {
    for (const auto& shipped : shipped_names("models/zoo"))
      fmt::print("{}\n", shipped);
    return exit_ok;
  }
  if (!a.name)
    throw UsageError{"model needs a model name or path (ddlsim model --list shows the shipped ones)"};
  const models::Model model = models::load_model(*a.name);
  const double d            = dtype_bytes(*dtype);
  auto bytes                = [](double b) { return format_quantity(b, Dimension::bytes); };
  fmt::print("model {}: {} blocks, {} layers, input {} per sample, element type {} ({:g} bytes)\n\n", model.get_name(),
             model.blocks().size(), model.size(), model.input_shape().to_string(), dtype_table.name(*dtype), d);
  if (a.layers) {
    fmt::print("{:<5} {:<34} {:<15} {:<10} {:<14} {:>14} {:>12} {:>12}  {}\n", "#", "layer", "type", "tp", "output",
               "parameters", "fwd_flop", "stash", "kernels (forward)");
    for (std::size_t i = 0; i < model.size(); ++i) {
      const auto& l = model.layers()[i];
      std::string kernels;
      for (const auto& k : l.kernels)
        if (k.in_forward)
          kernels += (kernels.empty() ? "" : "; ") + k.shape_string();
      fmt::print("{:<5} {:<34} {:<15} {:<10} {:<14} {:14.0f} {:12.4g} {:>12}  {}\n", i, l.name,
                 models::layer_kind_table.name(l.kind), models::tp_role_table.name(l.tp), l.output.to_string(),
                 l.parameters, l.forward_flop(), bytes(model.owned_stash_bytes(i, *dtype)), kernels);
    }
  } else {
    fmt::print("{:<5} {:<26} {:>7} {:>14} {:>16} {:>16} {:>14} {:>14}\n", "#", "block", "layers", "parameters",
               "fwd_flop/sample", "bwd_flop/sample", "stash/sample", "sent_at_end");
    for (std::size_t b = 0; b < model.blocks().size(); ++b) {
      const auto& block = model.blocks()[b];
      double params = 0, fwd = 0, bwd = 0, stash = 0;
      for (std::size_t i = block.layers.begin; i < block.layers.end; ++i) {
        const auto& l = model.layers()[i];
        params += l.parameters;
        fwd += l.forward_flop();
        bwd += l.backward_flop();
        stash += model.owned_stash_bytes(i, *dtype);
      }
      const std::string sent =
          b + 1 < model.blocks().size() ? bytes(model.crossing_elements(block.layers.end) * d) : "-";
      fmt::print("{:<5} {:<26} {:7} {:14.0f} {:16.4g} {:16.4g} {:>14} {:>14}\n", b, block.name, block.layers.size(),
                 params, fwd, bwd, bytes(stash), sent);
    }
  }
  fmt::print("\ntotal parameters            {:.0f} ({})\n", model.parameter_count(),
             format_quantity(model.parameter_count(), Dimension::count));
  if (model.has(models::LayerKind::moe))
    fmt::print("active parameters/token     {:.0f} ({}; the router and top-k experts of each MoE layer)\n",
               model.active_parameter_count(), format_quantity(model.active_parameter_count(), Dimension::count));
  const double state = 2 * d + models::optimizer_bytes_per_parameter(models::Optimizer::adam, *dtype);
  fmt::print("parameter bytes             {}\n", bytes(model.parameter_count() * d));
  fmt::print("forward flop per sample     {}\n", format_quantity(model.forward_flop_per_sample(), Dimension::flop));
  fmt::print("backward flop per sample    {}\n", format_quantity(model.backward_flop_per_sample(), Dimension::flop));
  fmt::print("stashed activations/sample  {}\n", bytes(model.stashed_bytes_per_sample(*dtype)));
  fmt::print("training state (adam)       {} ({:g} bytes per parameter: weights, gradients, optimizer)\n",
             bytes(model.parameter_count() * state), state);
  return exit_ok;
}

} // namespace

void add_model_command(CommandTable& table)
{
  CLI::App& root = table.root();
  auto c = table.add<ModelArgs>(root, "model", "a model's blocks (pipeline partition units) or layers, and totals",
                                cmd_model);
  c.app->add_option("MODEL", c.args.name, "a zoo name or a model file")->type_name("");
  c.app->add_flag("--layers", c.args.layers, "one row per layer, with output shape and kernel shapes");
  c.app->add_option("--dtype", c.args.dtype, "element type for the byte columns (default bf16)")->type_name("DTYPE");
  c.app->add_flag("--list", c.args.list, "list the shipped model names");
}

} // namespace ddlsim::cli
