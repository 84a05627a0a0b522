"""One point of `ddlsim execute --backend torch`, run as real PyTorch training steps.

    python3 run_point.py POINT.json OUT.json                                       # dp 1
    python3 launch_ranks.py --nproc-per-node DP run_point.py POINT.json OUT.json   # dp > 1 (or under torchrun)

POINT.json (format ddlsim-torch-point-1, written by ddlsim: sim/backends/TorchPoint.hpp) holds the
zoo model's layers, the training settings and the data-parallel degree. The step is the one
../shared/data/pytorch-h200/README.md measured: fp32 weights, the forward and loss under
torch.autocast in the point's dtype (bf16/fp16; on CPU where autocast supports it), AdamW (fused on
CUDA where this PyTorch has it), gradient accumulation over global_batch / (micro_batch x dp)
micro-batches with each loss divided by their count, zero_grad(set_to_none=True); several ranks run
it under DDP (gloo on CPU, nccl on CUDA), the gradients all-reduced once, after the last micro-batch.
Timing: `warmup` untimed steps, then `iterations` timed ones, perf_counter around each (after a
torch.cuda.synchronize on CUDA; with several ranks, a step's time is the slowest rank's); then one
more step under torch.profiler (CPU and CUDA activities, record_shapes=True) written to the point's
`trace` path as a Chrome trace, which `ddlsim calibrate import` reads.

OUT.json is ddlsim's execution result (format ddlsim-execution-1: device, iterations_s,
peak_memory_bytes from torch.cuda.max_memory_allocated on CUDA, notes), plus the model's parameter
count and the trace's path. Any failure prints one line "run_point.py: LABEL: why" on stderr and
exits 1 without writing OUT.json; a model whose parameter count is not ddlsim's fails so.
"""
import contextlib
import inspect
import json
import os
import platform
import sys
import time
import warnings

import torch
import torch.distributed as dist

from build_model import BuildError, build_model, check_parameters, make_batch

#: The point file format this script reads.
POINT_FORMAT = "ddlsim-torch-point-1"
#: Seed of the weights (every rank alike) and of the data (plus the rank).
SEED = 0
#: AdamW's and SGD's learning rate: the steps' values do not matter, only their kernels.
LEARNING_RATE = 1e-4
#: Parameters of at most this many megabytes in one DDP bucket: one all-reduce after backward, as ddlsim's
#: parallelism.dp_bucket = 0 simulates it.
ONE_BUCKET_MB = 1 << 20


class PointError(Exception):
    """What keeps a point from running, said for the CSV's message."""


def load_point(path):
    """The point description; raises PointError when it is not ddlsim's point format."""
    try:
        with open(path) as f:
            point = json.load(f)
    except (OSError, ValueError) as e:
        raise PointError(f"{path}: {e}") from e
    if point.get("format") != POINT_FORMAT:
        raise PointError(f"{path}: format is {point.get('format')!r}, expected {POINT_FORMAT}")
    return point


def start_ranks(dp):
    """(rank, local rank, world size) after joining the process group torchrun set up; (0, 0, 1) alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != dp:
        raise PointError(f"parallelism.dp is {dp} but {world} process(es) run: start it with "
                         f"launch_ranks.py --nproc-per-node {dp} (or torchrun --nproc_per_node {dp})")
    if world == 1:
        return 0, 0, 1
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local)
    dist.init_process_group(backend)
    return dist.get_rank(), local, world


def pick_device(local_rank):
    """This rank's GPU when PyTorch sees one, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def describe_device(device, world):
    """The CSV's `device`: PyTorch's version and the GPU's or the CPU's name."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = cpu_name()
        name += f" ({torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''}"
        name += f" x {world} ranks)" if world > 1 else ")"
    return f"torch {torch.__version__} {device.type}: {name}"


def cpu_name():
    """The CPU's model name from /proc/cpuinfo, else platform's."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def autocast_dtype(dtype, device, notes):
    """The torch dtype autocast runs in for the point's dtype on `device`, or None (fp32 throughout)."""
    wanted = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    if dtype == "fp8":
        raise PointError("training.dtype fp8 needs Transformer Engine, which the torch backend does not use")
    if wanted is None:
        return None
    if device.type == "cuda" or autocast_works(device, wanted):
        notes.append(f"autocast {dtype} over fp32 weights")
        return wanted
    notes.append(f"{dtype} run as fp32: autocast on this PyTorch's CPU does not compute in {dtype}")
    return None


