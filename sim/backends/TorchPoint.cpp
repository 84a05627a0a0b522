#include "sim/backends/TorchPoint.hpp"

#include "common/Error.hpp"
#include "models/ModelBuilder.hpp"
#include "traces/ChromeTrace.hpp"

#include <cmath>
#include <optional>
#include <sstream>

namespace ddlsim::backends {
namespace {

using models::Layer;
using models::LayerKind;
using models::TensorShape;

std::string num(double v) { return traces::json_number(v); }  // the point's numbers are whole

std::string text(const std::string& s) { return "\"" + traces::json_escape(s) + "\""; }

std::string boolean(bool b) { return b ? "true" : "false"; }

std::string shape_json(const TensorShape& s)
{
  return "{\"tokens\":" + num(s.tokens) + ",\"features\":" + num(s.features) + ",\"height\":" + num(s.height) +
         ",\"width\":" + num(s.width) + ",\"image\":" + boolean(s.image) + "}";
}

[[noreturn]] void refuse(const Layer& l, const std::string& why)
{
  throw ExecutionError("layer '" + l.name + "' (" + std::string(models::layer_kind_table.name(l.kind)) + "): " + why);
}

// The shape a layer reads: its first input's output, or the model's input.
const TensorShape& input_shape(const models::Model& m, const Layer& l)
{
  return l.inputs.empty() ? m.input_shape() : m.layers()[l.inputs.front()].output;
}

const models::Kernel& first_kernel(const Layer& l)
{
  if (l.kernels.empty())
    refuse(l, "has no kernel to read its shape from");
  return l.kernels.front();
}

// in, out, bias (from the parameters it owns and uses tied), tied owner.
std::string linear_fields(const models::Model& m, const Layer& l)
{
  const models::Kernel& k = first_kernel(l);
  const double in = k.gemm.k, out = k.gemm.n;
  const double bias = l.parameters + l.tied_parameters - in * out;
  if (bias != 0 && bias != out)
    refuse(l, "its " + num(l.parameters + l.tied_parameters) + " parameters are neither " + num(in) + " x " + num(out) +
                  " nor that plus a bias");
  std::string s = ",\"in_features\":" + num(in) + ",\"out_features\":" + num(out) + ",\"bias\":" + boolean(bias != 0);
  if (l.tied_parameters > 0) {
    if (m.layers()[l.tied_to].kind != LayerKind::embedding)
      refuse(l, "is tied to '" + m.layers()[l.tied_to].name + "', which is no embedding");
    s += ",\"tied_to\":" + std::to_string(l.tied_to);
  }
  return s;
}

std::string conv_fields(const Layer& l)
{
  const models::ConvShape& c = first_kernel(l).conv;
  const double weights = static_cast<double>(c.k) * (c.c / c.groups) * c.r * c.s;
  return ",\"in_channels\":" + std::to_string(c.c) + ",\"out_channels\":" + std::to_string(c.k) + ",\"kernel\":[" +
         std::to_string(c.r) + "," + std::to_string(c.s) + "],\"stride\":[" + std::to_string(c.stride_h) + "," +
         std::to_string(c.stride_w) + "],\"padding\":[" + std::to_string(c.pad_h) + "," + std::to_string(c.pad_w) +
         "],\"groups\":" + std::to_string(c.groups) + ",\"bias\":" + boolean(l.parameters > weights);
}

// Pooling keeps no options: max pooling keeps its input and argmax indices, average pooling nothing; the
// window is the flop per output element; stride and padding are the first that give the output size
// (the window's own stride without padding first, as PyTorch's default).
std::string pool_fields(const models::Model& m, const Layer& l)
{
  const TensorShape& in = input_shape(m, l);
  const double out = l.output.elements();
  const double window = first_kernel(l).forward_flop / out;
  const std::string mode = l.stash_inputs ? "max" : "avg";
  if (l.output.height == 1 && l.output.width == 1 && window == in.height * in.width)
    return ",\"mode\":\"" + mode + "\",\"global\":true";
  const int kernel = static_cast<int>(std::lround(std::sqrt(window)));
  if (kernel < 1 || kernel * kernel != window)
    refuse(l, "its " + num(window) + " flop per output element are no square window");
  auto fits = [&](int stride, int padding) {
    return std::floor((in.height + 2 * padding - kernel) / stride) + 1 == l.output.height &&
           std::floor((in.width + 2 * padding - kernel) / stride) + 1 == l.output.width;
  };
  std::optional<std::pair<int, int>> found;
  if (fits(kernel, 0))
    found = {kernel, 0};
  for (int padding = 0; padding <= kernel / 2 && !found; ++padding)
    for (int stride = kernel; stride >= 1 && !found; --stride)
      if (fits(stride, padding))
        found = {stride, padding};
  if (!found)
    refuse(l, "no square window, stride and padding take " + in.to_string() + " to " + l.output.to_string());
  return ",\"mode\":\"" + mode + "\",\"global\":false,\"kernel\":" + std::to_string(kernel) +
         ",\"stride\":" + std::to_string(found->first) + ",\"padding\":" + std::to_string(found->second);
}

std::string heads_fields(const models::Model& m, const Layer& l)
{
  const double head_dim = input_shape(m, l).features / (l.heads + 2.0 * l.kv_heads);
  return ",\"heads\":" + std::to_string(l.heads) + ",\"kv_heads\":" + std::to_string(l.kv_heads) +
         ",\"head_dim\":" + num(head_dim);
}

// Eager attention has a dropout kernel when it drops probabilities out; FlashAttention drops them inside
// its kernel, where the model's other dropout layers say whether it does.
std::string attention_fields(const models::Model& m, const Layer& l)
{
  bool flash = false, causal = false, dropout = false;
  for (const models::Kernel& k : l.kernels) {
    flash = flash || k.fused;
    causal = causal || k.causal;
    dropout = dropout || k.name.ends_with(".dropout");
  }
  if (flash)
    dropout = m.has(LayerKind::dropout);
  return heads_fields(m, l) + ",\"attention\":\"" + (flash ? "flash" : "eager") + "\",\"causal\":" + boolean(causal) +
         ",\"dropout\":" + boolean(dropout);
}

// One table of vocab + positions rows: the vocabulary is the rows of the LM head tied to it; untied, every
// row without learned positions (no add in the kernel), else the rows but one position per token.
std::string embedding_fields(const models::Model& m, const Layer& l, std::size_t index)
{
  const double hidden = l.output.features;
  const double rows = l.parameters / hidden;
  double vocab = first_kernel(l).forward_flop > 0 ? rows - l.output.tokens : rows;
  for (const Layer& user : m.layers())
    if (user.tied_parameters > 0 && user.tied_to == index)
      vocab = user.tied_parameters / hidden;
  if (!(vocab >= 1) || vocab > rows || std::floor(vocab) != vocab)
    refuse(l, "its " + num(l.parameters) + " parameters do not split into vocabulary and position rows");
  return ",\"vocab\":" + num(vocab) + ",\"positions\":" + num(rows - vocab) + ",\"hidden\":" + num(hidden);
}

std::string norm_fields(const models::Model& m, const Layer& l)
{
  std::string s = ",\"channels\":" + num(input_shape(m, l).features);
  if (l.kind == LayerKind::group_norm)  // the moments kernel writes a mean and rstd per group
    s += ",\"groups\":" + num((first_kernel(l).forward_sample_elements - input_shape(m, l).elements()) / 2);
  return s;
}

// The builder's flop per element (ModelBuilder.cpp's activation_flop) and what the function keeps.
std::string activation_fields(const Layer& l)
{
  const double per_element = first_kernel(l).forward_flop / l.output.elements();
  const char* function = l.stash_output ? (per_element == 1   ? "relu"
                                           : per_element == 5 ? "tanh"
                                           : per_element == 4 ? "sigmoid"
                                                              : nullptr)
                                        : (per_element == 8 ? "gelu" : per_element == 5 ? "silu" : nullptr);
  if (!function)
    refuse(l, "no activation function costs " + num(per_element) + " flop per element");
  return std::string(",\"function\":\"") + function + "\"";
}

std::string layer_fields(const models::Model& m, std::size_t i)
{
  const Layer& l = m.layers()[i];
  switch (l.kind) {
  case LayerKind::linear: return linear_fields(m, l);
  case LayerKind::conv2d: return conv_fields(l);
  case LayerKind::pooling: return pool_fields(m, l);
  case LayerKind::attention: return attention_fields(m, l);
  case LayerKind::rotary: return heads_fields(m, l);
  case LayerKind::embedding: return embedding_fields(m, l, i);
  case LayerKind::layer_norm:
  case LayerKind::rms_norm:
  case LayerKind::batch_norm:
  case LayerKind::sync_batch_norm:
  case LayerKind::group_norm: return norm_fields(m, l);
  case LayerKind::activation: return activation_fields(l);
  case LayerKind::softmax_loss: return ",\"classes\":" + num(input_shape(m, l).features);
  case LayerKind::swiglu:
  case LayerKind::dropout:
  case LayerKind::add:
  case LayerKind::concat: return "";
  case LayerKind::moe_router:
  case LayerKind::moe:
  case LayerKind::moe_combine: refuse(l, "the torch backend builds no mixtures of experts");
  case LayerKind::custom: refuse(l, "a custom layer has costs but no computation to run");
  }
  refuse(l, "unknown kind");
}

}  // namespace

void write_torch_point(const models::Model& model, const TorchPoint& p, std::ostream& out)
{
  if (p.micro_batch < 1 || p.dp < 1 || p.global_batch % (static_cast<long long>(p.micro_batch) * p.dp) != 0)
    throw ExecutionError(p.label + ": global batch " + std::to_string(p.global_batch) + " is not a whole number of " +
                         std::to_string(p.dp) + " x " + std::to_string(p.micro_batch) + " samples");
  std::ostringstream layers;  // built whole first: a refusal writes nothing
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& l = model.layers()[i];
    layers << (i ? ",\n  " : "\n  ") << "{\"name\":" << text(l.name) << ",\"kind\":\""
           << models::layer_kind_table.name(l.kind) << "\",\"inputs\":[";
    for (std::size_t j = 0; j < l.inputs.size(); ++j)
      layers << (j ? "," : "") << l.inputs[j];
    layers << "],\"output\":" << shape_json(l.output) << ",\"parameters\":" << num(l.parameters)
           << ",\"stash_inputs\":" << boolean(l.stash_inputs) << ",\"stash_output\":" << boolean(l.stash_output)
           << layer_fields(model, i) << "}";
  }
  out << "{\"format\":\"ddlsim-torch-point-1\",\"label\":" << text(p.label)
      << ",\n\"model\":{\"name\":" << text(model.get_name()) << ",\"parameters\":" << num(model.parameter_count())
      << ",\"input\":" << shape_json(model.input_shape()) << ",\"layers\":[" << layers.str() << "]},\n"
      << "\"training\":{\"global_batch\":" << p.global_batch << ",\"micro_batch\":" << p.micro_batch
      << ",\"micro_batches\":" << p.micro_batches() << ",\"dtype\":\"" << dtype_table.name(p.dtype)
      << "\",\"optimizer\":\"" << models::optimizer_table.name(p.optimizer) << "\",\"compile\":" << boolean(p.compile)
      << ",\"cuda_graphs\":" << boolean(p.cuda_graphs) << "},\n\"parallelism\":{\"dp\":" << p.dp
      << ",\"dp_bucket_bytes\":" << num(p.dp_bucket_bytes) << "},\n"
      << "\"timing\":{\"warmup\":" << p.warmup << ",\"iterations\":" << p.iterations << "},\n"
      << "\"trace\":" << text(p.trace) << "}\n";
}

}  // namespace ddlsim::backends
