"""Timelines (--trace-dir) checked against the schedule: per GPU a compute stream whose ops never
overlap and follow the schedule's order (1F1B warm-up, one forward one backward, drain; computed
here from the rule, not by ddlsim), link-class tracks, and every pipeline transfer starting after
the pass that produces it and ending before the pass that consumes it. Then the rules of the Trace
Event Format (timeline_rules.py: nesting per track, numeric args, flow bindings, memory and link
counters against the CSV) on that timeline, on an interleaved one, and on one point of every
shipped experiment (a few more where the first is not the interesting or not a feasible one)."""
import json
import os
import sys

from common import FIXTURES, ROOT, check, finish, read_csv, run, workdir
from timeline_rules import ONE_POINT, shipped_points, timeline_problems

binary = sys.argv[1]
checks = 0
out_dir = workdir()
traces = os.path.join(out_dir, "traces")
K, M = 4, 8
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", os.path.join(out_dir, "t.csv"),
                   "--set", f"parallelism.pp={K}", "--set", "parallelism.schedule=1f1b",
                   "--set", "training.global_batch=32", "--trace-dir", traces)
checks += 1
check(rc == 0, f"run with --trace-dir: {err}")
with open(os.path.join(traces, "zoo-smoke_0.json")) as f:
    trace = json.load(f)
events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
checks += 1
check({"compute stream", "intra-node links", "inter-node links"} <= set(threads.values()), f"tracks: {set(threads.values())}")
# Process of each GPU (named "gpu<d> (node <n>)") and its compute stream's thread.
pid_of = {int(e["args"]["name"].split()[0][3:]): e["pid"] for e in trace["traceEvents"]
          if e["ph"] == "M" and e["name"] == "process_name"}
stream_tid = {pid: tid for (pid, tid), name in threads.items() if name == "compute stream"}


def on_stream(e, gpu):
    return e["pid"] == pid_of[gpu] and e["tid"] == stream_tid[pid_of[gpu]]


# dgx-h100x2: 16 GPUs, dp = 4, GPU of (stage s, replica r) = 4 s + r; stages 0-1 on node 0, 2-3 on node 1.
eps = 1e-3  # microseconds
order_ok = overlap_ok = True
for gpu in range(16):
    stage = gpu // 4
    ops = sorted((e for e in events if on_stream(e, gpu)), key=lambda e: e["ts"])
    for a, b in zip(ops, ops[1:]):
        overlap_ok = overlap_ok and b["ts"] >= a["ts"] + a["dur"] - eps
    # Passes in stream order (a pass may be split into several segments with the same name).
    passes = []
    for e in ops:
        if e["cat"] in ("forward", "backward") and (not passes or passes[-1] != e["name"]):
            passes.append(e["name"])
    warmup = min(K - stage - 1, M)
    expected = [f"F s{stage} mb{m}" for m in range(warmup)]
    for i in range(M - warmup):
        expected += [f"F s{stage} mb{warmup + i}", f"B s{stage} mb{i}"]
    expected += [f"B s{stage} mb{m}" for m in range(M - warmup, M)]
    order_ok = order_ok and passes == expected
    if passes != expected:
        print(f"gpu {gpu}: {passes[:6]} vs {expected[:6]}", file=sys.stderr)
checks += 1
check(overlap_ok, "no two ops overlap on a compute stream")
checks += 1
check(order_ok, "every compute stream follows 1F1B's order")

# Dependencies: activations after the producing forward, before the consuming forward; gradients likewise.
def span(gpu, name):
    found = [e for e in events if on_stream(e, gpu) and e["name"] == name]
    return min(e["ts"] for e in found), max(e["ts"] + e["dur"] for e in found)

deps_ok = True
transfers = [e for e in events if e["cat"] == "transfer" and e["pid"] == pid_of[e["args"]["from"]]]
for t in transfers:
    kind, hop, mb = t["name"].split()
    src_stage, dst_stage = (int(x[1:]) for x in hop.split("->"))
    src, dst = t["args"]["from"], t["args"]["to"]
    phase = "F" if kind == "act" else "B"
    _, produced = span(src, f"{phase} s{src_stage} {mb}")
    consumed, _ = span(dst, f"{phase} s{dst_stage} {mb}")
    deps_ok = deps_ok and t["ts"] >= produced - eps and consumed >= t["ts"] + t["dur"] - eps
    link = "intra-node links" if src // 8 == dst // 8 else "inter-node links"
    deps_ok = deps_ok and threads[(pid_of[src], t["tid"])].startswith(link)  # one of its lanes
