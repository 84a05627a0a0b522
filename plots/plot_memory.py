#!/usr/bin/env python3
"""Peak memory per GPU against micro-batch size, one line per layout, with the GPU's capacity.

usage: plot_memory.py RESULTS.csv [-o FIGURE.png] [--global-batch B]...   (e.g. a search microbatch CSV, or any sweep over micro_batch)

Every point with a peak-memory estimate (ok and oom alike) is drawn; the dashed line is the memory
capacity of the cluster's GPUs, so the out-of-memory points are the ones above it.
"""
import argparse
from collections import defaultdict

from ddlsim_csv import load_rows, pyplot, save


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    parser.add_argument("--global-batch", type=int, action="append", help="only these mini-batches (repeatable)")
    args = parser.parse_args()
    rows = load_rows(args.csv, {"status", "micro_batch", "peak_memory_bytes", "memory_capacity_bytes", "pp", "dp", "tp",
                                "schedule", "global_batch"})
    lines = defaultdict(list)
    capacity = 0.0
    for r in rows:
        if args.global_batch and int(r["global_batch"]) not in args.global_batch:
            continue
        if r["peak_memory_bytes"]:
            key = (r["schedule"], int(r["pp"]), int(r["dp"]), int(r["tp"]), int(r["global_batch"]))
            lines[key].append((int(r["micro_batch"]), float(r["peak_memory_bytes"]) / 2**30, r["status"]))
        if r["memory_capacity_bytes"]:
            capacity = max(capacity, float(r["memory_capacity_bytes"]) / 2**30)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for key in sorted(lines):
        pts = sorted(lines[key])
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=f"{key[0]} pp {key[1]} dp {key[2]} tp {key[3]}, B {key[4]}")
        oom = [p for p in pts if p[2] == "oom"]
        ax.scatter([p[0] for p in oom], [p[1] for p in oom], marker="x", color=line.get_color(), s=60, zorder=3)
    if capacity:
        ax.axhline(capacity, color="black", linestyle="--", linewidth=1, label=f"capacity {capacity:.0f} GiB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batch size")
    ax.set_ylabel("peak memory per GPU (GiB); x: out of memory")
    ax.set_title(f"{rows[0]['model']} on {rows[0]['cluster']}", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    save(fig, args.output, args.csv)


if __name__ == "__main__":
    main()
