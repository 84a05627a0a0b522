"""ddlsim's predictions against real PyTorch training steps: a markdown table and the errors.

    python3 plots/crosscheck_pytorch.py SIMULATED.csv MEASURED_STEPS.csv [-o table.md]

SIMULATED.csv is `ddlsim run experiments/crosscheck_pytorch_h200.yaml`'s output; MEASURED_STEPS.csv has
columns model, micro_batch, global_batch, step_s and status (../shared/data/pytorch-h200/steps.csv).
Rows are matched on model, micro-batch and global batch; measured rows whose status is not ok are
listed and left out of the errors. Prints the table (or writes it with -o) with the mean absolute
percentage error overall and per model, and the largest error.
"""
import argparse
import statistics
import sys

from ddlsim_csv import load_rows, write_text


def matched(simulated, measured):
    """(model, micro_batch, simulated row, measured row) for every measured step with a simulated row."""
    sim = {(r["model"], int(r["micro_batch"]), int(r["global_batch"])): r for r in simulated}
    out = []
    for m in measured:
        key = (m["model"], int(m["micro_batch"]), int(m["global_batch"]))
        if key in sim:
            out.append((key[0], key[1], sim[key], m))
    return out


def error_pct(sim_row, measured_row):
    s, m = float(sim_row["iteration_time_s"]), float(measured_row["step_s"])
    return 100 * (s - m) / m


def mape(errors):
    return statistics.mean(abs(e) for e in errors) if errors else float("nan")


def table(pairs):
    lines = ["| model | micro-batch | simulated s | measured s | error % | host busy | GPU busy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    errors, by_model = [], {}
    for model, mb, s, m in pairs:
        if m.get("status", "ok") != "ok" or s.get("status") != "ok":
            lines.append(f"| {model} | {mb} | {s.get('iteration_time_s') or '-'} | - | - | - | - |"
                         f" (measured: {m.get('status')}, simulated: {s.get('status')})")
            continue
        e = error_pct(s, m)
        errors.append(e)
        by_model.setdefault(model, []).append(e)
        busy = lambda key: f"{float(s[key]):.2f}" if s.get(key) else "-"
        lines.append(f"| {model} | {mb} | {float(s['iteration_time_s']):.4f} | {float(m['step_s']):.4f} | {e:+.1f} |"
                     f" {busy('host_busy_fraction')} | {busy('gpu_busy_fraction')} |")
    summary = [f"MAPE {mape(errors):.2f}% over {len(errors)} steps"] + \
              [f"{model} {mape(es):.2f}%" for model, es in sorted(by_model.items())]
    if errors:
        summary.append(f"largest error {max(errors, key=abs):+.1f}%")
    return "\n".join(lines) + "\n\n" + "; ".join(summary) + "\n", errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("simulated")
    ap.add_argument("measured")
    ap.add_argument("-o", "--output", help="write the table here instead of printing it")
    a = ap.parse_args()
    simulated = load_rows(a.simulated, ["model", "micro_batch", "global_batch", "iteration_time_s", "status"])
    measured = load_rows(a.measured, ["model", "micro_batch", "global_batch", "step_s"])
    pairs = matched(simulated, measured)
    if not pairs:
        sys.exit(f"{a.simulated}: no row matches a step of {a.measured} (model, micro_batch, global_batch)")
    text, _ = table(pairs)
    write_text(text, a.output)


if __name__ == "__main__":
    main()
