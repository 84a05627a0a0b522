#include "sim/backends/HostOps.hpp"

#include "common/Error.hpp"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace ddlsim::backends {
namespace {

using calibration::BenchOp;
using calibration::BenchPoint;
using calibration::ConvPass;

struct Sizes {
  std::size_t a = 1, b = 1, c = 1, col = 1;
};

// Elements each buffer needs for one point.
Sizes sizes_of(const BenchPoint& p)
{
  Sizes s;
  switch (p.op) {
  case BenchOp::gemm:
  case BenchOp::batched_gemm: {
    // Batched GEMMs reuse one set of operands per batch entry: the time is the same, the memory is not.
    s.a = static_cast<std::size_t>(p.m * p.k);
    s.b = static_cast<std::size_t>(p.k * p.n);
    s.c = static_cast<std::size_t>(p.m * p.n);
    break;
  }
  case BenchOp::conv2d: {
    const auto& c = p.conv;
    const std::size_t in = static_cast<std::size_t>(c.c) * c.h * c.w;
    const std::size_t out = static_cast<std::size_t>(c.k) * c.out_h() * c.out_w();
    const std::size_t filter = static_cast<std::size_t>(c.k) * c.c * c.r * c.s;
    s.a = std::max(in, filter);
    s.b = std::max(out, filter);
    s.c = std::max({in, out, filter});
    s.col = static_cast<std::size_t>(c.c) * c.r * c.s * c.out_h() * c.out_w();
    break;
  }
  default: {
    const std::size_t n = static_cast<std::size_t>(p.bytes / 8) + 1;  // read x, write y
    s.a = n;
    s.c = n;
    break;
  }
  }
  return s;
}

void fill(std::vector<float>& v, std::uint32_t seed)
{
  std::uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
}

// Column buffer of one sample: (c r s) rows x (out_h out_w) columns.
void im2col(const float* in, const calibration::ConvProblem& c, float* col)
{
  const int oh = c.out_h(), ow = c.out_w();
  for (int ch = 0; ch < c.c; ++ch)
    for (int i = 0; i < c.r; ++i)
      for (int j = 0; j < c.s; ++j) {
        float* row = col + ((static_cast<std::size_t>(ch) * c.r + i) * c.s + j) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * c.stride - c.pad + i;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * c.stride - c.pad + j;
            row[y * ow + x] = (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) ? in[(static_cast<std::size_t>(ch) * c.h + iy) * c.w + ix] : 0.0f;
          }
        }
      }
}

void col2im(const float* col, const calibration::ConvProblem& c, float* in)
{
  const int oh = c.out_h(), ow = c.out_w();
  std::fill(in, in + static_cast<std::size_t>(c.c) * c.h * c.w, 0.0f);
  for (int ch = 0; ch < c.c; ++ch)
    for (int i = 0; i < c.r; ++i)
      for (int j = 0; j < c.s; ++j) {
        const float* row = col + ((static_cast<std::size_t>(ch) * c.r + i) * c.s + j) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * c.stride - c.pad + i;
          if (iy < 0 || iy >= c.h)
            continue;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * c.stride - c.pad + j;
            if (ix >= 0 && ix < c.w)
              in[(static_cast<std::size_t>(ch) * c.h + iy) * c.w + ix] += row[y * ow + x];
          }
        }
      }
}

// C[m x n] = op(A) op(B), row-major: A stored m x k (k x m when transposed), B stored k x n (n x k when
// transposed), so that a GEMM point's layout runs as on the GPU (calibration::GemmLayout).
void sgemm(long long m, long long n, long long k, const float* a, const float* b, float* c,
           calibration::GemmLayout layout = calibration::GemmLayout::nn)
{
  const bool ta = layout == calibration::GemmLayout::tn, tb = layout == calibration::GemmLayout::nt;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(ta ? m : k), b,
              static_cast<int>(tb ? k : n), 0.0f, c, static_cast<int>(n));
}

}  // namespace

HostBuffers::HostBuffers(const std::vector<BenchPoint>& points, double bytes)
{
  Sizes most;
  most.a = most.c = static_cast<std::size_t>(bytes / 4) + 1;
  for (const BenchPoint& p : points) {
    const Sizes s = sizes_of(p);
    most.a = std::max(most.a, s.a);
    most.b = std::max(most.b, s.b);
    most.c = std::max(most.c, s.c);
    most.col = std::max(most.col, s.col);
  }
  a_.resize(most.a);
  b_.resize(most.b);
  c_.resize(most.c);
  col_.resize(most.col);
  fill(a_, 1);
  fill(b_, 2);
  fill(c_, 3);
  fill(col_, 4);
}

void use_single_threaded_blas() { openblas_set_num_threads(1); }

