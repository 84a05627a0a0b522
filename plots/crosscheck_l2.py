#!/usr/bin/env python3
"""A GPU session's kernels cold and warm against its measured steps, as a Markdown table: for each workload of the
session, the sum over its launches of the collector's median time for that launch's exact shape (its kernels' busy
time, as `calibrate fit` takes it), with every run starting from a cold L2 (records.jsonl, what the fitted profile
prices) and with its operands left in the L2 (records-warm.jsonl, `ddlsim-collect --workloads-only --l2 warm`),
beside the step's measured time (measured-<i>.json, a CUDA graph replay). Where the measured step lies between the
two sums tells how much of a step's kernels find their operands in the L2, which the cold microbenchmarks leave out
(docs/crosscheck-gpu.md).

usage: crosscheck_l2.py SESSION [-o TABLE.md]

The sums leave out the gaps between kernels; a launch whose shape has no record is counted and named."""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys

from ddlsim_csv import write_text


def key_of_launch(launch):
    """The collector's shape key of a workload launch (BenchPoint::shape_key), or its bytes for memory-bound ops."""
    op, dtype = launch["op"], launch.get("dtype", "")
    if op in ("gemm", "batched_gemm"):
        layout = launch.get("layout", "nn")
        shape = f"m={launch['m']} n={launch['n']} k={launch['k']} batch={launch.get('batch', 1)}"
        return op, dtype, shape + ("" if layout == "nn" else f" layout={layout}")
    if op == "conv2d":
        n, c, h, w, k, r, s, stride, pad = launch["conv"]
        return op, dtype, f"n={n} c={c} h={h} w={w} k={k} r={r} s={s} stride={stride} pad={pad} {launch['pass']}"
    # Memory-bound kernels by their bytes alone: a record of no work (a zero-byte launch) carries no dtype.
    return op, "", round(float(launch.get("bytes", 0)))


def key_of_record(record):
    shape = record.get("shape")
    if shape:
        return record.get("op"), record.get("dtype", ""), shape
    return record.get("op"), "", round(float(record.get("bytes", 0)))


def record_seconds(record, span=False):
    """A record's time as `calibrate fit` takes it: the busy time of its kernels when it ran several (a CUDA graph
    runs them back to back), else its span; its span whatever it ran with span=True."""
    if not span and int(record.get("kernels", 0)) > 1 and float(record.get("busy_s", 0)) > 0:
        return float(record["busy_s"])
    return float(record["duration_s"])


def medians(path, span=False):
    """Median time (record_seconds) of each shape's runs in a records file; {} when the file is absent."""
    if not os.path.exists(path):
        return {}
    runs = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "kernel":
                runs[key_of_record(r)].append(record_seconds(r, span))
    return {k: statistics.median(v) for k, v in runs.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    cold = medians(os.path.join(args.session, "records.jsonl"))
    warm = medians(os.path.join(args.session, "records-warm.jsonl"))
    if not cold:
        sys.exit(f"{args.session}/records.jsonl: no kernel records")
    workloads = sorted(glob.glob(os.path.join(args.session, "workload-*.json")),
                       key=lambda p: int(re.search(r"workload-(\d+)\.json$", p).group(1)))
    lines = ["| point | workload | launches | cold kernels s | warm kernels s | warm / cold | measured s | "
             "cold vs measured % | warm vs measured % |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    missing = collections.Counter()
    for path in workloads:
        i = int(re.search(r"workload-(\d+)\.json$", path).group(1))
        with open(path) as f:
            w = json.load(f)
        launches = [launch for t in w["tasks"] if t["kind"] == "compute" for launch in t.get("launches", [])]
        cold_s = warm_s = 0.0
        warm_complete = bool(warm)
        for launch in launches:
            k = key_of_launch(launch)
            if k not in cold:
                missing[k] += 1
                continue
            cold_s += cold[k]
            if k in warm:
                warm_s += warm[k]
            else:
                warm_complete = False
        measured = None
        m_path = os.path.join(args.session, f"measured-{i}.json")
        if os.path.exists(m_path):
            with open(m_path) as f:
                measured = statistics.median(json.load(f)["iterations_s"])

        def pct(x):
            return f"{100 * (x - measured) / measured:+.1f}" if measured else ""
        lines.append("| {} | {} | {} | {:.4f} | {} | {} | {} | {} | {} |".format(
            i, w.get("label", ""), len(launches), cold_s,
            f"{warm_s:.4f}" if warm_complete else "-", f"{warm_s / cold_s:.3f}" if warm_complete and cold_s else "-",
            f"{measured:.4f}" if measured else "-", pct(cold_s), pct(warm_s) if warm_complete else ""))
    if missing:
        lines += ["", f"{sum(missing.values())} launch(es) of {len(missing)} shape(s) have no cold record, e.g. "
                  f"{next(iter(missing))}"]
    if not warm:
        lines += ["", "No warm records (records-warm.jsonl): `ddlsim-collect --workloads-only --l2 warm` writes them."]
    text = "\n".join(lines) + "\n"
    write_text(text, args.output)


if __name__ == "__main__":
    main()