checks += 1
check(len(transfers) == 2 * (K - 1) * 4 * M and deps_ok, f"{len(transfers)} transfers respect their dependencies")

# The per-device table next to the timeline averages to the CSV row.
row = read_csv(os.path.join(out_dir, "t.csv"))[0]
table = read_csv(os.path.join(traces, "zoo-smoke_0_devices.csv"))
mean = lambda col: sum(float(r[col]) for r in table) / len(table)
checks += 1
check(len(table) == 16 and abs(mean("utilization") - float(row["gpu_utilization"])) <= 1e-6
      and abs(mean("comm_bytes") - float(row["comm_bytes_per_gpu"])) <= 1e-6 * float(row["comm_bytes_per_gpu"])
      and max(float(r["peak_memory_bytes"]) for r in table) == float(row["peak_memory_bytes"]),
      "the device table matches the CSV row")


def check_rules(what, trace_path, csv_path, peak_is_bound=False):
    """The format's rules on one timeline; returns its summary."""
    global checks
    with open(trace_path) as f:
        trace = json.load(f)
    problems, summary = timeline_problems(trace, read_csv(csv_path)[0], read_csv(trace_path[:-5] + "_devices.csv"),
                                          peak_is_bound)
    checks += 1
    check(not problems, f"{what}: {len(problems)} problems, first {problems[:3]}")
    return summary


summary = check_rules("zoo-smoke 1F1B", os.path.join(traces, "zoo-smoke_0.json"), os.path.join(out_dir, "t.csv"))
checks += 1
check(summary.get("joined", {}).get("transfer") == 2 * len(transfers),
      f"a flow from every activation transfer's sender to its receiver: {summary.get('joined')}")

# Interleaved 1F1B: its chunks reach their own peaks at different times, and the memory model adds
# the peaks up, so the counter stays at or below the CSV's peak.
inter_dir = os.path.join(out_dir, "interleaved")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", os.path.join(out_dir, "i.csv"),
                   "--set", "parallelism.pp=4", "--set", "parallelism.schedule=interleaved", "--set",
                   "parallelism.virtual_stages=3", "--set", "training.global_batch=32", "--trace-dir", inter_dir)
checks += 1
check(rc == 0, f"interleaved run with --trace-dir: {err}")
if rc == 0:
    check_rules("zoo-smoke interleaved", os.path.join(inter_dir, "zoo-smoke_0.json"), os.path.join(out_dir, "i.csv"),
                peak_is_bound=True)

# One point of every shipped experiment (more where the first is out of memory or not the only kind).
for name, k in shipped_points(os.path.join(ROOT, "experiments")):
    where = os.path.join(out_dir, "shipped")
    out_csv = os.path.join(where, f"{name}_{k}.csv")
    rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", name), "--quiet", "-o", out_csv,
                     "--shard", f"{k}/{ONE_POINT}", "--trace-dir", where)
    rows = read_csv(out_csv) if rc == 0 else []
    checks += 1
    check(rc == 0 and len(rows) == 1 and rows[0]["status"] == "ok", f"{name} point {k} runs: {rc} {err}")
    if rows and rows[0]["status"] == "ok":
        check_rules(f"{name} point {k}", os.path.join(where, f"{rows[0]['experiment']}_{k}.json"), out_csv)

# Same inputs, same bytes.
again = os.path.join(out_dir, "again")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "sync_async.yaml"), "--quiet", "-o",
                 os.path.join(again, "s.csv"), "--shard", f"0/{ONE_POINT}", "--trace-dir", again)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


checks += 1
check(rc == 0 and read_bytes(os.path.join(again, "sync_async_0.json")) ==
      read_bytes(os.path.join(out_dir, "shipped", "sync_async_0.json")), "two runs write the same timeline")

finish("cli_timeline", checks)
