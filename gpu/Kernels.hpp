// The GPU library's own device kernels, the only code nvcc compiles (Kernels.cu): the memory-bound
// "pointwise" microbenchmark, and a fill that gives every benchmark operand non-trivial values (a GEMM
// over zeros draws less power and runs faster than one over real data, so zeros would flatter the GPU).
// Plain C++ declarations, so the rest of the library is compiled by the host compiler.
//
//   check_cuda(launch_fill(buffer, count, FillType::bf16, 1, stream), "filling A");
//   check_cuda(launch_axpb(x, y, n, 2.0f, 1.0f, 8 * sm_count, stream), "pointwise kernel");
//   check_cuda(launch_spin(200e-6, stream), "holding the stream");
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

namespace ddlsim::gpu {

enum class FillType { f32, f16, bf16 };

/// Writes `count` elements of `type` at `data` (device memory) with values in [-1, 1) that depend on the
/// index and `seed` only. Returns the launch status (cudaGetLastError).
cudaError_t launch_fill(void* data, std::size_t count, FillType type, unsigned seed, cudaStream_t stream);

/// y[i] = a * x[i] + b for i < n (fp32, device memory): reads 4 n bytes and writes 4 n bytes. A grid-stride
/// loop over `blocks` blocks of 256 threads. Returns the launch status (cudaGetLastError).
cudaError_t launch_axpb(const float* x, float* y, std::size_t n, float a, float b, int blocks, cudaStream_t stream);

/// One single-thread kernel that keeps the stream busy for `seconds` (the GPU's global timer). Launched before
/// timed work, it lets the host queue that work while the GPU waits, so that the time measured is the GPU's,
/// without the host's cost of issuing each launch (tens of microseconds for a cuDNN call). Returns the launch status.
cudaError_t launch_spin(double seconds, cudaStream_t stream);

} // namespace ddlsim::gpu
