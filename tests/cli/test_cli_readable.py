"""Readable results (issue 31, item 6): tokens_per_s_per_gpu, model_tflops_per_gpu and total_a2a_s
against their definitions (docs/csv.md) on shipped experiments, the presets that hold them, the
device table of --trace-dir in rank order with a rank column (docs/timelines.md), and every
collective_fidelity string of the shipped experiments' golden CSVs against its documented grammar."""
import glob
import os
import re
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
tmp = workdir()


def close(a, b, rel=1e-8):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def peak_flops(profile, dtype):
    """The profile's dense peak for a dtype, in flop/s (its YAML says e.g. 989.4TFlops)."""
    with open(os.path.join(ROOT, "calibration", "profiles", profile + ".yaml")) as f:
        m = re.search(rf"peak_flops_{dtype}: {{value: ([\d.]+)TFlops", f.read())
    return float(m.group(1)) * 1e12


# 1. A transformer (the demo, GPT-2 XL in bf16 on h100-sxm) and a CNN (normalization.yaml's ResNets).
demo = os.path.join(tmp, "demo.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", demo, "--quiet", "-j", "2")
rows = [r for r in read_csv(demo) if r["status"] == "ok"] if rc == 0 else []
checks += 1
check(rc == 0 and len(rows) >= 15, f"the demo runs: {err}")
for r in rows:
    gpus = int(r["gpus"])
    peak = peak_flops(r["calibration"], r["dtype"])
    checks += 2
    check(close(float(r["tokens_per_s_per_gpu"]) * gpus, float(r["tokens_per_s"])),
          f"demo point {r['config_id']}: tokens_per_s_per_gpu x gpus = tokens_per_s: {r['tokens_per_s_per_gpu']} x "
          f"{gpus} vs {r['tokens_per_s']}")
    check(close(float(r["model_tflops_per_gpu"]) * 1e12 / peak, float(r["mfu"])),
          f"demo point {r['config_id']}: model_tflops_per_gpu x 1e12 / peak = mfu: {r['model_tflops_per_gpu']} vs "
          f"{r['mfu']}")
norm = os.path.join(tmp, "norm.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "normalization.yaml"), "-o", norm, "--quiet", "-j",
                 "2", "--columns", "all")
cnn = [r for r in read_csv(norm) if r["status"] == "ok"] if rc == 0 else []
checks += 1
check(rc == 0 and cnn and all(r["tokens_per_s_per_gpu"] == "" and r["tokens_per_s"] == "" for r in cnn) and
      all(r["model_tflops_per_gpu"] != "" for r in cnn), f"a CNN: no tokens, model TFLOP/s per GPU still: {err}")
for r in cnn:
    if r["mfu"]:
        checks += 1
        check(close(float(r["model_tflops_per_gpu"]) * 1e12 / peak_flops(r["calibration"], r["dtype"]),
                    float(r["mfu"])), f"normalization point {r['config_id']}: model_tflops_per_gpu against mfu")

# 2. Mixtral 8x7B on 16 GPUs (moe.yaml at smoke size): ep 8 inside a node, ep 16 across two, direct
# and hierarchical, even and skewed loads. The all-to-alls' whole time in flight is at least their
# exposed part, and within the iteration.
moe = os.path.join(tmp, "moe.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "moe.yaml"), "-o", moe, "--quiet", "-j", "2",
                 "--set", "sweep.zip=[{model: [mixtral-8x7b], cluster.gpus: [16], parallelism.pp: [1], "
                 "training.global_batch: [16]}, {parallelism.ep: [8, 16, 16], "
                 "parallelism.ep_collective: [direct, direct, hierarchical]}]",
                 "--set", "sweep.training.load_imbalance=[1.0, 2.0]")
