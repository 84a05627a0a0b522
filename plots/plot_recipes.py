#!/usr/bin/env python3
"""Model flop utilization of each training recipe of a run, as horizontal bars grouped by model.

usage: plot_recipes.py RESULTS.csv [-o FIGURE.png]     (e.g. experiments/llama3_recipes.yaml's CSV)

One bar per point: its label is the model, sequence length, GPUs and split (tp x pp x dp x cp), the
ZeRO stage and sequence parallelism; its length the MFU (PaLM's 6N + 12 l h s model flop over the
GPUs' dense peak), with tokens/s and peak memory written beside it. Points that do not fit in memory
are drawn as an empty bar marked "oom" with the memory they would need.
"""
import argparse

from ddlsim_csv import load_rows, pyplot, save


def label(r):
    split = f"tp{r['tp']} pp{r['pp']} dp{r['dp']}" + (f" cp{r['cp']}" if r["cp"] not in ("", "1") else "")
    seq = int(r["seq"]) if r["seq"] else 0
    seq_text = f"{seq // 1024}k" if seq and seq % 1024 == 0 else str(seq)
    return (f"{r['model']} {seq_text} on {r['gpus']}: {split}, zero {r['zero']}"
            + (", SP" if r["sequence_parallel"] == "true" else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    rows = load_rows(args.csv, {"status", "model", "seq", "gpus", "tp", "pp", "dp", "cp", "zero", "sequence_parallel",
                                "mfu", "tokens_per_s", "peak_memory_bytes"})
    rows = [r for r in rows if r["status"] in ("ok", "oom")]
    if not rows:
        raise SystemExit(f"{args.csv}: no point is ok or oom")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.2))
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows):
        memory = float(r["peak_memory_bytes"]) / 2**30 if r["peak_memory_bytes"] else 0.0
        if r["status"] == "ok":
            mfu = float(r["mfu"])
            ax.barh(yi, mfu, color=colors[r["model"]])
            ax.text(mfu + 0.005, yi, f"{mfu:.0%}  {float(r['tokens_per_s']):,.0f} tok/s  {memory:.0f} GiB",
                    va="center", fontsize=7)
        else:
            ax.barh(yi, 0.02, color="white", edgecolor=colors[r["model"]], hatch="//")
            ax.text(0.025, yi, f"oom: needs {memory:.0f} GiB", va="center", fontsize=7, color="firebrick")
    ax.set_yticks(y)
    ax.set_yticklabels([label(r) for r in rows], fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("model flop utilization (6N + 12 l h s per token over the dense bf16 peak)")
    ax.set_title(f"{rows[0].get('experiment', '')}: {rows[0]['calibration'] if 'calibration' in rows[0] else ''}",
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    save(fig, args.output, args.csv)


if __name__ == "__main__":
    main()
