#include "calibration/Microbench.hpp"

#include "common/Dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

namespace ddlsim::calibration {
namespace {

bool wanted(const PlanOptions& options, BenchOp op)
{
  return options.only.empty() || std::find(options.only.begin(), options.only.end(), op) != options.only.end();
}

// Sizes from `first` to `last` (inclusive), each `factor` times the one before.
std::vector<double> geometric(double first, double last, double factor)
{
  std::vector<double> out;
  for (double v = first; v <= last * (1 + 1e-12); v *= factor)
    out.push_back(v);
  if (out.back() < last)
    out.push_back(last);
  return out;
}

BenchPoint gemm_point(BenchOp op, const char* dtype, long long m, long long n, long long k, long long batch)
{
  BenchPoint p;
  p.op = op;
  p.dtype = dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  return p;
}

BenchPoint sized_point(BenchOp op, const char* dtype, double bytes, const char* collective, int group = 0)
{
  BenchPoint p;
  p.op = op;
  p.dtype = dtype;
  p.bytes = bytes;
  p.collective = collective;
  p.group = group;
  return p;
}

constexpr double kib = 1024.0;
constexpr double gib = 1024.0 * 1024.0 * 1024.0;

}  // namespace

const char* bench_op_name(BenchOp op)
{
  switch (op) {
  case BenchOp::gemm: return "gemm";
  case BenchOp::batched_gemm: return "batched_gemm";
  case BenchOp::conv2d: return "conv2d";
  case BenchOp::pointwise: return "pointwise";
  case BenchOp::copy_d2d: return "copy_d2d";
  case BenchOp::copy_h2d: return "copy_h2d";
  case BenchOp::copy_d2h: return "copy_d2h";
  case BenchOp::collective: return "collective";
  }
  return "?";
}

const char* gemm_layout_name(GemmLayout layout)
{
  switch (layout) {
  case GemmLayout::nn: return "nn";
  case GemmLayout::nt: return "nt";
  case GemmLayout::tn: return "tn";
  }
  return "?";
}

const char* conv_pass_name(ConvPass pass)
{
  switch (pass) {
  case ConvPass::forward: return "fwd";
  case ConvPass::backward_data: return "bwd_data";
  case ConvPass::backward_filter: return "bwd_filter";
  }
  return "?";
}

double BenchPoint::element_bytes() const { return dtype_bytes(dtype); }

std::array<std::size_t, 3> BenchPoint::operand_bytes() const
{
  auto whole = [](double b) { return b > 0 ? static_cast<std::size_t>(std::llround(b)) : std::size_t{0}; };
  const double e = element_bytes();
  switch (op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm: {
    const double b = static_cast<double>(batch), dm = static_cast<double>(m), dn = static_cast<double>(n),
                 dk = static_cast<double>(k);
    return {whole(e * b * dm * dk), whole(e * b * dk * dn), whole(e * b * dm * dn)};
  }
  case BenchOp::conv2d:
    return {whole(e * conv.n * conv.c * conv.h * static_cast<double>(conv.w)),
            whole(e * conv.k * conv.c * conv.r * static_cast<double>(conv.s)),
            whole(e * conv.n * conv.k * conv.out_h() * static_cast<double>(conv.out_w()))};
  case BenchOp::pointwise: {  // x read and y written: half of `bytes` each, fp32
    const std::size_t elements = std::max<std::size_t>(1, whole(bytes) / 8);
    return {4 * elements, 0, 4 * elements};
  }
  default:
    return {0, 0, 0};
  }
}

double BenchPoint::flop() const
{
  switch (op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm:
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  case BenchOp::conv2d:  // each pass is one multiply-add per (output element, filter tap)
    return 2.0 * conv.n * conv.k * conv.out_h() * conv.out_w() * static_cast<double>(conv.c) * conv.r * conv.s;
  default:
    return 0.0;
  }
}

double BenchPoint::traffic_bytes() const
{
  const double e = element_bytes();
  switch (op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm:
    return e * static_cast<double>(batch) *
           (static_cast<double>(m) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n) +
            static_cast<double>(m) * static_cast<double>(n));
  case BenchOp::conv2d:
    return e * (static_cast<double>(conv.n) * conv.c * conv.h * conv.w +
                static_cast<double>(conv.k) * conv.c * conv.r * conv.s +
                static_cast<double>(conv.n) * conv.k * conv.out_h() * conv.out_w());
  default:
    return bytes;
  }
}