void run_point(const BenchPoint& p, HostBuffers& buf)
{
  switch (p.op) {
  case BenchOp::gemm:
    sgemm(p.m, p.n, p.k, buf.a(), buf.b(), buf.c(), p.layout);
    return;
  case BenchOp::batched_gemm:
    for (long long i = 0; i < p.batch; ++i)
      sgemm(p.m, p.n, p.k, buf.a(), buf.b(), buf.c(), p.layout);
    return;
  case BenchOp::conv2d: {
    const auto& c = p.conv;
    const long long crs = static_cast<long long>(c.c) * c.r * c.s, hw = static_cast<long long>(c.out_h()) * c.out_w();
    for (int sample = 0; sample < c.n; ++sample) {
      switch (p.pass) {
      case ConvPass::forward:  // out[k x hw] = W[k x crs] col[crs x hw]
        im2col(buf.a(), c, buf.col());
        sgemm(c.k, hw, crs, buf.b(), buf.col(), buf.c());
        break;
      case ConvPass::backward_data:  // col[crs x hw] = W^T[crs x k] dout[k x hw], then scatter
        sgemm(crs, hw, c.k, buf.b(), buf.c(), buf.col());
        col2im(buf.col(), c, buf.a());
        break;
      case ConvPass::backward_filter:  // dW[k x crs] = dout[k x hw] col^T[hw x crs]
        im2col(buf.a(), c, buf.col());
        sgemm(c.k, crs, hw, buf.c(), buf.col(), buf.b());
        break;
      }
    }
    return;
  }
  case BenchOp::pointwise: {
    const std::size_t n = static_cast<std::size_t>(p.bytes / 8);
    float* x = buf.a();
    float* y = buf.c();
    for (std::size_t i = 0; i < n; ++i)
      y[i] = 0.5f * x[i] + 0.25f;
    return;
  }
  default:
    throw ExecutionError(std::string("the host runs no ") + calibration::bench_op_name(p.op) + " points");
  }
}

traces::TraceSet time_points(const std::vector<BenchPoint>& points, const calibration::RepeatPolicy& policy, int threads)
{
  use_single_threaded_blas();
  traces::TraceSet set;
  set.provenance = {{"source", "ddlsim host microbenchmarks"}, {"device", host_description()}, {"timing", "steady_clock"},
                    {"blas", "OpenBLAS, one thread per call"}, {"threads", std::to_string(threads)}};
  const std::size_t count = static_cast<std::size_t>(std::max(1, threads));
  std::vector<std::vector<traces::KernelRecord>> per_thread(count);
  // The threads run each point together, in lockstep: the replicas of a step run the same kernels
  // at the same time, and memory-bound kernels then share the caches' and DRAM's bandwidth.
  std::barrier sync(static_cast<std::ptrdiff_t>(count));
  std::atomic<bool> more{true};
  using clock = std::chrono::steady_clock;
  const auto origin = clock::now();
  auto work = [&](int thread) {
    pin_to_core(thread);
    HostBuffers buffers(points);
    std::vector<traces::KernelRecord>& out = per_thread[static_cast<std::size_t>(thread)];
    // Each timed run starts with the core's private caches holding other data, as a kernel inside a
    // training step does (the kernels before it touched other tensors): without this, a skinny GEMM
    // that streams a 4 MB weight runs about 25% faster than it does within a step.
    const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    std::vector<float> scratch(static_cast<std::size_t>(4 * (l2 > 0 ? l2 : 2L << 20)) / sizeof(float), 1.0f);
    auto evict = [&] {
      for (std::size_t i = 0; i < scratch.size(); i += 16)
        scratch[i] += 1.0f;
    };
    for (const BenchPoint& p : points) {
      for (int w = 0; w < policy.warmup; ++w)
        run_point(p, buffers);
      double spent = 0;
      for (int r = 0;; ++r) {
        evict();
        sync.arrive_and_wait();
        const auto start = clock::now();
        run_point(p, buffers);
        const double seconds = std::chrono::duration<double>(clock::now() - start).count();
        spent += seconds;
        traces::KernelRecord k;
        k.name = p.label();
        k.start_s = std::chrono::duration<double>(start - origin).count();
        k.duration_s = seconds;
        k.device = thread;
        k.op = calibration::bench_op_name(p.op);
        k.flop = p.flop();
        k.bytes = p.traffic_bytes();
        k.dtype = "fp32";  // computed in fp32 whatever the point's dtype
        k.point = p.id;
        k.shape = p.shape_key();
        out.push_back(std::move(k));
        if (thread == 0)  // thread 0's clock decides for all, so every thread stops at the same run
          more = r + 1 < policy.max_repeats && (r + 1 < policy.min_repeats || spent < policy.min_seconds);
        sync.arrive_and_wait();
        if (!more)
          break;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < static_cast<int>(per_thread.size()); ++t)
    pool.emplace_back(work, t);
  work(0);
  for (auto& t : pool)
    t.join();
  for (auto& records : per_thread)
    for (auto& k : records)
      set.kernels.push_back(std::move(k));
  return set;
}

void pin_to_core(int index)
{
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(index) % std::max(1u, std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

std::string host_description()
{
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return "host: " + model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

}  // namespace ddlsim::backends
