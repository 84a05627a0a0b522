"""CSV columns: the default set has no column that is empty in every row (the contract columns
stay), --columns chooses columns by name and preset (did-you-mean for unknown ones), and
--resume and merge read CSVs of any column set."""
import os
import re
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
tmp = workdir()
demo = os.path.join(ROOT, "experiments", "demo.yaml")
norm = os.path.join(ROOT, "experiments", "normalization.yaml")


def header(path):
    with open(path) as f:
        return f.readline().rstrip("\n").split(",")


def text(path):
    with open(path) as f:
        return f.read()


CONTRACT = ("config_id experiment model cluster calibration schedule pp dp tp gpus global_batch micro_batch "
            "num_micro_batches dtype status iteration_time_s throughput_samples_per_s bubble_fraction "
            "compute_time_s exposed_comm_time_s comm_bytes_per_gpu peak_memory_bytes memory_capacity_bytes "
            "sim_activities sim_wall_time_s message").split()

# 1. Default against all: the default header is the full one without the columns empty in every row.
full, default = os.path.join(tmp, "all.csv"), os.path.join(tmp, "default.csv")
rc, _, err = run(binary, "run", demo, "-o", full, "--columns", "all", "--quiet")
checks += 1
check(rc == 0, f"--columns all: {err}")
rc, _, err = run(binary, "run", demo, "-o", default, "--quiet")
checks += 1
check(rc == 0, f"default columns: {err}")
all_rows, rows = read_csv(full), read_csv(default)
empty_everywhere = [c for c in header(full) if all(r[c] == "" for r in all_rows)]
checks += 1
check(len(empty_everywhere) >= 5 and "bn_batch" in empty_everywhere and "ps_servers" in empty_everywhere,
      f"the demo leaves columns empty throughout: {empty_everywhere}")
expected = [c for c in header(full) if c in CONTRACT or c not in empty_everywhere]
checks += 1
check(header(default) == expected, f"default = all but the columns empty throughout (contract kept): {header(default)}")
checks += 1
check(header(default)[: len(CONTRACT)] == CONTRACT, "contract columns first")
checks += 1
check(all(r[c] == a[c] for r, a in zip(rows, all_rows) for c in header(default) if c != "sim_wall_time_s"),
      "the default CSV's cells are the full CSV's")

# docs/csv.md says how many columns the demo's default CSV has out of all of them, and how many it
# leaves out: the figures must be this version's.
m = re.search(r"The demo \(`experiments/demo.yaml`\) has (\d+) of the (\d+) columns: the (\d+) left out",
              text(os.path.join(ROOT, "docs", "csv.md")))
checks += 1
check(m is not None and (int(m.group(1)), int(m.group(2)), int(m.group(3))) ==
      (len(header(default)), len(header(full)), len(header(full)) - len(header(default))),
      f"docs/csv.md's demo column counts: {m and m.groups()} against {len(header(default))} of {len(header(full))}")

# 2. Names and presets, in the order given; `-NAME` takes out; starting with `-` takes out of the default.
sel = os.path.join(tmp, "sel.csv")
rc, _, err = run(binary, "run", demo, "-o", sel, "--columns", "identity,throughput,-tokens_per_s,bn_batch", "--quiet")
checks += 1
identity = "experiment config_id model cluster calibration schedule pp dp tp gpus global_batch micro_batch dtype".split()
want = identity + ["iteration_time_s", "throughput_samples_per_s", "tokens_per_s_per_gpu", "mfu", "model_tflops_per_gpu",
                   "bubble_fraction", "gpu_utilization", "bn_batch"]
check(rc == 0 and header(sel) == want, f"identity,throughput,-tokens_per_s,bn_batch: {header(sel)} {err}")
checks += 1
check(all(r[c] == a[c] for r, a in zip(read_csv(sel), all_rows) for c in want), "the selected cells are the full CSV's")
det1, det2 = os.path.join(tmp, "det1.csv"), os.path.join(tmp, "det2.csv")
for path, jobs in ((det1, "1"), (det2, "2")):
    rc, _, err = run(binary, "run", demo, "-o", path, "-j", jobs, "--columns", "-sim_wall_time_s", "--quiet")
    checks += 1
    check(rc == 0, f"--columns -sim_wall_time_s: {err}")
