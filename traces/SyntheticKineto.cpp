#include "traces/SyntheticKineto.hpp"

#include "common/Error.hpp"

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <zlib.h>

namespace ddlsim::traces {
namespace {

// splitmix64: a fixed, portable sequence (std:: distributions differ between libraries).
class Random {
public:
  std::uint64_t next()
  {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z               = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z               = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// An integer in [lo, hi].
  long long between(long long lo, long long hi)
  {
    return lo + static_cast<long long>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  /// A double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::uint64_t state_ = 20240521;
};

// Buffered output through zlib: gzip-compressed, or written as it is ("T", transparent).
class Output {
public:
  Output(const std::string& path, bool gzip) : path_(path), file_(gzopen(path.c_str(), gzip ? "wb6" : "wbT"))
  {
    if (file_ == nullptr)
      throw TraceError(path + ": cannot create");
    buffer_.reserve(chunk + 4096);
  }
  ~Output()
  {
    if (file_ != nullptr)
      gzclose(file_);
  }
  Output(const Output&)            = delete;
  Output& operator=(const Output&) = delete;

  void put(const std::string& text)
  {
    buffer_ += text;
    written_ += text.size();
    if (buffer_.size() >= chunk)
      flush();
  }
  // printf into the buffer (events are well under a kilobyte, names included).
  void format(const char* pattern, ...) __attribute__((format(printf, 2, 3)))
  {
    char line[4096];
    va_list args;
    va_start(args, pattern);
    const int n = std::vsnprintf(line, sizeof line, pattern, args);
    va_end(args);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof line)
      throw TraceError(path_ + ": a synthetic event does not fit its buffer");
    put(line);
  }
  std::uint64_t written() const { return written_; }
  void close()
  {
    flush();
    const int status = gzclose(file_);
    file_            = nullptr;
    if (status != Z_OK)
      throw TraceError(path_ + ": cannot write (gzclose " + std::to_string(status) + ")");
  }

private:
  static constexpr std::size_t chunk = 1 << 20;
  void flush()
  {
    if (!buffer_.empty() &&
        gzwrite(file_, buffer_.data(), static_cast<unsigned>(buffer_.size())) != static_cast<int>(buffer_.size()))
      throw TraceError(path_ + ": cannot write");
    buffer_.clear();
  }
  std::string path_;
  gzFile file_;
  std::string buffer_;
  std::uint64_t written_ = 0;
};

struct KernelKind {
  const char* name;
  const char* cpu_op;
  int grid_x, block_x, registers, shared_memory;
  double mean_us; // typical duration
};

// Kernels of a transformer's forward and backward as PyTorch 2.x names them on an H100.
constexpr std::array<KernelKind, 8> kernel_kinds{{
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
     "cublas",
     "aten::mm", 132, 384, 168, 213248, 180},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_"
     "cublas",
     "autograd::engine::evaluate_function: MmBackward0", 132, 384, 168, 229632, 320},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
     "aten::add_", 1056, 128, 24, 0, 12},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
     "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
     "aten::native_layer_norm", 4096, 256, 32, 0, 22},
    {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
     "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, "
     "false>(Flash_fwd_params)",
     "aten::_scaled_dot_product_flash_attention", 512, 128, 255, 49152, 140},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
     "const::{lambda(c10::BFloat16)#1}, "
     "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::"
     "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
     "at::detail::Array<char*, 2>)",
     "aten::gelu", 4224, 128, 30, 0, 35},
    {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}, "
     "at::detail::Array<char*, 2>, "
     "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
     "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)",
     "aten::copy_", 2112, 128, 28, 0, 9},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, "
     "float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
     "aten::sum", 264, 512, 40, 16, 15},
}};

struct NcclKind {
  const char* kernel;
  const char* collective_name; // args "Collective name"
  const char* annotation;      // the CPU-side record function
};

