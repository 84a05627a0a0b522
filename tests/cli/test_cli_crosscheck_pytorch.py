"""ddlsim's prediction of the step a PyTorch user runs, against real PyTorch steps on an H200
(../shared/data/pytorch-h200/, measured 2026-11-27; docs/frameworks.md). Skips without ../shared.

1. The committed profile calibration/profiles/pytorch-h200.yaml is what `calibrate import` of the three
   one-micro-batch profiler traces and `calibrate fit --host-only` on h200-measured make of them: the host
   costs and the eager kernels' efficiencies are reproducible from the traces, and nothing in it comes from
   steps.csv.
2. experiments/crosscheck_pytorch_h200.yaml (framework pytorch) against steps.csv, which no parameter was
   fitted on (global batch 64, micro-batch 1 to 32): MAPE at most 7.5% (6.92% when this test was written),
   GPT-2 small at most 8% (7.43%), ResNet-50 at most 7% (6.42%), no step beyond 19% (ResNet-50 at
   micro-batch 16: +17.9%, a step 20% faster per micro-batch than its neighbours'). The issue's goal of no
   step beyond 15% is not met by that one step.
3. The one-micro-batch steps of the traces: ResNet-50 at micro-batch 2 host-bound (GPU busy within 10 points
   of the trace's 8%), GPT-2 small at micro-batch 8 GPU-bound (within 10 points of 96%).
4. Held out by model: a profile fitted on one model's traces predicts the other's steps. From ResNet-50's two
   traces, GPT-2 small within 17% MAPE (16.06%); from GPT-2 small's trace alone, ResNet-50 within 30% (28.34%:
   a GPU-bound trace cannot tell the profiler's own host cost, so its host costs keep it).
5. The ideal framework on the same profile stays the kernel list it was: 3x faster than PyTorch's step."""
import csv
import os
import statistics
import sys

from common import ROOT, SKIP, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
data = os.path.join(ROOT, "..", "shared", "data", "pytorch-h200")
if not os.path.isdir(data):
    print(f"skipped: {data} is absent (the shared PyTorch measurements)")
    sys.exit(SKIP)
d = workdir()
experiment = os.path.join(ROOT, "experiments", "crosscheck_pytorch_h200.yaml")
profile = os.path.join(ROOT, "calibration", "profiles", "pytorch-h200.yaml")
traces = {"gpt2-small": ["gpt2-small-mb8-gb8"], "resnet50": ["resnet50-mb2-gb2", "resnet50-mb32-gb32"]}
# The untraced step times as the profile's provenance gives them (rounded from traced-steps.csv).
command = next(line for line in open(profile) if line.strip().startswith("command:"))
given = command.split("--untraced-step-s")[1].split("-o")[0].split()
order = [t.split("/")[-1].replace(".json.gz", "") for t in command.split("--untraced-step-s")[0].split() if t.endswith(".json.gz")]
untraced = dict(zip(order, given))
with open(os.path.join(data, "traced-steps.csv"), newline="") as f:
    for r in csv.DictReader(f):
        name = f"{r['model']}-mb{r['micro_batch']}-gb{r['global_batch']}"
        checks += 1
        check(name in untraced and abs(float(untraced[name]) - float(r["step_s"])) <= 1e-6,
              f"the profile's untraced time of {name} is traced-steps.csv's: {untraced.get(name)} {r['step_s']}")
steps = read_csv(os.path.join(data, "steps.csv"))


def fit(names, out):
    """Imports the traces `names` with their untraced step times and fits a profile on h200-measured."""
    records = os.path.join(d, out + ".jsonl")
    rc, _, err = run(binary, "calibrate", "import", *[os.path.join(data, n + ".json.gz") for n in names],
                     "--untraced-step-s", *[untraced[n] for n in names], "-o", records)
    if rc != 0:
        return rc, err
    rc, _, err = run(binary, "calibrate", "fit", records, "--base", "h200-measured", "--host-only", "--name",
                     "pytorch-h200", "-o", os.path.join(d, out + ".yaml"))
    return rc, err


def fitted_values(path):
    """The parameters the traces fit, as written (values, not their sources' paths)."""
    keep = ("host_", "memory_efficiency_", "gemm_unaligned_efficiency")
    out = {}
    for line in open(path):
        name = line.strip().split(":")[0]
        if name.startswith(keep) and "{value:" in line:
            out[name] = line.split("value:")[1].split(",")[0].strip()
    return out


def errors(csv_path, models):
    """Percent error of every simulated step that steps.csv measured, by model."""
    sim = {(r["model"], r["micro_batch"]): r for r in read_csv(csv_path)}
    out = {m: [] for m in models}
    for m in steps:
        key = (m["model"], m["micro_batch"])
        if m["status"] == "ok" and m["model"] in models and key in sim and sim[key]["status"] == "ok":
            out[m["model"]].append(100 * (float(sim[key]["iteration_time_s"]) - float(m["step_s"])) / float(m["step_s"]))
    return out


