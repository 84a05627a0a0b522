#!/usr/bin/env python3
"""A pipeline Gantt chart from a ddlsim timeline (`ddlsim run --trace-dir DIR`): one row per GPU.

usage: plot_gantt.py TIMELINE.json [-o FIGURE.png] [--gpus N]

Forward passes light, backward passes dark, optimizer steps grey, on each GPU's compute stream; the
white gaps are the bubble. --gpus limits the rows (default 16).
"""
import argparse
import json
import os
import sys

from ddlsim_csv import pyplot, save


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("-o", "--output")
    parser.add_argument("--gpus", type=int, default=16)
    args = parser.parse_args()
    try:
        with open(args.timeline) as f:
            trace = json.load(f)
        # Each GPU's process is named "gpu<d> (node <n>)"; its compute stream is a thread so named.
        meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
        label = {e["pid"]: e["args"]["name"].split()[0].upper() for e in meta if e.get("name") == "process_name"}
        streams = {(e["pid"], e["tid"]) for e in meta
                   if e.get("name") == "thread_name" and e["args"]["name"] == "compute stream"}
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in streams]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"{args.timeline}: not a ddlsim timeline ({e})")
    if not events:
        sys.exit(f"{args.timeline}: no compute events")
    plt = pyplot()
    gpus = sorted({e["pid"] for e in events})[: args.gpus]
    colors = {"forward": "#7fb3e6", "backward": "#1f4e8c", "optimizer": "#999999"}
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(gpus) + 1.2))
    for row, gpu in enumerate(gpus):
        spans = [(e["ts"] / 1e3, e["dur"] / 1e3, colors.get(e.get("cat"), "#cccccc")) for e in events if e["pid"] == gpu]
        ax.broken_barh([(s, d) for s, d, _ in spans], (row - 0.4, 0.8), facecolors=[c for _, _, c in spans],
                       edgecolor="white", linewidth=0.4)
    ax.set_yticks(range(len(gpus)))
    ax.set_yticklabels([label.get(g, f"pid {g}").replace("GPU", "GPU ") for g in gpus], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(os.path.basename(args.timeline) + ": forward (light), backward (dark), optimizer (grey)", fontsize=9)
    save(fig, args.output, args.timeline)


if __name__ == "__main__":
    main()