rows = [r for r in read_csv(moe) if r["status"] == "ok"] if rc == 0 else []
checks += 1
check(rc == 0 and len(rows) == 6, f"moe.yaml at smoke size: {rc} {err}")
for r in rows:
    total, exposed, t = float(r["total_a2a_s"]), float(r["all_to_all_time_s"]), float(r["iteration_time_s"])
    checks += 1
    check(0 < total <= t and total >= exposed >= 0,
          f"moe point {r['config_id']} (ep {r['ep']} {r['ep_collective']}, imbalance {r['load_imbalance']}): "
          f"all_to_all_time_s {exposed} <= total_a2a_s {total} <= iteration {t}")
# ddlsim's expert layers dispatch, compute and combine in turn (docs/csv.md): nothing of an
# all-to-all is hidden, and the two are equal.
checks += 1
check(rows and all(close(float(r["total_a2a_s"]), float(r["all_to_all_time_s"])) for r in rows),
      "no all-to-all overlaps compute in ddlsim's own expert layers: total = exposed")

# 3. The presets hold the new columns, beside the ones they explain.
for preset, wanted in (("throughput", ["tokens_per_s", "tokens_per_s_per_gpu", "mfu", "model_tflops_per_gpu"]),
                       ("moe", ["all_to_all_time_s", "total_a2a_s"])):
    out = os.path.join(tmp, f"preset_{preset}.csv")
    rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", out, "--quiet",
                     "--shard", "0/16", "--columns", f"identity,{preset}")
    header = open(out).readline().rstrip("\n").split(",") if rc == 0 else []
    checks += 1
    check(all(c in header for c in wanted), f"--columns {preset} holds {wanted}: {header} {err}")

# 4. Device tables: one row per GPU in rank order, the rank first (docs/timelines.md). A pipeline of 4
# stages x 4 replicas (the demo), a folded tensor-parallel point (drawn whole), and parameter servers.
traces = os.path.join(tmp, "traces")
cases = [("demo", os.path.join(ROOT, "experiments", "demo.yaml"),
          ["--set", "sweep.parallelism.pp=[4]", "--set", "sweep.training.micro_batch=[4]"], 16),
         ("sync_async", os.path.join(ROOT, "experiments", "sync_async.yaml"), ["--shard", "0/1000"], None)]
for name, path, extra, gpus in cases:
    rc, _, err = run(binary, "run", path, "-o", os.path.join(tmp, f"trace_{name}.csv"), "--quiet", "--trace-dir",
                     traces, *extra)
    table = os.path.join(traces, f"{name}_0_devices.csv")
    devices = read_csv(table) if rc == 0 and os.path.exists(table) else []
    header = open(table).readline().rstrip("\n").split(",") if devices else []
    checks += 1
    check(header[:1] == ["rank"], f"{name}: the device table's first column is the rank: {header} {err}")
    ranks = [int(d["rank"]) for d in devices] if header[:1] == ["rank"] else []
    checks += 1
    check(ranks and ranks == list(range(len(ranks))) and (gpus is None or len(ranks) == gpus),
          f"{name}: one row per GPU, in rank order 0..n-1: {ranks}")

# 5. collective_fidelity: every string of the shipped experiments' and bench points' golden CSVs
# parses by docs/csv.md's grammar.
F = r"(flow|analytic)"
SHAPE = r"(tp\d+xdp\d+|tp\d+|dp\d+|none|off)"
grammar = re.compile(rf"dp={F};tp={F}(\+aggregated)?(;fold={SHAPE}( \((tp: |dp: |[a-z_]+ [a-z_]+ over ).*\))?)?"
                     rf"(;ep={F})?")
strings = set()
for path in glob.glob(os.path.join(ROOT, "tests", "golden", "**", "*.csv"), recursive=True) + [demo, moe]:
    for r in read_csv(path):
        if r.get("collective_fidelity"):
            strings.add(r["collective_fidelity"])
checks += 1
check(len(strings) >= 3, f"collective_fidelity strings to check: {len(strings)}")
for s in sorted(strings):
    checks += 1
    check(grammar.fullmatch(s), f"collective_fidelity '{s}' follows docs/csv.md's grammar")

finish("cli_readable", checks)
