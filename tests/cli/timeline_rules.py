"""The rules of the Trace Event Format that ddlsim's timelines keep, so that Perfetto and
chrome://tracing draw them as meant (experiments/Timeline.hpp): slices on a track nest, numbers are
JSON numbers, flows have a start and an end bound inside slices, and each GPU has memory and link
counters that agree with the CSV, its link counters never above the link's bandwidth. `timeline_problems` returns what is wrong (empty: nothing)."""
import bisect
import os
import re
from collections import defaultdict

# Points of the shipped experiments whose timelines the tests check (--shard K/2^20 picks point K):
# the first, and where it is out of memory or one of several kinds, the points that show them.
SHIPPED_POINTS = {
    "llama3_recipes.yaml": [5, 11, 14],  # tp 8 folded with ZeRO-1; ZeRO-3 with cp 2; 405B, pp 16 on 1,024 GPUs
    "normalization.yaml": [0, 4],        # batch norm; synchronized batch norm
    "sync_async.yaml": [0, 3],           # parameter servers (BSP); ring all-reduce
    "validation.yaml": [11],             # framework megatron, FP8, cp 2 on 8 GPUs (NeMo's Llama 3 8B)
}
ONE_POINT = 1 << 20  # a shard count past any sweep's size: shard K of it is point K


def shipped_points(experiments_dir):
    """(file name, config_id) of the points to check, over every shipped experiment."""
    for name in sorted(f for f in os.listdir(experiments_dir) if f.endswith(".yaml")):
        for k in SHIPPED_POINTS.get(name, [0]):
            yield name, k


NUMERIC_ARGS = {"bytes", "from", "to", "members", "samples", "layer_begin", "layer_end", "share"}
LOOKS_NUMERIC = re.compile(r"^\s*[-+.]?\d")  # "12", "0-12", "3.5e9": a number written as a string


def ns(us):
    """A time of the file (microseconds) as whole nanoseconds, the timelines' resolution."""
    return round(us * 1000)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1.0)


def nesting_problems(slices):
    """Per (pid, tid): every slice inside the one open around its start, or after it (no partial overlap)."""
    problems = []
    tracks = defaultdict(list)
    for e in slices:
        tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    for track, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"track {track}: '{name}' [{start}, {end}] ns overlaps '{stack[-1][2]}' "
                                f"[{stack[-1][0]}, {stack[-1][1]}] ns")
            stack.append((start, end, name))
    return problems


