// Measured kernels and collectives, as the calibration fitter reads them, and their JSON-lines file.
//
// A trace file (`ddlsim calibrate import ... -o traces.jsonl`) is one JSON object per line:
//   {"type":"provenance","source":"kineto","file":"...","device":"NVIDIA A100-...","sm_count":108,...}
//   {"type":"kernel","name":"ampere_sgemm_128x64_tn","duration_s":1.2e-05,"start_s":...,"device":0,"stream":7,
//    "grid":[8,1,1],"block":[256,1,1]}   # microbenchmarks add "op", "flop", "bytes", "dtype", "point"
//                                         # traces with shapes add "op", "flop", "bytes", "dtype", "shape",
//                                         # "cpu_op"; kernels without work say why in "unusable"
//   {"type":"collective","collective":"all_reduce","bytes":26550272,"dtype":"float","group_size":2,
//    "duration_s":0.0026,"source":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float"}
//   {"type":"host_op","trace":"step.json.gz","pass":"forward","op":"aten::conv2d","kind":"conv","count":53,
//    "seconds":0.0104,"events":1120,"max_s":0.0025,"stall_s":0.0021}   # PyTorch traces of a training step
//   {"type":"host_step","trace":"step.json.gz","steps":1,"backward_passes":1,"span_s":0.045,"host_span_s":0.045,
//    "gpu_span_s":0.042,"gpu_busy_s":0.0035,"host_events":5115,"profiler_stall_s":0.0027,"optimizer_s":0.0018,
//    "optimizer_events":12,
//    "parameter_tensors":161,"parameter_tensors_from":"AccumulateGrad nodes","untraced_step_s":0.028,
//    "threads":[{"thread":"589/589","role":"main","busy_s":0.012,"events":3000,"ops":233},...]}
// Times in seconds, sizes in bytes. A collective's source says where its size came from: the NCCL
// kernel's arguments ("kernel"), or a CPU-side annotation ("annotation", whose duration is the
// host-side call, not the kernel). Host records (HostActivity.hpp) time a step's operators on the host
// thread; untraced_step_s is 0 (absent) unless the step's time without the profiler was given.
//
//   TraceSet set = import_kineto("rank0.json.gz");   // KinetoImporter.hpp
//   write_jsonl(set, std::cout);
#pragma once

#include <array>
#include <iosfwd>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace ddlsim::traces {

struct KernelRecord {
  std::string name;
  double start_s = 0;
  double duration_s = 0;  ///< first start to last end of its kernels (a microbenchmark run, a launch)
  /// Of a record that covers several kernels (a run, a launch): the time its kernels ran, gaps between them left
  /// out (the union of their intervals), and how many there were; 0 when not known (one kernel: duration_s).
  double busy_s = 0;
  int kernels   = 0;
  int device = -1;
  int stream = -1;
  std::array<int, 3> grid{0, 0, 0};
  std::array<int, 3> block{0, 0, 0};
  double flop = 0;    ///< work, when the record comes from a microbenchmark that knows it (else 0)
  double bytes = 0;   ///< bytes moved to and from device memory (else 0)
  std::string dtype;  ///< element type of that work (else empty)
  std::string op;     ///< microbenchmark op (gemm, batched_gemm, conv2d, pointwise, copy_d2d, ...); else empty
  int point = 0;      ///< microbenchmark point id (its CUPTI external correlation id); 0 when none
  std::string shape{};  ///< microbenchmark shape key (BenchPoint::shape_key); empty when unknown
  std::string cpu_op{};    ///< profiler traces: the CPU op that launched it (aten::mm, ...), when known
  std::string unusable{};  ///< why the record carries no work for calibration (KernelShapes.hpp); empty when it does
};

struct CollectiveRecord {
  std::string collective;  ///< all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv, ...
  double bytes = 0;        ///< message size per rank; 0 when the trace does not say
  std::string dtype;       ///< element type as the trace names it, lower case
  int group_size = 0;      ///< 0 when unknown
  int nodes = 0;           ///< machines the group spans (distinct hosts of its ranks); 0 when unknown
  double duration_s = 0;
  std::string source;      ///< "kernel" or "annotation"
  std::string name;
  int point{0};            ///< microbenchmark point id; 0 when none
};

