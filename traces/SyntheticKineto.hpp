// A synthetic PyTorch profiler (Kineto) trace of a given size, for benchmarking the importer
// without shipping anyone's trace.
//
// The file has the structure of a real one (PyTorch 2.x on an 8-GPU data-parallel job):
// deviceProperties, distributedInfo, then per kernel launch a `cpu_op`, a `cuda_runtime`
// cudaLaunchKernel, the `ac2g` flow pair that ties them, and the `kernel` event with the args
// Kineto writes (External id, correlation, registers per thread, grid, block, ...). About one
// kernel in 25 is an NCCL kernel carrying Collective name, In msg nelems, Group size and dtype,
// with its `nccl:<op>` annotation (Input Dims, Input type); memcpys, memsets and fwdbwd flows are
// sprinkled in. Every number comes from a fixed-seed generator: the same size gives the same bytes.
//
//   SyntheticKineto s = write_synthetic_kineto("/tmp/trace.json.gz", 64e6, true);
//   import_kineto("/tmp/trace.json.gz").kernels.size() == s.kernels;
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddlsim::traces {

struct SyntheticKineto {
  std::uint64_t json_bytes = 0; ///< the JSON text's size (before compression)
  std::uint64_t file_bytes = 0; ///< the file's size on disk
  std::size_t events       = 0; ///< entries of traceEvents
  std::size_t kernels      = 0; ///< `kernel` events (all well-formed: the importer keeps them all)
  std::size_t collectives  = 0; ///< NCCL kernels plus `nccl:` annotations: the importer's collective records
};

/// Writes a trace of `json_bytes` bytes of JSON (to within one event, about 1 kB; at least the
/// header and one launch) to `path`, gzip-compressed when `gzip`. Throws TraceError when the file
/// cannot be written.
SyntheticKineto write_synthetic_kineto(const std::string& path, std::uint64_t json_bytes, bool gzip);

} // namespace ddlsim::traces
