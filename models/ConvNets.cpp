// ResNet, VGG, AlexNet, AmoebaNet-D and MLP generators (declared in Zoo.hpp).
#include "models/Zoo.hpp"

#include <array>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ddlsim::models {
namespace {

ConvOptions conv(int out, int kernel, int stride = 1, int pad = -1)
{
  if (pad < 0)
    pad = kernel / 2;
  return {.out_channels = out, .kernel_h = kernel, .kernel_w = kernel, .stride_h = stride, .stride_w = stride,
          .pad_h = pad, .pad_w = pad, .groups = 1, .bias = false};
}

void check_image(const std::string& name, int image, int classes)
{
  if (image < 32 || classes < 1)
    throw std::invalid_argument(name + ": image must be >= 32 pixels and classes >= 1");
}

// Convolution, normalisation, optional ReLU: the unit every CNN below is made of.
Tensor conv_norm(ModelBuilder& b, Tensor x, const ConvOptions& o, Normalization norm, int groups, bool relu,
                 const std::string& name)
{
  x = b.conv2d(x, o, name + ".conv");
  x = b.norm(x, norm, name + ".norm", groups);
  return relu ? b.activation(x, Activation::relu, name + ".relu") : x;
}

}  // namespace

Model make_resnet(const ResNetConfig& c)
{
  check_image(c.name, c.image, c.classes);
  std::array<int, 4> units{};
  bool bottleneck = true;
  switch (c.depth) {
  case 18: units = {2, 2, 2, 2}; bottleneck = false; break;
  case 34: units = {3, 4, 6, 3}; bottleneck = false; break;
  case 50: units = {3, 4, 6, 3}; break;
  case 101: units = {3, 4, 23, 3}; break;
  case 152: units = {3, 8, 36, 3}; break;
  default: throw std::invalid_argument(c.name + ": ResNet depth must be 18, 34, 50, 101 or 152");
  }
  if (c.width < 1)
    throw std::invalid_argument(c.name + ": width must be positive");
  const int expansion = bottleneck ? 4 : 1;
  ModelBuilder b(c.name, TensorShape::picture(3, c.image, c.image));

  b.block("stem");
  Tensor x = conv_norm(b, b.input(), conv(c.width, 7, 2, 3), c.normalization, c.groups, true, "stem");
  x = b.pool(x, {.mode = PoolMode::max, .kernel = 3, .stride = 2, .padding = 1}, "stem.maxpool");

  int in_channels = c.width;
  for (int stage = 0; stage < 4; ++stage) {
    const int width = c.width << stage;
    for (int u = 0; u < units[static_cast<std::size_t>(stage)]; ++u) {
      const std::string p = "stage" + std::to_string(stage + 1) + ".unit" + std::to_string(u);
      const int stride = (u == 0 && stage > 0) ? 2 : 1;
      b.block(p);
      Tensor y = x;
      if (bottleneck) {
        y = conv_norm(b, y, conv(width, 1), c.normalization, c.groups, true, p + ".a");
        y = conv_norm(b, y, conv(width, 3, stride), c.normalization, c.groups, true, p + ".b");
        y = conv_norm(b, y, conv(width * expansion, 1), c.normalization, c.groups, false, p + ".c");
      } else {
        y = conv_norm(b, y, conv(width, 3, stride), c.normalization, c.groups, true, p + ".a");
        y = conv_norm(b, y, conv(width, 3), c.normalization, c.groups, false, p + ".b");
      }
      Tensor shortcut = x;
      if (stride != 1 || in_channels != width * expansion)
        shortcut = conv_norm(b, x, conv(width * expansion, 1, stride), c.normalization, c.groups, false, p + ".down");
      x = b.activation(b.add({y, shortcut}, p + ".add"), Activation::relu, p + ".relu");
      in_channels = width * expansion;
    }
  }

  b.block("head");
  x = b.pool(x, {.mode = PoolMode::avg, .global = true}, "avgpool");
  x = b.linear(x, c.classes, true, "fc");
  b.softmax_loss(x, "loss");
  return b.build();
}

