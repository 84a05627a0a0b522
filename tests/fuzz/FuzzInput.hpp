// Shared by the fuzz targets: the fuzzer's bytes as a file, and the rule for what counts as a bug.
//
// Every loader under test reads a path (it also sniffs gzip and reports file:line), so each input
// is written to one file in a private temporary directory and loaded from there. A loader may
// refuse any input with a ddlsim::Error (ConfigError, TraceError, CalibrationError): that is the
// contract. Anything else (a crash, a sanitizer report, another exception type escaping, an
// allocation past libFuzzer's -malloc_limit_mb, a run past -timeout) is a bug.
//
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
//   {
//     return ddlsim::fuzz::refusing_is_fine([&] { models::load_model_file(fuzz::as_file(data, size, "model.yaml")); });
//   }
#pragma once

#include "common/Error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace ddlsim::fuzz {

/// Writes the input to `<private tmp dir>/<name>` (the same file every call) and returns its path.
inline std::string as_file(const std::uint8_t* data, std::size_t size, const std::string& name)
{
  static const std::string dir = [] {
    const char* base  = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/ddlsim-fuzz-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr)
      std::abort();
    return templ;
  }();
  const std::string path = dir + "/" + name;
  std::FILE* f           = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    std::abort(); // the harness itself failed, not the code under test
  return path;
}

/// Runs `load`; a ddlsim::Error is a refusal (fine), any other exception escapes and is a bug.
template <typename Load> int refusing_is_fine(Load load)
{
  try {
    load();
  } catch (const ddlsim::Error&) {
  }
  return 0;
}

} // namespace ddlsim::fuzz
