#include "calibration/Profile.hpp"

#include "common/DataPath.hpp"
#include "common/Dtype.hpp"
#include "common/EnumTable.hpp"
#include "common/Error.hpp"
#include "common/YamlReader.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ddlsim::calibration {
namespace {

constexpr std::array<ParameterSpec, 49> specs{{
    {"peak_flops_fp32", Dimension::flop_rate, false, "peak FP32 rate (CUDA cores)"},
    {"peak_flops_tf32", Dimension::flop_rate, false, "peak dense TF32 tensor-core rate"},
    {"peak_flops_fp16", Dimension::flop_rate, false, "peak dense FP16 tensor-core rate"},
    {"peak_flops_bf16", Dimension::flop_rate, false, "peak dense BF16 tensor-core rate"},
    {"peak_flops_fp8", Dimension::flop_rate, false, "peak dense FP8 tensor-core rate"},
    {"sustained_clock", Dimension::count, true,
     "share of the clock the peaks are rated at that the SMs hold under sustained training load (power and thermal "
     "limits): scales every peak_flops_<dtype> and the special-function rate"},
    {"compute_efficiency", Dimension::count, true, "fraction of the peak rate that layer kernels reach"},
    {"memory_bandwidth", Dimension::bandwidth, false, "device memory bandwidth"},
    {"memory_efficiency", Dimension::count, true, "fraction of the memory bandwidth that kernels reach"},
    {"kernel_overhead", Dimension::time, false, "fixed time per kernel (launch gap between back-to-back kernels)"},
    // Shape-aware kernel costs (KernelModel.hpp), used when the profile lists gemm_tiles.
    {"sm_count", Dimension::count, false, "streaming multiprocessors: the CTAs that run at once, one per SM"},
    {"gemm_efficiency", Dimension::count, true,
     "share of an SM's dense peak a GEMM tile reaches in its main loop (full tiles, full waves)"},
    {"gemm_tile_k_bytes", Dimension::bytes, false, "bytes of K one main-loop step of a GEMM tile consumes per row"},
    {"gemm_pipeline_steps", Dimension::count, false,
     "main-loop steps of fixed cost per tile: pipeline fill and epilogue"},
    {"gemm_tile_intensity", Dimension::count, false,
     "tile intensity tm tn / (tm + tn) from which a tile reaches gemm_efficiency (smaller tiles are limited by their "
     "operand traffic)"},
    {"gemv_max_rows", Dimension::count, false,
     "a GEMM with at most this many rows or columns may run as a memory-bound matrix-vector kernel"},
    {"kernel_launch_floor", Dimension::time, false, "shortest time a kernel runs on the GPU, however little its work"},
    {"attention_efficiency", Dimension::count, true,
     "share of the peak fused attention's matrix products reach between softmax steps"},
    {"special_function_rate", Dimension::flop_rate, false, "exponentials per second (SFU/MUFU) for the softmax"},
    {"attention_block", Dimension::count, false, "query and key rows per block of fused attention"},
    {"attention_block_overhead", Dimension::count, false,
     "fixed cost of one query block of fused attention, in KV blocks (loading Q, writing O)"},
    {"attention_backward_efficiency", Dimension::count, true,
     "fused attention's backward efficiency relative to its forward"},
    {"comm_compute_slowdown", Dimension::count, false,
     "extra share of time compute takes while a collective or transfer of its GPU runs (NCCL kernels take SMs and "
     "memory bandwidth)"},
    // Host costs of eager PyTorch (HostModel.hpp), fitted from profiler traces (HostFit.hpp). A forward op
    // is one top-level aten op with the Python up to the next one; a backward one, one autograd node.
    // Eager PyTorch's own kernels against the microbenchmarks' (EagerFit.hpp), fitted from profiler traces.
    {"memory_efficiency_strided", Dimension::count, true,
     "share of the pointwise microbenchmark's bandwidth a strided or mixed-dtype copy reaches (PyTorch's unrolled "
     "loop)"},
    {"memory_efficiency_broadcast", Dimension::count, true,
     "share of the pointwise microbenchmark's bandwidth an elementwise kernel over broadcast operands reaches"},
    {"memory_efficiency_dropout", Dimension::count, true,
     "share of the pointwise microbenchmark's bandwidth a dropout kernel reaches (random numbers drawn in it)"},
    {"memory_efficiency_norm", Dimension::count, true,
     "share of the pointwise microbenchmark's bandwidth a layer or batch norm kernel reaches"},
    {"memory_efficiency_reduction", Dimension::count, true,
     "share of the pointwise microbenchmark's bandwidth a softmax, log-softmax or sum reaches"},
    {"gemm_unaligned_efficiency", Dimension::count, true,
     "share of the dense peak a GEMM with a leading dimension off 16 bytes reaches (cuBLAS's unaligned kernels)"},
    {"host_forward_gemm_s", Dimension::time, false, "host time of a forward GEMM op (linear, addmm, mm, bmm, matmul)"},
    {"host_forward_conv_s", Dimension::time, false, "host time of a forward convolution op (conv2d)"},
    {"host_forward_norm_s", Dimension::time, false,
     "host time of a forward normalisation op (layer_norm, batch_norm, group_norm, rms_norm)"},
    {"host_forward_elementwise_s", Dimension::time, false,
     "host time of a forward elementwise or other op (add, mul, gelu, dropout, to, cat, ...)"},
    {"host_forward_view_s", Dimension::time, false,
     "host time of a forward view op (view, reshape, transpose, split, slice, expand, flatten, ...)"},
    {"host_forward_reduction_s", Dimension::time, false,
     "host time of a forward reduction op (softmax, cross_entropy_loss, mean, sum, pooling)"},
    {"host_forward_gather_s", Dimension::time, false,
     "host time of a forward gather op (embedding, index_select, gather)"},
    {"host_backward_gemm_s", Dimension::time, false,
     "host time of a GEMM's autograd node (AddmmBackward0, MmBackward0, BmmBackward0)"},
    {"host_backward_conv_s", Dimension::time, false,
     "host time of a convolution's autograd node (ConvolutionBackward0)"},
    {"host_backward_norm_s", Dimension::time, false,
     "host time of a normalisation's autograd node (NativeLayerNormBackward0, CudnnBatchNormBackward0)"},
    {"host_backward_elementwise_s", Dimension::time, false,
     "host time of an elementwise or other autograd node (AddBackward0, ToCopyBackward0, ...)"},
    {"host_backward_view_s", Dimension::time, false,
     "host time of a view's autograd node (ViewBackward0, TransposeBackward0, ...)"},
    {"host_backward_reduction_s", Dimension::time, false,
     "host time of a reduction's autograd node (SoftmaxBackward0, NllLossBackward0, pooling)"},
    {"host_backward_gather_s", Dimension::time, false, "host time of a gather's autograd node (EmbeddingBackward0)"},
    {"host_accumulate_s", Dimension::time, false, "host time of one AccumulateGrad node (a parameter's gradient)"},
    {"host_optimizer_tensor_s", Dimension::time, false,
     "host time of optimizer.step (fused AdamW) and zero_grad, per parameter tensor"},
    {"host_compiled_graph_s", Dimension::time, false,
     "host time of one call into a torch.compile'd graph (guards, AOTAutograd's wrapper), forward or backward"},
    {"host_compiled_kernel_s", Dimension::time, false,
     "host time of one kernel launched by Inductor's generated wrapper (Triton launcher or extern kernel)"},
    {"host_graph_replay_s", Dimension::time, false,
     "host time of replaying one compiled graph as a CUDA graph (cudagraph trees' checks and cudaGraphLaunch)"},
    {"host_profiler_event_s", Dimension::time, false,
     "host time the PyTorch profiler adds per recorded event (removed from the other host costs)"},
}};

constexpr EnumTable<ProfileKind, 2> kind_table{{{
    {"analytic", ProfileKind::analytic, "spec-sheet or assumed values, not measured"},
    {"measured", ProfileKind::measured, "fitted from measurements on a real device"},
}}};

std::string si_unit(Dimension d)
{
  switch (d) {
  case Dimension::flop_rate: return "flop/s";
  case Dimension::bandwidth: return "B/s";
  case Dimension::time: return "s";
  case Dimension::bytes: return "B";
  case Dimension::flop: return "flop";
  case Dimension::count: return "1";
  }
  return "1";
}

KernelTable parse_kernel_table(const YAML::Node& node, const std::string& path, Diagnostics& diags)
{
  YamlMap t(node, path, diags);
  KernelTable table;
  table.op = t.required_string("op");
  constexpr std::array ops{"gemm", "batched_gemm", "conv2d", "pointwise", "copy_d2d", "copy_h2d", "copy_d2h"};
  if (std::find(ops.begin(), ops.end(), table.op) == ops.end() && t.has("op"))
    t.report("op", "unknown op '" + table.op + "' (expected gemm, batched_gemm, conv2d, pointwise, copy_d2d, copy_h2d or copy_d2h)");
  table.dtype = t.string("dtype", "");
  if (is_compute_op(table.op) && !dtype_table.parse(table.dtype))
    t.report("dtype", "a compute op's table needs a dtype (" + dtype_table.names() + ")");
  table.source = t.string("source", "");
  table.held_out_error = t.quantity("held_out_error", Dimension::count, -1.0, Bound::non_negative);
  table.max_held_out_error = t.quantity("max_held_out_error", Dimension::count, -1.0, Bound::non_negative);
  table.grid_held_out_error = t.quantity("grid_held_out_error", Dimension::count, -1.0, Bound::non_negative);
  table.max_grid_held_out_error = t.quantity("max_grid_held_out_error", Dimension::count, -1.0, Bound::non_negative);
  const YAML::Node points = t.node("points");
  if (!points.IsSequence() || points.size() < 2) {
    t.report("points", "expected a list of at least 2 [work, seconds] pairs");
  } else {
    for (std::size_t i = 0; i < points.size(); ++i) {
      const YAML::Node& p = points[i];
      double work = 0, seconds = 0;
      bool ok = p.IsSequence() && p.size() == 2 && p[0].IsScalar() && p[1].IsScalar() &&
                YAML::convert<double>::decode(p[0], work) && YAML::convert<double>::decode(p[1], seconds);
      if (!ok || !(work > 0) || !(seconds > 0) || !std::isfinite(work) || !std::isfinite(seconds)) {
        diags.error(p, t.key_path("points") + "[" + std::to_string(i) + "]", "expected [work, seconds], both positive numbers");
        continue;
      }
      if (!table.points.empty() && work <= table.points.back().work) {
        diags.error(p, t.key_path("points") + "[" + std::to_string(i) + "]", "work must increase from one point to the next");
        continue;
      }
      table.points.push_back({work, seconds, {}});
    }
  }
  if (auto shapes = t.map("shapes")) {
    for (auto it = shapes->yaml().begin(); it != shapes->yaml().end(); ++it) {
      const std::string key = it->first.Scalar();
      double seconds = 0;
      if (!it->second.IsScalar() || !YAML::convert<double>::decode(it->second, seconds) || !(seconds > 0) || !std::isfinite(seconds)) {
        shapes->report(key, "expected the shape's time in seconds, a positive number");
        continue;
      }
      table.shapes[key] = seconds;
    }
  }
  t.check_unknown_keys();
  return table;
}

}  // namespace

