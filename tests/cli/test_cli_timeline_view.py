"""What a timeline draws and what its link counters may say (issue 31, items 2 and 3):
--trace-ranks, --trace-window and --trace-counters, the automatic thinning of large points, and
link accounting a NIC could carry: each GPU's inter-node bytes its own (NCCL's channels cross nodes
at every GPU's rail, not at one) and no link counter above the link's bandwidth."""
import json
import os
import sys

from common import FIXTURES, check, finish, read_csv, run, workdir
from timeline_rules import timeline_problems

binary = sys.argv[1]
checks = 0
tmp = workdir()


def trace_run(name, yaml, *args):
    """Runs `yaml` with --trace-dir; returns (rc, stderr, CSV row, timeline or None, device table)."""
    where = os.path.join(tmp, name)
    rc, _, err = run(binary, "run", yaml, "--quiet", "-o", os.path.join(where, "r.csv"), "--trace-dir", where, *args)
    if rc != 0:
        return rc, err, None, None, []
    row = read_csv(os.path.join(where, "r.csv"))[0]
    path = os.path.join(where, f"{row['experiment']}_0.json")
    trace = None
    if os.path.exists(path):
        with open(path) as f:
            trace = json.load(f)
    return rc, err, row, trace, read_csv(os.path.join(where, f"{row['experiment']}_0_devices.csv"))


def gpus_drawn(trace):
    return sorted(int(e["args"]["name"].split()[0][3:]) for e in trace["traceEvents"]
                  if e["ph"] == "M" and e["name"] == "process_name")


# The newcomer's case: Llama 3 8B on 8 DGX H100 nodes, tp 2, cp 2, ZeRO-3 (dp 16), sequence 8,192,
# global batch 64. The ZeRO collectives' rings span 32 GPUs, 4 per node, over 4 rails: before, GPUs
# 6 and 7 of every node carried 93 GB of inter-node bytes in a 0.92 s iteration (at 50 GB/s a NIC
# carries 46 GB) and the other 48 GPUs none; link counters peaked at 592 GB/s on 450 GB/s NVLink.
llama = os.path.join(tmp, "llama3_8b_zero3.yaml")
with open(llama, "w") as f:
    f.write("name: llama3-8b-zero3\nmodel: llama3-8b\ncluster: dgx-h100x8\ncalibration: h100-sxm\n"
            "training: {global_batch: 64, micro_batch: 1, seq: 8192, dtype: bf16, optimizer: adam}\n"
            "parallelism: {schedule: 1f1b, tp: 2, pp: 1, dp: 16, cp: 2, zero: 3}\n")
rc, err, row, trace, devices = trace_run("llama_all", llama, "--trace-ranks", "all")
checks += 1
check(rc == 0 and trace is not None and len(devices) == 64, f"Llama 3 8B, every GPU drawn: {rc} {err}")
if trace is not None:
    inter = [float(d["inter_node_bytes"]) for d in devices]
    checks += 1
    check(min(inter) > 0 and max(inter) <= min(inter) * (1 + 1e-9),
          f"every GPU sends its own inter-node bytes, alike: {min(inter):.4g} to {max(inter):.4g} B")
    iteration = float(row["iteration_time_s"])
    checks += 1
    check(max(inter) <= 50e9 * iteration, f"{max(inter):.4g} B fit a 400 Gb/s NIC in {iteration:.4g} s")
    problems, _ = timeline_problems(trace, row, devices)
    checks += 1
    check(not problems, f"its timeline keeps the rules (link counters within capacity): {problems[:3]}")
    checks += 1
    check(gpus_drawn(trace) == list(range(64)), "--trace-ranks all draws all 64 GPUs")

# auto (the default): that point's whole timeline is about 66 MB, over the budget: the fold's
# representatives, and the row says so.
rc, err, row, auto_trace, _ = trace_run("llama_auto", llama)
checks += 1
check(rc == 0 and auto_trace is not None and 0 < len(gpus_drawn(auto_trace)) < 64
      and "timeline: the fold's representatives only" in row["message"]
      and os.path.getsize(os.path.join(tmp, "llama_auto", "llama3-8b-zero3_0.json")) < 50e6,
      f"auto thins a large timeline and says so: {rc} {err} {row and row['message']}")

