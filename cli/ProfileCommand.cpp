// ddlsim profile gemm|attention: a kernel's predicted time on a profile's GPU (calibration/KernelModel.hpp).
#include "calibration/KernelModel.hpp"
#include "calibration/Profile.hpp"
#include "cli/Commands.hpp"
#include "common/Dtype.hpp"

#include <fmt/core.h>

#include <string>
#include <vector>

namespace ddlsim::cli {

namespace {

struct ProfileKernelArgs {
  std::string profile, dtype = "bf16";
  std::vector<long long> dims; // M N K, or HEADS SEQ HEAD_DIM
  long long batch = 1;
  bool causal = false, backward = false;
};

int cmd_profile_gemm(const ProfileKernelArgs& a)
{
  if (a.dims.size() != 3)
    throw UsageError{"profile gemm needs PROFILE M N K"};
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  const calibration::CalibrationProfile profile = calibration::load_profile(a.profile);
  auto us                                       = [](double s) { return s * 1e6; };
  const calibration::GemmDims dims{.m     = static_cast<double>(a.dims[0]),
                                   .n     = static_cast<double>(a.dims[1]),
                                   .k     = static_cast<double>(a.dims[2]),
                                   .batch = static_cast<double>(a.batch)};
  const calibration::GemmEstimate e = calibration::estimate_gemm(profile, dims, *dtype);
  fmt::print("gemm {} m={} n={} k={} batch={} on {}\n", a.dtype, a.dims[0], a.dims[1], a.dims[2], a.batch,
             profile.name);
  fmt::print("time_us {:.3f}\nflop_per_s {:.6g}\nefficiency {:.4f}\nbound {}\n", us(e.seconds), e.flop / e.seconds,
             e.efficiency, calibration::kernel_bound_name(e.bound));
  if (e.ctas > 0)
    fmt::print("tile {}x{}, split-K {}: {} CTAs in {} wave(s) on {:g} SMs; compute {:.3f} us, memory {:.3f} us{}\n",
               e.tile.m, e.tile.n, e.split_k, e.ctas, e.waves, profile.value("sm_count"), us(e.compute_s),
               us(e.memory_s), e.split_k > 1 ? fmt::format(", split-K reduction {:.3f} us", us(e.split_s)) : "");
  else if (!profile.gemm_tiles.tiles.empty())
    fmt::print("matrix-vector kernel (at most {:g} rows or columns): compute {:.3f} us, memory {:.3f} us\n",
               profile.value("gemv_max_rows"), us(e.compute_s), us(e.memory_s));
  else
    fmt::print("flat roofline (the profile lists no gemm_tiles): compute {:.3f} us, memory {:.3f} us\n",
               us(e.compute_s), us(e.memory_s));
  return exit_ok;
}

int cmd_profile_attention(const ProfileKernelArgs& a)
{
  if (a.dims.size() != 3)
    throw UsageError{"profile attention needs PROFILE HEADS SEQ HEAD_DIM"};
  const auto dtype = dtype_table.parse(a.dtype);
  if (!dtype)
    throw UsageError{"--dtype expects one of " + dtype_table.names()};
  const calibration::CalibrationProfile profile = calibration::load_profile(a.profile);
  const std::string peak_name                   = "peak_flops_" + a.dtype;
  const double peak                             = profile.find(peak_name) ? profile.value(peak_name) : 0.0;
  const calibration::AttentionDims dims{.heads    = static_cast<double>(a.dims[0]),
                                        .q        = static_cast<double>(a.dims[1]),
                                        .kv       = static_cast<double>(a.dims[1]),
                                        .head_dim = static_cast<double>(a.dims[2]),
                                        .causal   = a.causal,
                                        .backward = a.backward};
  const calibration::AttentionEstimate e = calibration::estimate_attention(profile, dims, *dtype);
  fmt::print("attention {} {} heads={} seq={} head_dim={}{} on {}\n", a.backward ? "backward" : "forward", a.dtype,
             a.dims[0], a.dims[1], a.dims[2], a.causal ? " causal" : "", profile.name);
  fmt::print("time_us {:.3f}\nflop_per_s {:.6g}\nefficiency {:.4f}\nbound {}\n", e.seconds * 1e6, e.efficiency * peak,
             e.efficiency, calibration::kernel_bound_name(e.bound));
  return exit_ok;
}

} // namespace

void add_profile_commands(CommandTable& table)
{
  CLI::App& root    = table.root();
  CLI::App* profile = root.add_subcommand("profile", "a kernel's predicted time on a profile's GPU");
  profile->require_subcommand(1);
  auto dimensions = [](CLI::App* app, ProfileKernelArgs& a, const char* names) {
    app->add_option("PROFILE", a.profile, "a shipped profile or a file")->required()->type_name("");
    app->add_option("DIMS", a.dims, names)->required()->check(CLI::Range(1LL, 1LL << 40))->type_name(names);
    app->add_option("--dtype", a.dtype, "element type (default bf16)")->type_name("DTYPE");
  };
  auto g = table.add<ProfileKernelArgs>(
      *profile, "gemm", "one GEMM C[M x N] = A[M x K] B[K x N]: time, flop/s, efficiency and why", cmd_profile_gemm);
  g.app->footer("Efficiency is the share of the dtype's dense peak; the why is the tile, split-K and waves over the "
                "SMs, or the memory and launch floor. docs/kernels.md");
  dimensions(g.app, g.args, "M N K");
  cli::add_int(g.app, "--batch", g.args.batch, 1, 1LL << 40, "a batched GEMM of B such products (default 1)");
  auto at = table.add<ProfileKernelArgs>(
      *profile, "attention", "a fused attention kernel (FlashAttention): HEADS x SEQ queries against SEQ keys",
      cmd_profile_attention);
  at.app->footer("HEADS is micro-batch x heads, each of SEQ queries and keys of HEAD_DIM. docs/kernels.md");
  dimensions(at.app, at.args, "HEADS SEQ HEAD_DIM");
  at.app->add_flag("--causal", at.args.causal, "a causal mask (half the square)");
  at.app->add_flag("--backward", at.args.backward, "the backward kernel");
}

} // namespace ddlsim::cli
