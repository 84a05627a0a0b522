#!/usr/bin/env python3
"""Throughput against micro-batch size, one line per parallel layout, from a ddlsim results CSV.

usage: plot_throughput.py RESULTS.csv [-o FIGURE.png] [--title TEXT]

Reads only the CSV (columns documented in docs/csv.md); draws the points with status "ok" and
marks micro-batch sizes that ran out of memory with an x on the axis. Writes a PNG.
Run it with Debian's python3 (python3-matplotlib); another python3 first on PATH may lack it.
"""
import argparse
import csv
import os
import sys
from collections import defaultdict


def load_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    required = {"status", "micro_batch", "throughput_samples_per_s", "pp", "dp", "tp", "schedule", "model"}
    missing = required - set(rows[0].keys() if rows else required)
    if not rows or missing:
        sys.exit(f"{path}: not a ddlsim results CSV (missing columns: {', '.join(sorted(missing)) or 'all rows'})")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output", help="PNG path (default: the CSV path with .png)")
    parser.add_argument("--title", help="figure title (default: experiment and model)")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = load_rows(args.csv)
    lines = defaultdict(list)
    ooms = defaultdict(list)
    for r in rows:
        key = (r["schedule"], int(r["pp"]), int(r["dp"]), int(r["tp"]))
        if r["status"] == "ok":
            lines[key].append((int(r["micro_batch"]), float(r["throughput_samples_per_s"])))
        elif r["status"] == "oom":
            ooms[key].append(int(r["micro_batch"]))
    if not lines:
        sys.exit(f"{args.csv}: no row with status ok to plot")

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for key in sorted(lines):
        schedule, pp, dp, tp = key
        pts = sorted(lines[key])
        label = f"{schedule} pp={pp} dp={dp}" + (f" tp={tp}" if tp > 1 else "")
        (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        if ooms[key]:
            ax.plot(ooms[key], [0] * len(ooms[key]), "x", color=line.get_color(), clip_on=False)
    ax.set_xscale("log", base=2)
    sizes = sorted({p[0] for pts in lines.values() for p in pts} | {m for ms in ooms.values() for m in ms})
    ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("micro-batch size (samples)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_ylim(bottom=0)
    experiment = rows[0].get("experiment", "")
    ax.set_title(args.title or f"{experiment}: {rows[0]['model']} on {rows[0].get('cluster', '')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    if os.path.dirname(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
