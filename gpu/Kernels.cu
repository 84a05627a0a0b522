#include "gpu/Kernels.hpp"

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ddlsim::gpu {
namespace {

constexpr int threads_per_block = 256;

// SplitMix64 of the index: cheap, stateless, and every element differs.
__device__ float hashed_value(std::uint64_t i, unsigned seed)
{
  std::uint64_t z = i + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(seed) + 1);
  z               = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z               = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f; // top 24 bits -> [-1, 1)
}

__device__ void store(float* p, float v)
{
  *p = v;
}
__device__ void store(__half* p, float v)
{
  *p = __float2half(v);
}
__device__ void store(__nv_bfloat16* p, float v)
{
  *p = __float2bfloat16(v);
}

template <typename T> __global__ void fill_kernel(T* data, std::size_t count, unsigned seed)
{
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    store(data + i, hashed_value(i, seed));
}

__global__ void axpb_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, float a, float b)
{
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = a * x[i] + b;
}

// One thread that returns once `ns` nanoseconds have passed on the GPU's global timer, or, should that timer not
// advance, once 4 x ns SM cycles have (at least 2 x ns at a 2 GHz clock): never an endless kernel.
__global__ void spin_kernel(unsigned long long ns)
{
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns && static_cast<unsigned long long>(clock64() - c0) < 4 * ns);
}

unsigned blocks_for(std::size_t count, std::size_t cap)
{
  const std::size_t blocks = (count + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace

cudaError_t launch_fill(void* data, std::size_t count, FillType type, unsigned seed, cudaStream_t stream)
{
  if (count == 0)
    return cudaSuccess;
  const unsigned blocks = blocks_for(count, 65535);
  switch (type) {
  case FillType::f32:
    fill_kernel<<<blocks, threads_per_block, 0, stream>>>(static_cast<float*>(data), count, seed);
    break;
  case FillType::f16:
    fill_kernel<<<blocks, threads_per_block, 0, stream>>>(static_cast<__half*>(data), count, seed);
    break;
  case FillType::bf16:
    fill_kernel<<<blocks, threads_per_block, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
    break;
  }
  return cudaGetLastError();
}

cudaError_t launch_axpb(const float* x, float* y, std::size_t n, float a, float b, int blocks, cudaStream_t stream)
{
  const unsigned grid = blocks_for(n, blocks > 0 ? static_cast<std::size_t>(blocks) : 1);
  axpb_kernel<<<grid, threads_per_block, 0, stream>>>(x, y, n, a, b);
  return cudaGetLastError();
}

cudaError_t launch_spin(double seconds, cudaStream_t stream)
{
  if (!(seconds > 0))
    return cudaSuccess;
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(seconds * 1e9));
  return cudaGetLastError();
}

} // namespace ddlsim::gpu
