"""Published runs (docs/validation.md): experiments/validation.yaml simulated and compared by
plots/validation.py with experiments/validation/published.csv. Fails when the MAPE of the fit rows or
of the held-out rows rises above what docs/validation.md reports, when the order of a source's layouts
is lost, when docs/validation.md's table and summary differ from what the run prints, or when a shipped
*-megatron profile is not what its fit produced (its fit_mape_pct) or not what the page quotes. A
corrupted measurement must make the comparison fail, and a layout that differs from the CSV's must be
refused. Skipped under the sanitizer build (minutes of simulation, the same numbers)."""
import csv
import os
import re
import subprocess
import sys

from common import ROOT, check, finish, read_csv, run, workdir

if os.environ.get("DDLSIM_SANITIZED") == "1":
    print("validation: skipped under the sanitizer build (DDLSIM_SANITIZED=1)")
    sys.exit(77)

binary = sys.argv[1]
checks = 0
d = workdir()
results = os.path.join(d, "validation.csv")
rc, out, err = run(binary, "run", os.path.join(ROOT, "experiments", "validation.yaml"), "-o", results, "--quiet",
                   "-j", "2")
checks += 1
check(rc == 0, f"ddlsim run experiments/validation.yaml: {rc} {err}")
script = os.path.join(ROOT, "plots", "validation.py")
published = os.path.join(ROOT, "experiments", "validation", "published.csv")

# The bounds docs/validation.md states (fit 1.72%, held out 7.61%, largest 20.0%), with a little room.
bounds = ["--max-mape-fit", "1.9", "--max-mape-holdout", "7.9", "--max-error", "20.5", "--min-spearman", "0.9"]
p = subprocess.run([sys.executable, script, results, "--markdown", os.path.join(d, "table.md")] + bounds,
                   capture_output=True, text=True)
print(p.stdout[-1500:])
checks += 1
check(p.returncode == 0, f"validation within its bounds: {p.stderr.strip()}")

# docs/validation.md's table and summary are what this run prints, figure for figure (issue 31 item 8:
# a page's figures kept current by a test).
def table_and_summary(text):
    """The comparison table's rows and the summary bullets (fit, holdout, all, rankings) of a page."""
    return [line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| id ") and line.count("|") == 10
            or re.match(r"- (fit|holdout|all|ranking)", line)]
with open(os.path.join(ROOT, "docs", "validation.md")) as f:
    page = table_and_summary(f.read())
generated = []
if p.returncode == 0:
    with open(os.path.join(d, "table.md")) as f:
        generated = table_and_summary(f.read())
checks += 1
stale = [line for line in generated if line not in page] + [line for line in page if line not in generated]
check(generated and not stale, f"docs/validation.md's table and summary as simulated (regenerate with the page's "
      f"command): {len(stale)} lines differ, e.g. {stale[:2]}")

# The runs whose configurations overlap tensor-parallel communication (MLPerf v3.1, NeMo's and
# Megatron-Bridge's GPT-3 and Llama 3 recipes) are simulated with it, and say so in the CSV.
overlapped = [r for r in read_csv(results) if r.get("tp_comm_overlap") == "true"] if rc == 0 else []
checks += 1
check(len(overlapped) == 16 and all(r["framework"] == "megatron" and r["sequence_parallel"] == "true" for r in overlapped),
      f"16 rows with tp_comm_overlap, all megatron with sequence parallelism: {len(overlapped)}")

# Each *-megatron profile's provenance records the MAPE of its fit rows; the run reproduces it.
rows = {r["config_id"]: r for r in read_csv(results)} if rc == 0 else {}
with open(published, newline="") as f:
    pub = [r for r in csv.DictReader(f) if not r["set"].startswith("excluded")]
# Megatron's asynchronous tensor-parallel backward in every row with tp > 1 but the SC'21 ones, which
# predate it (experiments/validation.yaml).
backward = {int(r["config_id"]) for r in rows.values() if r.get("tp_backward_overlap") == "true"}
sc21 = {i for i, r in enumerate(pub) if r["id"].startswith("megatron21-")}
checks += 1
check(len(backward) == 29 and len(sc21) == 10 and not backward & sc21,
      f"29 rows with tp_backward_overlap, none of the 10 SC'21 ones: {len(backward)}, {sorted(backward & sc21)}")
for name in ("h100-megatron", "a100-megatron"):
    with open(os.path.join(ROOT, "calibration", "profiles", name + ".yaml")) as f:
        profile = f.read()
    recorded = float(re.search(r'fit_mape_pct: "([0-9.]+)"', profile).group(1))
    ids = re.search(r'fit_rows: "([^"]*)"', profile).group(1).split()
    errors = [abs(float(rows[str(i)]["iteration_time_s"]) / float(r["derived_iteration_time_s"]) - 1)
              for i, r in enumerate(pub) if r["id"] in ids and str(i) in rows]
    mape = 100 * sum(errors) / len(errors) if errors else float("nan")
    checks += 1
    check(len(errors) == len(ids) and abs(mape - recorded) < 0.01,
          f"{name}: fit rows' MAPE {mape:.2f}% as its provenance records ({recorded}%)")
    # docs/validation.md's table of the fitted clocks says what the shipped profile holds.
    clock = re.search(r"sustained_clock: \{value: ([0-9.]+)", profile).group(1)
    with open(os.path.join(ROOT, "docs", "validation.md")) as f:
        quoted = re.search(r"^\| `%s` \| ([0-9.]+) \|.*\| ([0-9.]+)%% \|$" % name, f.read(), re.M)
    checks += 1
    check(quoted and quoted.group(1) == clock and float(quoted.group(2)) == float(recorded),
          f"docs/validation.md quotes {name}'s clock {clock} and fit MAPE {recorded}%: "
          f"{quoted.group(0) if quoted else 'no row'}")

# The comparison can fail: one measurement off by half makes its row (and the MAPE) miss the bounds.
bad = os.path.join(d, "bad.csv")
with open(published, newline="") as f:
    table = list(csv.DictReader(f))
row = next(r for r in table if r["set"] == "holdout")
row["derived_iteration_time_s"] = str(float(row["derived_iteration_time_s"]) * 0.5)
with open(bad, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0].keys()))
    w.writeheader()
    w.writerows(table)
p = subprocess.run([sys.executable, script, results, "--published", bad] + bounds, capture_output=True, text=True)
checks += 1
check(p.returncode == 1 and row["id"] in p.stderr, f"a halved measurement fails the bounds: {p.returncode} {p.stderr}")
# A layout that is not the CSV's is refused (exit 2), naming the row.
row["derived_iteration_time_s"] = str(float(row["derived_iteration_time_s"]) * 2)
row["tp"] = str(int(row["tp"]) * 2)
with open(bad, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(table[0].keys()))
    w.writeheader()
    w.writerows(table)
p = subprocess.run([sys.executable, script, results, "--published", bad], capture_output=True, text=True)
checks += 1
check(p.returncode == 2 and row["id"] in p.stderr and "tp" in p.stderr, f"a different layout is refused: {p.stderr}")

finish("validation", checks)
