"""The GPU session's steps that run without a GPU: `ddlsim execute --backend cuda --prepare` writes each point's
workload with its memory model; `--measured DIR` pairs each point with the times and memory a GPU machine wrote
for it (error_pct = 100 (simulated - measured) / measured, measured_peak_memory_bytes), and refuses a workload
that is not the point's; `calibration/gpu_session.sh prepare` and `finish` around a measurement made up here
(the collector's record format, an H100's provenance), down to the fitted profile and the Markdown table whose
MAPE is the mean of the CSV's absolute errors."""
import json
import os
import re
import subprocess
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()
experiment = os.path.join(ROOT, "experiments", "crosscheck_gpu.yaml")
prepared = os.path.join(d, "prepared")

rc, out, err = run(binary, "execute", experiment, "--backend", "cuda", "--prepare", prepared)
files = sorted(f for f in os.listdir(prepared) if f.startswith("workload-")) if os.path.isdir(prepared) else []
checks += 1
check(rc == 0 and len(files) == 14 and "14 workload(s)" in out, f"--prepare writes the 14 points' workloads: {rc} {out} {err}")
w0 = json.load(open(os.path.join(prepared, "workload-0.json")))
memory = w0.get("memory", [{}])[0]
checks += 1
check(w0["devices"] == 1 and set(memory) == {"weights", "gradients", "optimizer_state", "activations", "workspace", "reserve"}
      and memory["weights"] > 0 and memory["optimizer_state"] > memory["weights"],
      f"a workload carries the memory model of its device: {memory}")
phases = {t.get("phase") for t in w0["tasks"] if t["kind"] == "compute"}
layouts = {l.get("layout") for t in w0["tasks"] if t["kind"] == "compute" for l in t["launches"] if l["op"] == "gemm"}
checks += 1
check(phases == {"forward", "backward", "optimizer"} and layouts == {"nn", "nt", "tn"},
      f"compute tasks name their phase, GEMMs their layout: {phases} {layouts}")

# The simulated side, for reference: the same points through `run`.
sim_csv = os.path.join(d, "sim.csv")
rc, _, err = run(binary, "run", experiment, "-o", sim_csv, "--quiet")
sim = {int(r["config_id"]): r for r in read_csv(sim_csv)} if rc == 0 else {}
checks += 1
check(rc == 0 and len(sim) == 14, f"the cross-check simulates: {rc} {err}")
# The 1 GiB reserve and the workspace are not allocated by the runner; the rest of the peak is.
total = sum(memory[k] for k in memory)
checks += 1
check(abs(total - float(sim[0]["peak_memory_bytes"])) <= 1, f"the workload's memory is the CSV's peak: {total} {sim[0]['peak_memory_bytes']}")

# What a GPU machine writes back: made up here, 0.1 s per iteration, 20 GB in use.
for i in range(14):
    with open(os.path.join(prepared, f"measured-{i}.json"), "w") as f:
        json.dump({"format": "ddlsim-execution-1", "device": "NVIDIA H100 80GB HBM3 x1 (driver 13.0)",
                   "iterations_s": [0.1, 0.11, 0.09], "peak_memory_bytes": 2e10, "notes": ["made up"]}, f)
# Point 5's workload no longer is its own.
with open(os.path.join(prepared, "workload-5.json"), "a") as f:
    f.write(" ")
xc = os.path.join(d, "xc.csv")
rc, out, err = run(binary, "execute", experiment, "--backend", "cuda", "--measured", prepared, "-o", xc)
rows = read_csv(xc) if os.path.exists(xc) else []
checks += 1
check(rc == 0 and len(rows) == 14 and "over 13 points" in out, f"--measured pairs 13 points: {rc} {out} {err}")
for r in rows:
    i = int(r["config_id"])
    if i == 5:
        checks += 1
        check(r["status"] == "error" and "is not this point's workload" in r["message"], f"a changed workload is refused: {r['message']}")
        continue
    s = float(r["iteration_time_s"])
    checks += 4
    check(r["status"] == "ok" and float(r["measured_iteration_time_s"]) == 0.1, f"point {i}: the median of the run's times")
    check(abs(float(r["error_pct"]) - 100 * (s - 0.1) / 0.1) < 1e-6 * max(1, abs(float(r["error_pct"]))), f"point {i}: error_pct")
    check(r["measured_peak_memory_bytes"] == "20000000000", f"point {i}: measured_peak_memory_bytes {r['measured_peak_memory_bytes']}")
    check(abs(s - float(sim[i]["iteration_time_s"])) <= 1e-9 * s, f"point {i}: the simulated time is the simulator's")