# Ranks, on a small point drawn whole (zoo-smoke: 16 GPUs, pp 4 x dp 4).
zoo = os.path.join(FIXTURES, "zoo_smoke.yaml")
pp4 = ("--set", "parallelism.pp=4", "--set", "parallelism.schedule=1f1b", "--set", "training.global_batch=32")
rc, err, row, trace, _ = trace_run("ranks", zoo, *pp4, "--trace-ranks", "0-1,9,40-50")
checks += 1
check(rc == 0 and trace is not None and gpus_drawn(trace) == [0, 1, 9], f"--trace-ranks 0-1,9,40-50: {rc} {err}")
rc, err, row, trace, _ = trace_run("replica0", zoo, *pp4, "--trace-ranks", "replica0")
checks += 1
check(rc == 0 and trace is not None and gpus_drawn(trace) == [0, 4, 8, 12],
      f"--trace-ranks replica0: one GPU per stage (dp 4): {trace and gpus_drawn(trace)}")
if trace is not None:
    sent = [e for e in trace["traceEvents"] if e["ph"] in ("X", "C") and e["pid"] not in (1, 5, 9, 13)]
    checks += 1
    check(not sent, f"nothing drawn on other GPUs: {sent[:1]}")
rc, err, row, trace, _ = trace_run("none", zoo, *pp4, "--trace-ranks", "64-70")
checks += 1
check(rc == 0 and trace is None and "names none of this point's 16 GPUs" in row["message"],
      f"ranks past the point's GPUs: no file, and the row says why: {rc} {row and row['message']}")

# The window: every slice overlaps it, and the counters start and end inside it.
rc, err, row, whole, _ = trace_run("whole", zoo, *pp4)
t0, t1 = 0.25 * float(row["iteration_time_s"]), 0.5 * float(row["iteration_time_s"])
rc, err, row, trace, _ = trace_run("window", zoo, *pp4, "--trace-window", f"{t0}:{t1 * 1e3}ms")
checks += 1
check(rc == 0 and trace is not None, f"--trace-window: {rc} {err}")
if trace is not None and whole is not None:
    lo, hi = t0 * 1e6, t1 * 1e6  # microseconds, as the file
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    inside = [e for e in whole["traceEvents"] if e["ph"] == "X" and e["ts"] + e["dur"] >= lo and e["ts"] <= hi]
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    checks += 1
    check(0 < len(slices) == len(inside) < len([e for e in whole["traceEvents"] if e["ph"] == "X"]),
          f"the slices that overlap the window, and only those: {len(slices)} of {len(inside)}")
    checks += 1
    check(counters and all(lo - 1e-3 <= c["ts"] <= hi + 1e-3 for c in counters)
          and min(c["ts"] for c in counters) >= lo - 1e-3,
          "counter samples inside the window")

# Counters: none, memory or links only.
for which, names in (("none", set()), ("memory", {"memory"}), ("links", {"link send"}), ("all", {"memory", "link send"})):
    rc, err, row, trace, _ = trace_run(f"counters_{which}", zoo, *pp4, "--trace-counters", which)
    got = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"} if trace else None
    checks += 1
    check(rc == 0 and got == names, f"--trace-counters {which}: {got}")

# --trace-format: Perfetto's protobuf (.perfetto-trace) holds what the JSON does. Read here with a
# protobuf wire reader of a few lines (the field numbers of traces/perfetto_trace.proto), so that the
# check does not lean on ddlsim's own generated code.
def wire(buf):
    """(field number, value) of each field of a protobuf message: an int (varint), bytes (length-delimited)
    or the raw 8 or 4 bytes (fixed64, fixed32)."""
    i, out = 0, []
    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    while i < len(buf):
        key = varint()
        field, kind = key >> 3, key & 7
        if kind == 0:
            out.append((field, varint()))
        elif kind == 2:
            n = varint()
            out.append((field, buf[i:i + n]))
            i += n
        elif kind in (1, 5):
            n = 8 if kind == 1 else 4
            out.append((field, buf[i:i + n]))
            i += n
        else:
            raise ValueError(f"wire type {kind}")
    return out