constexpr std::array<NcclKind, 4> nccl_kinds{{
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "allreduce",
     "nccl:all_reduce"},
    {"ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "_allgather_base",
     "nccl:_all_gather_base"},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "_reduce_scatter_base",
     "nccl:_reduce_scatter_base"},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "allreduce",
     "nccl:all_reduce"},
}};

constexpr int cpu_pid = 2910249, main_tid = 2910249, backward_tid = 2919752;
constexpr int compute_stream = 7, nccl_stream = 20;

void write_header(Output& out)
{
  out.put("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n");
  for (int id = 0; id < 8; ++id)
    out.format("    {\n      \"id\": %d, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929347584,\n"
               "      \"computeMajor\": 9, \"computeMinor\": 0,\n"
               "      \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n"
               "      \"regsPerBlock\": 65536, \"warpSize\": 32,\n"
               "      \"sharedMemPerBlock\": 49152, \"numSms\": 132\n"
               "    , \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, "
               "\"sharedMemPerMultiprocessor\": 233472\n"
               "    }%s\n",
               id, id < 7 ? "," : "");
  out.put("  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, \"pg_count\": 1, "
          "\"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", "
          "\"pg_size\": 8, \"ranks\": [0, 1, 2, 3, 4, 5, 6, 7]}], \"nccl_version\": \"2.21.5\"},\n"
          "  \"record_shapes\": 1,\n  \"with_stack\": 0,\n  \"traceEvents\": [\n");
}

const std::string trailer = "\n  ],\n  \"traceName\": \"synthetic_rank0.json\",\n  \"displayTimeUnit\": \"ms\",\n"
                            "  \"baseTimeNanoseconds\": 1700000000000000000\n}\n";

// One launch: the CPU op, its cudaLaunchKernel, the flow between them and the kernel; every 25th
// launch an NCCL collective with its annotation, every 40th a copy or a memset.
class Launches {
public:
  explicit Launches(Output& out) : out_(out) {}

  void next(SyntheticKineto& stats)
  {
    const bool backward = (launch_ / 400) % 3 != 0; // a third of the step forward, the rest backward
    const int tid       = backward ? backward_tid : main_tid;
    if (launch_ % 25 == 24)
      collective(stats, tid);
    else
      kernel(stats, tid, kernel_kinds[random_.next() % kernel_kinds.size()]);
    if (launch_ % 40 == 39)
      copy(stats);
    if (backward && launch_ % 12 == 0)
      fwdbwd(stats, tid);
    ++launch_;
  }

private:
  // Starts the next event: the separator, then the event's text.
  void begin(SyntheticKineto& stats) { out_.put(stats.events++ == 0 ? "    " : ",\n    "); }
  double advance(double lo_us, double hi_us) { return cpu_ts_ += random_.uniform(lo_us, hi_us); }