def autocast_works(device, dtype):
    """True when a linear under torch.autocast(device, dtype) really computes in `dtype` here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autocast(device.type, dtype=dtype):
                out = torch.nn.functional.linear(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device))
        except (RuntimeError, TypeError):
            return False
    return out.dtype == dtype


def make_optimizer(name, model, device, notes):
    """AdamW (fused on CUDA where supported) for adam, SGD for sgd and momentum."""
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATE)
    if name == "momentum":
        return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=0.9)
    if name != "adam":
        raise PointError(f"training.optimizer {name}: the torch backend runs sgd, momentum and adam")
    if device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        notes.append("AdamW fused")
        return torch.optim.AdamW(params, lr=LEARNING_RATE, fused=True)
    notes.append("AdamW (for-each)" if device.type == "cuda" else "AdamW")
    return torch.optim.AdamW(params, lr=LEARNING_RATE)


def make_scaler(amp_dtype, device):
    """A gradient scaler for fp16 on CUDA (as users train in fp16), else None."""
    if amp_dtype != torch.float16 or device.type != "cuda":
        return None
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def configure_backends(dtype):
    """cuDNN autotuning on; TF32 matmuls only for dtype tf32 (as the H200 reference runs)."""
    if torch.cuda.is_available():
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype == "tf32"


def wrap_ddp(model, device, world, bucket_bytes, notes):
    """The model under DistributedDataParallel when there are several ranks."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel
    bucket_mb = bucket_bytes / 2**20 if bucket_bytes > 0 else ONE_BUCKET_MB
    notes.append(f"DDP over {dist.get_backend()}, {world} ranks, "
                 + (f"{bucket_mb:g} MB buckets" if bucket_bytes > 0 else "one all-reduce after backward"))
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_mb)


def compile_model(model, training, notes):
    """The model under torch.compile for framework pytorch-compile (CUDA graphs: mode reduce-overhead)."""
    if not training.get("compile"):
        return model
    if not hasattr(torch, "compile"):
        raise PointError(f"training.framework pytorch-compile needs torch.compile (PyTorch 2.0 or later); "
                         f"this is PyTorch {torch.__version__}")
    if training.get("cuda_graphs") and not hasattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin"):
        raise PointError(f"training.cuda_graphs needs torch.compiler.cudagraph_mark_step_begin (PyTorch 2.1 or "
                         f"later) to replay a graph per micro-batch; this is PyTorch {torch.__version__}")
    mode = "reduce-overhead" if training.get("cuda_graphs") else "default"
    notes.append(f"torch.compile, mode {mode}")
    return torch.compile(model, mode=mode)


class Step:
    """One training step: every micro-batch forward (autocast) and backward, then the optimizer."""

    def __init__(self, model, optimizer, batches, amp_dtype, scaler, device, cuda_graphs=False):
        self.model, self.optimizer, self.batches = model, optimizer, batches
        self.amp_dtype, self.scaler, self.device = amp_dtype, scaler, device
        self.cuda_graphs = cuda_graphs

    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def _no_sync(self, last):
        """DDP all-reduces only after the last micro-batch's backward."""
        if last or not hasattr(self.model, "no_sync"):
            return contextlib.nullcontext()
        return self.model.no_sync()

    def __call__(self):
        count = len(self.batches)
        for i, (x, targets) in enumerate(self.batches):
            if self.cuda_graphs:  # each micro-batch a new replay of the compiled graphs
                torch.compiler.cudagraph_mark_step_begin()
            with self._no_sync(i == count - 1):
                with self._autocast():
                    loss = self.model(x, targets) / count
                (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step, device, warmup, iterations, world):
    """Seconds of each timed step (the slowest rank's), after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    synchronize(device)
    times = []
    for _ in range(iterations):
        if world > 1:
            dist.barrier()
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    if world > 1:
        slowest = torch.tensor(times, dtype=torch.float64, device=device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        times = slowest.tolist()
    return times


def kineto_available():
    """True when this PyTorch's profiler records through Kineto (and exports its trace format)."""
    check = getattr(torch.profiler, "kineto_available", None) or torch.autograd.kineto_available
    return bool(check())


