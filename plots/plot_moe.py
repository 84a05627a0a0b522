#!/usr/bin/env python3
"""Mixtures of experts: MFU and exposed all-to-all time against the busiest expert's load.

usage: plot_moe.py RESULTS.csv [-o FIGURE.png]     (e.g. experiments/moe.yaml's CSV)

The x axis is the busiest expert's tokens over the mean (the CSV's load_imbalance). One line per model, GPUs and
expert-parallel layout (ep and its all-to-all algorithm): colour by model and GPUs, solid for ep
inside a node (ep <= GPUs per node), dashed for direct all-to-alls across nodes, dotted for
hierarchical ones. Left: MFU (6 N_active + 12 l h s per token); right: the all-to-all time left
exposed per iteration. Points that are not ok are left out.
"""
import argparse

from ddlsim_csv import load_rows, pyplot, save


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    rows = load_rows(args.csv, {"status", "model", "gpus", "ep", "ep_collective", "mfu", "all_to_all_time_s",
                                "tokens_per_s", "load_imbalance"})
    lines = {}
    for r in rows:
        key = (r["model"], int(r["gpus"] or 0), int(r["ep"] or 1), r["ep_collective"])
        lines.setdefault(key, []).append(r)
    series = []
    for key, members in lines.items():
        points = sorted(((float(r["load_imbalance"]), r) for r in members if r["status"] == "ok"), key=lambda p: p[0])
        if points:
            series.append((key, points))
    if not series:
        raise SystemExit(f"{args.csv}: no mixture-of-experts point is ok")
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    groups = sorted({(k[0], k[1]) for k, _ in series})
    colors = {g: plt.cm.tab10(i % 10) for i, g in enumerate(groups)}
    for (model, gpus, ep, algorithm), points in sorted(series):
        style = "-" if ep <= 8 else "--" if algorithm == "direct" else ":"
        x = [p[0] for p in points]
        label = f"{model} on {gpus}, ep {ep}" + ("" if ep <= 8 else f" {algorithm}")
        left.plot(x, [float(p[1]["mfu"]) for p in points], style, marker="o", color=colors[(model, gpus)], label=label)
        right.plot(x, [float(p[1]["all_to_all_time_s"]) for p in points], style, marker="o", color=colors[(model, gpus)],
                   label=label)
    left.set_xlabel("busiest expert's tokens over the mean (load_imbalance)")
    left.set_ylabel("MFU (6 N_active + 12 l h s per token)")
    left.set_ylim(bottom=0)
    right.set_xlabel("busiest expert's tokens over the mean (load_imbalance)")
    right.set_ylabel("exposed all-to-all time per iteration (s)")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    left.legend(fontsize=7)
    fig.suptitle("mixtures of experts: ep inside a node (solid) against across nodes (dashed direct, dotted "
                 "hierarchical)", fontsize=10)
    save(fig, args.output, args.csv)


if __name__ == "__main__":
    main()
