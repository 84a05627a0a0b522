#!/usr/bin/env python3
"""Throughput and pipeline bubble against the number of micro-batches M, one line per pipeline depth K.

usage: plot_bm.py RESULTS.csv [-o FIGURE.png]   (e.g. from experiments/gpipe_bm.yaml)

Top: throughput (samples/s) against M; bottom: the bubble fraction against M, with GPipe's
(K-1)/(M+K-1) dotted for each K. Points with status "ok" only.
"""
import argparse
from collections import defaultdict

from ddlsim_csv import load_rows, pyplot, save


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    rows = load_rows(args.csv, {"status", "pp", "num_micro_batches", "throughput_samples_per_s", "bubble_fraction"})
    lines = defaultdict(list)
    for r in rows:
        if r["status"] == "ok":
            lines[int(r["pp"])].append((int(r["num_micro_batches"]), float(r["throughput_samples_per_s"]), float(r["bubble_fraction"])))
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    for k in sorted(lines):
        pts = sorted(lines[k])
        m = [p[0] for p in pts]
        line, = top.plot(m, [p[1] for p in pts], marker="o", label=f"K = {k}")
        bottom.plot(m, [p[2] for p in pts], marker="o", color=line.get_color(), label=f"K = {k}")
        bottom.plot(m, [(k - 1) / (x + k - 1) for x in m], linestyle=":", color=line.get_color())
    top.set_ylabel("throughput (samples/s)")
    top.set_title(f"{rows[0]['model']} on {rows[0]['cluster']}, global batch {rows[0]['global_batch']}", fontsize=10)
    top.legend(fontsize=8)
    bottom.set_ylabel("bubble fraction (dotted: (K-1)/(M+K-1))")
    bottom.set_xlabel("micro-batches M")
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
    save(fig, args.output, args.csv)


if __name__ == "__main__":
    main()