# Usage: --prepare and --measured belong to the cuda backend and exclude each other; --cuda-graph is the runner's.
for bad in (["--backend", "host", "--prepare", d], ["--backend", "cuda", "--prepare", d, "--measured", d],
            ["--backend", "cuda", "--measured", d, "--map-devices"], ["--backend", "host", "--cuda-graph"],
            ["--backend", "cuda", "--measured", d, "--cuda-graph"]):
    rc, _, err = run(binary, "execute", experiment, *bad)
    checks += 1
    check(rc == 2, f"execute {' '.join(bad)} is a usage error: {rc} {err}")

# The GPU programs' host-side options, where CUDA was found and they are built (no GPU is touched).
collector = os.path.join(os.path.dirname(binary), "ddlsim-collect")
runner = os.path.join(os.path.dirname(binary), "ddlsim-run-cuda")
if os.path.exists(collector):
    w13 = os.path.join(prepared, "workload-13.json")
    rc, plain, err = run(collector, "--plan", "--quick")
    rc2, first, err2 = run(collector, "--plan", "--quick", "--workload", w13, "--workloads-first")
    rc3, mixed, _ = run(collector, "--plan", "--quick", "--workload", w13)
    plan_labels = {line.split("\t")[1] for line in plain.splitlines()}
    first_labels = [line.split("\t")[1] for line in first.splitlines()]
    extra = [label for label in first_labels if label not in plan_labels]
    checks += 1
    check(rc == 0 and rc2 == 0 and rc3 == 0 and extra and first_labels[:len(extra)] == extra and
          sorted(first_labels) == sorted(line.split("\t")[1] for line in mixed.splitlines()) and
          [int(line.split("\t")[0]) for line in first.splitlines()] == list(range(1, len(first_labels) + 1)),
          f"--workloads-first: the workload's {len(extra)} launches first, the same points, ids renumbered: {err} {err2}")
    for option, bad in (("--time-limit", ["--time-limit", "0", "-o", os.path.join(d, "r.jsonl")]),
                        ("--time-limit", ["--time-limit", "soon", "-o", os.path.join(d, "r.jsonl")]),
                        ("--workloads-first", ["--plan", "--workloads-first=no"])):
        rc, _, err = run(collector, *bad)
        checks += 1
        check(rc == 2 and option in err, f"ddlsim-collect {' '.join(bad)} is a usage error naming {option}: {rc} {err}")
if os.path.exists(runner):
    for bad in (["--cuda-graph", "--mpi"], ["--cuda-graph", "--warmup", "0"]):
        rc, _, err = run(runner, os.path.join(prepared, "workload-13.json"), "-o", os.path.join(d, "m.json"), *bad)
        checks += 1
        check(rc == 2 and "--cuda-graph" in err, f"ddlsim-run-cuda {' '.join(bad)} is a usage error: {rc} {err}")

# gpu_session.sh prepare and finish around a made-up measurement: an H100's records in the collector's format.
script = os.path.join(ROOT, "calibration", "gpu_session.sh")
env = dict(os.environ, DDLSIM=binary, SESSION=os.path.join(d, "session"), PROFILE_DIR=os.path.join(d, "profiles"),
           RESULTS=os.path.join(d, "results"), FETCH_DEBS="0")