Model make_vgg(const VggConfig& c)
{
  check_image(c.name, c.image, c.classes);
  std::vector<std::vector<int>> stages;
  switch (c.depth) {
  case 11: stages = {{64}, {128}, {256, 256}, {512, 512}, {512, 512}}; break;
  case 13: stages = {{64, 64}, {128, 128}, {256, 256}, {512, 512}, {512, 512}}; break;
  case 16: stages = {{64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}}; break;
  case 19: stages = {{64, 64}, {128, 128}, {256, 256, 256, 256}, {512, 512, 512, 512}, {512, 512, 512, 512}}; break;
  default: throw std::invalid_argument(c.name + ": VGG depth must be 11, 13, 16 or 19");
  }
  ModelBuilder b(c.name, TensorShape::picture(3, c.image, c.image));
  Tensor x = b.input();
  int n = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (int width : stages[s]) {
      const std::string p = "conv" + std::to_string(++n);
      b.block(p);
      ConvOptions o = conv(width, 3);
      o.bias = true;
      x = b.conv2d(x, o, p);
      if (c.batch_norm)
        x = b.norm(x, Normalization::batch_norm, p + ".bn");
      x = b.activation(x, Activation::relu, p + ".relu");
    }
    x = b.pool(x, {.mode = PoolMode::max, .kernel = 2, .stride = 2}, "pool" + std::to_string(s + 1));
  }
  // torchvision pools adaptively to 7 x 7 before the classifier; at 224 x 224 that is the identity.
  const char* names[] = {"fc6", "fc7"};
  for (const char* name : names) {
    b.block(name);
    x = b.linear(x, 4096, true, name);
    x = b.activation(x, Activation::relu, std::string(name) + ".relu");
    x = b.dropout(x, std::string(name) + ".dropout");
  }
  b.block("fc8");
  x = b.linear(x, c.classes, true, "fc8");
  b.softmax_loss(x, "loss");
  return b.build();
}

Model make_alexnet(const AlexNetConfig& c)
{
  check_image(c.name, c.image, c.classes);
  ModelBuilder b(c.name, TensorShape::picture(3, c.image, c.image));
  struct ConvSpec {
    int out, kernel, stride, pad;
    bool pool;
  };
  const ConvSpec convs[] = {{64, 11, 4, 2, true}, {192, 5, 1, 2, true}, {384, 3, 1, 1, false},
                            {256, 3, 1, 1, false}, {256, 3, 1, 1, true}};
  Tensor x = b.input();
  int n = 0;
  for (const ConvSpec& s : convs) {
    const std::string p = "conv" + std::to_string(++n);
    b.block(p);
    ConvOptions o = conv(s.out, s.kernel, s.stride, s.pad);
    o.bias = true;
    x = b.activation(b.conv2d(x, o, p), Activation::relu, p + ".relu");
    if (s.pool)
      x = b.pool(x, {.mode = PoolMode::max, .kernel = 3, .stride = 2}, p + ".pool");
  }
  const char* names[] = {"fc6", "fc7"};
  for (const char* name : names) {
    b.block(name);
    x = b.dropout(x, std::string(name) + ".dropout");
    x = b.activation(b.linear(x, 4096, true, name), Activation::relu, std::string(name) + ".relu");
  }
  b.block("fc8");
  b.softmax_loss(b.linear(x, c.classes, true, "fc8"), "loss");
  return b.build();
}