/// Host time of one operator name in one pass of a PyTorch profiler trace's training step
/// (HostActivity.hpp): its top-level ops, each timed from its start to the next top-level op's start
/// on its thread (the last one before the pass ends: its own duration).
struct HostOpRecord {
  std::string trace;      ///< the trace file
  std::string pass;       ///< "forward" (the main thread's aten ops) or "backward" (autograd nodes)
  std::string op;         ///< "aten::conv2d", "ConvolutionBackward0", "torch::autograd::AccumulateGrad"
  std::string kind{};     ///< its host kind (calibration/HostModel.hpp) when the writer knew it; else empty
  int count = 0;          ///< top-level ops of that name
  double seconds = 0;     ///< their summed intervals
  int events = 0;         ///< profiler events (cpu_op, user_annotation, cuda_runtime, cuda_driver) in them
  double max_s = 0;       ///< the longest interval
  double stall_s = 0;     ///< of seconds, the profiler's set-up of the thread (HostActivity.hpp)
};

/// One host thread's totals in a trace.
struct HostThread {
  std::string thread;     ///< "pid/tid"
  std::string role;       ///< "main" (forward, optimizer), "autograd" (backward nodes) or "other"
  double busy_s = 0;      ///< union of its recorded events' intervals
  int events = 0;         ///< its recorded events
  int ops = 0;            ///< its top-level CPU ops
};

/// A PyTorch profiler trace's training step(s) as a whole (HostActivity.hpp).
struct HostStepRecord {
  std::string trace;
  int steps = 0;              ///< Optimizer.step annotations (0: none; the whole trace is one forward region)
  int backward_passes = 0;    ///< runs of autograd nodes (micro-batches)
  double span_s = 0;          ///< first to last event, host and GPU
  double host_span_s = 0;     ///< first to last recorded host event
  double gpu_span_s = 0;      ///< first GPU activity's start to the last one's end (0: none)
  double gpu_busy_s = 0;      ///< union of kernels, memcpys and memsets
  int host_events = 0;        ///< recorded host events in the host span (every one)
  double profiler_stall_s = 0;  ///< the profiler's set-up of its threads, in the host span (HostActivity.hpp)
  double optimizer_s = 0;     ///< Optimizer.step and Optimizer.zero_grad annotations, summed
  int optimizer_events = 0;   ///< recorded events inside them
  int parameter_tensors = 0;  ///< per step
  std::string parameter_tensors_from{};  ///< "fused optimizer input" or "AccumulateGrad nodes"
  double untraced_step_s = 0;          ///< the step timed without the profiler (import --untraced-step-s); 0 unknown
  std::vector<HostThread> threads{};
};

struct TraceSet {
  std::map<std::string, std::string> provenance;  ///< device, sm_count, nccl_version, file, source, ...
  std::vector<KernelRecord> kernels;
  std::vector<CollectiveRecord> collectives;
  std::vector<HostOpRecord> host_ops;
  std::vector<HostStepRecord> host_steps;
  std::map<std::string, int> skipped;  ///< reason -> count of events left out
  int skipped_total() const;
};

/// Writes the provenance line, then one line per kernel and per collective.
void write_jsonl(const TraceSet& set, std::ostream& out);

/// Reads a JSON-lines file that write_jsonl wrote (several provenance lines merge: distinct values of
/// one key are joined with "; "). Throws TraceError naming the file and line of a malformed record.
TraceSet read_jsonl(const std::string& path);
/// The same, from a stream; `name` stands for the file in messages (a gzip file's text, read_maybe_gzip).
TraceSet read_jsonl(std::istream& in, const std::string& name);

/// Appends `more` to `into`: records, skip counts, and provenance (distinct values of one key joined
/// with "; "). Microbenchmark point ids of `more` are shifted past those of `into`, so points of
/// different files stay distinct.
void append(TraceSet& into, TraceSet more);

/// Bytes of one element of a dtype as traces name it ("Float", "float32", "Half", "BFloat16",
/// "Long", "int8", ...), case-insensitive; 0 when unknown.
double element_bytes(const std::string& dtype);

}  // namespace ddlsim::traces
