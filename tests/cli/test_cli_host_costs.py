"""Host costs from PyTorch profiler traces: `ddlsim calibrate import` writes host records (each operator's host time
by pass, the step's spans and optimizer), `calibrate fit --host-only` fits the host_* parameters on top of a base
profile and keeps the rest of it (docs/calibration.md, "Host costs from a PyTorch profiler trace").

1. On the fixture tests/fixtures/kineto_host_step.json, whose gaps and events are known: the records, the fit's
   numbers (2 us per profiler event, 39 us per forward convolution), the base profile kept, and bad input refused.
2. On the three H200 traces in ../shared/data/pytorch-h200 (skipped when absent), with their untraced step times
   from traced-steps.csv (never steps.csv, the held-out steps): every host parameter positive and ordered as the
   operators' work (a convolution over a view, ...), both ResNet-50 traces giving the same profiler cost per event,
   and calibration/profiles/pytorch-h200.yaml being what these commands make of the traces."""
import csv
import json
import os
import sys

from common import FIXTURES, ROOT, SKIP, check, failures, finish, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()
US = 1e-6


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def host_parameters(path):
    """name -> (value in seconds, source) of the host_* parameters of a profile file."""
    out = {}
    for line in open(path):
        name = line.strip().split(":")[0]
        if name.startswith("host_") and "{value:" in line:
            value = line.split("{value: ")[1].split("s,")[0]
            out[name] = (float(value), line.split('source: "')[1].split('", description')[0])
    return out


# 1. The fixture.
fixture = os.path.join(FIXTURES, "kineto_host_step.json")
out = os.path.join(d, "host.jsonl")
rc, _, err = run(binary, "calibrate", "import", fixture, "--untraced-step-s", "0.000398", "-o", out)
rows = records(out) if rc == 0 else []
ops = {(r["pass"], r["op"]): r for r in rows if r["type"] == "host_op"}
steps = [r for r in rows if r["type"] == "host_step"]
checks += 1
check(rc == 0 and len(ops) == 7 and len(steps) == 1, f"import writes 7 host_op records and a host_step: {rc} {err}")
checks += 1
conv = ops.get(("forward", "aten::conv2d"), {})
check(conv.get("kind") == "conv" and conv.get("count") == 2 and abs(conv.get("seconds", 0) - 90 * US) < 1e-9
      and conv.get("events") == 6, f"forward convolutions: 2, 90 us, 6 events: {conv}")
checks += 1
check(ops.get(("backward", "torch::autograd::AccumulateGrad"), {}).get("kind") == "accumulate",
      "AccumulateGrad nodes are the accumulate kind")
checks += 1
step = steps[0] if steps else {}
check(step.get("untraced_step_s") == 0.000398 and step.get("host_events") == 26 and step.get("parameter_tensors") == 3
      and "import" in json.dumps([r for r in rows if r["type"] == "provenance"]),
      f"the step: its untraced time, 26 events, 3 parameter tensors, the import command in provenance: {step}")

profile = os.path.join(d, "host.yaml")
rc, _, err = run(binary, "calibrate", "fit", out, "--base", "h200-measured", "--host-only", "-o", profile)
checks += 1
check(rc == 0 and "20 host parameters" in err, f"calibrate fit --host-only: {rc} {err}")
p = host_parameters(profile) if rc == 0 else {}
expected = {"host_profiler_event_s": 2, "host_forward_conv_s": 39, "host_forward_view_s": 8,
            "host_forward_elementwise_s": 9.5, "host_backward_conv_s": 24, "host_accumulate_s": 20 / 3,
            "host_optimizer_tensor_s": 52 / 3, "host_forward_gemm_s": 9.5}
for name, micro in expected.items():
    checks += 1
    check(name in p and abs(p[name][0] - micro * US) < 1e-3 * micro * US, f"{name} = {micro} us: {p.get(name)}")
if rc == 0:
    text = open(profile).read()
    base = open(os.path.join(ROOT, "calibration", "profiles", "h200-measured.yaml")).read()
    command = [line for line in text.splitlines() if line.startswith("  command:")]
    checks += 1
    check(text.count("  - op: ") == base.count("  - op: ") and 'name: "host"' in text and "base_command:" in text
          and len(command) == 1 and "ddlsim calibrate import" in command[0] and "--host-only" in command[0],
          "the base's tables are kept; the provenance's command holds the import and the fit")
rc, report, err = run(binary, "calibrate", "report", profile)
checks += 1
check(rc == 0 and "host_forward_conv_s" in report, f"calibrate report shows the host parameters: {rc} {err}")

# Bad input: one time per file; a time for a file with no training step; no host record to fit.
rc, _, err = run(binary, "calibrate", "import", fixture, fixture, "--untraced-step-s", "0.001", "-o", out)
checks += 1
check(rc == 2 and "one time per FILE" in err, f"--untraced-step-s needs one time per file: {rc} {err}")
nccl = os.path.join(FIXTURES, "nccl_tests_all_reduce.txt")
rc, _, err = run(binary, "calibrate", "import", nccl, "--untraced-step-s", "0.001", "-o", out)
checks += 1
check(rc == 1 and "nccl_tests_all_reduce.txt" in err and "no training step" in err,
      f"--untraced-step-s for a file with no step: {rc} {err}")
