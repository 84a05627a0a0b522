#!/usr/bin/env python3
"""A GPU session's steps as the GPU ran them inside their CUDA graph, against the microbenchmarks, as Markdown
tables. `ddlsim-run-cuda --cuda-graph --trace` traces one eager iteration (a record per launch, with how many kernels
it ran) and then two replays of the graph (a record per kernel, in the order they ran, naming no launch): in that
order the second replay's kernels are the launches' kernels, which this script checks by name. For each step:

  graph busy    the second replay's kernels' own time, summed; gaps: the time between them
  cold busy     the sum over the launches of the collector's median busy time of that shape, cold L2 (records.jsonl):
                what `calibrate fit` prices
  cold span     the same with each run's span, first kernel's start to last kernel's end (the gaps a stream
                leaves between a cuDNN call's kernels under CUPTI included): what the fit priced before
  warm busy     the same with the operands left in the L2 (records-warm.jsonl)

beside the measured step (measured-<i>.json, untraced replays). Then the launches of all steps by kind: the graph's
busy time against the cold busy time, per op and pass, one kernel or several (of the points --kinds-of names, or
of all).

usage: crosscheck_graph.py SESSION [--kinds-of I,J,...] [-o TABLE.md]"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys

from crosscheck_l2 import key_of_record, medians
from ddlsim_csv import write_text


def read_records(path):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("type") == "kernel"]


def step_of(path):
    """(launch records of the eager iteration, kernels of the second replay, memsets of that replay)."""
    records = read_records(path)
    launches = [r for r in records if int(r.get("point", 0)) > 0]
    kernels = [r for r in records if int(r.get("point", 0)) == 0]
    n = sum(int(r.get("kernels", 1)) for r in launches)
    # A memset captured in the graph runs as a kernel there ("memset32"); eagerly it is no kernel CUPTI records.
    real = [k for k in kernels if not k["name"].startswith("memset")]
    if len(real) != 2 * n:
        raise ValueError(f"{path}: {len(real)} kernels in the replays, not twice the eager iteration's {n}")
    second = real[n:]
    first_done = real[n - 1]["start_s"]  # the first replay's last kernel: what starts later is the second's
    memsets = [k for k in kernels if k["name"].startswith("memset") and k["start_s"] > first_done]
    return launches, second, memsets


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session")
    parser.add_argument("--kinds-of", help="points whose launches the second table sums (default: all)")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    kinds_of = {int(x) for x in args.kinds_of.split(",")} if args.kinds_of else None
    cold = medians(os.path.join(args.session, "records.jsonl"))
    span = medians(os.path.join(args.session, "records.jsonl"), span=True)
    warm = medians(os.path.join(args.session, "records-warm.jsonl"))
    traces = sorted(glob.glob(os.path.join(args.session, "trace-graph-*.jsonl")),
                    key=lambda p: int(re.search(r"trace-graph-(\d+)\.jsonl$", p).group(1)))
    if not traces or not cold:
        sys.exit(f"{args.session}: no trace-graph-<i>.jsonl or no records.jsonl")

    def pct(x, ref):
        return f"{100 * (x - ref) / ref:+.1f}"

    lines = ["| point | workload | launches | kernels | graph busy s | gaps s | measured s | cold busy s | "
             "cold span s | warm busy s | cold busy vs measured % | cold span vs measured % |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    kinds = collections.defaultdict(lambda: [0, 0, 0.0, 0.0, 0.0])
    mismatched = 0
    for path in traces:
        i = int(re.search(r"trace-graph-(\d+)\.jsonl$", path).group(1))
        launches, second, memsets = step_of(path)
        with open(os.path.join(args.session, f"measured-{i}.json")) as f:
            measured = statistics.median(json.load(f)["iterations_s"])
        ran = sorted(second + memsets, key=lambda k: k["start_s"])
        busy = sum(k["duration_s"] for k in ran)
        gaps = ran[-1]["start_s"] + ran[-1]["duration_s"] - ran[0]["start_s"] - busy
        sums = [0.0, 0.0, 0.0]
        j = 0
        for launch in launches:
            count = int(launch.get("kernels", 1))
            own = second[j:j + count]
            j += count
            names = set(launch["name"].split("+"))
            mismatched += any(k["name"] not in names for k in own)
            key = key_of_record(launch)
            for s, table in enumerate((cold, span, warm)):
                sums[s] += table.get(key, float("nan"))
            if kinds_of is not None and i not in kinds_of:
                continue
            op = key[0] + (" " + key[2].split()[-1] if key[0] == "conv2d" else "")
            kind = kinds[(op, "several kernels" if count > 1 else "one kernel")]
            kind[0] += 1
            kind[1] += count
            kind[2] += sum(k["duration_s"] for k in own)
            kind[3] += cold.get(key, float("nan"))
            kind[4] += span.get(key, float("nan"))
        with open(path) as f:  # the provenance line names the workload
            label = json.loads(f.readline()).get("workload", "")
        lines.append(f"| {i} | {label} | {len(launches)} | {len(ran)} | {busy:.4f} | {gaps:.4f} | {measured:.4f} | "
                     f"{sums[0]:.4f} | {sums[1]:.4f} | {sums[2]:.4f} | {pct(sums[0], measured)} | "
                     f"{pct(sums[1], measured)} |")
    lines += ["", f"Launches of {'points ' + args.kinds_of if kinds_of is not None else 'all points'} by kind:", "",
              "| launches of | kernels per launch | launches | kernels | graph busy s | cold busy s | cold span s | "
              "graph / cold busy | graph / cold span |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (op, many), (n, k, graph, c, sp) in sorted(kinds.items()):
        lines.append(f"| {op} | {many} | {n} | {k} | {graph:.4f} | {c:.4f} | {sp:.4f} | {graph / c:.3f} | "
                     f"{graph / sp:.3f} |")
    if mismatched:
        lines += ["", f"{mismatched} launch(es) whose kernels in the graph do not carry the eager launch's names"]
    write_text("\n".join(lines) + "\n", args.output)


if __name__ == "__main__":
    main()
