#include "traces/KernelShapes.hpp"

#include "common/Text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <optional>
#include <utility>

namespace ddlsim::traces {
namespace {

using Dims = std::vector<double>;

bool contains(const std::string& s, const char* needle)
{
  return s.find(needle) != std::string::npos;
}

// The shapes of an op's inputs: "Input Dims" (a list of lists of sizes, [] for scalars), "Input type"
// and "Concrete Inputs" (strings). ok = false when the dims are missing or not numbers.
struct OpInputs {
  bool ok = false;
  std::vector<Dims> dims;
  std::vector<std::string> types;
  std::vector<std::string> concrete;
};

OpInputs read_inputs(const JsonValue* args)
{
  OpInputs in;
  const JsonValue* dims = args ? args->find("Input Dims") : nullptr;
  if (!dims || !dims->is_array())
    return in;
  in.ok = true;
  for (const JsonValue& d : dims->as_array()) {
    Dims sizes;
    if (d.is_array())
      for (const JsonValue& v : d.as_array()) {
        const bool good = v.is_number() && std::isfinite(v.as_number()) && v.as_number() >= 0 && v.as_number() < 1e15;
        in.ok           = in.ok && good;
        sizes.push_back(good ? v.as_number() : 0.0);
      }
    in.dims.push_back(std::move(sizes));
  }
  for (const char* key : {"Input type", "Concrete Inputs"})
    if (const JsonValue* list = args->find(key); list && list->is_array())
      for (const JsonValue& v : list->as_array())
        (key[0] == 'I' ? in.types : in.concrete).push_back(v.is_string() ? v.as_string() : std::string());
  return in;
}

// "[1, 1]" -> {1, 1}; "2" -> {2}; nullopt when not a list of whole numbers.
std::optional<std::vector<int>> int_list(const std::string& text)
{
  std::vector<int> out;
  std::string number;
  for (char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      number += c;
    } else if (c == ',' || c == ']') {
      if (!number.empty()) {
        if (number.size() > 6)
          return std::nullopt;
        out.push_back(std::stoi(number));
        number.clear();
      }
    } else if (c != '[' && c != ' ') {
      return std::nullopt;
    }
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

// ddlsim's dtype of a kernel: Input type of the first tensor, TF32 when a float GEMM or convolution
// ran on TF32 tensor cores (cuBLAS/CUTLASS/cuDNN name them s1688, tf32 or xmma..._tf32). Empty: none.
std::string work_dtype(const std::string& input_type, const std::string& kernel_name)
{
  std::string t = lower(input_type);
  if (t.rfind("c10::", 0) == 0)
    t = t.substr(5);
  if (t == "float" || t == "float32") {
    const std::string k = lower(kernel_name);
    return contains(k, "tf32") || contains(k, "s1688") || contains(k, "s16816") ? "tf32" : "fp32";
  }
  if (t == "half" || t == "float16")
    return "fp16";
  if (t == "bfloat16")
    return "bf16";
  if (t.rfind("float8", 0) == 0)
    return "fp8";
  return "";
}

double element_size(const std::string& dtype)
{
  return dtype == "fp32" || dtype == "tf32" ? 4 : dtype == "fp8" ? 1 : 2;
}

double product(const Dims& d, std::size_t from = 0, std::size_t to = SIZE_MAX)
{
  double p = 1;
  for (std::size_t i = from; i < std::min(to, d.size()); ++i)
    p *= d[i];
  return p;
}

// The work of one kernel of an op (what a KernelRecord gets).
struct Work {
  std::string op; // gemm, batched_gemm, conv2d
  double flop = 0, bytes = 0;
  std::string shape;
  std::string pass; // conv2d: fwd, bwd_data, bwd_filter
};

std::string gemm_key(double m, double n, double k, double batch)
{
  char buf[128];
  std::snprintf(buf, sizeof buf, "m=%.0f n=%.0f k=%.0f batch=%.0f", m, n, k, batch);
  return buf;
}

Work gemm_work(double m, double n, double k, double batch, double element)
{
  Work w;
  w.op    = batch > 1 ? "batched_gemm" : "gemm";
  w.flop  = 2 * m * n * k * batch;
  w.bytes = element * batch * (m * k + k * n + m * n);
  w.shape = gemm_key(m, n, k, batch);
  return w;
}

struct Conv {
  double n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, p = 0, q = 0, groups = 1;
  int stride = 0, pad = -1; // when known and square
};

// A convolution pass as BenchPoint::shape_key spells it (square stride and padding, no groups).
Work conv_work(const Conv& cv, const std::string& pass, double element)
{
  Work w;
  w.op    = "conv2d";
  w.pass  = pass;
  w.flop  = 2 * cv.n * cv.k * cv.p * cv.q * (cv.c / cv.groups) * cv.r * cv.s;
  w.bytes = element * (cv.n * cv.c * cv.h * cv.w + cv.n * cv.k * cv.p * cv.q + cv.k * (cv.c / cv.groups) * cv.r * cv.s);
  if (cv.stride > 0 && cv.pad >= 0 && cv.groups == 1) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "n=%.0f c=%.0f h=%.0f w=%.0f k=%.0f r=%.0f s=%.0f stride=%d pad=%d %s", cv.n, cv.c,
                  cv.h, cv.w, cv.k, cv.r, cv.s, cv.stride, cv.pad, pass.c_str());
    w.shape = buf;
  }
  return w;
}

// Stride and padding from "Concrete Inputs" at the op's argument positions; square ones only.
void conv_params(Conv& cv, const OpInputs& in, std::size_t stride_at, std::size_t pad_at, std::size_t groups_at)
{
  auto get = [&](std::size_t i) { return i < in.concrete.size() ? int_list(in.concrete[i]) : std::nullopt; };
  if (auto g = get(groups_at); g && g->size() == 1 && (*g)[0] >= 1)
    cv.groups = (*g)[0];
  const auto stride = get(stride_at), pad = get(pad_at);
  if (stride && pad && (*stride)[0] >= 1 &&
      std::all_of(stride->begin(), stride->end(), [&](int v) { return v == (*stride)[0]; }) &&
      std::all_of(pad->begin(), pad->end(), [&](int v) { return v == (*pad)[0]; })) {
    cv.stride = (*stride)[0];
    cv.pad    = (*pad)[0];
  }
}

// What an op's kernels compute: one Work per compute kernel (a convolution's backward: data and
// weight gradients), or empty with `why`.
std::vector<Work> op_work(const std::string& name, const OpInputs& in, const std::string& dtype, std::string& why)
{
  const double e = element_size(dtype);
  auto dims      = [&](std::size_t i) -> const Dims& {
    static const Dims none;
    return i < in.dims.size() ? in.dims[i] : none;
  };
  auto bad = [&](const char* what) {
    why = std::string("unusable Input Dims (") + what + ")";
    return std::vector<Work>{};
  };
  if (name == "aten::mm" || name == "aten::_scaled_mm" || name == "aten::addmm" || name == "aten::matmul") {
    const std::size_t a = name == "aten::addmm" ? 1 : 0;
    const Dims &x = dims(a), &y = dims(a + 1);
    if (x.size() != 2 || y.size() != 2 || x[1] != y[0])
      return bad("two matrices [M, K] x [K, N] expected");
    return {gemm_work(x[0], y[1], x[1], 1, e)};
  }
  if (name == "aten::linear") { // x [..., K] W [N, K]
    const Dims &x = dims(0), &w = dims(1);
    if (x.empty() || w.size() != 2 || x.back() != w[1])
      return bad("[..., K] and [N, K] expected");
    return {gemm_work(product(x, 0, x.size() - 1), w[0], w[1], 1, e)};
  }
  if (name == "aten::bmm" || name == "aten::baddbmm") {
    const std::size_t a = name == "aten::baddbmm" ? 1 : 0;
    const Dims &x = dims(a), &y = dims(a + 1);
    if (x.size() != 3 || y.size() != 3 || x[0] != y[0] || x[2] != y[1])
      return bad("[B, M, K] x [B, K, N] expected");
    return {gemm_work(x[1], y[2], x[2], x[0], e)};
  }
  const bool forward = name == "aten::convolution" || name == "aten::_convolution" ||
                       name == "aten::cudnn_convolution" || name == "aten::conv2d";
  if (forward || name == "aten::convolution_backward") {
    // Forward: (input [N, C, H, W], weight [K, C/g, R, S], ...); backward: (dY [N, K, P, Q], input, weight, ...).
    const std::size_t x_at = forward ? 0 : 1;
    const Dims &x = dims(x_at), &wt = dims(x_at + 1);
    if (x.size() != 4 || wt.size() != 4)
      return bad("4-D input and weight expected");
    Conv cv{.n = x[0], .c = x[1], .h = x[2], .w = x[3], .k = wt[0], .r = wt[2], .s = wt[3]};
    if (name == "aten::cudnn_convolution") // (input, weight, padding, stride, dilation, groups, ...)
      conv_params(cv, in, 3, 2, 5);
    else if (name == "aten::conv2d") // (input, weight, bias, stride, padding, dilation, groups)
      conv_params(cv, in, 3, 4, 6);
    else if (forward) // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
      conv_params(cv, in, 3, 4, 8);
    else // (dY, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
      conv_params(cv, in, 4, 5, 9);
    if (cv.groups < 1 || wt[1] * cv.groups != cv.c)
      return bad("weight channels x groups differ from the input's channels");
    if (!forward) {
      const Dims& dy = dims(0);
      if (dy.size() != 4 || dy[1] != cv.k)
        return bad("dY [N, K, P, Q] expected");
      cv.p = dy[2];
      cv.q = dy[3];
      return {conv_work(cv, "bwd_data", e), conv_work(cv, "bwd_filter", e)};
    }
    if (cv.stride < 1) {
      why = "a convolution without stride and padding: record with PyTorch 2.1 or later (Concrete Inputs)";
      return {};
    }
    cv.p = std::floor((cv.h + 2 * cv.pad - cv.r) / cv.stride) + 1;
    cv.q = std::floor((cv.w + 2 * cv.pad - cv.s) / cv.stride) + 1;
    if (cv.p < 1 || cv.q < 1)
      return bad("kernel larger than the padded input");
    return {conv_work(cv, "fwd", e)};
  }
  why = "not a GEMM or convolution"; // priced_op() keeps these out
  return {};
}


// Innermost op of each thread around a time: ops sorted by start, each with its enclosing op.
class OpTree {
public:
  explicit OpTree(const std::vector<CpuOp>& ops) : ops_(ops), parent_(ops.size(), SIZE_MAX)
  {
    for (std::size_t i = 0; i < ops.size(); ++i)
      by_thread_[{ops[i].pid, ops[i].tid}].push_back(i);
    for (auto& [thread, list] : by_thread_) {
      std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return ops[a].ts != ops[b].ts ? ops[a].ts < ops[b].ts : ops[a].dur > ops[b].dur; // outer first
      });
      std::vector<std::size_t> stack;
      for (std::size_t i : list) {
        while (!stack.empty() && end(stack.back()) < ops[i].ts)
          stack.pop_back();
        parent_[i] = stack.empty() ? SIZE_MAX : stack.back();
        stack.push_back(i);
      }
    }
  }
  /// The innermost op of (pid, tid) whose interval holds `ts`, or SIZE_MAX.
  std::size_t innermost(double pid, double tid, double ts) const
  {
    auto it = by_thread_.find({pid, tid});
    if (it == by_thread_.end())
      return SIZE_MAX;
    const auto& list = it->second;
    auto after =
        std::upper_bound(list.begin(), list.end(), ts, [&](double t, std::size_t i) { return t < ops_[i].ts; });
    if (after == list.begin())
      return SIZE_MAX;
    for (std::size_t i = *(after - 1); i != SIZE_MAX; i = parent_[i])
      if (end(i) >= ts)
        return i;
    return SIZE_MAX;
  }