  // The CPU side of a launch: the op, cudaLaunchKernel inside it and the flow's start. Returns the
  // correlation id.
  unsigned long long launch_side(SyntheticKineto& stats, int tid, const char* op, unsigned long long external)
  {
    const double op_ts   = advance(2, 30);
    const double op_dur  = random_.uniform(15, 60);
    const long long rows = 1LL << random_.between(10, 14);
    begin(stats);
    out_.format(
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
        "\"dur\": %.3f, \"args\": {\"External id\": %llu, \"Record function id\": %llu, \"Sequence number\": %llu, "
        "\"Fwd thread id\": 1, \"Concrete Inputs\": [\"\", \"\"], \"Input type\": [\"c10::BFloat16\", "
        "\"c10::BFloat16\"], \"Input Strides\": [[6144, 1], [1, 6144]], \"Input Dims\": [[%lld, 6144], "
        "[6144, %lld]], \"Ev Idx\": %llu}}",
        op, cpu_pid, tid, op_ts, op_dur, external, external - 140, external / 2, rows, rows,
        static_cast<unsigned long long>(stats.events));
    // The small ops a PyTorch op calls before it launches (allocation, views), as nested cpu_ops.
    static constexpr std::array<const char*, 6> nested{"aten::empty",      "aten::view",      "aten::t",
                                                       "aten::as_strided", "aten::transpose", "aten::resolve_conj"};
    double nested_ts = op_ts + 0.5;
    for (long long n = random_.between(2, 4); n > 0; --n) {
      const double nested_dur                  = random_.uniform(0.5, 3);
      const unsigned long long nested_external = ++external_;
      begin(stats);
      out_.format("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                  "\"dur\": %.3f, \"args\": {\"External id\": %llu, \"Record function id\": %llu, \"Concrete Inputs\": "
                  "[\"\", \"\", \"\"], \"Input type\": [\"c10::BFloat16\", \"\", \"Scalar\"], \"Input Strides\": "
                  "[[6144, 1], [], "
                  "[]], \"Input Dims\": [[%lld, 6144], [], []], \"Ev Idx\": %llu}}",
                  nested[random_.next() % nested.size()], cpu_pid, tid, nested_ts, nested_dur, nested_external,
                  nested_external - 140, rows, static_cast<unsigned long long>(stats.events));
      nested_ts += nested_dur + random_.uniform(0.2, 1);
    }
    const unsigned long long correlation = ++correlation_;
    const double launch_ts               = nested_ts + random_.uniform(0.2, 1);
    cpu_ts_                              = op_ts + std::max(op_dur, launch_ts + 10 - op_ts);
    begin(stats);
    out_.format("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": %d, \"tid\": %d, "
                "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %llu, \"cbid\": 211, \"correlation\": %llu}}",
                cpu_pid, tid, launch_ts, random_.uniform(3, 9), external, correlation);
    begin(stats);
    out_.format(
        "{\"ph\": \"s\", \"id\": %llu, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\"}",
        correlation, cpu_pid, tid, launch_ts);
    return correlation;
  }

  // The GPU side: the flow's end and the kernel event up to its args' last common member (the
  // caller closes the args).
  void kernel_event(SyntheticKineto& stats, const char* name, int stream, double dur_us, unsigned long long external,
                    unsigned long long correlation, int grid_x, int block_x, int registers, int shared_memory)
  {
    double& gpu_ts = stream == nccl_stream ? nccl_ts_ : gpu_ts_;
    gpu_ts         = std::max(gpu_ts, cpu_ts_ + 5) + random_.uniform(0.5, 3);
    begin(stats);
    out_.format(
        "{\"ph\": \"f\", \"id\": %llu, \"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\", "
        "\"bp\": \"e\"}",
        correlation, stream, gpu_ts);
    const double blocks_per_sm = grid_x / 132.0;
    begin(stats);
    out_.format(
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
        "\"args\": {\"External id\": %llu, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": %d, "
        "\"correlation\": %llu, \"registers per thread\": %d, \"shared memory\": %d, \"blocks per SM\": %.6f, "
        "\"warps per SM\": %.6f, \"grid\": [%d, 1, 1], \"block\": [%d, 1, 1], \"est. achieved occupancy %%\": %d",
        name, stream, gpu_ts, dur_us, external, stream, correlation, registers, shared_memory, blocks_per_sm,
        blocks_per_sm * block_x / 32.0, grid_x, block_x, static_cast<int>(random_.between(12, 100)));
    gpu_ts += dur_us;
    ++stats.kernels;
  }

  void kernel(SyntheticKineto& stats, int tid, const KernelKind& kind)
  {
    const unsigned long long external    = ++external_;
    const unsigned long long correlation = launch_side(stats, tid, kind.cpu_op, external);
    kernel_event(stats, kind.name, compute_stream, kind.mean_us * random_.uniform(0.7, 1.3), external, correlation,
                 kind.grid_x, kind.block_x, kind.registers, kind.shared_memory);
    out_.put("}}");
  }