rc, _, err = run(binary, "calibrate", "import", nccl, "-o", out)
rc, _, err = run(binary, "calibrate", "fit", out, "--base", "h200-measured", "--host-only", "-o", profile)
checks += 1
check(rc == 1 and "no host record" in err, f"--host-only without host records: {rc} {err}")

# 2. The H200 traces.
data = os.path.join(ROOT, "..", "shared", "data", "pytorch-h200")
if not os.path.isdir(data):
    if failures:
        finish("cli_host_costs", checks)
    print(f"cli_host_costs: {checks} passed; the H200 traces' part skipped, no traces at {data}")
    sys.exit(SKIP)

names = ["gpt2-small-mb8-gb8", "resnet50-mb2-gb2", "resnet50-mb32-gb32"]
untraced = {}
with open(os.path.join(data, "traced-steps.csv"), newline="") as f:
    for row in csv.DictReader(f):
        untraced[f"{row['model']}-mb{row['micro_batch']}-gb{row['global_batch']}"] = float(row["step_s"])
traces = [os.path.join(data, n + ".json.gz") for n in names]
# The committed profile's commands, with its paths (ROOT/../shared) and this run's output files.
times = [f"{untraced[n]:.7f}" for n in names]
out = os.path.join(d, "pytorch-h200.jsonl")
rc, _, err = run(binary, "calibrate", "import", *traces, "--untraced-step-s", *times, "-o", out)
rows = records(out) if rc == 0 else []
steps = {os.path.basename(r["trace"]).split(".")[0]: r for r in rows if r["type"] == "host_step"}
checks += 1
check(rc == 0 and len(steps) == 3, f"the three traces import: {rc} {err}")
if len(steps) == 3:
    busy = {n: s["gpu_busy_s"] / s["span_s"] for n, s in steps.items()}
    checks += 1
    check(busy["resnet50-mb2-gb2"] < 0.1 and busy["gpt2-small-mb8-gb8"] > 0.9,
          f"ResNet-50 at micro-batch 2 is host-bound, GPT-2 small GPU-bound: {busy}")
    per_event = [(s["host_span_s"] - s["profiler_stall_s"] - s["untraced_step_s"]) / s["host_events"]
                 for n, s in steps.items() if n.startswith("resnet50")]
    checks += 1
    check(abs(per_event[0] / per_event[1] - 1) < 0.05,
          f"both ResNet-50 traces cost the same per profiler event, their stalls left out: {per_event}")
fitted = os.path.join(d, "pytorch-h200.yaml")
rc, _, err = run(binary, "calibrate", "fit", out, "--base", "h200-measured", "--host-only", "--name", "pytorch-h200",
                 "-o", fitted)
checks += 1
check(rc == 0, f"calibrate fit --host-only of the three traces: {rc} {err}")
p = {k: v[0] for k, v in host_parameters(fitted).items()} if rc == 0 else {}
checks += 1
check(len(p) == 20 and all(v > 0 for v in p.values()), f"20 host parameters, all positive: {p}")
if len(p) == 20:
    orders = [("host_forward_conv_s", "host_forward_view_s"), ("host_forward_gemm_s", "host_forward_elementwise_s"),
              ("host_forward_elementwise_s", "host_forward_view_s"), ("host_forward_norm_s", "host_forward_view_s"),
              ("host_backward_conv_s", "host_backward_view_s"), ("host_backward_gemm_s", "host_backward_elementwise_s"),
              ("host_forward_conv_s", "host_accumulate_s"), ("host_forward_view_s", "host_profiler_event_s")]
    for a, b in orders:
        checks += 1
        check(p[a] > p[b], f"{a} ({p[a] / US:.1f} us) > {b} ({p[b] / US:.1f} us)")
    checks += 1
    check(2 * US < p["host_profiler_event_s"] < 4 * US and 50 * US < p["host_forward_conv_s"] < 200 * US,
          f"the profiler's 2-4 us per event, a convolution's 50-200 us: {p}")


def without_run_details(text):
    # The fit's date, its command line and the records' path differ by run; the fitted values do not.
    records_path = [line.split('"')[1] for line in text.splitlines() if line.strip().startswith("host_traces:")]
    text = text.replace(records_path[0], "RECORDS") if records_path else text
    return [line for line in text.splitlines()
            if not line.strip().startswith(("command:", "host_traces:", "host_date:", "date:"))]


committed = os.path.join(ROOT, "calibration", "profiles", "pytorch-h200.yaml")
if rc == 0:
    checks += 1
    check(without_run_details(open(fitted).read()) == without_run_details(open(committed).read()),
          "calibration/profiles/pytorch-h200.yaml is what its provenance's commands make of the traces: rerun them "
          "(its provenance's command)")
finish("cli_host_costs", checks)