namespace {

// AmoebaNet-D: cell operations (which state they read, what they are) and which states the cell
// concatenates, as in the TensorFlow reference implementation GPipe used.
enum class AmoebaOp { none, conv_1x1, conv_3x3, conv_1x7_7x1, avg_pool_3x3, max_pool_3x3, max_pool_2x2 };
using CellOps = std::vector<std::pair<int, AmoebaOp>>;

const CellOps normal_ops = {{1, AmoebaOp::conv_1x1},     {1, AmoebaOp::max_pool_3x3}, {1, AmoebaOp::none},
                            {0, AmoebaOp::conv_1x7_7x1}, {0, AmoebaOp::conv_1x1},     {0, AmoebaOp::conv_1x7_7x1},
                            {2, AmoebaOp::max_pool_3x3}, {2, AmoebaOp::none},         {1, AmoebaOp::avg_pool_3x3},
                            {5, AmoebaOp::conv_1x1}};
const std::vector<int> normal_concat = {0, 3, 4, 6};
const CellOps reduction_ops = {{0, AmoebaOp::max_pool_2x2}, {0, AmoebaOp::max_pool_3x3}, {2, AmoebaOp::none},
                               {1, AmoebaOp::conv_3x3},     {2, AmoebaOp::conv_1x7_7x1}, {2, AmoebaOp::max_pool_3x3},
                               {3, AmoebaOp::none},         {1, AmoebaOp::max_pool_2x2}, {2, AmoebaOp::avg_pool_3x3},
                               {3, AmoebaOp::conv_1x1}};
const std::vector<int> reduction_concat = {4, 5, 6};

class AmoebaBuilder {
public:
  AmoebaBuilder(ModelBuilder& b, Normalization norm, int groups) : b_(b), norm_(norm), groups_(groups) {}

  Tensor relu_conv_norm(Tensor x, const ConvOptions& o, const std::string& p)
  {
    x = b_.activation(x, Activation::relu, p + ".relu");
    x = b_.conv2d(x, o, p + ".conv");
    return b_.norm(x, norm_, p + ".norm", groups_);
  }

  // Halves height and width with two offset 1x1 stride-2 convolutions, each giving half the channels.
  Tensor factorized_reduce(Tensor x, int out, const std::string& p)
  {
    x = b_.activation(x, Activation::relu, p + ".relu");
    Tensor a = b_.conv2d(x, conv(out / 2, 1, 2, 0), p + ".conv1");
    Tensor c = b_.conv2d(x, conv(out / 2, 1, 2, 0), p + ".conv2");
    return b_.norm(b_.concat({a, c}, p + ".concat"), norm_, p + ".norm", groups_);
  }

  Tensor op(AmoebaOp op, Tensor x, int ch, int stride, const std::string& p)
  {
    switch (op) {
    case AmoebaOp::none: return stride == 1 ? x : factorized_reduce(x, ch, p + ".reduce");
    case AmoebaOp::avg_pool_3x3:
      return b_.pool(x, {.mode = PoolMode::avg, .kernel = 3, .stride = stride, .padding = 1}, p + ".avgpool3");
    case AmoebaOp::max_pool_3x3:
      return b_.pool(x, {.mode = PoolMode::max, .kernel = 3, .stride = stride, .padding = 1}, p + ".maxpool3");
    case AmoebaOp::max_pool_2x2:
      return b_.pool(x, {.mode = PoolMode::max, .kernel = 2, .stride = stride, .padding = 0}, p + ".maxpool2");
    case AmoebaOp::conv_1x1: return relu_conv_norm(x, conv(ch, 1, stride, 0), p + ".conv1x1");
    case AmoebaOp::conv_3x3:
      x = relu_conv_norm(x, conv(ch / 4, 1, 1, 0), p + ".a");
      x = relu_conv_norm(x, conv(ch / 4, 3, stride, 1), p + ".b");
      return relu_conv_norm(x, conv(ch, 1, 1, 0), p + ".c");
    case AmoebaOp::conv_1x7_7x1: {
      x = relu_conv_norm(x, conv(ch / 4, 1, 1, 0), p + ".a");
      ConvOptions row{.out_channels = ch / 4, .kernel_h = 1, .kernel_w = 7, .stride_h = 1, .stride_w = stride,
                      .pad_h = 0, .pad_w = 3};
      x = relu_conv_norm(x, row, p + ".1x7");
      ConvOptions col{.out_channels = ch / 4, .kernel_h = 7, .kernel_w = 1, .stride_h = stride, .stride_w = 1,
                      .pad_h = 3, .pad_w = 0};
      x = relu_conv_norm(x, col, p + ".7x1");
      return relu_conv_norm(x, conv(ch, 1, 1, 0), p + ".d");
    }
    }
    return x;
  }