p = subprocess.run([script, "prepare"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
session = env["SESSION"]
checks += 1
check(p.returncode == 0 and len([f for f in os.listdir(session) if f.startswith("workload-")]) == 14 and
      os.path.getsize(os.path.join(session, "commit")) > 0, f"gpu_session.sh prepare: {p.returncode} {p.stderr}")
lines = [{"type": "provenance", "source": "ddlsim-collect", "device": "NVIDIA H100 80GB HBM3", "driver": "13.0",
          "cuda_runtime": "13.0", "nccl_version": "2.28.9", "commit": "abc123", "date": "2026-11-25T00:00:00Z",
          "clocks_start": "P0, SM 1980/1980 MHz, memory 2619/2619 MHz", "clocks_end": "P0, SM 1980/1980 MHz, memory 2619/2619 MHz"}]
point = 0
for n in (256, 1024, 4096):
    point += 1
    flop = 2.0 * n ** 3
    for run_time in (1.0, 1.01, 0.99):
        lines.append({"type": "kernel", "name": "gemm", "op": "gemm", "duration_s": run_time * (5e-6 + flop / 6e14),
                      "flop": flop, "bytes": 6.0 * n * n, "dtype": "bf16", "point": point, "shape": f"m={n} n={n} k={n} batch=1"})
with open(os.path.join(session, "records.jsonl"), "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
for i in range(14):
    with open(os.path.join(session, f"measured-{i}.json"), "w") as f:
        json.dump({"format": "ddlsim-execution-1", "device": "NVIDIA H100 80GB HBM3 x1", "iterations_s": [0.2],
                   "peak_memory_bytes": 1.5e10, "notes": []}, f)
    # The same steps issued eagerly, 0.4 s each, for half the points: the table's eager columns and MAPE.
    if i % 2 == 0:
        with open(os.path.join(session, f"measured-eager-{i}.json"), "w") as f:
            json.dump({"format": "ddlsim-execution-1", "device": "NVIDIA H100 80GB HBM3 x1", "iterations_s": [0.5, 0.4, 0.3],
                       "peak_memory_bytes": 1.5e10, "notes": []}, f)
p = subprocess.run([script, "finish"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
profile = os.path.join(d, "profiles", "h100-measured.yaml")
table = os.path.join(d, "results", "crosscheck_gpu.md")
checks += 1
check(p.returncode == 0 and os.path.exists(profile) and os.path.exists(table), f"gpu_session.sh finish: {p.returncode} {p.stderr}")
if os.path.exists(profile) and os.path.exists(table):
    text = open(profile).read()
    checks += 1
    check(all(k in text for k in ("commit: \"abc123\"", "clocks_start:", "nccl_version: \"2.28.9\"", "driver: \"13.0\"")),
          f"the fitted profile keeps the session's provenance: {text[:600]}")
    rows = read_csv(os.path.join(d, "results", "crosscheck_gpu.csv"))
    errors = [abs(float(r["error_pct"])) for r in rows if r["status"] == "ok"]
    md = open(table).read()
    m = re.search(r"\| all \| (\d+) \| ([0-9.]+) \|", md)
    checks += 1
    check(len(errors) == 14 and m and int(m.group(1)) == 14 and abs(float(m.group(2)) - sum(errors) / 14) < 0.006,
          f"the table's MAPE is the CSV's mean absolute error: {m and m.groups()} {sum(errors) / max(1, len(errors))}")
    eager_errors = [abs(float(r["iteration_time_s"]) - 0.4) / 0.4 * 100 for i, r in enumerate(rows) if i % 2 == 0]
    m = re.search(r"Against the eager runs.*?\| all \| (\d+) \| ([0-9.]+) \|", md, re.S)
    checks += 1
    check(m and int(m.group(1)) == 7 and abs(float(m.group(2)) - sum(eager_errors) / 7) < 0.006 and "eager measured s" in md,
          f"the eager runs' MAPE over the 7 points that have one: {m and m.groups()} {sum(eager_errors) / 7}")
    checks += 1
    check("| gpt2-small | 1 |" in md and "| resnet50 | 64 |" in md and "13.97" in md,
          f"the table lists every point with its measured memory (1.5e10 B = 13.97 GiB): {md[:400]}")
    checks += 1
    check("## Kernels cold and warm" in md and "No warm records" in md, "finish adds the kernels' cold and warm sums")

# plots/crosscheck_l2.py on a session made up here: one workload of a GEMM (launched twice), a convolution and a
# pointwise kernel; cold and warm medians per shape; the step measured at 0.05 s.
l2 = os.path.join(d, "l2")
os.makedirs(l2)
gemm = {"op": "gemm", "dtype": "bf16", "m": 64, "n": 128, "k": 256, "batch": 1, "layout": "nt"}
conv = {"op": "conv2d", "dtype": "bf16", "pass": "bwd_filter", "conv": [4, 64, 56, 56, 64, 3, 3, 1, 1]}
pointwise = {"op": "pointwise", "dtype": "bf16", "bytes": 4096}
empty = {"op": "pointwise", "dtype": "bf16", "bytes": 0}  # runs as a one-element kernel; its record has no dtype
with open(os.path.join(l2, "workload-0.json"), "w") as f:
    json.dump({"format": "ddlsim-workload-1", "label": "made up", "devices": 1, "dtype": "bf16",
               "tasks": [{"kind": "compute", "device": 0, "launches": [gemm, conv]},
                         {"kind": "compute", "device": 0, "launches": [gemm, pointwise, empty]}]}, f)
shapes = {"gemm": "m=64 n=128 k=256 batch=1 layout=nt", "conv2d": "n=4 c=64 h=56 w=56 k=64 r=3 s=3 stride=1 pad=1 bwd_filter"}
for name, scale in (("records.jsonl", 1.0), ("records-warm.jsonl", 0.5)):
    with open(os.path.join(l2, name), "w") as f:
        for op, base in (("gemm", 0.01), ("conv2d", 0.02), ("pointwise", 0.004), ("empty", 0.002)):
            for t in (0.9, 1.0, 1.3):  # median 1.0 x base
                r = {"type": "kernel", "op": op, "dtype": "bf16", "duration_s": scale * base * t, "bytes": 4096}
                if op in shapes:
                    r["shape"] = shapes[op]
                if op == "conv2d":  # three kernels (layout transforms around it): busy 75% of its span
                    r.update({"busy_s": 0.75 * r["duration_s"], "kernels": 3})
                if op == "empty":  # as write_jsonl writes a record of no work: no flop, bytes or dtype
                    r = {"type": "kernel", "op": "pointwise", "duration_s": scale * base * t}
                f.write(json.dumps(r) + "\n")
with open(os.path.join(l2, "measured-0.json"), "w") as f:
    json.dump({"format": "ddlsim-execution-1", "iterations_s": [0.05, 0.04, 0.06], "peak_memory_bytes": 1}, f)
p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "crosscheck_l2.py"), l2], capture_output=True, text=True)
# cold: 2 x 0.01 + 0.75 x 0.02 (the convolution's busy time) + 0.004 + 0.002 = 0.041 s; warm: half of it; measured
# 0.05 s: -18.0% and -59.0%.
checks += 1
check(p.returncode == 0 and "| 0 | made up | 5 | 0.0410 | 0.0205 | 0.500 | 0.0500 | -18.0 | -59.0 |" in p.stdout
      and "no cold record" not in p.stdout,
      f"crosscheck_l2.py sums each launch's median busy time, cold and warm: {p.returncode} {p.stdout} {p.stderr}")

# plots/crosscheck_graph.py on the same session, traced as ddlsim-run-cuda --cuda-graph --trace writes it: the
# eager iteration's five launches (the convolution ran three kernels), then two replays of the graph, one record
# per kernel, each with a memset the graph runs as a kernel, 0.1 ms between kernels.
with open(os.path.join(l2, "trace-graph-0.jsonl"), "w") as f:
    f.write(json.dumps({"type": "provenance", "workload": "made up"}) + "\n")
    eager = [("g", 1, 1, "gemm", shapes["gemm"], 0), ("a+c+b", 3, 1, "conv2d", shapes["conv2d"], 0),
             ("g", 1, 2, "gemm", shapes["gemm"], 0), ("p", 1, 2, "pointwise", None, 4096),
             ("e", 1, 2, "pointwise", None, 0)]
    for t, (name, kernels, point, op, shape, nbytes) in enumerate(eager):
        r = {"type": "kernel", "name": name, "duration_s": 0.01, "busy_s": 0.01, "kernels": kernels,
             "start_s": t, "op": op, "point": point, "bytes": nbytes, "dtype": "bf16"}
        if shape:
            r["shape"] = shape
        f.write(json.dumps(r) + "\n")
    clock = 10.0
    for replay in range(2):
        for name, seconds in (("memset32", 0.001), ("g", 0.009), ("a", 0.002), ("c", 0.010), ("b", 0.002),
                              ("g", 0.009), ("p", 0.004), ("e", 0.002)):
            f.write(json.dumps({"type": "kernel", "name": name, "duration_s": seconds, "start_s": clock}) + "\n")
            clock += seconds + 1e-4
        clock += 1.0
p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "crosscheck_graph.py"), l2], capture_output=True,
                   text=True)
# graph busy 0.039 s (memset included), 7 gaps of 0.1 ms; cold busy 0.041 s, cold span 0.046 s, warm 0.0205 s.
checks += 1
check(p.returncode == 0 and "| 0 | made up | 5 | 8 | 0.0390 | 0.0007 | 0.0500 | 0.0410 | 0.0460 | 0.0205 | -18.0 | -8.0 |"
      in p.stdout and "| conv2d bwd_filter | several kernels | 1 | 3 | 0.0140 | 0.0150 | 0.0200 | 0.933 | 0.700 |"
      in p.stdout and "do not carry" not in p.stdout,
      f"crosscheck_graph.py maps the replay's kernels to the launches in order: {p.returncode} {p.stdout} {p.stderr}")
finish("cli_gpu_session", checks)
