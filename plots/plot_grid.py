#!/usr/bin/env python3
"""Throughput of every P_r x P_c process grid, one panel per network and GPU count (a heatmap row each).

usage: plot_grid.py RESULTS.csv [-o FIGURE.png]   (e.g. from experiments/grid_shapes.yaml)

Each panel's cells are P_r = tp (model) x P_c = dp (data) shapes of one P, coloured by throughput
relative to the panel's best; the best cell is outlined. Points with status "ok" and pp = 1 only.
"""
import argparse
import os
from collections import defaultdict

from ddlsim_csv import load_rows, pyplot


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    rows = load_rows(args.csv, {"status", "model", "gpus", "pp", "tp", "dp", "throughput_samples_per_s"})
    panels = defaultdict(list)
    for r in rows:
        if r["status"] == "ok" and r["pp"] == "1":
            panels[(r["model"], int(r["gpus"]))].append((int(r["tp"]), int(r["dp"]), float(r["throughput_samples_per_s"])))
    if not panels:
        raise SystemExit(f"{args.csv}: no ok points with pp = 1")
    plt = pyplot()
    keys = sorted(panels)
    fig, axes = plt.subplots(len(keys), 1, figsize=(8, 1.3 * len(keys) + 1), squeeze=False)
    image = None
    for ax, key in zip(axes[:, 0], keys):
        cells = sorted(panels[key])
        best = max(c[2] for c in cells)
        values = [[c[2] / best for c in cells]]
        image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels([f"{c[0]}x{c[1]}" for c in cells], fontsize=8)
        ax.set_yticks([])
        ax.set_ylabel(f"{key[0]}\nP = {key[1]}", rotation=0, ha="right", va="center", fontsize=9)
        i = max(range(len(cells)), key=lambda j: cells[j][2])
        ax.add_patch(plt.Rectangle((i - 0.5, -0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        for j, c in enumerate(cells):
            ax.text(j, 0, f"{c[2] / best:.2f}", ha="center", va="center", fontsize=7, color="white" if c[2] / best < 0.6 else "black")
    axes[-1, 0].set_xlabel("P_r x P_c (tp x dp); red: fastest; numbers: throughput / best")
    fig.colorbar(image, ax=axes[:, 0].tolist(), shrink=0.8, label="throughput / best")
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    fig.savefig(out, dpi=120, bbox_inches="tight")
    print(out)


if __name__ == "__main__":
    main()
