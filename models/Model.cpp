#include "models/Model.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace ddlsim::models {
namespace {

constexpr std::size_t no_layer = std::numeric_limits<std::size_t>::max();

std::string number(double v)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

template <typename F> double sum(const std::vector<Layer>& layers, F field)
{
  return std::accumulate(layers.begin(), layers.end(), 0.0,
                         [&](double acc, const Layer& l) { return acc + field(l); });
}

}  // namespace

std::string TensorShape::to_string() const
{
  if (image)
    return number(features) + "x" + number(height) + "x" + number(width);
  return number(tokens) + "x" + number(features);
}

std::string Kernel::shape_string() const
{
  switch (kind) {
  case KernelKind::gemm:
    return "gemm m=" + number(gemm.m) + " n=" + number(gemm.n) + " k=" + number(gemm.k);
  case KernelKind::batched_gemm:
    return "bgemm " + number(gemm.batch) + "x m=" + number(gemm.m) + " n=" + number(gemm.n) + " k=" + number(gemm.k);
  case KernelKind::conv2d: {
    std::string s = "conv " + std::to_string(conv.c) + "x" + std::to_string(conv.h) + "x" + std::to_string(conv.w) +
                    " k=" + std::to_string(conv.k) + " " + std::to_string(conv.r) + "x" + std::to_string(conv.s);
    if (conv.stride_h != 1 || conv.stride_w != 1)
      s += "/" + std::to_string(conv.stride_h) + (conv.stride_w != conv.stride_h ? "," + std::to_string(conv.stride_w) : "");
    if (conv.groups != 1)
      s += " g=" + std::to_string(conv.groups);
    return s;
  }
  case KernelKind::pointwise:
  case KernelKind::gather:
  case KernelKind::custom:
    return std::string(kernel_kind_table.name(kind)) + " " + number(forward_sample_elements) + " el";
  }
  return {};
}

double Layer::forward_flop() const
{
  double f = 0;
  for (const auto& k : kernels)
    f += k.forward_flop;
  return f;
}

double Layer::backward_flop() const
{
  double f = 0;
  for (const auto& k : kernels)
    f += k.backward_flop;
  return f;
}

double Layer::workspace_elements() const
{
  double w = 0;
  for (const auto& k : kernels)
    w = std::max(w, k.workspace_elements);
  return w;
}