def legacy_trace(prof):
    """Kineto's trace layout from a profiler without Kineto (Debian's PyTorch 1.13): a traceEvents list of
    cpu_op events with their input shapes, which the legacy exporter leaves out."""
    events = []
    for e in prof.events():
        start, end = e.time_range.start, e.time_range.end
        events.append({"ph": "X", "cat": "cpu_op", "name": e.name, "pid": os.getpid(), "tid": e.thread, "ts": start,
                       "dur": end - start, "args": {"Input Dims": [list(s) for s in e.input_shapes or []],
                                                    "Sequence number": e.sequence_nr}})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceName": "ddlsim torch backend (no Kineto)",
            "traceEvents": events}


def profile_step(step, device, path):
    """One more step under torch.profiler, written to `path` as a Chrome trace in Kineto's layout (atomically)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        step()
        synchronize(device)
    partial = path + ".partial.json"
    if kineto_available():
        prof.export_chrome_trace(partial)
    else:
        write_json(partial, legacy_trace(prof), indent=None)
    os.replace(partial, path)


def write_json(path, value, indent=1):
    """Writes `value` to `path` whole or not at all."""
    partial = path + ".partial"
    text = json.dumps(value, indent=indent)  # whole: json.dump streams through the slow pure-Python encoder
    with open(partial, "w") as f:
        f.write(text + "\n")
    os.replace(partial, path)


def make_step(point, device, rank, world, notes):
    """The point's training step on `device`, ready to run: (Step, the model's parameter count)."""
    training, spec = point["training"], point["model"]
    amp_dtype = autocast_dtype(training["dtype"], device, notes)
    torch.manual_seed(SEED)
    model = build_model(spec, device=device, options={"sync_batch_norm": world > 1 and device.type == "cuda"})
    parameters = check_parameters(model, spec)
    notes.extend(sorted(model.notes))
    model = wrap_ddp(model, device, world, float(point["parallelism"].get("dp_bucket_bytes", 0)), notes)
    model = compile_model(model, training, notes)
    optimizer = make_optimizer(training["optimizer"], model, device, notes)
    generator = torch.Generator().manual_seed(SEED + 1 + rank)
    batches = [make_batch(spec, int(training["micro_batch"]), device, generator)
               for _ in range(int(training["micro_batches"]))]
    cuda_graphs = bool(training.get("compile") and training.get("cuda_graphs"))
    return Step(model, optimizer, batches, amp_dtype, make_scaler(amp_dtype, device), device, cuda_graphs), parameters


def what_ran(training, world, timed):
    """The first note: micro-batches per rank and how many steps the median is of."""
    count = int(training["micro_batches"])
    return (f"{count} micro-batch{'es' if count > 1 else ''} of {training['micro_batch']}"
            + (" per rank" if world > 1 else "") + f", median of {timed}")


def run(point, out_path):
    """Builds, times and profiles the point; writes OUT.json on rank 0."""
    rank, local, world = start_ranks(int(point["parallelism"]["dp"]))
    device = pick_device(local)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    configure_backends(point["training"]["dtype"])
    notes = []
    step, parameters = make_step(point, device, rank, world, notes)
    timing = point["timing"]
    times = time_steps(step, device, int(timing["warmup"]), int(timing["iterations"]), world)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    trace = point.get("trace") or ""
    if trace and rank == 0:
        profile_step(step, device, trace)
    elif trace:
        step()  # the other ranks take part in the profiled step's all-reduce
    if world > 1:
        dist.barrier()
    if rank == 0:
        notes.insert(0, what_ran(point["training"], world, len(times)))
        write_json(out_path, {"format": "ddlsim-execution-1", "device": describe_device(device, world),
                              "iterations_s": times, "peak_memory_bytes": peak, "notes": notes,
                              "parameters": parameters, "trace": trace})
    if world > 1:
        dist.destroy_process_group()


def main(argv):
    if len(argv) != 3:
        print("usage: run_point.py POINT.json OUT.json", file=sys.stderr)
        return 2
    label = argv[1]
    try:
        point = load_point(argv[1])
        label = point.get("label", label)
        run(point, argv[2])
    except (PointError, BuildError) as e:
        print(f"run_point.py: {label}: {e}", file=sys.stderr)
        return 1
    except (RuntimeError, ValueError, KeyError, OSError) as e:  # PyTorch's errors, out of memory included
        print(f"run_point.py: {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