private:
  double end(std::size_t i) const { return ops_[i].ts + ops_[i].dur; }
  const std::vector<CpuOp>& ops_;
  std::map<std::pair<double, double>, std::vector<std::size_t>> by_thread_;
  std::vector<std::size_t> parent_; // enclosing op of each op (SIZE_MAX: none)
};

// Bytes a memory-bound op moves, from its inputs' sizes and types: every input read and an output the
// size of the largest written (an out-of-place op); an in-place op (add_, copy_) writes its first input
// instead, which copy_, fill_ and zero_ do not read. 0 when it has no tensor input, or when its kernels
// are compute-bound (fused attention) or launched for a list of tensors (a fused optimizer).
double memory_bytes(const std::string& name, const OpInputs& in)
{
  if (contains(name, "attention") || contains(name, "flash") || contains(name, "_foreach") || contains(name, "_fused"))
    return 0;
  double read = 0, largest = 0, first = 0;
  for (std::size_t i = 0; i < in.dims.size(); ++i) {
    if (in.dims[i].empty())
      continue;  // a scalar
    const std::string dtype = work_dtype(i < in.types.size() ? in.types[i] : std::string(), "");
    const double bytes = product(in.dims[i]) * (dtype.empty() ? 1.0 : element_size(dtype));  // bool, int8: 1
    read += bytes;
    largest = std::max(largest, bytes);
    if (i == 0)
      first = bytes;
  }
  if (read <= 0)
    return 0;
  if (!name.empty() && name.back() == '_') {
    const bool writes_only = name == "aten::copy_" || name == "aten::fill_" || name == "aten::zero_";
    return writes_only ? read : read + first;
  }
  return read + largest;
}

