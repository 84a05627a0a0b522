#!/usr/bin/env python3
"""Simulated against published: the table of docs/validation.md.

    ddlsim run experiments/validation.yaml -o results/validation.csv
    python3 plots/validation.py results/validation.csv [--published experiments/validation/published.csv]
                                [--markdown FILE] [--plot FILE.png] [--max-mape-fit PCT]
                                [--max-mape-holdout PCT] [--max-error PCT]
                                [--min-spearman R]

Row i of the results (config_id i of the experiment's zipped sweep) is row i of published.csv; the
script refuses to compare them unless their layouts agree (GPUs, tp, pp, cp, dp, sequence, global
batch, dtype), so the two files cannot drift apart. Each row's error is that of the simulated
iteration time against the one the source implies (published.csv's derived_iteration_time_s, whose
notes say how): positive when the simulator is slower.

Rows are the calibration set (`set` = fit: what the profile's fitted parameters were fitted on),
held out (`set` = holdout), or left out (`set` = "excluded: why"); the MAPE of the first two is
printed apart, each with its own bound.
Rankings: for each (source, model, gpu, dtype) with at least three rows, Spearman's rank correlation
of simulated and measured throughput per GPU. Exit 1 when a bound is missed, 2 on bad input.
"""
import argparse
import csv
import math
import os
import sys

LAYOUT = [("gpus", "gpus"), ("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("dp", "dp"), ("seq", "seq"),
          ("global_batch", "global_batch")]


def fail(msg, code=2):
    print(f"validation.py: {msg}", file=sys.stderr)
    sys.exit(code)


def read(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: {e.strerror}")


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def compare(results, published):
    if len(results) != len(published):
        fail(f"{len(results)} simulated rows for {len(published)} published ones: rerun experiments/validation.yaml")
    rows = []
    for sim, pub in zip(sorted(results, key=lambda r: int(r["config_id"])), published):
        for s_key, p_key in LAYOUT:
            if pub.get(p_key, "") != "" and float(sim[s_key]) != float(pub[p_key]):
                fail(f"row {pub['id']}: {s_key} {sim[s_key]} simulated, {pub[p_key]} published")
        measured = float(pub["derived_iteration_time_s"])
        ok = sim["status"] == "ok"
        simulated = float(sim["iteration_time_s"]) if ok else float("nan")
        tokens = float(pub["global_batch"]) * float(pub["seq"])
        rows.append({"id": pub["id"], "source": pub["source"], "model": pub["model"], "gpu": pub["gpu"],
                     "gpus": int(pub["gpus"]), "dtype": pub["dtype"], "set": pub.get("set", "holdout") or "holdout",
                     "layout": f"tp{pub['tp']} pp{pub['pp']} cp{pub['cp'] or 1} dp{pub['dp']}"
                               + (f" vp{pub['vp']}" if pub.get("vp") not in ("", "1", None) else ""),
                     "measured_s": measured, "simulated_s": simulated, "status": sim["status"],
                     "message": sim.get("message", ""),
                     "measured_tps": tokens / measured / int(pub["gpus"]),
                     "simulated_tps": tokens / simulated / int(pub["gpus"]) if ok else float("nan"),
                     "error_pct": 100 * (simulated - measured) / measured if ok else float("nan")})
    return rows


def mape(rows):
    errors = [abs(r["error_pct"]) for r in rows]
    return sum(errors) / len(errors) if errors else float("nan")


def rankings(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["source"], r["model"], r["gpu"], r["dtype"]), []).append(r)
    out = []
    for key, g in sorted(groups.items()):
        if len(g) >= 3:
            out.append((key, len(g), spearman([r["simulated_tps"] for r in g], [r["measured_tps"] for r in g])))
    return out


def markdown(rows, ranked):
    lines = ["| id | model | GPUs | layout | dtype | set | measured s | simulated s | error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['model']} | {r['gpus']:,} {r['gpu'].split()[0]} | {r['layout']} | "
                     f"{r['dtype']} | {r['set']} | {r['measured_s']:.3f} | {r['simulated_s']:.3f} | "
                     f"{r['error_pct']:+.1f}% |")
    lines.append("")
    for name in ("fit", "holdout"):
        sub = [r for r in rows if r["set"] == name]
        if sub:
            lines.append(f"- {name}: {len(sub)} rows, MAPE {mape(sub):.2f}%, largest "
                         f"{max(abs(r['error_pct']) for r in sub):.1f}%")
    lines.append(f"- all: {len(rows)} rows, MAPE {mape(rows):.2f}%, largest {max(abs(r['error_pct']) for r in rows):.1f}%")
    for (source, model, gpu, dtype), n, rho in ranked:
        lines.append(f"- ranking, {model} in {source.split(',')[0]} ({n} layouts): Spearman {rho:.2f}")
    return "\n".join(lines) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--published", default=os.path.join(here, "..", "experiments", "validation", "published.csv"))
    ap.add_argument("--markdown")
    ap.add_argument("--plot")
    ap.add_argument("--max-mape-fit", type=float)
    ap.add_argument("--max-mape-holdout", type=float)
    ap.add_argument("--max-error", type=float)
    ap.add_argument("--min-spearman", type=float)
    args = ap.parse_args()
    published = [r for r in read(args.published) if not r.get("set", "").startswith("excluded")]
    rows = compare(read(args.results), published)
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        fail(f"not simulated: {', '.join(r['id'] + ' (' + r['status'] + ': ' + r['message'] + ')' for r in bad)}", 1)
    ranked = rankings(rows)
    text = markdown(rows, ranked)
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5.5, 5))
        for name, marker in (("fit", "o"), ("holdout", "s")):
            sub = [r for r in rows if r["set"] == name]
            ax.scatter([r["measured_tps"] for r in sub], [r["simulated_tps"] for r in sub], marker=marker, label=name)
        lo = min(min(r["measured_tps"], r["simulated_tps"]) for r in rows) * 0.8
        hi = max(max(r["measured_tps"], r["simulated_tps"]) for r in rows) * 1.2
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("published tokens/s per GPU")
        ax.set_ylabel("simulated tokens/s per GPU")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    missed = []
    for name, bound in (("fit", args.max_mape_fit), ("holdout", args.max_mape_holdout)):
        sub = [r for r in rows if r["set"] == name]
        if sub and bound is not None and mape(sub) > bound:
            missed.append(f"{name} MAPE {mape(sub):.2f}% > {bound}%")
    if args.max_error is not None:
        missed += [f"{r['id']} {r['error_pct']:+.1f}% beyond {args.max_error}%" for r in rows
                   if abs(r["error_pct"]) > args.max_error]
    if args.min_spearman is not None:
        missed += [f"ranking {key[1]} ({key[0]}) Spearman {rho:.2f} < {args.min_spearman}" for key, n, rho in ranked
                   if not rho >= args.min_spearman]
    if missed:
        fail("; ".join(missed), 1)


if __name__ == "__main__":
    main()