def perfetto_summary(path):
    """Slice names begun, counter samples, flow ids begun and ended, and process names of a .perfetto-trace."""
    with open(path, "rb") as f:
        packets = [v for k, v in wire(f.read()) if k == 1]
    names, counters, flows, ends, processes = [], 0, set(), set(), set()
    interned = {}  # event names by iid (InternedData.event_names)
    for packet in packets:
        fields = wire(packet)
        for field, value in fields:  # the packet's interned names first (a field after its event)
            if field == 12:  # interned_data
                for entry in (dict(wire(v)) for k, v in wire(value) if k == 2):
                    interned[entry[1]] = entry[2].decode()
        for field, value in fields:
            if field == 60:  # track_descriptor
                for k, v in wire(value):
                    if k == 3:  # process
                        processes |= {n.decode() for kk, n in wire(v) if kk == 6}
            if field != 11:  # track_event
                continue
            event = dict((k, v) for k, v in wire(value) if k in (9, 10, 23))
            if event.get(9) == 1:
                names.append(interned[event[10]] if 10 in event else event[23].decode())
            counters += event.get(9) == 4
            flows |= {v for k, v in wire(value) if k == 47}
            ends |= {v for k, v in wire(value) if k == 48}
    return names, counters, flows, ends, processes


rc, err, row, trace, _ = trace_run("format_both", zoo, *pp4, "--trace-format", "both")
proto = os.path.join(tmp, "format_both", f"{row['experiment']}_0.perfetto-trace") if row else ""
checks += 1
check(rc == 0 and trace is not None and os.path.exists(proto), f"--trace-format both writes both files: {rc} {err}")
if trace is not None and os.path.exists(proto):
    names, counters, flows, ends, processes = perfetto_summary(proto)
    events = trace["traceEvents"]
    checks += 4
    check(sorted(names) == sorted(e["name"] for e in events if e["ph"] == "X"),
          f"every slice, once: {len(names)} in the protobuf, {sum(e['ph'] == 'X' for e in events)} in the JSON")
    check(counters == sum(len(e["args"]) for e in events if e["ph"] == "C") > 0, f"every counter sample: {counters}")
    check(flows and ends and ends <= flows and len(flows) == len({e["id"] for e in events if e["ph"] == "s"}),
          f"every flow starts and ends on a slice: {len(flows)} started, {len(ends)} ended")
    check(processes == {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"},
          f"a process per GPU, named as in the JSON: {sorted(processes)[:3]}")
    checks += 1
    check(os.path.getsize(proto) < os.path.getsize(os.path.join(tmp, "format_both", f"{row['experiment']}_0.json")),
          "the protobuf file is the smaller")
rc, err, row, trace, _ = trace_run("format_perfetto", zoo, *pp4, "--trace-format", "perfetto")
checks += 1
check(rc == 0 and trace is None and row is not None
      and os.path.exists(os.path.join(tmp, "format_perfetto", f"{row['experiment']}_0.perfetto-trace")),
      f"--trace-format perfetto writes the protobuf file alone: {rc} {err}")

# Bad values are usage errors (exit 2) that say what is accepted; none of them without --trace-dir.
for args, says in ((("--trace-ranks", "3-1"), "ends before it begins"), (("--trace-ranks", "gpu0"), "is not a rank"),
                   (("--trace-window", "1:0.5"), "ends before it begins"), (("--trace-window", "1"), "T0:T1"),
                   (("--trace-window", "a:b"), "is not a time"), (("--trace-counters", "some"), "all, memory, links or none"),
                   (("--trace-format", "xml"), "json")):
    rc, _, err = run(binary, "run", zoo, "--quiet", "-o", os.path.join(tmp, "bad.csv"), "--trace-dir",
                     os.path.join(tmp, "bad"), *args)
    checks += 1
    check(rc == 2 and says in err, f"{' '.join(args)}: exit {rc}, {err.strip()[:200]}")
rc, _, err = run(binary, "run", zoo, "--quiet", "-o", os.path.join(tmp, "bad.csv"), "--trace-ranks", "0")
checks += 1
check(rc == 2 and "--trace-dir" in err, f"--trace-ranks without --trace-dir: exit {rc}, {err.strip()[:200]}")

finish("cli_timeline_view", checks)