std::span<const ParameterSpec> parameter_specs() { return specs; }

const Parameter* CalibrationProfile::find(const std::string& parameter) const
{
  auto it = parameters.find(parameter);
  return it == parameters.end() ? nullptr : &it->second;
}

double CalibrationProfile::value(const std::string& parameter) const
{
  if (const Parameter* p = find(parameter))
    return p->value;
  throw CalibrationError("calibration profile '" + name + "' has no parameter '" + parameter + "'");
}

double CalibrationProfile::sustained_peak(Dtype dtype) const
{
  const Parameter* peak = find("peak_flops_" + std::string(dtype_table.name(dtype)));
  const Parameter* clock = find("sustained_clock");
  return peak ? peak->value * (clock ? clock->value : 1.0) : 0.0;
}

CalibrationProfile parse_profile(YamlMap& top)
{
  CalibrationProfile profile;
  profile.name = top.required_string("name");
  profile.kind = top.choice("kind", kind_table, ProfileKind::analytic);
  profile.device = top.string("device", "");
  top.string("description");
  if (auto prov = top.map("provenance")) {
    for (auto it = prov->yaml().begin(); it != prov->yaml().end(); ++it) {
      const std::string key = it->first.Scalar();
      if (auto text = prov->string(key))
        profile.provenance[key] = *text;
    }
  }
  if (auto params = top.map("parameters")) {
    for (const auto& spec : specs) {
      const std::string key(spec.name);
      auto entry = params->map(key);
      if (!entry)
        continue;
      Parameter p;
      p.name = key;
      p.unit = si_unit(spec.dimension);
      // A fitted per-kernel overhead may be 0 (the fit clamps it there); every other value is positive.
      const bool may_be_zero = key == "kernel_overhead" || key == "kernel_launch_floor" || key == "gemm_pipeline_steps" ||
                               key == "attention_block_overhead" || key == "comm_compute_slowdown" ||
                               key.starts_with("host_");  // a host cost after the profiler's share is removed
      auto v = entry->quantity("value", spec.dimension, may_be_zero ? Bound::non_negative : Bound::positive);
      if (!entry->has("value"))
        entry->report("value", "missing required key");
      if (v && spec.is_fraction && *v > 1.0)
        entry->report("value", "a fraction must lie in (0, 1]");
      p.value = v.value_or(0.0);
      p.description = entry->string("description", std::string(spec.help));
      p.source = entry->string("source", "");
      entry->check_unknown_keys();
      profile.parameters.emplace(key, std::move(p));
    }
    params->check_unknown_keys();
  } else {
    top.report("parameters", "missing required key");
  }
  if (auto tiles = top.map("gemm_tiles")) {
    const YAML::Node list = tiles->node("tiles");
    if (!list.IsSequence() || list.size() == 0) {
      tiles->report("tiles", "expected a non-empty list of [rows, columns] output tiles, e.g. [[128, 256], [128, 128]]");
    } else {
      for (std::size_t i = 0; i < list.size(); ++i) {
        const YAML::Node& t = list[i];
        long long m = 0, n = 0;
        const bool ok = t.IsSequence() && t.size() == 2 && t[0].IsScalar() && t[1].IsScalar() &&
                        YAML::convert<long long>::decode(t[0], m) && YAML::convert<long long>::decode(t[1], n) &&
                        m >= 1 && n >= 1 && m <= 4096 && n <= 4096;
        if (!ok) {
          tiles->diagnostics().error(t, tiles->key_path("tiles") + "[" + std::to_string(i) + "]",
                                     "expected [rows, columns], two whole numbers from 1 to 4096");
          continue;
        }
        profile.gemm_tiles.tiles.push_back({static_cast<int>(m), static_cast<int>(n)});
      }
    }
    profile.gemm_tiles.source = tiles->string("source", "");
    profile.gemm_tiles.description = tiles->string("description", "");
    tiles->check_unknown_keys();
    for (const char* needed : {"sm_count", "gemm_efficiency", "gemm_tile_k_bytes", "gemm_pipeline_steps", "gemm_tile_intensity"})
      if (!profile.find(needed))
        top.report("gemm_tiles", std::string("the shape-aware GEMM model needs parameters.") + needed);
  }
  const YAML::Node curves = top.node("collectives");
  if (curves.IsDefined()) {
    if (!curves.IsSequence()) {
      top.report("collectives", "expected a list of fitted collectives");
    } else {
      for (std::size_t i = 0; i < curves.size(); ++i) {
        YamlMap c(curves[i], top.key_path("collectives") + "[" + std::to_string(i) + "]", top.diagnostics());
        CollectiveCurve curve;
        curve.collective = c.required_string("collective");
        curve.group_size = static_cast<int>(c.integer("group_size", 0, 0, 1 << 20));
        curve.nodes = static_cast<int>(c.integer("nodes", 0, 0, 1 << 20));
        curve.source = c.string("source", "");
        curve.held_out_error = c.quantity("held_out_error", Dimension::count, -1.0, Bound::non_negative);
        const YAML::Node regimes = c.node("regimes");
        if (!regimes.IsSequence() || regimes.size() == 0) {
          c.report("regimes", "expected a non-empty list of {min_bytes, max_bytes, alpha, bandwidth}");
        } else {
          for (std::size_t r = 0; r < regimes.size(); ++r) {
            YamlMap m(regimes[r], c.key_path("regimes") + "[" + std::to_string(r) + "]", top.diagnostics());
            AlphaBetaFit f;
            f.min_bytes = m.quantity("min_bytes", Dimension::bytes, 0.0, Bound::non_negative);
            f.max_bytes = m.required_quantity("max_bytes", Dimension::bytes, Bound::non_negative);
            f.alpha_s = m.quantity("alpha", Dimension::time, 0.0, Bound::non_negative);
            f.bandwidth = m.required_quantity("bandwidth", Dimension::bandwidth);
            f.r2 = m.quantity("r2", Dimension::count, 0.0, Bound::any);
            f.points = static_cast<int>(m.integer("points", 0, 0, 1 << 30));
            f.max_relative_error = m.quantity("max_relative_error", Dimension::count, 0.0, Bound::non_negative);
            m.check_unknown_keys();
            curve.regimes.push_back(f);
          }
        }
        c.check_unknown_keys();
        profile.collectives.push_back(std::move(curve));
      }
    }
  }
  const YAML::Node tables = top.node("kernel_tables");
  if (tables.IsDefined()) {
    if (!tables.IsSequence()) {
      top.report("kernel_tables", "expected a list of {op, dtype, points}");
    } else {
      for (std::size_t i = 0; i < tables.size(); ++i)
        profile.kernel_tables.push_back(
            parse_kernel_table(tables[i], top.key_path("kernel_tables") + "[" + std::to_string(i) + "]", top.diagnostics()));
    }
  }
  top.check_unknown_keys();
  return profile;
}