Model::Model(std::string name, TensorShape input, std::vector<Layer> layers, std::vector<std::string> block_names)
    : name_(std::move(name)), input_(input), layers_(std::move(layers))
{
  const std::size_t n = layers_.size();
  if (n == 0)
    throw std::invalid_argument("model '" + name_ + "' has no layers");

  // Blocks: contiguous runs of non-decreasing block indices, none empty.
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = layers_[i].block;
    if (b >= block_names.size())
      throw std::invalid_argument("layer '" + layers_[i].name + "' names block " + std::to_string(b) + " of " +
                                  std::to_string(block_names.size()));
    if (blocks_.empty() ? b != 0 : (b != blocks_.size() - 1 && b != blocks_.size()))
      throw std::invalid_argument("block '" + block_names[b] + "' is not contiguous in the layer order (at layer '" +
                                  layers_[i].name + "')");
    if (b == blocks_.size())
      blocks_.push_back({block_names[b], {i, i + 1}});
    else
      blocks_.back().layers.end = i + 1;
  }
  if (blocks_.size() != block_names.size())
    throw std::invalid_argument("model '" + name_ + "' has an empty block '" + block_names[blocks_.size()] + "'");

  // Who consumes and who stashes each tensor (a tensor is named by its producer; the model input by n).
  std::vector<std::size_t> last_consumer(n + 1, no_layer);
  std::vector<std::size_t> first_stasher(n + 1, no_layer);
  std::vector<std::size_t> last_stasher(n + 1, no_layer);
  feeds_loss_.assign(n, 0);
  for (const Layer& l : layers_)
    if (l.kind == LayerKind::softmax_loss)
      for (std::size_t in : l.inputs)
        if (in < n)
          feeds_loss_[in] = 1;
  // GEMM inputs: tensors every layer that stashes is a linear layer other than the output projection.
  std::vector<char> gemm_only(n + 1, 1);
  auto note_stash = [&](std::size_t tensor, std::size_t by) {
    if (first_stasher[tensor] == no_layer)
      first_stasher[tensor] = by;
    last_stasher[tensor] = by;
    if (layers_[by].kind != LayerKind::linear || feeds_loss_[by] != 0)
      gemm_only[tensor] = 0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Layer& l = layers_[i];
    if (l.tied_parameters > 0 && l.tied_to >= n)
      throw std::invalid_argument("layer '" + l.name + "' ties its weights to an unknown layer");
    std::vector<std::size_t> tensors = l.inputs;
    if (tensors.empty())
      tensors.push_back(n);
    for (std::size_t t : tensors) {
      if (t != n && t >= i)
        throw std::invalid_argument("layer '" + l.name + "' reads a layer that comes later; layers must be in topological order");
      last_consumer[t] = i;
      if (l.stash_inputs)
        note_stash(t, i);
    }
    if (l.stash_output)
      note_stash(i, i);
  }
  auto elements = [&](std::size_t tensor) { return tensor == n ? input_.elements() : layers_[tensor].output_elements(); };

  owned_stash_.assign(n, 0.0);
  owned_split_stash_.assign(n, 0.0);
  owned_gemm_stash_.assign(n, 0.0);
  owned_split_gemm_stash_.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    owned_stash_[i] = layers_[i].stashed_elements;
    if (tp_divides(layers_[i].tp))
      owned_split_stash_[i] = layers_[i].stashed_elements;
  }
  for (std::size_t t = 0; t <= n; ++t)
    if (first_stasher[t] != no_layer) {
      const bool split = t < n && tp_output_split(layers_[t].tp);
      owned_stash_[first_stasher[t]] += elements(t);
      owned_split_stash_[first_stasher[t]] += split ? elements(t) : 0.0;
      if (gemm_only[t] != 0) {
        owned_gemm_stash_[first_stasher[t]] += elements(t);
        owned_split_gemm_stash_[first_stasher[t]] += split ? elements(t) : 0.0;
      }
    }

  // crossing_[p]: tensors produced before p (the model input is not: it is fed, not sent) and read at
  // or after p. Difference arrays over the producer..last-consumer interval of each tensor.
  std::vector<double> diff(n + 2, 0.0);
  std::vector<double> diff_stash(n + 2, 0.0);
  for (std::size_t t = 0; t < n; ++t) {
    if (last_consumer[t] == no_layer || last_consumer[t] <= t)
      continue;
    diff[t + 1] += elements(t);
    diff[last_consumer[t] + 1] -= elements(t);
    // A stage starting at p needs its own copy when the tensor's owner (first stasher) is before p
    // and another layer at or after p stashes it too.
    if (first_stasher[t] != no_layer && last_stasher[t] > first_stasher[t]) {
      diff_stash[first_stasher[t] + 1] += elements(t);
      diff_stash[last_stasher[t] + 1] -= elements(t);
    }
  }
  crossing_.assign(n + 1, 0.0);
  crossing_stash_.assign(n + 1, 0.0);
  double running = 0, running_stash = 0;
  for (std::size_t p = 0; p <= n; ++p) {
    running += diff[p];
    running_stash += diff_stash[p];
    crossing_[p] = running;
    crossing_stash_[p] = running_stash;
  }
}

double Model::parameter_count() const { return sum(layers_, [](const Layer& l) { return l.parameters; }); }
double Model::active_parameter_count() const
{
  return sum(layers_, [](const Layer& l) { return l.kind == LayerKind::moe ? l.active_parameters : l.parameters; });
}
double Model::forward_flop_per_sample() const { return sum(layers_, [](const Layer& l) { return l.forward_flop(); }); }
double Model::backward_flop_per_sample() const { return sum(layers_, [](const Layer& l) { return l.backward_flop(); }); }

double Model::stashed_bytes_per_sample(Dtype dtype) const
{
  double total = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    total += owned_stash_bytes(i, dtype);
  return total;
}

double Model::held_parameters(std::size_t i, StageRange stage, int tp) const
{
  const Layer& l = layers_[i];
  double p = l.parameters;
  if (l.tied_parameters > 0 && (l.tied_to < stage.begin || l.tied_to >= stage.end))
    p += l.tied_parameters;
  return tp_divides(l.tp) ? p / tp : p;
}

StageRange Model::layer_range(StageRange blocks) const
{
  if (blocks.begin >= blocks.end || blocks.end > blocks_.size())
    throw std::out_of_range("block range out of range");
  return {blocks_[blocks.begin].layers.begin, blocks_[blocks.end - 1].layers.end};
}

bool Model::has(LayerKind kind) const
{
  return std::any_of(layers_.begin(), layers_.end(), [&](const Layer& l) { return l.kind == kind; });
}

}  // namespace ddlsim::models
