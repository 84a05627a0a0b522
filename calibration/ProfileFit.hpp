// From measured trace records to a measured calibration profile (`ddlsim calibrate fit`).
//
// Starting from a base profile (the device's spec-sheet peaks and bandwidth), the fit adds:
//   collectives    per (collective, group size) with >= 3 distinct sizes: alpha-beta size regimes
//                  (Fitter.hpp) and their held-out error
//   kernel_tables  per microbenchmark op and dtype with >= 2 distinct work values: log-log lookup
//                  tables of the median time of each point (KernelTable.hpp)
//   compute_efficiency, memory_efficiency, kernel_overhead
//                  the roofline fit over every kernel record that knows its flop and bytes (copies
//                  aside), for work outside the tables
//   gemm_efficiency
//                  when the base profile has the shape-aware model (KernelModel.hpp): the value that
//                  makes it best predict the GEMM records that know their shape (least squares on log
//                  time), for GEMMs outside the tables
// A fit whose R^2 is below 0.9 (a collective's size regime, the roofline, the GEMM model) is refused
// unless `accept_poor_fit`; either way the notes say which kernel records carried no work, and why
// (KernelRecord::unusable, counted by reason).
// Repeated runs of one microbenchmark point (same "point" id) count once, at their median time. A run of several
// kernels counts their busy time (KernelRecord::busy_s), not its span: a CUDA graph runs them back to back.
// Parameters the records cannot determine keep the base profile's values and say so in `source`.
// Host records of PyTorch profiler traces add the host_* parameters (HostFit.hpp). The provenance's
// command is the records' import commands (their provenance's import_command) followed by the fit's.
//
//   FitResult fit = fit_profile(load_profile("h100-sxm"), read_jsonl("h100.jsonl"), {.name = "my-h100", ...});
//   for (const auto& note : fit.notes) std::cerr << note << "\n";   // what was not fitted, and why
#pragma once

#include "calibration/Profile.hpp"
#include "traces/TraceRecords.hpp"

#include <string>
#include <vector>

namespace ddlsim::calibration {

struct FitOptions {
  std::string name;        ///< the new profile's name
  std::string base;        ///< how the base profile was named (for provenance)
  std::string sources;     ///< the trace files, for provenance
  std::string command;     ///< the command line, for provenance
  std::string date;        ///< YYYY-MM-DD, for provenance (the caller's clock: the fit reads none)
  bool accept_poor_fit = false;  ///< write a fit whose R^2 is below min_r2 (with a note) instead of refusing it
  double min_r2 = 0.9;
};

struct FitResult {
  CalibrationProfile profile;
  std::vector<std::string> notes;  ///< one line per thing not fitted, and why
};

/// Fits `records` on top of `base`. Throws CalibrationError when the records hold nothing to fit, or
/// when a fit's R^2 is below options.min_r2 and !options.accept_poor_fit (the message names each poor
/// fit and the unusable records).
FitResult fit_profile(CalibrationProfile base, const traces::TraceSet& records, const FitOptions& options);

/// `base` as it is (tables, collectives, parameters and their sources, provenance), renamed
/// options.name, with the host parameters of `records` (HostFit.hpp) added or replaced: the host costs
/// of a PyTorch trace on top of a profile measured otherwise (`calibrate fit --host-only`). The
/// provenance's command becomes the records' import commands and the fit's; the base's is kept as
/// base_command. Throws CalibrationError when the records hold no host record.
FitResult fit_host_profile(CalibrationProfile base, const traces::TraceSet& records, const FitOptions& options);

}  // namespace ddlsim::calibration