const AlphaBetaFit& CollectiveCurve::regime(double bytes) const
{
  const AlphaBetaFit* f = &regimes.front();
  for (const auto& r : regimes)
    if (bytes >= r.min_bytes)
      f = &r;
  return *f;
}

double CollectiveCurve::seconds(double bytes) const { return regimes.empty() ? 0.0 : regime(bytes).seconds(bytes); }

const CollectiveCurve* CalibrationProfile::find_collective(const std::string& collective, int group_size) const
{
  for (const auto& c : collectives)
    if (c.collective == collective && c.group_size == group_size && !c.regimes.empty())
      return &c;
  return nullptr;
}

std::optional<CalibrationProfile::MeasuredTime> CalibrationProfile::measured_time(const std::string& collective,
                                                                                 int group_size, int nodes,
                                                                                 double bytes) const
{
  const bool spans = nodes > 1;
  const CollectiveCurve* below = nullptr;
  const CollectiveCurve* above = nullptr;
  auto at = [&](const CollectiveCurve& c) {
    const AlphaBetaFit& r = c.regime(bytes);
    return std::pair{r.alpha_s, r.bandwidth > 0 ? bytes / r.bandwidth : 0.0};
  };
  auto where = [](const CollectiveCurve& c) {
    return c.spans_nodes() ? " on " + std::to_string(c.nodes) + " nodes" : std::string(" on 1 node");
  };
  for (const auto& c : collectives) {
    if (c.collective != collective || c.regimes.empty() || c.spans_nodes() != spans)
      continue;
    if (c.group_size == group_size && (!spans || c.nodes == nodes)) {
      const auto [alpha, transfer] = at(c);
      return MeasuredTime{alpha, transfer, collective + " x" + std::to_string(group_size) + where(c)};
    }
    if (c.group_size < group_size && (!below || c.group_size > below->group_size))
      below = &c;
    if (c.group_size > group_size && (!above || c.group_size < above->group_size))
      above = &c;
  }
  if (!below || !above)
    return std::nullopt;
  const double w = static_cast<double>(group_size - below->group_size) / (above->group_size - below->group_size);
  const auto [a0, t0] = at(*below);
  const auto [a1, t1] = at(*above);
  return MeasuredTime{(1 - w) * a0 + w * a1, (1 - w) * t0 + w * t1,
                      collective + " x" + std::to_string(below->group_size) + ".." + std::to_string(above->group_size) +
                          (spans ? " across nodes" : " on 1 node") + ", interpolated"};
}

