"""`ddlsim execute --backend torch`: the shipped CPU cross-check (experiments/crosscheck_torch_cpu.yaml) run
as real PyTorch, one process and two DDP ranks over gloo, its CSV's measured columns against their
definitions, one profiler trace per point that `ddlsim calibrate import` reads, the --prepare /
--measured round trip, and the refusals (pp > 1, a missing interpreter, options of other backends).
PyTorch is a test dependency (python3-torch): without it this test fails. Run serially: it times
real work on the CPU."""
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import time

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
python = sys.executable
p = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
if p.returncode != 0:  # a failure, not a skip: CI installs python3-torch (make test)
    print(f"FAIL: PyTorch is a test dependency (apt-get install python3-torch): {p.stderr.strip()}", file=sys.stderr)
    sys.exit(1)
print(f"PyTorch {p.stdout.strip()} ({python})")

experiment = os.path.join(ROOT, "experiments", "crosscheck_torch_cpu.yaml")
d = workdir()
csv_path = os.path.join(d, "torch.csv")
started = time.monotonic()
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--python", python, "-o", csv_path)
elapsed = time.monotonic() - started
print(f"execute --backend torch: {elapsed:.1f} s\n{out}")
rows = read_csv(csv_path) if os.path.exists(csv_path) else []
checks += 2
check(rc == 0 and "simulated vs measured on PyTorch" in out and f"over {len(rows)} points" in out,
      f"execute --backend torch: {rc} {out} {err}")
check(len(rows) == 8 and sorted({r["dp"] for r in rows}) == ["1", "2"] and all(r["status"] == "ok" for r in rows),
      f"8 points (two models, micro-batch 2 and 4, dp 1 and 2), all ok: "
      f"{[(r.get('dp'), r.get('status'), r.get('message')) for r in rows]}")
work = os.path.join(d, "torch.work")
for i, r in enumerate(rows):
    if r["status"] != "ok":
        continue
    sim, real = float(r["iteration_time_s"]), float(r["measured_iteration_time_s"])
    lo, hi = float(r["measured_min_s"]), float(r["measured_max_s"])
    ranks = int(r["dp"])
    print(f"point {i}: {r['model']} mb {r['micro_batch']} dp {ranks}: simulated {sim:.4f} s, measured {real:.4f} s "
          f"({r['error_pct']}%)")
    checks += 6
    check(r["backend"] == "torch" and r["device"].startswith("torch ") and " cpu: " in r["device"],
          f"point {i}: backend and device: {r['backend']} {r['device']}")
    check(0 < lo <= real <= hi, f"point {i}: min <= median <= max: {lo} {real} {hi}")
    check(math.isclose(float(r["error_pct"]), 100 * (sim - real) / real, rel_tol=1e-6),
          f"point {i}: error_pct = 100 (simulated - measured) / measured")
    check(math.isclose(float(r["measured_throughput_samples_per_s"]), float(r["global_batch"]) / real, rel_tol=1e-6),
          f"point {i}: measured throughput = global batch / measured time")
    check(r.get("measured_peak_memory_bytes", "") == "", f"point {i}: no device memory measured on the CPU")
    ddp = f"DDP over gloo, {ranks} ranks" in r["message"]
    check(ddp == (ranks > 1) and "micro-batch" in r["message"], f"point {i}: what ran, in the message: {r['message']}")

# One profiler trace per point, next to the CSV, in Kineto's layout (PyTorch's own export where it has Kineto,
# else written from the profiler's events): operators with their input shapes. calibrate import reads them; a
# CPU step has no GPU kernel to make records of, which it says (on a GPU it writes the kernel records).
traces = sorted(glob.glob(os.path.join(work, "torch-trace-*.json")))
checks += 1
check(len(traces) == len(rows) and all(os.path.exists(os.path.join(work, f"point-{i}.json")) for i in range(len(rows))),
      f"a trace and a point file per point: {traces}")
for trace in traces[:1] + traces[-1:]:
    with open(trace) as f:
        events = json.load(f).get("traceEvents", [])
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    shaped = [e for e in ops if e["name"] in ("aten::addmm", "aten::linear", "aten::mm", "aten::convolution")
              and any(e.get("args", {}).get("Input Dims", []))]
    checks += 1
    check(ops and shaped, f"{os.path.basename(trace)}: operators ({len(ops)}), GEMMs or convolutions with their "
                          f"shapes ({len(shaped)})")
records = os.path.join(d, "records.jsonl")
rc, out, err = run(binary, "calibrate", "import", traces[0], "-o", records)
checks += 1
if any(" cuda: " in r["device"] for r in rows):
    check(rc == 0 and os.path.getsize(records) > 0, f"calibrate import reads a GPU step's trace: {rc} {err}")
