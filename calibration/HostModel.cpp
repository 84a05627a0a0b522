#include "calibration/HostModel.hpp"

#include <algorithm>
#include <cctype>

namespace ddlsim::calibration {
namespace {

// Names in their key form (key() below): lower case, no underscores, no namespace, no "Backward<N>".
constexpr std::string_view view_ops[] = {
    "view",        "viewas",     "reshape",      "reshapealias", "unsafeview", "permute",     "transpose",
    "t",           "numpyt",     "split",        "splitwithsizes", "unsafesplit", "unsafesplitwithsizes",
    "tensorsplit", "chunk",      "unsafechunk",  "unbind",       "slice",      "select",      "narrow",
    "unsqueeze",   "squeeze",    "expand",       "expandas",     "broadcastto", "flatten",    "unflatten",
    "detach",      "alias",      "asstrided",    "contiguous",   "diagonal",   "movedim",     "moveaxis",
    "swapaxes",    "swapdims",   "unfold",       "viewasreal",   "viewascomplex", "liftfresh", "resolveconj",
    "resolveneg"};
constexpr std::string_view gemm_ops[] = {"linear", "addmm", "mm", "bmm", "baddbmm", "matmul", "addbmm",
                                         "addmv",  "mv",    "dot", "einsum", "scaledmm"};
constexpr std::string_view reduction_ops[] = {"mean", "sum",    "nansum", "nanmean", "amax",      "amin",
                                              "max",  "min",    "argmax", "argmin",  "norm",      "linalgvectornorm",
                                              "var",  "std",    "varmean", "stdmean", "logsumexp", "prod",
                                              "all",  "any"};
constexpr std::string_view gather_ops[] = {"embedding", "embeddingbag", "embeddingdense", "indexselect",
                                           "gather",    "index",        "take"};

bool has(std::string_view key, std::string_view part) { return key.find(part) != std::string_view::npos; }

template <std::size_t N> bool listed(const std::string_view (&list)[N], std::string_view key)
{
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

// "autograd::engine::evaluate_function: NativeLayerNormBackward0" -> "nativelayernorm";
// "aten::_log_softmax" -> "logsoftmax"; "torch::autograd::AccumulateGrad" -> "accumulategrad".
std::string key(std::string_view name)
{
  if (const auto colon = name.find(": "); colon != std::string_view::npos)
    name.remove_prefix(colon + 2);  // the engine's wrapper
  if (const auto ns = name.rfind("::"); ns != std::string_view::npos)
    name.remove_prefix(ns + 2);
  std::string out;
  for (char c : name)
    if (c != '_')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t end = out.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(out[end - 1])))
    --end;
  constexpr std::string_view backward = "backward";
  if (end >= backward.size() && std::string_view(out).substr(end - backward.size(), backward.size()) == backward)
    out.resize(end - backward.size());
  return out;
}

}  // namespace

HostOpKind host_op_kind(std::string_view name)
{
  const std::string k = key(name);
  if (k == "accumulategrad")
    return HostOpKind::accumulate;
  if (listed(view_ops, k))
    return HostOpKind::view;
  if (listed(gemm_ops, k) || has(k, "attention") || k.starts_with("scaleddotproduct"))
    return HostOpKind::gemm;
  if (k.starts_with("conv") || has(k, "convolution"))
    return HostOpKind::conv;
  if (has(k, "layernorm") || has(k, "batchnorm") || has(k, "groupnorm") || has(k, "rmsnorm") || has(k, "instancenorm"))
    return HostOpKind::norm;
  if (listed(reduction_ops, k) || has(k, "softmax") || has(k, "pool") || has(k, "loss") || has(k, "crossentropy"))
    return HostOpKind::reduction;
  if (listed(gather_ops, k))
    return HostOpKind::gather;
  return HostOpKind::elementwise;
}

std::string_view host_kind_name(HostOpKind kind)
{
  switch (kind) {
  case HostOpKind::gemm: return "gemm";
  case HostOpKind::conv: return "conv";
  case HostOpKind::norm: return "norm";
  case HostOpKind::elementwise: return "elementwise";
  case HostOpKind::view: return "view";
  case HostOpKind::reduction: return "reduction";
  case HostOpKind::gather: return "gather";
  case HostOpKind::accumulate: return "accumulate";
  }
  return "elementwise";
}

std::string host_parameter(HostOpKind kind, bool backward)
{
  if (kind == HostOpKind::accumulate)
    return "host_accumulate_s";
  return std::string(backward ? "host_backward_" : "host_forward_") + std::string(host_kind_name(kind)) + "_s";
}

}  // namespace ddlsim::calibration