checks += 1
check(header(det1) == [c for c in header(default) if c != "sim_wall_time_s"] and text(det1) == text(det2),
      "without sim_wall_time_s the CSV is byte-identical across runs and -j")

# 3. Unknown names: a usage error with the closest valid name; nothing written.
for spec, needle in (("troughput_samples_per_s", "did you mean 'throughput_samples_per_s'?"),
                     ("identity,meory", "did you mean 'memory'?"),
                     ("all,-all", "selects no column")):
    out = os.path.join(tmp, "bad.csv")
    rc, _, err = run(binary, "run", demo, "-o", out, "--columns", spec)
    checks += 1
    check(rc == 2 and needle in err and not os.path.exists(out), f"--columns {spec}: exit 2 and {needle!r}: {rc} {err}")
for argv in (("merge", default, "-o", os.path.join(tmp, "bad.csv")), ("search", "grid", demo, "-o", os.path.join(tmp, "bad.csv")),
             ("execute", demo, "--backend", "host", "-o", os.path.join(tmp, "bad.csv"))):
    rc, _, err = run(binary, *argv, "--columns", "nope_column")
    checks += 1
    check(rc == 2 and "unknown column 'nope_column'" in err and not os.path.exists(os.path.join(tmp, "bad.csv")),
          f"{argv[0]} --columns refuses an unknown column: {rc} {err}")

# 4. --resume reads a CSV of another column set; without the identity columns it cannot match rows.
part = os.path.join(tmp, "resume.csv")
with open(default) as f:
    lines = f.readlines()
with open(part, "w") as f:
    f.writelines(lines[:6])  # the first five points
rc, _, err = run(binary, "run", demo, "-o", part, "--resume", "--quiet")
checks += 1
check(rc == 0 and [r["config_id"] for r in read_csv(part)] == [str(i) for i in range(16)], f"resume: {err}")
checks += 1
check(all(r[c] == d[c] for r, d in zip(read_csv(part), rows) for c in header(default) if c != "sim_wall_time_s"),
      "resumed CSV equals the uninterrupted one")
rc, _, err = run(binary, "run", demo, "-o", sel, "--resume", "--columns", "throughput")
checks += 1
check(rc == 0, f"a CSV with the identity columns resumes under another selection: {err}")
thin = os.path.join(tmp, "thin.csv")
run(binary, "run", demo, "-o", thin, "--columns", "throughput", "--quiet")
before = text(thin)
rc, _, err = run(binary, "run", demo, "-o", thin, "--resume")
checks += 1
check(rc == 1 and "thin.csv:1: no column 'experiment'" in err and text(thin) == before,
      f"--resume refuses a CSV without the identity columns, and leaves it: {rc} {err}")

# 5. Shards of different column sets merge into the unsharded CSV: a BN point fills bn_batch, a GN
# point does not, so one part has the column and the other not.
sets = ["--set", "sweep.model.resnet.normalization=[batch_norm,group_norm]", "--set", "sweep.training.micro_batch=[2]"]
parts = []
for i in range(2):
    p = os.path.join(tmp, f"part{i}.csv")
    rc, _, err = run(binary, "run", norm, "-o", p, "--shard", f"{i}/2", "--quiet", *sets)
    checks += 1
    check(rc == 0, f"shard {i}: {err}")
    parts.append(p)
checks += 1
check("bn_batch" in header(parts[0]) and "bn_batch" not in header(parts[1]),
      f"the parts have different columns: {header(parts[0])} / {header(parts[1])}")