bool is_data_gradient(const std::string& kernel)
{
  return contains(lower(kernel), "dgrad");
}
bool is_weight_gradient(const std::string& kernel)
{
  return contains(lower(kernel), "wgrad");
}

} // namespace

double memory_bound_bytes(const std::string& name, const JsonValue* args)
{
  const OpInputs in = read_inputs(args);
  return in.ok ? memory_bytes(name, in) : 0;
}

bool may_launch(const std::string& name)
{
  static const char* const views[] = {"aten::view",   "aten::reshape", "aten::_reshape_alias", "aten::permute",
                                      "aten::transpose", "aten::t",    "aten::detach",  "aten::detach_",
                                      "aten::slice",  "aten::select",  "aten::unsqueeze", "aten::squeeze",
                                      "aten::expand", "aten::split",   "aten::chunk",   "aten::alias",
                                      "aten::as_strided", "aten::empty", "aten::empty_strided", "aten::lift_fresh",
                                      "aten::_unsafe_view", "aten::flatten", "aten::resolve_conj", "aten::resolve_neg"};
  return std::none_of(std::begin(views), std::end(views), [&](const char* v) { return name == v; });
}

// The ops whose shapes give their kernels' work (op_work).
bool priced_op(const std::string& name)
{
  static const char* const names[] = {"aten::mm",           "aten::_scaled_mm",
                                      "aten::addmm",        "aten::matmul",
                                      "aten::linear",       "aten::bmm",
                                      "aten::baddbmm",      "aten::convolution",
                                      "aten::_convolution", "aten::cudnn_convolution",
                                      "aten::conv2d",       "aten::convolution_backward"};
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

void attach_kernel_shapes(std::vector<KernelRecord>& kernels, const std::vector<CpuOp>& ops,
                          const std::vector<RuntimeLaunch>& launches, const std::vector<KernelLink>& links)
{
  // Hash maps: the lookups are one per kernel (a std::map's were 8% of a large import); the first
  // op or launch of an id wins, as it did.
  std::unordered_map<double, std::size_t> by_external(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].external_id >= 0)
      by_external.emplace(ops[i].external_id, i);
  std::unordered_map<double, const RuntimeLaunch*> by_correlation(launches.size());
  for (const RuntimeLaunch& l : launches)
    by_correlation.emplace(l.correlation, &l);
  const OpTree tree(ops);

  // Each kernel's op, then each op's kernels in trace order.
  std::map<std::size_t, std::vector<std::size_t>> kernels_of;
  for (const KernelLink& link : links) {
    KernelRecord& k = kernels[link.kernel];
    if (!k.unusable.empty())
      continue; // an NCCL kernel: a collective record times it
    std::size_t op = SIZE_MAX;
    if (auto it = by_external.find(link.external_id); it != by_external.end()) {
      op = it->second;
    } else if (auto launch = by_correlation.find(link.correlation); launch != by_correlation.end()) {
      const RuntimeLaunch& l = *launch->second;
      auto via               = by_external.find(l.external_id);
      op                     = via != by_external.end() ? via->second : tree.innermost(l.pid, l.tid, l.ts);
    }
    if (op == SIZE_MAX) {
      k.unusable = "no CPU op around its launch (a trace without CPU ops, or a kernel launched outside them)";
      continue;
    }
    k.cpu_op = ops[op].name;
    kernels_of[op].push_back(link.kernel);
  }

  for (const auto& entry : kernels_of) {
    // Named copies, not structured bindings: C++20 lambdas may capture those, Clang 14 cannot.
    const std::size_t op                  = entry.first;
    const std::vector<std::size_t>& members = entry.second;
    const std::string& name = ops[op].name;
    const OpInputs in       = read_inputs(ops[op].args.get());
    auto mark               = [&](const std::string& why) {
      for (std::size_t k : members)
        kernels[k].unusable = why;
    };
    if (!priced_op(name)) {  // a memory-bound op: its longest kernel carries the bytes
      const double bytes = ops[op].memory_bytes;
      if (bytes <= 0) {
        mark("not a GEMM, convolution or memory-bound op with tensor shapes");
        continue;
      }
      const auto longest = std::max_element(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
        return kernels[a].duration_s < kernels[b].duration_s;
      });
      mark("auxiliary kernel (its op's longest kernel carries the work)");
      KernelRecord& k = kernels[*longest];
      k.unusable.clear();
      k.op = "pointwise";
      k.flop = 0;
      k.bytes = bytes;
      k.dtype = "fp32";  // memory-bound tables are keyed by bytes, whatever the dtype
      k.shape.clear();
      continue;
    }
    if (!in.ok) {
      const bool recorded = ops[op].args && ops[op].args->find("Input Dims");
      mark(recorded ? "unusable Input Dims" : "no Input Dims: record with record_shapes=True");
      continue;
    }
    // The longest kernels carry the work; ties keep trace order.
    std::vector<std::size_t> order = members;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return kernels[a].duration_s > kernels[b].duration_s; });
    const std::string dtype =
        work_dtype(in.types.empty() ? std::string() : in.types.front(), kernels[order.front()].name);
    std::string why;
    std::vector<Work> work;
    if (dtype.empty())
      why = "no ddlsim dtype (fp32, tf32, fp16, bf16, fp8) for " +
            (in.types.empty() ? std::string("an unknown type") : in.types.front());
    else
      work = op_work(name, in, dtype, why);
    if (work.empty()) {
      mark(why);
      continue;
    }
    // A convolution's backward: the kernels named as data and weight gradients when there are, else
    // the two longest.
    std::vector<std::size_t> carriers(order.begin(),
                                      order.begin() + static_cast<std::ptrdiff_t>(std::min(work.size(), order.size())));
    if (work.size() == 2) {
      auto find = [&](bool (*is)(const std::string&)) {
        auto it = std::find_if(order.begin(), order.end(), [&](std::size_t k) { return is(kernels[k].name); });
        return it == order.end() ? SIZE_MAX : *it;
      };
      const std::size_t data = find(is_data_gradient), weight = find(is_weight_gradient);
      if (data != SIZE_MAX && weight != SIZE_MAX)
        carriers = {data, weight};
      else
        for (Work& w : work)
          w.shape.clear(); // which kernel is which pass is not known: the flop table only
    }
    for (std::size_t i = 0; i < members.size(); ++i)
      kernels[members[i]].unusable = "auxiliary kernel (its op's longest kernel carries the work)";
    for (std::size_t i = 0; i < carriers.size(); ++i) {
      KernelRecord& k = kernels[carriers[i]];
      k.unusable.clear();
      k.op    = work[i].op;
      k.flop  = work[i].flop;
      k.bytes = work[i].bytes;
      k.dtype = dtype;
      k.shape = work[i].shape;
    }
  }
}

} // namespace ddlsim::traces