std::string BenchPoint::label() const
{
  char buf[160];
  switch (op) {
  case BenchOp::gemm:
    std::snprintf(buf, sizeof buf, "gemm %s m=%lld n=%lld k=%lld%s%s", dtype.c_str(), m, n, k,
                  layout == GemmLayout::nn ? "" : " ", layout == GemmLayout::nn ? "" : gemm_layout_name(layout));
    break;
  case BenchOp::batched_gemm:
    std::snprintf(buf, sizeof buf, "batched_gemm %s m=%lld n=%lld k=%lld batch=%lld%s%s", dtype.c_str(), m, n, k, batch,
                  layout == GemmLayout::nn ? "" : " ", layout == GemmLayout::nn ? "" : gemm_layout_name(layout));
    break;
  case BenchOp::conv2d:
    std::snprintf(buf, sizeof buf, "conv2d %s %s n=%d %dx%dx%d k=%d %dx%d/%d pad %d", dtype.c_str(), conv_pass_name(pass),
                  conv.n, conv.c, conv.h, conv.w, conv.k, conv.r, conv.s, conv.stride, conv.pad);
    break;
  case BenchOp::collective:
    std::snprintf(buf, sizeof buf, "%s %s %.0f B over %d GPUs", collective.c_str(), dtype.c_str(), bytes, group);
    break;
  default:
    std::snprintf(buf, sizeof buf, "%s %.0f B", bench_op_name(op), bytes);
    break;
  }
  return buf;
}

std::string BenchPoint::shape_key() const
{
  char buf[160];
  switch (op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm:
    // nn keeps the key it always had, which the GEMM grid parses; the other layouts are exact shapes of their own.
    std::snprintf(buf, sizeof buf, "m=%lld n=%lld k=%lld batch=%lld%s%s", m, n, k, batch,
                  layout == GemmLayout::nn ? "" : " layout=", layout == GemmLayout::nn ? "" : gemm_layout_name(layout));
    return buf;
  case BenchOp::conv2d:
    std::snprintf(buf, sizeof buf, "n=%d c=%d h=%d w=%d k=%d r=%d s=%d stride=%d pad=%d %s", conv.n, conv.c, conv.h, conv.w,
                  conv.k, conv.r, conv.s, conv.stride, conv.pad, conv_pass_name(pass));
    return buf;
  default:
    return {};
  }
}

std::string nccl_type_name(const std::string& dtype)
{
  if (dtype == "bf16")
    return "bfloat16";
  if (dtype == "fp16")
    return "half";
  if (dtype == "fp8")
    return "int8";
  return "float";
}

CollectiveBuffers collective_buffers(const std::string& collective, double bytes, double element_bytes, int group,
                                     int rank)
{
  if (group < 1 || rank < 0 || rank >= group)
    throw std::invalid_argument("rank " + std::to_string(rank) + " of a group of " + std::to_string(group));
  if (!(element_bytes > 0))
    throw std::invalid_argument("element size must be positive");
  const auto n = static_cast<std::size_t>(group);
  const auto elements = static_cast<double>(std::llround(bytes / element_bytes));
  std::size_t count = elements < 1 ? 1 : static_cast<std::size_t>(elements);
  CollectiveBuffers b;
  if (collective == "all_reduce" || collective == "broadcast") {
    b.send_count = b.recv_count = count;
  } else if (collective == "all_gather") {  // nccl-tests: sendcount = count / n, recvcount = sendcount x n
    count = (count + n - 1) / n * n;
    b.send_count = count / n;
    b.recv_count = count;
  } else if (collective == "reduce_scatter") {
    count = (count + n - 1) / n * n;
    b.send_count = count;
    b.recv_count = count / n;
  } else if (collective == "send_recv") {
    if (group < 2)
      throw std::invalid_argument("send_recv needs a group of at least 2");
    b.send_count = b.recv_count = count;
    b.send_to = (rank + 1) % group;
    b.recv_from = (rank + group - 1) % group;
  } else {
    throw std::invalid_argument("unknown collective '" + collective + "'");
  }
  b.bytes = element_bytes * static_cast<double>(count);
  return b;
}

