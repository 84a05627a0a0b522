// Error hierarchy of ddlsim. Library code never prints and never exits: it throws one of these and
// only main() turns them into a message and an exit code (1 for bad input, 2 for usage).
//
//   try { auto exp = experiments::load_experiment("exp.yaml"); }
//   catch (const ddlsim::ConfigError& e) { for (auto& d : e.diagnostics()) std::cerr << d.to_string(); }
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ddlsim {

/// Base of every error ddlsim throws on purpose.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One problem found in an input file: where it is (file, 1-based line, dotted key) and what is wrong.
struct Diagnostic {
  std::string file;  ///< path as given by the user, or an origin such as "--set training.micro_batch=3"
  int line = 0;      ///< 1-based; 0 when unknown
  std::string key;   ///< dotted YAML path, e.g. "parallelism.pp"; empty for whole-file problems
  std::string message;

  /// "file:line: key: message" (parts that are unknown are left out).
  std::string to_string() const;
};

/// Bad input (experiment, model, cluster or profile file). Carries every problem found, not just the first.
class ConfigError : public Error {
public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  ConfigError(std::string file, int line, std::string key, std::string message);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

private:
  std::vector<Diagnostic> diagnostics_;
};

/// Malformed or unreadable trace (Kineto JSON, CUPTI JSONL, nccl-tests output).
class TraceError : public Error {
public:
  using Error::Error;
};

/// A calibration profile that cannot be used (missing parameter, unit mismatch).
class CalibrationError : public Error {
public:
  using Error::Error;
};

/// The simulation itself failed (engine misuse, inconsistent task graph).
class SimulationError : public Error {
public:
  using Error::Error;
};

/// Real execution failed or cannot start (no device, too few devices, a kernel or NCCL error).
class ExecutionError : public Error {
public:
  using Error::Error;
};

}  // namespace ddlsim