def timeline_problems(trace, row, devices, peak_is_bound=False):
    """Checks one timeline against the rules and against its CSV row and device table (list of dicts).
    The memory counters peak at the CSV's peak memory, or with `peak_is_bound` never exceed it (the
    interleaved schedule, whose memory model adds up each chunk's own peak). Returns a list of
    problems and a summary dict (counts, for the caller's own checks)."""
    problems = []
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    flows = [e for e in events if e["ph"] in ("s", "t", "f")]
    counters = [e for e in events if e["ph"] == "C"]
    # GPU of each process, from its name "gpu<d> (node <n>)"
    gpu_of = {e["pid"]: int(e["args"]["name"].split()[0][3:]) for e in events
              if e["ph"] == "M" and e["name"] == "process_name"}
    pid_of = {gpu: pid for pid, gpu in gpu_of.items()}
    processes = set(gpu_of)
    # A large folded point is drawn by its representatives: "gpu<d> (node <n>), 1 of <k> alike".
    folded = any(e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"].endswith(" alike")
                 for e in events)
    if folded:
        devices = [d for d in devices if int(d["device"]) in pid_of]
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}

    # Times and ids are numbers; every slice is on a named track.
    for e in events:
        for key in ("ts", "dur", "pid", "tid"):
            if key in e and not is_number(e[key]):
                problems.append(f"{e['ph']} '{e.get('name')}': {key} is not a number: {e[key]!r}")
    if problems:
        return problems, {}
    unnamed = {(e["pid"], e["tid"]) for e in slices} - threads
    if unnamed:
        problems.append(f"slices on unnamed tracks: {sorted(unnamed)[:5]}")

    # Numbers in arguments are JSON numbers.
    for e in slices:
        for key, value in e.get("args", {}).items():
            if key in NUMERIC_ARGS and not is_number(value):
                problems.append(f"'{e['name']}': arg {key} is not a number: {value!r}")
            elif isinstance(value, str) and LOOKS_NUMERIC.match(value):
                problems.append(f"'{e['name']}': arg {key} is a number in a string: {value!r}")
    if problems:  # the rules below read these numbers
        return problems, {}

    problems += nesting_problems(slices)[:10]

    # Flows: per id one start, steps, one end, in time order, each strictly inside a slice of its
    # track (the innermost one there binds it).
    by_track = defaultdict(list)
    for e in slices:
        by_track[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e))
    for spans in by_track.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
    starts_of = {track: [s[0] for s in spans] for track, spans in by_track.items()}

    def enclosing(f):
        t, track = ns(f["ts"]), (f["pid"], f["tid"])
        i = bisect.bisect_left(starts_of.get(track, []), t) - 1
        while i >= 0:
            start, end, e = by_track[track][i]
            if start < t < end:
                return e
            i -= 1
        return None

    by_id = defaultdict(list)
    for f in flows:
        by_id[f["id"]].append(f)
    joined = {"transfer": 0, "collective": 0}
    for fid, chain in by_id.items():
        chain.sort(key=lambda f: ns(f["ts"]))
        phases = "".join(f["ph"] for f in chain)
        times = [ns(f["ts"]) for f in chain]
        if not re.fullmatch(r"st*f", phases) or len(set(times)) != len(times):
            problems.append(f"flow {fid}: events {phases} at {times} (want one s, t's, one f, in time order)")
        if len({(f["name"], f.get("cat")) for f in chain}) != 1:
            problems.append(f"flow {fid}: events differ in name or category")
        bound = [enclosing(f) for f in chain]
        if any(s is None for s in bound):
            problems.append(f"flow {fid}: an event is not strictly inside a slice of its track")
            continue
        if len({(s["name"], s["ts"], s["dur"], s["cat"]) for s in bound}) != 1 or len({s["pid"] for s in bound}) != len(bound):
            problems.append(f"flow {fid}: does not join one task's slices on distinct GPUs")
            continue
        first, last = bound[0], bound[-1]
        if first["cat"] == "transfer":
            if (gpu_of.get(first["pid"]), gpu_of.get(last["pid"]), len(bound)) != \
                    (first["args"]["from"], first["args"]["to"], 2):
                problems.append(f"flow {fid} of '{first['name']}': not from its sender to its receiver")
        elif first["cat"] == "collective":
            # Drawn by representatives, a collective joins those of its members that are drawn.
            if len(bound) > first["args"]["members"] or (not folded and len(bound) != first["args"]["members"]):
                problems.append(f"flow {fid} of '{first['name']}': joins {len(bound)} of {first['args']['members']} members")
        else:
            problems.append(f"flow {fid}: binds to a {first['cat']} slice")
            continue
        joined[first["cat"]] += len(bound)
    # Every transfer and every collective has its flow (tasks too short to hold the events aside).
    want = {"transfer": sum(2 for e in slices if e["cat"] == "transfer" and gpu_of.get(e["pid"]) == e["args"]["from"]
                            and ns(e["dur"]) >= 3),
            "collective": sum(1 for e in slices if e["cat"] == "collective" and e["args"]["members"] > 1
                              and ns(e["dur"]) >= e["args"]["members"] + 1)}
    if folded:
        want["collective"] = joined["collective"]
    if joined != want:
        problems.append(f"flows join {joined} slices, want {want}")

    # Counters: numbers; per GPU a memory series and a link series, the links never negative.
    series = defaultdict(list)
    for c in counters:
        for key, value in c["args"].items():
            if not is_number(value):
                problems.append(f"counter {c['name']} {key} of gpu {c['pid']}: not a number: {value!r}")
                continue
            series[(c["pid"], c["name"], key)].append((c["ts"], value))
    if 0 in processes or any(tid == 0 for _, tid in threads):
        problems.append("pid or tid 0, which Perfetto keeps for the kernel's swapper")
    for pid in sorted(processes):
        for name, key in (("memory", "bytes"), ("link send", "intra_node_Bps"), ("link send", "inter_node_Bps")):
            if (pid, name, key) not in series:
                problems.append(f"gpu {pid}: no counter '{name} {key}'")
    negative = [k for k, samples in series.items() if k[1] == "link send" and any(v < 0 for _, v in samples)]
    if negative:
        problems.append(f"negative link rates: {negative[:3]}")
    for k, samples in series.items():
        if [t for t, _ in samples] != sorted(t for t, _ in samples) or len({t for t, _ in samples}) != len(samples):
            problems.append(f"counter {k}: samples not in strictly increasing time")

    # Memory: each GPU's maximum is its peak in the device table; the largest is the CSV's peak.
    peaks = {pid: max(v for _, v in series[(pid, "memory", "bytes")]) for pid in processes
             if (pid, "memory", "bytes") in series}

    def agrees(got, want):
        return got <= want * (1 + 1e-9) if peak_is_bound else close(got, want, 1e-9)

    if not row.get("peak_memory_bytes"):
        problems.append("the CSV row has no peak_memory_bytes")
    elif peaks and not agrees(max(peaks.values()), float(row["peak_memory_bytes"])):
        problems.append(f"largest memory counter {max(peaks.values())}, CSV peak_memory_bytes {row['peak_memory_bytes']}")
    for d in devices:
        pid = pid_of.get(int(d["device"]))
        if d.get("peak_memory_bytes") and pid in peaks and not agrees(peaks[pid], float(d["peak_memory_bytes"])):
            problems.append(f"gpu {pid}: memory counter peaks at {peaks[pid]}, device table {d['peak_memory_bytes']}")
    if any(v <= 0 for pid in processes for _, v in series.get((pid, "memory", "bytes"), [])):
        problems.append("a memory counter at or below zero")

    # Links: the send rates integrate to the device table's bytes.
    def integral(samples):
        return sum(v * (t1 - t0) * 1e-6 for (t0, v), (t1, _) in zip(samples, samples[1:]))

    if sorted(pid_of) != sorted(int(d["device"]) for d in devices):
        problems.append(f"processes for GPUs {sorted(pid_of)}, device table for {[d['device'] for d in devices]}")
    for d in devices:
        pid = pid_of.get(int(d["device"]))
        intra = integral(series.get((pid, "link send", "intra_node_Bps"), []))
        inter = integral(series.get((pid, "link send", "inter_node_Bps"), []))
        for got, column in ((intra + inter, "comm_bytes"), (inter, "inter_node_bytes")):
            want = float(d[column])
            if abs(got - want) > 1e-6 * max(want, 1.0):
                problems.append(f"gpu {pid}: link counters integrate to {got:.6g} B, device table {column} {want:.6g}")
    # Links: no sample above the link's bandwidth (the file's otherData gives it; 0: no such link),
    # and every byte sent by the time the last task ends, which flow-level collectives guarantee (the
    # closed forms run as timers beside each other, which may ask more of a link than it has).
    ceilings = trace.get("otherData", {})
    end = max((ns(e["ts"]) + ns(e["dur"]) for e in slices), default=0)
    timers = any(e["args"].get("fidelity") == "analytic" for e in slices if "args" in e)
    for key in ("intra_node_Bps", "inter_node_Bps"):
        ceiling = ceilings.get(key.replace("_Bps", "_link_Bps"))
        if not is_number(ceiling) or ceiling < 0:
            problems.append(f"otherData has no {key.replace('_Bps', '_link_Bps')}: {ceilings}")
            continue
        for pid in sorted(processes):
            samples = series.get((pid, "link send", key), [])
            top = max((v for _, v in samples), default=0)
            if top > ceiling * (1 + 1e-9):
                problems.append(f"gpu {gpu_of[pid]}: {key} reaches {top:.6g} B/s, above its link's {ceiling:.6g}")
            if samples and not timers and ns(samples[-1][0]) > end:
                problems.append(f"gpu {gpu_of[pid]}: {key} still sending at {samples[-1][0]} us, after the last task")
    # Each GPU's bytes of the device table fit its links over the run (a ring crossing nodes at one
    # GPU instead of every GPU's rail gives that GPU the bytes of all of them).
    links = {"inter_node_Bps": ceilings.get("inter_node_link_Bps"), "intra_node_Bps": ceilings.get("intra_node_link_Bps")}
    for d in devices:
        inter = float(d["inter_node_bytes"])
        for sent, key in ((inter, "inter_node_Bps"), (float(d["comm_bytes"]) - inter, "intra_node_Bps")):
            if is_number(links[key]) and sent > links[key] * end * 1e-9 * (1 + 1e-9):
                problems.append(f"gpu {d['device']}: {sent:.6g} B over {key[:10]} links in {end * 1e-9:.6g} s, "
                                f"more than {links[key]:.6g} B/s allows")
    summary = {"slices": len(slices), "flows": len(by_id), "joined": joined, "counters": len(counters), "memory_peaks": peaks,
               "lanes": len(threads)}
    return problems, summary