  // One cell: prev is the previous cell's output, prev_prev the one before. Returns its output.
  Tensor cell(Tensor prev, Tensor prev_prev, int ch, bool reduction, bool reduction_prev, const std::string& p)
  {
    std::vector<Tensor> states;
    states.push_back(relu_conv_norm(prev, conv(ch, 1, 1, 0), p + ".reduce1"));
    if (reduction_prev)
      states.push_back(factorized_reduce(prev_prev, ch, p + ".reduce2"));
    else if (prev_prev.shape.features != ch)
      states.push_back(relu_conv_norm(prev_prev, conv(ch, 1, 1, 0), p + ".reduce2"));
    else
      states.push_back(prev_prev);
    const CellOps& ops = reduction ? reduction_ops : normal_ops;
    for (std::size_t i = 0; i < ops.size(); i += 2) {
      const std::string q = p + ".node" + std::to_string(i / 2);
      auto [in1, op1] = ops[i];
      auto [in2, op2] = ops[i + 1];
      Tensor h1 = op(op1, states[static_cast<std::size_t>(in1)], ch, reduction && in1 < 2 ? 2 : 1, q + ".left");
      Tensor h2 = op(op2, states[static_cast<std::size_t>(in2)], ch, reduction && in2 < 2 ? 2 : 1, q + ".right");
      states.push_back(b_.add({h1, h2}, q + ".add"));
    }
    std::vector<Tensor> out;
    for (int s : reduction ? reduction_concat : normal_concat)
      out.push_back(states[static_cast<std::size_t>(s)]);
    return b_.concat(out, p + ".concat");
  }

private:
  ModelBuilder& b_;
  Normalization norm_;
  int groups_;
};

}  // namespace

Model make_amoebanet(const AmoebaNetConfig& c)
{
  check_image(c.name, c.image, c.classes);
  if (c.layers < 3 || c.layers % 3 != 0)
    throw std::invalid_argument(c.name + ": AmoebaNet layers (L) must be a positive multiple of 3");
  if (c.filters < 16 || c.filters % 16 != 0)
    throw std::invalid_argument(c.name + ": AmoebaNet filters (D) must be a positive multiple of 16");
  ModelBuilder b(c.name, TensorShape::picture(3, c.image, c.image));
  AmoebaBuilder amoeba(b, c.normalization, c.groups);

  int ch = c.filters / 4;
  b.block("stem");
  Tensor prev = amoeba.relu_conv_norm(b.input(), conv(ch, 3, 2, 1), "stem");
  Tensor prev_prev = prev;
  bool reduction_prev = false;
  auto add_cell = [&](bool reduction, const std::string& name) {
    b.block(name);
    Tensor out = amoeba.cell(prev, prev_prev, ch, reduction, reduction_prev, name);
    prev_prev = prev;
    prev = out;
    reduction_prev = reduction;
  };
  for (int stem = 2; stem <= 3; ++stem) {
    ch *= 2;
    add_cell(true, "stem" + std::to_string(stem));
  }
  const int normal = c.layers / 3;
  for (int group = 0; group < 3; ++group) {
    if (group > 0) {
      ch *= 2;
      add_cell(true, "reduction" + std::to_string(group));
    }
    for (int i = 0; i < normal; ++i)
      add_cell(false, "cell" + std::to_string(group + 1) + "_normal" + std::to_string(i + 1));
  }
  b.block("classify");
  Tensor x = b.pool(prev, {.mode = PoolMode::avg, .global = true}, "avgpool");
  b.softmax_loss(b.linear(x, c.classes, true, "fc"), "loss");
  return b.build();
}

Model make_mlp(const MlpConfig& c)
{
  if (c.input < 1 || c.hidden < 1 || c.layers < 0 || c.classes < 1)
    throw std::invalid_argument(c.name + ": MLP sizes must be positive");
  ModelBuilder b(c.name, TensorShape::sequence(1, c.input));
  Tensor x = b.input();
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "fc" + std::to_string(i + 1);
    b.block(p);
    x = b.activation(b.linear(x, c.hidden, true, p), c.activation, p + "." + std::string(activation_table.name(c.activation)));
  }
  b.block("output");
  b.softmax_loss(b.linear(x, c.classes, true, "output"), "loss");
  return b.build();
}

}  // namespace ddlsim::models
