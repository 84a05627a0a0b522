#!/usr/bin/env python3
"""The GPU cross-check as a Markdown page: each point's simulated and measured iteration time and peak memory, the
error, and the mean absolute percentage error (MAPE) per model and over all points, from a `ddlsim execute` CSV.

usage: crosscheck_table.py CROSSCHECK.csv [-o TABLE.md] [--profile PROFILE.yaml] [--session DIR]

--profile adds the fitted profile's provenance (device, driver, CUDA, cuDNN, NCCL, clocks, date, commit);
--session adds the GPU session's clock readings (nvidia-smi, clocks-start.csv and clocks-end.csv there).
Needs no package beyond Python's standard library.
"""
import argparse
import csv
import json
import os
import statistics
import sys

from ddlsim_csv import write_text

GIB = 1024.0 ** 3


def provenance(path):
    """The `provenance:` block of a profile YAML written by ddlsim (one `key: "value"` per line)."""
    out, inside = {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("device:"):
                out["device"] = line.partition(":")[2].strip().strip('"')
                continue
            if line.startswith("provenance:"):
                inside = True
                continue
            if inside:
                if not line.startswith("  "):
                    break
                key, _, value = line.strip().partition(":")
                value = value.strip()
                if value.startswith('"') and value.endswith('"'):
                    value = value[1:-1].replace('\\"', '"')
                out[key] = value
    return out


def number(row, column):
    try:
        return float(row[column])
    except (KeyError, ValueError):
        return None


def mean_abs(errors):
    """The mean absolute value of the errors that are known (not None), and how many there are."""
    errors = [abs(e) for e in errors if e is not None]
    return (sum(errors) / len(errors), len(errors)) if errors else (None, 0)


def mape_lines(rows, error):
    """The MAPE table per model and over all rows, `error(i, row)` giving a row's error in % (None: unknown);
    and the MAPE over all rows with its count."""
    lines = ["| models | points compared | MAPE % |", "| --- | ---: | ---: |"]
    for model in sorted({r.get("model", "") for r in rows}) + ["all"]:
        value, n = mean_abs([error(i, r) for i, r in enumerate(rows) if model in ("all", r.get("model"))])
        lines.append(f"| {model} | {n} | {value:.2f} |" if value is not None else f"| {model} | 0 | - |")
    return lines, value, n


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    parser.add_argument("--profile")
    parser.add_argument("--session")
    args = parser.parse_args()
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "measured_iteration_time_s" not in rows[0]:
        sys.exit(f"{args.csv}: not a ddlsim execute CSV")

    lines = ["# GPU cross-check: simulated against measured", ""]
    device = next((r["device"] for r in rows if r.get("device")), "")
    if device:
        lines.append(f"Measured on: {device}.")
    if args.profile:
        p = provenance(args.profile)
        lines.append(f"Simulated with `{args.profile}`, fitted from the session's microbenchmarks.")
        lines.append("")
        lines.append("| provenance | value |")
        lines.append("| --- | --- |")
        for key in ("device", "driver", "cuda_runtime", "cublas", "cudnn", "nccl_version", "clocks_start", "clocks_end",
                    "clocks_warning", "l2_isolation", "collective_timing", "math", "date", "commit", "command"):
            if key in p:
                lines.append(f"| {key} | {p[key]} |")
    if args.session:
        for name in ("clocks-start.csv", "clocks-end.csv"):
            path = os.path.join(args.session, name)
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                lines += ["", f"nvidia-smi, {name[:-4].replace('-', ' ')}:", "", "```", text, "```"]
    # The same steps issued eagerly (measured-eager-<point>.json, when the session ran them both ways): the host's
    # cost of issuing each launch included, which a CUDA graph replay leaves out.
    eager = {}
    if args.session:
        for i, r in enumerate(rows):
            path = os.path.join(args.session, f"measured-eager-{i}.json")
            if os.path.exists(path):
                with open(path) as f:
                    eager[i] = statistics.median(json.load(f)["iterations_s"])

    def eager_error(i, r):
        sim = number(r, "iteration_time_s")
        return 100 * (sim - eager[i]) / eager[i] if i in eager and sim is not None else None
    lines += ["", "| model | micro-batch | simulated s | measured s (min-max) | error % | simulated peak GiB | "
                  "measured peak GiB | status |" + (" eager measured s | eager error % |" if eager else ""),
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |" + (" ---: | ---: |" if eager else "")]
    for i, r in enumerate(rows):
        sim, real = number(r, "iteration_time_s"), number(r, "measured_iteration_time_s")
        lo, hi = number(r, "measured_min_s"), number(r, "measured_max_s")
        err = number(r, "error_pct")
        sim_mem, real_mem = number(r, "peak_memory_bytes"), number(r, "measured_peak_memory_bytes")
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r.get("model", ""), r.get("micro_batch", ""),
            f"{sim:.4f}" if sim is not None else "",
            f"{real:.4f} ({lo:.4f}-{hi:.4f})" if real is not None and lo is not None else "",
            f"{err:+.1f}" if err is not None else "",
            f"{sim_mem / GIB:.2f}" if sim_mem is not None else "",
            f"{real_mem / GIB:.2f}" if real_mem is not None else "",
            r.get("status", "") + (f": {r['message']}" if r.get("status") != "ok" and r.get("message") else ""))
            + (" {} | {} |".format(f"{eager[i]:.4f}", f"{eager_error(i, r):+.1f}" if sim is not None else "")
               if i in eager else (" | |" if eager else "")))
    table, value, n = mape_lines(rows, lambda i, r: number(r, "error_pct"))
    lines += [""] + table
    if value is not None:
        lines += ["", f"Goal: MAPE <= 5% on one GPU; this run: {value:.2f}% over {n} points."]
    if eager:
        lines += ["", "Against the eager runs (each launch issued by the host, as PyTorch without CUDA graphs):", ""]
        lines += mape_lines(rows, eager_error)[0]
    text = "\n".join(lines) + "\n"
    write_text(text, args.output)


if __name__ == "__main__":
    main()