else:
    check(rc == 1 and "traceEvents: no GPU kernel" in err and "CPU-only profile" in err,
          f"calibrate import reads a CPU step's trace as a Kineto trace, and says it has no GPU kernel: {rc} {err}")

# --prepare writes the same point files; --measured reads the results back without running anything.
prepared = os.path.join(d, "prepared")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--prepare", prepared)
files = sorted(os.listdir(prepared)) if os.path.isdir(prepared) else []
checks += 1
check(rc == 0 and files == sorted(f"point-{i}.json" for i in range(8)) and
      all(open(os.path.join(prepared, f)).read() == open(os.path.join(work, f)).read() for f in files),
      f"--prepare writes the points execute ran: {rc} {files} {err}")
for i in range(len(rows)):
    shutil.copy(os.path.join(work, f"measured-{i}.json"), prepared)
again = os.path.join(d, "again.csv")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--measured", prepared, "-o", again)
back = read_csv(again) if rc == 0 else []
checks += 1
check(len(back) == len(rows) and all(b["measured_iteration_time_s"] == r["measured_iteration_time_s"]
                                     for b, r in zip(back, rows)), f"--measured reads the results back: {rc} {err}")
with open(os.path.join(prepared, "point-0.json"), "a") as f:
    f.write(" ")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--measured", prepared, "-o", again)
back = read_csv(again) if os.path.exists(again) else []
checks += 1
check(back and back[0]["status"] == "error" and "is not this point's" in back[0]["message"],
      f"--measured refuses a point file that changed: {back[0] if back else err}")

# Refusals: a pipeline, a missing interpreter (error rows, the sweep goes on); options of other backends (usage).
one = ["--set", "sweep.training.micro_batch=[2]", "--set", "sweep.zip={parallelism.dp: [1], cluster.gpus: [1]}"]
refused = os.path.join(d, "refused.csv")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--python", python, "-o", refused,
                   "--set", "parallelism.pp=2", "--set", "sweep.zip={parallelism.dp: [1], cluster.gpus: [2]}",
                   "--set", "sweep.training.micro_batch=[2]")
back = read_csv(refused) if os.path.exists(refused) else []
checks += 1
check(rc == 1 and len(back) == 2 and all(b["status"] == "error" and "parallelism.pp = 2" in b["message"] and
                                         "data parallelism only" in b["message"] for b in back),
      f"pp 2 is refused, the key named: {rc} {[b.get('message') for b in back]} {err}")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--python", os.path.join(d, "no-python"),
                   "-o", refused, *one)
back = read_csv(refused) if os.path.exists(refused) else []
checks += 1
check(rc == 1 and len(back) == 2 and all(b["status"] == "error" and "cannot run" in b["message"] for b in back),
      f"a missing interpreter: error rows saying so: {rc} {[b.get('message') for b in back]} {err}")
# framework pytorch-compile runs the model under torch.compile, where this PyTorch has it (2.0 or later;
# Debian 12's is 1.13: each point an error saying what it needs).
compiled = os.path.join(d, "compiled.csv")
rc, out, err = run(binary, "execute", experiment, "--backend", "torch", "--python", python, "-o", compiled,
                   "--set", "training.framework=pytorch-compile", "--set", "calibration=pytorch-h200", *one)
back = read_csv(compiled) if os.path.exists(compiled) else []
has_compile = subprocess.run([python, "-c", "import torch; assert hasattr(torch, 'compile')"]).returncode == 0
checks += 1
if has_compile:
    check(rc == 0 and len(back) == 2 and all(b["status"] == "ok" and "torch.compile, mode default" in b["message"]
                                             for b in back),
          f"pytorch-compile runs torch.compile: {rc} {[b.get('message') for b in back]} {err}")
else:
    check(rc == 1 and len(back) == 2 and all(b["status"] == "error" and "needs torch.compile" in b["message"]
                                             for b in back),
          f"pytorch-compile without torch.compile: error rows saying so: {rc} {[b.get('message') for b in back]} {err}")
for args, what in ((["--scale", "0.5"], "--scale"), (["--cuda-graph"], "--cuda-graph")):
    rc, out, err = run(binary, "execute", experiment, "--backend", "torch", *args)
    checks += 1
    check(rc == 2 and what in err, f"{what} with --backend torch is a usage error: {rc} {err}")
rc, out, err = run(binary, "execute", experiment, "--backend", "host", "--python", python)
checks += 1
check(rc == 2 and "--python is for --backend torch" in err,
      f"--python with --backend host is a usage error: {rc} {err}")
finish("cli_execute_torch", checks)
