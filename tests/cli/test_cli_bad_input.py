"""Bad input: exit code 1 (2 for usage), a message naming file:line and key, and no CSV written."""
import os
import sys

from common import check, finish, read_csv, run, workdir

binary = sys.argv[1]
tmp = workdir()
checks = 0

GOOD = """name: t
model: gpt2-small
cluster: node4.yaml
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 2, dtype: bf16}
parallelism: {schedule: gpipe, pp: 2, dp: 2}
"""

# (label, experiment text, extra args, exit code, substrings the message must contain)
CASES = [
    ("malformed YAML", "name: t\ntraining: {global_batch: 16\n", [], 1, ["exp.yaml:", "YAML syntax error"]),
    ("unknown top-level key", GOOD + "trainig: {}\n", [], 1, ["exp.yaml:7: trainig: unknown key"]),
    ("unknown nested key", GOOD.replace("dp: 2}", "dp: 2, ppp: 1}"), [], 1,
     ["exp.yaml:6: parallelism.ppp: unknown key"]),
    ("pp x dp does not match the GPUs", GOOD.replace("dp: 2}", "dp: 3}"), [], 1,
     ["exp.yaml:6: parallelism.pp:", "does not match the 4 GPUs"]),
    ("global batch not divisible", GOOD.replace("global_batch: 16", "global_batch: 10"), [], 1,
     ["exp.yaml:5: training.global_batch:", "not divisible by micro_batch x dp = 2 x 2 = 4"]),
    ("wrong type", GOOD.replace("micro_batch: 2", "micro_batch: four"), [], 1,
     ["exp.yaml:5: training.micro_batch: 'four' is not an integer"]),
    ("zero size", GOOD.replace("global_batch: 16", "global_batch: 0"), [], 1,
     ["exp.yaml:5: training.global_batch:", "out of range"]),
    ("absurd micro-batch count", GOOD.replace("micro_batch: 2", "micro_batch: 10000000"), [], 1,
     ["training.micro_batch", "out of range"]),
    ("unknown enum value", GOOD.replace("dtype: bf16", "dtype: fp13"), [], 1,
     ["exp.yaml:5: training.dtype: unknown value 'fp13' (expected one of: fp32, tf32, fp16, bf16, fp8)"]),
    ("unknown model", GOOD.replace("gpt2-small", "gpt-17"), [], 1, ["exp.yaml:2: model: unknown name 'gpt-17'"]),
    ("missing cluster file", GOOD.replace("node4.yaml", "nowhere.yaml"), [], 1, ["nowhere.yaml", "cannot open"]),
    ("bad unit in an inline cluster",
     GOOD.replace("cluster: node4.yaml", "cluster: {name: c, nodes: 1, gpus_per_node: 4, gpu: {memory: 80GiB}, "
                                         "intra_node: {bandwidth: 10 furlongs}}"), [], 1,
     ["exp.yaml:3: cluster.intra_node.bandwidth: unknown unit 'furlongs'"]),
    ("missing required key", GOOD.replace("calibration: h100-sxm\n", ""), [], 1, ["calibration: missing required key"]),
    ("unknown --set key", GOOD, ["--set", "training.foo=1"], 1, ["--set training.foo=1: training.foo: unknown key"]),
    ("malformed --set", GOOD, ["--set", "training.micro_batch"], 1, ["expected --set dotted.key=value"]),
    ("every sweep point invalid", GOOD + "sweep: {parallelism.dp: [3, 5]}\n", [], 1,
     ["exp.yaml:7: parallelism.dp:", "does not match"]),
    ("empty sweep axis", GOOD + "sweep: {parallelism.dp: []}\n", [], 1,
     ["exp.yaml:7: sweep.parallelism.dp: expected a non-empty list"]),
    ("unknown option", GOOD, ["--frobnicate"], 2, ["unknown option for run: --frobnicate"]),
    ("bad -j", GOOD, ["-j", "zero"], 2, ["--jobs expects an integer"]),
]

for label, text, extra, code, needles in CASES:
    path = os.path.join(tmp, "exp.yaml")
    out_csv = os.path.join(tmp, "out.csv")
    with open(path, "w") as f:
        f.write(text)
    rc, out, err = run(binary, "run", path, "-o", out_csv, *extra, cwd=tmp)
    checks += 3
    check(rc == code, f"{label}: exit {code}, got {rc} ({err.strip()})")
    check(all(n.replace("exp.yaml", path) in err or n in err for n in needles), f"{label}: message {needles!r} in {err!r}")
    check(not os.path.exists(out_csv), f"{label}: nothing written")

# validate reports every problem of a file at once.
with open(os.path.join(tmp, "two.yaml"), "w") as f:
    f.write(GOOD.replace("dtype: bf16", "dtype: fp13") + "extra: 1\n")
rc, out, err = run(binary, "validate", os.path.join(tmp, "two.yaml"))
checks += 1
check(rc == 1 and "training.dtype" in err and "extra: unknown key" in err, f"validate lists both: {err}")
rc, out, err = run(binary, "validate", os.path.join(tmp, "missing.yaml"))
checks += 1
check(rc == 1 and "cannot open file" in err, f"validate of a missing file: {err}")

# A sweep with some impossible points: those become `invalid` rows and the others still run.
with open(os.path.join(tmp, "mixed.yaml"), "w") as f:
    f.write(GOOD + "sweep: {parallelism.dp: [1, 2, 3]}\n")
rc, out, err = run(binary, "validate", os.path.join(tmp, "mixed.yaml"))
checks += 1
check(rc == 0 and "3 point(s), 1 valid, 2 invalid" in out, f"validate counts points: {out} {err}")
mixed_csv = os.path.join(tmp, "mixed.csv")
rc, out, err = run(binary, "run", os.path.join(tmp, "mixed.yaml"), "-o", mixed_csv)
rows = read_csv(mixed_csv) if rc == 0 else []
checks += 1
check([r["status"] for r in rows] == ["invalid", "ok", "invalid"], f"mixed sweep rows: {rows and [r['status'] for r in rows]}")

# Usage errors exit 2.
for args in (["run"], ["frobnicate"], [], ["model"], ["run", "a.yaml", "b.yaml"]):
    rc, _, err = run(binary, *args)
    checks += 1
    check(rc == 2 and "ddlsim --help" in err, f"usage error for {args}: rc={rc}")
for args in (["--help"], ["--version"]):
    rc, out, _ = run(binary, *args)
    checks += 1
    check(rc == 0 and "ddlsim" in out, f"{args} exits 0")
rc, out, _ = run(binary, "--version")
checks += 1
check("SimGrid 3.32" in out, f"--version names SimGrid: {out}")

finish("cli_bad_input", checks)