def mape(values):
    return statistics.mean(abs(e) for e in values)


# 1. The profile from the traces.
rc, err = fit(traces["gpt2-small"] + traces["resnet50"], "all")
checks += 1
check(rc == 0, f"calibrate import and fit of the three traces: {rc} {err}")
if rc == 0:
    fresh, committed = fitted_values(os.path.join(d, "all.yaml")), fitted_values(profile)
    checks += 1
    check(fresh == committed and len(fresh) == 26,
          f"calibration/profiles/pytorch-h200.yaml is the fit of the traces (its provenance's command): "
          f"{ {k: (fresh.get(k), committed.get(k)) for k in set(fresh) | set(committed) if fresh.get(k) != committed.get(k)} }")

# 2. Predicted against measured steps.
out = os.path.join(d, "pytorch.csv")
rc, _, err = run(binary, "run", experiment, "-o", out, "--quiet")
checks += 1
check(rc == 0, f"ddlsim run {experiment}: {rc} {err}")
if rc == 0:
    e = errors(out, ["gpt2-small", "resnet50"])
    everything = e["gpt2-small"] + e["resnet50"]
    print(f"MAPE {mape(everything):.2f}% (GPT-2 small {mape(e['gpt2-small']):.2f}%, ResNet-50 "
          f"{mape(e['resnet50']):.2f}%), largest {max(everything, key=abs):+.1f}%")
    checks += 4
    check(len(everything) == 12, f"12 measured steps simulated, got {len(everything)}")
    check(mape(everything) <= 7.5, f"MAPE {mape(everything):.2f}% <= 7.5%")
    check(mape(e["gpt2-small"]) <= 8 and mape(e["resnet50"]) <= 7,
          f"per model: GPT-2 small {mape(e['gpt2-small']):.2f}% <= 8%, ResNet-50 {mape(e['resnet50']):.2f}% <= 7%")
    check(max(abs(x) for x in everything) <= 19, f"no step beyond 19%: {max(everything, key=abs):+.1f}%")
    rows = read_csv(out)
    checks += 1
    check(all(r["framework"] == "pytorch" and r["host_busy_fraction"] and r["gpu_busy_fraction"] for r in rows),
          "every row says framework pytorch with its host and GPU busy fractions")

# 3. Host-bound and GPU-bound, as the traces say.
for model, mb, trace_busy in (("resnet50", 2, 0.08), ("gpt2-small", 8, 0.96)):
    one = os.path.join(d, f"{model}-{mb}.csv")
    rc, _, err = run(binary, "run", experiment, "--set", f"model={model}", "--set", f"training.micro_batch={mb}",
                     "--set", f"training.global_batch={mb}", "-o", one, "--quiet")
    checks += 1
    busy = float(read_csv(one)[0]["gpu_busy_fraction"]) if rc == 0 else -1
    check(abs(busy - trace_busy) <= 0.10, f"{model} at micro-batch {mb}: GPU busy {busy:.2f}, the trace's {trace_busy}")

# 4. Held out by model.
for source, target, bound in (("resnet50", "gpt2-small", 17), ("gpt2-small", "resnet50", 30)):
    rc, err = fit(traces[source], "from-" + source)
    checks += 1
    check(rc == 0, f"fit from {source}'s traces: {rc} {err}")
    if rc != 0:
        continue
    held = os.path.join(d, f"held-{target}.csv")
    rc, _, err = run(binary, "run", experiment, "--set", f"calibration={os.path.join(d, 'from-' + source + '.yaml')}",
                     "--set", f"model={target}", "-o", held, "--quiet")
    e = errors(held, [target])[target] if rc == 0 else []
    print(f"fitted on {source}'s traces, {target}: MAPE {mape(e):.2f}%" if e else f"{target}: no rows")
    checks += 1
    check(len(e) == 6 and mape(e) <= bound, f"{target} held out: MAPE {mape(e) if e else -1:.2f}% <= {bound}%")

# 5. The ideal framework: the simulator's own kernel list, no host.
ideal = os.path.join(d, "ideal.csv")
rc, _, err = run(binary, "run", experiment, "--set", "training.framework=ideal", "--set", "model=gpt2-small",
                 "--set", "training.micro_batch=8", "-o", ideal, "--quiet")
checks += 1
if rc == 0 and os.path.exists(out):
    t_ideal = float(read_csv(ideal)[0]["iteration_time_s"])
    t_torch = next(float(r["iteration_time_s"]) for r in read_csv(out) if r["model"] == "gpt2-small" and r["micro_batch"] == "8")
    check(read_csv(ideal)[0]["framework"] == "ideal" and not read_csv(ideal)[0].get("host_busy_fraction") and
          t_torch > 3 * t_ideal, f"ideal {t_ideal:.3f} s vs pytorch {t_torch:.3f} s")
else:
    check(False, f"ideal run: {rc} {err}")

finish("cli_crosscheck_pytorch", checks)
