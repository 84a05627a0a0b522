#include "calibration/Profile.hpp"

#include "common/DataPath.hpp"
#include "common/EnumTable.hpp"
#include "common/Error.hpp"
#include "common/YamlReader.hpp"

#include <array>

namespace ddlsim::calibration {
namespace {

constexpr std::array<ParameterSpec, 9> specs{{
    {"peak_flops_fp32", Dimension::flop_rate, false, "peak FP32 rate (CUDA cores)"},
    {"peak_flops_tf32", Dimension::flop_rate, false, "peak dense TF32 tensor-core rate"},
    {"peak_flops_fp16", Dimension::flop_rate, false, "peak dense FP16 tensor-core rate"},
    {"peak_flops_bf16", Dimension::flop_rate, false, "peak dense BF16 tensor-core rate"},
    {"peak_flops_fp8", Dimension::flop_rate, false, "peak dense FP8 tensor-core rate"},
    {"compute_efficiency", Dimension::count, true, "fraction of the peak rate that layer kernels reach"},
    {"memory_bandwidth", Dimension::bandwidth, false, "device memory bandwidth"},
    {"memory_efficiency", Dimension::count, true, "fraction of the memory bandwidth that kernels reach"},
    {"kernel_overhead", Dimension::time, false, "fixed time per kernel (launch gap between back-to-back kernels)"},
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
      auto v = entry->quantity("value", spec.dimension, Bound::positive);
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
  top.check_unknown_keys();
  return profile;
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