merged, whole = os.path.join(tmp, "merged.csv"), os.path.join(tmp, "whole.csv")
rc, _, err = run(binary, "merge", *parts, "-o", merged, "--columns", "-sim_wall_time_s")
checks += 1
check(rc == 0, f"merge: {err}")
rc, _, err = run(binary, "run", norm, "-o", whole, "--quiet", "--columns", "-sim_wall_time_s", *sets)
checks += 1
check(rc == 0 and text(merged) == text(whole), "the merged parts are the unsharded CSV, byte for byte")
rc, _, err = run(binary, "merge", parts[0], thin, "-o", os.path.join(tmp, "m2.csv"))
checks += 1
check(rc == 1 and "no column 'experiment'" in err, f"merge refuses a part without the identity columns: {rc} {err}")
with open(os.path.join(tmp, "alien.csv"), "w") as f:
    f.write("config_id,experiment,througput\n0,demo,1\n")
rc, _, err = run(binary, "merge", os.path.join(tmp, "alien.csv"), "-o", os.path.join(tmp, "m3.csv"))
checks += 1
check(rc == 1 and "alien.csv:1: not a CSV of this ddlsim version: unknown column 'througput'" in err,
      f"an unknown column is refused with file:line: {rc} {err}")

# Exposed communication by parallel dimension (sim/CommBreakdown.hpp): no dimension is exposed longer
# than all communication together, and together they cover it (dimensions in flight at once each
# count); a dimension a layout does not have is 0, and with one dimension alone it is the total.
DIMS = ("exposed_tp_s", "exposed_dp_s", "exposed_pp_s", "exposed_cp_s", "all_to_all_time_s")
search = os.path.join(ROOT, "experiments", "llama3_70b_search.yaml")
layouts = {  # Llama 3 70B on 1,024 H100s (collectives in closed form), and the demo's data parallelism
    "tp pp dp": (search, ["--set", "parallelism.tp=8", "--set", "parallelism.pp=4", "--set", "parallelism.dp=32"]),
    "tp pp dp cp": (search, ["--set", "parallelism.tp=4", "--set", "parallelism.pp=4", "--set", "parallelism.dp=32",
                             "--set", "parallelism.cp=2", "--set", "parallelism.zero=3"]),
    "pp alone": (search, ["--set", "parallelism.tp=1", "--set", "parallelism.pp=8", "--set", "parallelism.dp=1",
                          "--set", "cluster=dgx-h100", "--set", "training.global_batch=8", "--set", "model=llama3-8b",
                          "--set", "parallelism.zero=0", "--set", "parallelism.sequence_parallel=false"]),
    "dp alone": (demo, ["--set", "sweep.training.micro_batch=[4]"]),
}
for name, (exp, sets) in layouts.items():
    path = os.path.join(tmp, "dims.csv")
    rc, _, err = run(binary, "run", exp, "--quiet", "-o", path, *sets)
    row = read_csv(path)[0] if rc == 0 else {}
    total = float(row.get("exposed_comm_time_s") or "nan")
    dims = {d: float(row[d]) for d in DIMS if row.get(d)}
    eps = 1e-9 * float(row.get("iteration_time_s") or 1)
    checks += 2
    check(rc == 0 and row.get("status") == "ok" and len(dims) >= 4 and all(v >= 0 and v <= total + eps for v in dims.values())
          and sum(dims.values()) >= total - eps, f"{name}: each dimension within the total, together at least it: {total} {dims} {err}")
    absent = {"tp pp dp": ["exposed_cp_s"], "tp pp dp cp": [], "pp alone": ["exposed_tp_s", "exposed_dp_s", "exposed_cp_s"],
              "dp alone": ["exposed_tp_s", "exposed_pp_s", "exposed_cp_s"]}[name]
    alone = {"pp alone": "exposed_pp_s", "dp alone": "exposed_dp_s"}.get(name)
    check(all(dims.get(d) == 0 for d in absent) and (alone is None or abs(dims.get(alone, -1) - total) <= eps)
          and (name != "tp pp dp cp" or all(dims.get(d, 0) > 0 for d in DIMS[:4])),
          f"{name}: the dimensions it has, and only those: {dims} of {total}")

finish("cli_columns", checks)
