#!/usr/bin/env python3
"""Fits the sustained clock of a GPU to published training runs: calibration/profiles/*-megatron.yaml.

    python3 calibration/fit_published.py build/bin/ddlsim [--base h100-sxm:h100-megatron] [--base ...]

For each BASE:NAME pair (default: h100-sxm:h100-megatron and a100-sxm:a100-megatron), NAME.yaml is the
base profile with one more parameter, `sustained_clock`: the share of the rated clock the SMs hold
under sustained training load, which scales every peak (calibration/Profile.hpp). Its value minimises
the mean absolute error of the simulated iteration times against the published ones over the rows of
experiments/validation/published.csv whose `set` is `fit` (experiments/validation.yaml, the rows
calibrated with NAME), over [0.5, 1]: a row's time is affine in 1 / clock, so two simulations of the
fit rows fix it and a third checks the minimum. The held-out rows (`set` = holdout)
are never looked at here; docs/validation.md reports both. Deterministic: the same inputs give the
same profile.
"""
import argparse
import csv
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXPERIMENT = os.path.join(ROOT, "experiments", "validation.yaml")
PUBLISHED = os.path.join(ROOT, "experiments", "validation", "published.csv")
LO, HI = 0.5, 1.0


def profile_text(base, name, clock, provenance):
    """The base profile file with name, provenance and sustained_clock set."""
    with open(os.path.join(ROOT, "calibration", "profiles", base + ".yaml")) as f:
        text = f.read()
    text = re.sub(r"^name: .*$", f"name: {name}", text, count=1, flags=re.M)
    lines = [f'  {k}: "{v}"' for k, v in provenance.items()]
    text = re.sub(r"^provenance:\n", "provenance:\n" + "\n".join(lines) + "\n", text, count=1, flags=re.M)
    param = (f'  sustained_clock: {{value: {clock:.4f}, source: "fitted: calibration/fit_published.py '
             f'to the fit rows of experiments/validation/published.csv", description: "share of the rated '
             f'clock the SMs hold under sustained training load"}}\n')
    text = re.sub(r"^parameters:\n", "parameters:\n" + param, text, count=1, flags=re.M)
    header = (f"# {name}: {base} with its sustained clock fitted to published training runs\n"
              f"# (calibration/fit_published.py, docs/validation.md). {base}'s own notes follow.\n")
    return header + text


def split_flow(text):
    """The items of a YAML flow list's inside, splitting at commas outside braces."""
    items, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return items + [cur.strip()] if cur.strip() else items


def experiment_rows(experiment, keep):
    """experiments/validation.yaml with only the zipped points `keep` (indices)."""
    out = []
    for line in experiment.splitlines():
        m = re.match(r"^(    [a-z_.]+: )\[(.*)\]$", line)
        if m:
            items = split_flow(m.group(2))
            line = m.group(1) + "[" + ", ".join(items[i] for i in keep) + "]"
        out.append(line)
    return "\n".join(out) + "\n"


def simulate(ddlsim, clocks, keep, workdir):
    """Iteration times of the validation rows `keep` with each NAME's sustained clock set as given."""
    with open(EXPERIMENT) as f:
        experiment = experiment_rows(f.read(), keep)
    for (base, name), clock in clocks.items():
        path = os.path.join(workdir, name + ".yaml")
        with open(path, "w") as f:
            f.write(profile_text(base, name, clock, {"fit": "candidate"}))
        experiment = re.sub(rf"\b{re.escape(name)}\b", path, experiment)
    exp_path = os.path.join(workdir, "validation.yaml")
    with open(exp_path, "w") as f:
        f.write(experiment)
    out = os.path.join(workdir, "validation.csv")
    p = subprocess.run([ddlsim, "run", exp_path, "-o", out, "--quiet", "-j", str(os.cpu_count() or 1)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"fit_published.py: ddlsim run failed: {p.stderr.strip()}")
    with open(out, newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["config_id"]))
    return [float(r["iteration_time_s"]) if r["status"] == "ok" else math.inf for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ddlsim")
    ap.add_argument("--base", action="append", help="BASE:NAME (repeatable)")
    args = ap.parse_args()
    pairs = [tuple(b.split(":", 1)) for b in (args.base or ["h100-sxm:h100-megatron", "a100-sxm:a100-megatron"])]
    with open(PUBLISHED, newline="") as f:
        published = [r for r in csv.DictReader(f) if not r["set"].startswith("excluded")]
    with open(EXPERIMENT) as f:
        calibrations = split_flow(re.search(r"calibration: \[([^\]]*)\]", f.read()).group(1))
    if len(calibrations) != len(published):
        sys.exit("fit_published.py: experiments/validation.yaml and published.csv disagree on the rows")
    keep = [i for i, r in enumerate(published) if r["set"] == "fit"]
    measured = [float(published[i]["derived_iteration_time_s"]) for i in keep]
    rows_of = {name: [j for j, i in enumerate(keep) if calibrations[i] == name] for _, name in pairs}

    def mape(times, name):
        e = [abs(times[j] / measured[j] - 1) for j in rows_of[name]]
        return 100 * sum(e) / len(e) if e else math.nan

    # A row's time is affine in 1 / clock (its compute scales with it, its exposed communication not):
    # t = a + b / c. Two runs give a and b per row; the clock minimising the MAPE of that form is found on a
    # fine grid, and a third run gives the fit's real MAPE.
    with tempfile.TemporaryDirectory() as work:
        t1 = simulate(args.ddlsim, {p: 1.0 for p in pairs}, keep, work)
        t2 = simulate(args.ddlsim, {p: 0.8 for p in pairs}, keep, work)
        b = [(y - x) / (1 / 0.8 - 1) for x, y in zip(t1, t2)]
        a = [x - bb for x, bb in zip(t1, b)]
        best = {}
        for p in pairs:
            grid = [LO + (HI - LO) * k / 5000 for k in range(5001)]
            best[p] = round(min(grid, key=lambda c: mape([aa + bb / c for aa, bb in zip(a, b)], p[1])), 4)
        final = simulate(args.ddlsim, best, keep, work)
    for (base, name), clock in best.items():
        provenance = {"base_profile": base, "fit": f"sustained_clock minimising the fit rows' MAPE over [{LO}, {HI}]",
                      "fit_rows": " ".join(published[keep[j]]["id"] for j in rows_of[name]),
                      "fit_mape_pct": f"{mape(final, name):.2f}",
                      "command": "python3 calibration/fit_published.py build/bin/ddlsim"}
        path = os.path.join(ROOT, "calibration", "profiles", name + ".yaml")
        with open(path, "w") as f:
            f.write(profile_text(base, name, clock, provenance))
        print(f"{name}: sustained_clock {clock:.4f}, fit MAPE {mape(final, name):.2f}% over "
              f"{len(rows_of[name])} rows -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