  void collective(SyntheticKineto& stats, int tid)
  {
    const NcclKind& kind              = nccl_kinds[(launch_ / 25) % nccl_kinds.size()];
    const unsigned long long external = ++external_;
    const long long elements          = 1LL << random_.between(16, 26);
    begin(stats);
    out_.format(
        "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
        "\"dur\": %.3f, \"args\": {\"External id\": %llu, \"Record function id\": %llu, \"Input Dims\": [[%lld]], "
        "\"Input type\": [\"c10::BFloat16\"], \"Ev Idx\": %llu}}",
        kind.annotation, cpu_pid, tid, advance(2, 10), random_.uniform(40, 120), external, external - 140, elements,
        static_cast<unsigned long long>(stats.events));
    ++stats.collectives;
    const unsigned long long correlation = launch_side(stats, tid, "record_param_comms", external);
    // Ring bandwidth of about 150 GB/s, bf16.
    kernel_event(stats, kind.kernel, nccl_stream, 8 + static_cast<double>(elements) * 2 / 150e3, external, correlation,
                 24, 544, 96, 87568);
    out_.format(
        ", \"Collective name\": \"%s\", \"In msg nelems\": %lld, \"Out msg nelems\": %lld, \"Group size\": 8, "
        "\"dtype\": \"BFloat16\", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": "
        "\"0\", "
        "\"Process Group Description\": \"default_pg\", \"Process Group Ranks\": \"[0, 1, 2, 3, 4, 5, 6, 7]\"}}",
        kind.collective_name, elements, elements);
    ++stats.collectives;
  }

  void copy(SyntheticKineto& stats)
  {
    const bool memset     = launch_ % 80 == 79;
    const long long bytes = 1LL << random_.between(12, 24);
    const double dur      = 2 + static_cast<double>(bytes) / 1.2e6;
    gpu_ts_ += random_.uniform(0.5, 3);
    begin(stats);
    out_.format(
        "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
        "\"args\": {\"External id\": %llu, \"device\": 0, \"context\": 1, \"stream\": %d, \"correlation\": %llu, "
        "\"bytes\": %lld, \"memory bandwidth (GB/s)\": %.6f}}",
        memset ? "gpu_memset" : "gpu_memcpy", memset ? "Memset (Device)" : "Memcpy DtoD (Device -> Device)",
        compute_stream, gpu_ts_, dur, external_, compute_stream, ++correlation_, bytes,
        static_cast<double>(bytes) / dur / 1e3);
    gpu_ts_ += dur;
  }

  void fwdbwd(SyntheticKineto& stats, int tid)
  {
    const unsigned long long id = ++flow_;
    begin(stats);
    out_.format("{\"ph\": \"s\", \"id\": %llu, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"fwdbwd\", \"name\": "
                "\"fwdbwd\"}",
                id, cpu_pid, main_tid, cpu_ts_ - 5000);
    begin(stats);
    out_.format("{\"ph\": \"f\", \"id\": %llu, \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"cat\": \"fwdbwd\", \"name\": "
                "\"fwdbwd\", "
                "\"bp\": \"e\"}",
                id, cpu_pid, tid, cpu_ts_);
  }

  Output& out_;
  Random random_;
  unsigned long long launch_ = 0, external_ = 2000, correlation_ = 57000, flow_ = 0;
  double cpu_ts_ = 1700000000000.0, gpu_ts_ = 0, nccl_ts_ = 0;
};

} // namespace

SyntheticKineto write_synthetic_kineto(const std::string& path, std::uint64_t json_bytes, bool gzip)
{
  SyntheticKineto stats;
  Output out(path, gzip);
  write_header(out);
  Launches launches(out);
  do
    launches.next(stats);
  while (out.written() + trailer.size() < json_bytes);
  out.put(trailer);
  stats.json_bytes = out.written();
  out.close();
  std::error_code ec;
  stats.file_bytes = std::filesystem::file_size(path, ec);
  if (ec)
    throw TraceError(path + ": cannot read its size after writing it");
  return stats;
}

} // namespace ddlsim::traces
