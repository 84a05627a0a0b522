// Calibration profiles: named parameters with unit, description and provenance, read from YAML.
//
//   name: h100-sxm
//   kind: analytic                    # analytic = spec-sheet values, measured = fitted from traces
//   device: NVIDIA H100 80GB HBM3 (SXM5)
//   provenance: {source: "NVIDIA H100 datasheet", date: 2026-11-21}
//   parameters:
//     peak_flops_bf16: {value: 989.4TFlops, description: "dense BF16 tensor-core peak", source: datasheet}
//     memory_bandwidth: {value: 3.35TBps, description: "HBM3 bandwidth", source: datasheet}
//
//   collectives:                      # fitted by `ddlsim calibrate fit` (Fitter.hpp)
//     - collective: all_reduce
//       group_size: 8
//       nodes: 1                        # machines the measured group spanned (absent: one)
//       source: "all_reduce_8gpu.txt"
//       held_out_error: 0.012           # median relative error on held-out points
//       regimes:                        # t = alpha + bytes / bandwidth within [min_bytes, max_bytes]
//         - {min_bytes: 8, max_bytes: 65536, alpha: 1.2e-05, bandwidth: 2.1e+09, r2: 0.998, points: 14,
//            max_relative_error: 0.03}
//
//   gemm_tiles:                       # shape-aware kernel costs (KernelModel.hpp), with sm_count, gemm_* parameters
//     tiles: [[128, 256], [256, 128], [128, 128], [64, 128]]
//     source: "CUTLASS 3 sm90 kernel tile shapes"
//
//   kernel_tables:                    # measured microbenchmarks (KernelTable.hpp), [work, seconds] pairs
//     - {op: gemm, dtype: bf16, source: "h100.jsonl", held_out_error: 0.02, points: [[2.1e9, 1.1e-05], ...]}
//
// Parameter names are fixed by a table (parameter_specs()) that also gives each one's dimension,
// so "memory_bandwidth: 3.35TFlops" is an error naming the file, line and key.
#pragma once

#include "calibration/Fitter.hpp"
#include "calibration/KernelTable.hpp"
#include "common/Dtype.hpp"
#include "common/Units.hpp"
#include "common/YamlReader.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <vector>
#include <span>
#include <string>

namespace ddlsim::calibration {

enum class ProfileKind { analytic, measured };

/// One calibration parameter, SI value inside.
struct Parameter {
  std::string name;
  double value = 0;         ///< SI: flop/s, B/s, s, or dimensionless
  std::string unit;         ///< SI unit of `value` ("flop/s", "B/s", "s", "1")
  std::string description;  ///< what it means
  std::string source;       ///< where the number comes from (datasheet, trace file, fit)
};

struct ParameterSpec {
  std::string_view name;
  Dimension dimension;
  bool is_fraction;  ///< dimensionless value in (0, 1]
  std::string_view help;
};

/// Every parameter a profile may hold.
std::span<const ParameterSpec> parameter_specs();

/// Measured times of one collective and group size, fitted per size regime.
struct CollectiveCurve {
  std::string collective;  ///< all_reduce, all_gather, ...
  int group_size = 0;
  /// Machines the measured group spanned: 1 inside one node, more across nodes; 0 unknown (profiles
  /// written before the key existed), taken as one node.
  int nodes = 0;
  bool spans_nodes() const { return nodes > 1; }
  std::string source;      ///< the traces it was fitted from
  double held_out_error = -1;  ///< median relative error on held-out sizes; -1 when too few sizes
  std::vector<AlphaBetaFit> regimes;
  /// The regime that covers `bytes` (the nearest one outside the measured range). Needs regimes.
  const AlphaBetaFit& regime(double bytes) const;
  /// Time for `bytes`, from regime(bytes); 0 without regimes.
  double seconds(double bytes) const;
};

/// One output tile of a GEMM kernel: rows x columns of C that one CTA computes.
struct GemmTile {
  int m = 0;
  int n = 0;
};

/// The GEMM output tiles a device's libraries choose from (cuBLAS, CUTLASS): the shape-aware kernel
/// model (KernelModel.hpp) is on when a profile lists them.
struct GemmTiles {
  std::vector<GemmTile> tiles;
  std::string source;       ///< where the list comes from
  std::string description;
};

struct CalibrationProfile {
  std::string name;
  ProfileKind kind = ProfileKind::analytic;
  std::string device;
  std::map<std::string, std::string> provenance;  ///< source, date, driver, command, ... as written
  std::map<std::string, Parameter> parameters;    ///< by name, sorted
  std::vector<CollectiveCurve> collectives;       ///< measured collectives (measured profiles)
  std::vector<KernelTable> kernel_tables;         ///< measured op tables (measured profiles)
  GemmTiles gemm_tiles;                           ///< shape-aware kernel costs when not empty

  const Parameter* find(const std::string& parameter) const;
  /// The fitted curve of `collective` (all_reduce, ...) over `group_size` ranks, or nullptr.
  const CollectiveCurve* find_collective(const std::string& collective, int group_size) const;
  /// The measured time of `collective` over a group of `group_size` GPUs on `nodes` nodes for
  /// `bytes`, as alpha + transfer: from the curve of that group size and spread (one node, or across
  /// nodes: a curve measured inside one node never times a group that spans nodes, nor the other way
  /// round), else interpolated linearly in group size between the nearest measured sizes of the same
  /// spread on either side; nullopt when none matches (the links time it). `how` says which.
  struct MeasuredTime {
    double alpha_s = 0;
    double transfer_s = 0;
    std::string how;  ///< "all_reduce x8 on 1 node", or "all_reduce x16..x32 across nodes, interpolated"
  };
  std::optional<MeasuredTime> measured_time(const std::string& collective, int group_size, int nodes, double bytes) const;
  /// Value of a parameter; throws CalibrationError naming the profile when it is missing.
  double value(const std::string& parameter) const;
  /// The tensor-core (or CUDA-core, fp32) rate kernels of `dtype` compute at: peak_flops_<dtype> times
  /// sustained_clock (1 when absent); 0 when the profile has no peak for `dtype`.
  double sustained_peak(Dtype dtype) const;
};

/// Reads a profile from a YAML mapping, recording problems in the map's Diagnostics.
CalibrationProfile parse_profile(YamlMap& map);
/// Loads a profile file. Throws ConfigError (file:line: key: message) on any problem.
CalibrationProfile load_profile_file(const std::filesystem::path& path);
/// Loads a shipped profile by name (calibration/profiles/NAME.yaml) or a profile file by path.
CalibrationProfile load_profile(const std::string& name_or_path);
/// Writes a profile as YAML that load_profile_file reads back (values in SI units).
void write_profile(const CalibrationProfile& profile, std::ostream& out);

}  // namespace ddlsim::calibration