void add_points(std::vector<BenchPoint>& plan, const std::vector<BenchPoint>& extra)
{
  std::set<std::string> labels;
  for (const BenchPoint& p : plan)
    labels.insert(p.label());
  for (const BenchPoint& p : extra)
    if (labels.insert(p.label()).second)
      plan.push_back(p);
  std::stable_sort(plan.begin(), plan.end(),
                   [](const BenchPoint& a, const BenchPoint& b) { return static_cast<int>(a.op) < static_cast<int>(b.op); });
  for (std::size_t i = 0; i < plan.size(); ++i)
    plan[i].id = static_cast<int>(i) + 1;
}

void put_first(std::vector<BenchPoint>& plan, const std::vector<BenchPoint>& first)
{
  std::set<std::string> labels;
  for (const BenchPoint& p : first)
    labels.insert(p.label());
  std::stable_partition(plan.begin(), plan.end(), [&](const BenchPoint& p) { return labels.count(p.label()) > 0; });
  for (std::size_t i = 0; i < plan.size(); ++i)
    plan[i].id = static_cast<int>(i) + 1;
}

CollectionPoints collection_points(const PlanOptions& options, const std::vector<BenchPoint>& extra, bool extra_first,
                                   bool extra_only)
{
  CollectionPoints c;
  if (!extra_only)
    c.points = microbenchmark_plan(options);
  const std::size_t planned = c.points.size();
  add_points(c.points, extra);
  c.added = c.points.size() - planned;
  if (extra_first)
    put_first(c.points, extra);
  return c;
}

std::vector<int> collective_group_sizes(int gpus, bool quick)
{
  std::vector<int> out;
  const int most = std::min(gpus, 8);
  for (int g = 2; g <= most; ++g)
    if (!quick || (g & (g - 1)) == 0 || g == most)
      out.push_back(g);
  return out;
}

std::vector<ConvProblem> zoo_convolutions()
{
  // {c, h, w, k, r (= s), stride, pad} per sample. Regenerate with the unit test
  // "zoo_convolutions lists the zoo's convolution layers" if the zoo changes.
  struct Row {
    int c, h, w, k, r, stride, pad;
  };
  static constexpr Row rows[] = {
      {3, 224, 224, 64, 7, 2, 3},     {64, 56, 56, 64, 1, 1, 0},     {64, 56, 56, 64, 3, 1, 1},    // resnet50
      {64, 56, 56, 256, 1, 1, 0},     {256, 56, 56, 64, 1, 1, 0},    {256, 56, 56, 128, 1, 1, 0},
      {128, 56, 56, 128, 3, 2, 1},    {128, 28, 28, 512, 1, 1, 0},   {256, 56, 56, 512, 1, 2, 0},
      {512, 28, 28, 128, 1, 1, 0},    {128, 28, 28, 128, 3, 1, 1},   {512, 28, 28, 256, 1, 1, 0},
      {256, 28, 28, 256, 3, 2, 1},    {256, 14, 14, 1024, 1, 1, 0},  {512, 28, 28, 1024, 1, 2, 0},
      {1024, 14, 14, 256, 1, 1, 0},   {256, 14, 14, 256, 3, 1, 1},   {1024, 14, 14, 512, 1, 1, 0},
      {512, 14, 14, 512, 3, 2, 1},    {512, 7, 7, 2048, 1, 1, 0},    {1024, 14, 14, 2048, 1, 2, 0},
      {2048, 7, 7, 512, 1, 1, 0},     {512, 7, 7, 512, 3, 1, 1},
      {3, 224, 224, 64, 3, 1, 1},     {64, 224, 224, 64, 3, 1, 1},   {64, 112, 112, 128, 3, 1, 1}, // vgg16
      {128, 112, 112, 128, 3, 1, 1},  {128, 56, 56, 256, 3, 1, 1},   {256, 56, 56, 256, 3, 1, 1},
      {256, 28, 28, 512, 3, 1, 1},    {512, 28, 28, 512, 3, 1, 1},   {512, 14, 14, 512, 3, 1, 1},
      {3, 224, 224, 64, 11, 4, 2},    {64, 27, 27, 192, 5, 1, 2},    {192, 13, 13, 384, 3, 1, 1},  // alexnet
      {384, 13, 13, 256, 3, 1, 1},    {256, 13, 13, 256, 3, 1, 1},
  };
  std::vector<ConvProblem> out;
  for (const Row& r : rows)
    out.push_back(ConvProblem{.n = 1, .c = r.c, .h = r.h, .w = r.w, .k = r.k, .r = r.r, .s = r.r, .stride = r.stride, .pad = r.pad});
  return out;
}

