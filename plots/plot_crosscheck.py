#!/usr/bin/env python3
"""Simulated against measured throughput, with the y = x line, from a `ddlsim execute` CSV.

usage: plot_crosscheck.py CROSSCHECK.csv [-o FIGURE.png] [--title TEXT]

One marker per point with both times (status "ok"), coloured by schedule and shaped by pipeline
depth; dotted lines at +-10% around y = x; the mean absolute percentage error in the title.
Run it with Debian's python3 (python3-matplotlib).
"""
import argparse
import csv
import sys

from ddlsim_csv import save


def load_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    required = {"status", "throughput_samples_per_s", "measured_throughput_samples_per_s", "error_pct", "schedule", "pp",
                "backend", "device"}
    missing = required - set(rows[0].keys() if rows else required)
    if not rows or missing:
        sys.exit(f"{path}: not a ddlsim execute CSV (missing columns: {', '.join(sorted(missing)) or 'all rows'})")
    rows = [r for r in rows if r["status"] == "ok" and r["measured_throughput_samples_per_s"]]
    if not rows:
        sys.exit(f"{path}: no point has both a simulated and a measured time")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output", help="PNG path (default: the CSV path with .png)")
    parser.add_argument("--title", help="figure title")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_rows(args.csv)
    mape = sum(abs(float(r["error_pct"])) for r in rows) / len(rows)
    fig, ax = plt.subplots(figsize=(6, 6))
    markers = {"1": "o", "2": "s", "4": "^", "8": "D"}
    for schedule in sorted({r["schedule"] for r in rows}):
        for pp in sorted({r["pp"] for r in rows}, key=int):
            sel = [r for r in rows if r["schedule"] == schedule and r["pp"] == pp]
            if sel:
                ax.scatter([float(r["measured_throughput_samples_per_s"]) for r in sel],
                           [float(r["throughput_samples_per_s"]) for r in sel], marker=markers.get(pp, "x"),
                           label=f"{schedule}, pp {pp}", s=45)
    values = [float(r[c]) for r in rows for c in ("throughput_samples_per_s", "measured_throughput_samples_per_s")]
    lo, hi = min(values) * 0.8, max(values) * 1.2
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="y = x")
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], color="gray", linestyle=":", linewidth=1, label="+-10%")
    ax.plot([lo, hi], [lo * 0.9, hi * 0.9], color="gray", linestyle=":", linewidth=1)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured throughput (samples/s)")
    ax.set_ylabel("simulated throughput (samples/s)")
    ax.set_title(args.title or f"{rows[0]['backend']} backend, {rows[0]['device'][:60]}\n"
                 f"mean absolute error {mape:.1f}% over {len(rows)} points", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, args.output, args.csv)


if __name__ == "__main__":
    main()