void write_profile(const CalibrationProfile& p, std::ostream& out)
{
  auto q = [](const std::string& s) {
    std::string r = "\"";
    for (char c : s)
      r += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return r + "\"";
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return std::string(buf);
  };
  out << "name: " << q(p.name) << "\n";
  out << "kind: " << (p.kind == ProfileKind::measured ? "measured" : "analytic") << "\n";
  if (!p.device.empty())
    out << "device: " << q(p.device) << "\n";
  if (!p.provenance.empty()) {
    out << "provenance:\n";
    for (const auto& [k, v] : p.provenance)
      out << "  " << k << ": " << q(v) << "\n";
  }
  // Every quantity with its SI unit, as input files must carry units (common/Units.hpp).
  auto with_unit = [&](double v, Dimension dimension) { return num(v) + std::string(unit_suffix(dimension)); };
  out << "parameters:\n";
  for (const auto& [name, param] : p.parameters) {
    Dimension dimension = Dimension::count;
    for (const ParameterSpec& spec : parameter_specs())
      if (spec.name == name)
        dimension = spec.dimension;
    out << "  " << name << ": {value: " << with_unit(param.value, dimension) << ", source: " << q(param.source)
        << ", description: " << q(param.description) << "}\n";
  }
  if (!p.gemm_tiles.tiles.empty()) {
    out << "gemm_tiles:\n  tiles: [";
    for (std::size_t i = 0; i < p.gemm_tiles.tiles.size(); ++i)
      out << (i ? ", " : "") << "[" << p.gemm_tiles.tiles[i].m << ", " << p.gemm_tiles.tiles[i].n << "]";
    out << "]\n  source: " << q(p.gemm_tiles.source) << "\n  description: " << q(p.gemm_tiles.description) << "\n";
  }
  if (!p.collectives.empty()) {
    out << "collectives:\n";
    for (const auto& c : p.collectives) {
      out << "  - collective: " << c.collective << "\n    group_size: " << c.group_size << "\n";
      if (c.nodes > 0)
        out << "    nodes: " << c.nodes << "\n";
      out << "    source: " << q(c.source) << "\n";
      if (c.held_out_error >= 0)
        out << "    held_out_error: " << num(c.held_out_error) << "\n";
      out << "    regimes:\n";
      for (const auto& r : c.regimes)
        out << "      - {min_bytes: " << with_unit(r.min_bytes, Dimension::bytes)
            << ", max_bytes: " << with_unit(r.max_bytes, Dimension::bytes)
            << ", alpha: " << with_unit(r.alpha_s, Dimension::time)
            << ", bandwidth: " << with_unit(r.bandwidth, Dimension::bandwidth) << ", r2: " << num(r.r2)
            << ", points: " << r.points << ", max_relative_error: " << num(r.max_relative_error) << "}\n";
    }
  }
  if (!p.kernel_tables.empty()) {
    out << "kernel_tables:            # [work, seconds]; work is flop for compute ops, bytes for memory ops\n";
    for (const auto& t : p.kernel_tables) {
      out << "  - op: " << t.op << "\n";
      if (!t.dtype.empty())
        out << "    dtype: " << t.dtype << "\n";
      out << "    source: " << q(t.source) << "\n";
      if (t.held_out_error >= 0)
        out << "    held_out_error: " << num(t.held_out_error) << "\n    max_held_out_error: " << num(t.max_held_out_error) << "\n";
      if (t.grid_held_out_error >= 0)
        out << "    grid_held_out_error: " << num(t.grid_held_out_error) << "\n    max_grid_held_out_error: "
            << num(t.max_grid_held_out_error) << "\n";
      if (!t.shapes.empty()) {
        out << "    shapes:                # seconds of each measured shape\n";
        for (const auto& [shape, seconds] : t.shapes)
          out << "      " << q(shape) << ": " << num(seconds) << "\n";
      }
      out << "    points: [";
      for (std::size_t i = 0; i < t.points.size(); ++i)
        out << (i ? "," : "") << (i % 4 == 0 ? "\n      " : " ") << "[" << num(t.points[i].work) << ", " << num(t.points[i].seconds) << "]";
      out << "]\n";
    }
  }
}

CalibrationProfile load_profile_file(const std::filesystem::path& path)
{
  return parse_yaml_file(path.string(), [](YamlMap& map) { return parse_profile(map); });
}

CalibrationProfile load_profile(const std::string& name_or_path)
{
  return load_profile_file(resolve_input_or_throw(name_or_path, "calibration/profiles", "calibration"));
}

}  // namespace ddlsim::calibration