std::vector<BenchPoint> microbenchmark_plan(const PlanOptions& options)
{
  std::vector<BenchPoint> plan;
  auto add = [&](BenchPoint p) {
    p.id = static_cast<int>(plan.size()) + 1;
    plan.push_back(std::move(p));
  };
  const bool quick = options.quick;

  if (wanted(options, BenchOp::gemm)) {
    const std::vector<long long> sizes =
        quick ? std::vector<long long>{256, 1024, 4096} : std::vector<long long>{128, 256, 512, 1024, 2048, 4096, 8192};
    for (const char* dtype : {"fp32", "tf32", "fp16", "bf16"})
      for (long long m : sizes)
        for (long long n : sizes)
          for (long long k : sizes)
            add(gemm_point(BenchOp::gemm, dtype, m, n, k, 1));
    // The gradients' layouts, on the grid, in the dtype training runs in (quick: the exact shapes of a step come
    // from `ddlsim-collect --workload`, which times every launch at its own layout).
    if (!quick)
      for (GemmLayout layout : {GemmLayout::nt, GemmLayout::tn})
        for (long long m : sizes)
          for (long long n : sizes)
            for (long long k : sizes) {
              BenchPoint p = gemm_point(BenchOp::gemm, "bf16", m, n, k, 1);
              p.layout = layout;
              add(p);
            }
  }
  if (wanted(options, BenchOp::batched_gemm)) {
    // Attention: scores = Q K^T (s x s x d) and context = P V (s x d x s), batch = micro-batch x heads.
    const std::vector<long long> seq = quick ? std::vector<long long>{512, 2048} : std::vector<long long>{256, 512, 1024, 2048, 4096};
    const std::vector<long long> head = quick ? std::vector<long long>{128} : std::vector<long long>{64, 128};
    const std::vector<long long> batches = quick ? std::vector<long long>{32} : std::vector<long long>{16, 64};
    const std::vector<const char*> dtypes = quick ? std::vector<const char*>{"bf16"} : std::vector<const char*>{"fp16", "bf16"};
    for (const char* dtype : dtypes)
      for (long long s : seq)
        for (long long d : head)
          for (long long b : batches) {
            add(gemm_point(BenchOp::batched_gemm, dtype, s, s, d, b));
            add(gemm_point(BenchOp::batched_gemm, dtype, s, d, s, b));
          }
  }
  if (wanted(options, BenchOp::conv2d)) {
    const std::vector<int> batches = quick ? std::vector<int>{32} : std::vector<int>{8, 32, 128};
    const std::vector<const char*> dtypes = quick ? std::vector<const char*>{"fp16"} : std::vector<const char*>{"fp32", "fp16", "bf16"};
    for (const char* dtype : dtypes)
      for (int n : batches)
        for (ConvProblem conv : zoo_convolutions()) {
          conv.n = n;
          for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
            BenchPoint p;
            p.op = BenchOp::conv2d;
            p.dtype = dtype;
            p.conv = conv;
            p.pass = pass;
            add(p);
          }
        }
  }
  // Bandwidth curves: 4 KiB to 1 GiB, doubling (quick: x4).
  const std::vector<double> sizes = geometric(4 * kib, gib, quick ? 4.0 : 2.0);
  for (BenchOp op : {BenchOp::pointwise, BenchOp::copy_d2d, BenchOp::copy_h2d, BenchOp::copy_d2h})
    if (wanted(options, op))
      for (double b : sizes)
        add(sized_point(op, op == BenchOp::pointwise ? "fp32" : "", b, ""));
  if (wanted(options, BenchOp::collective)) {
    // Over groups of GPUs 0 .. g-1; none on one GPU, where no collective runs in training.
    const std::vector<double> message = geometric(8, gib, quick ? 4.0 : 2.0);
    const std::vector<const char*> dtypes = quick ? std::vector<const char*>{"bf16"} : std::vector<const char*>{"bf16", "fp32"};
    for (int group : collective_group_sizes(options.gpus, quick))
      for (const char* dtype : dtypes)
        for (const char* kind : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv"})
          for (double b : message)
            add(sized_point(BenchOp::collective, dtype, b, kind, group));
  }
  return plan;
}

}  // namespace ddlsim::calibration
