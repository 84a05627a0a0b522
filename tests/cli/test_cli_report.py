"""`ddlsim report CSV [--top N]` (issue 31, item 6): the best ok points of a CSV by throughput, as a
fixed-width table with their breakdown and the layout columns that differ (docs/running.md); bad
input (a missing file, a file that is not a ddlsim CSV, one without the columns it ranks by) is an
error naming the file, exit 1."""
import os
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
tmp = workdir()

# The demo's 16 points (pp x micro-batch; GPT-2 XL, 16 GPUs).
csv_path = os.path.join(tmp, "demo.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", csv_path, "--quiet", "-j", "2")
checks += 1
check(rc == 0, f"the demo runs: {err}")
rows = read_csv(csv_path) if rc == 0 else []
best = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: -float(r["throughput_samples_per_s"]))
statuses = ", ".join(f"{n} {s}" for s in ("ok", "oom", "invalid", "error")
                     for n in [sum(r["status"] == s for r in rows)] if n)

rc, out, err = run(binary, "report", csv_path, "--top", "5")
lines = out.splitlines()
checks += 1
check(rc == 0 and len(lines) == 2 + 1 + 5, f"report --top 5: a summary, what is alike, a header, 5 rows: {rc} {out}{err}")
if rc == 0 and len(lines) == 8:
    checks += 1
    check(lines[0] == f"{csv_path}: 16 points ({statuses}); the 5 best by throughput", f"the summary: {lines[0]}")
    checks += 1
    check(lines[1].startswith("same in all 5: experiment demo, model gpt2-xl, cluster dgx-h100x2") and
          "schedule gpipe" in lines[1] and "tp 1" in lines[1], f"what the 5 share, once: {lines[1]}")
    header = lines[2].split()
    checks += 1
    # The exposed communication by dimension: the dimensions some of the five use (here data and
    # pipeline parallelism), left out where all five have none (tensor, context).
    check(header[:2] == ["rank", "config_id"] and
          header[-10:] == ["iteration_s", "samples/s", "tokens/s/GPU", "MFU", "compute_s", "bubble", "exposed_comm_s",
                           "dp_s", "pp_s", "memory/GPU_GiB"] and "micro_batch" in header,
          f"the layout that differs, then the breakdown: {header}")
    checks += 1
    check(len({len(line) for line in lines[2:]}) == 1, f"fixed width: every line of the table as long: {lines[2:]}")
    table = [line.split() for line in lines[3:]]
    ids = [t[1] for t in table]
    checks += 1
    check(ids == [r["config_id"] for r in best[:5]], f"ranked by throughput: {ids} vs {[r['config_id'] for r in best[:5]]}")
    for t, r in zip(table, best):
        col = dict(zip(header, t))
        gib = 1024 ** 3
        checks += 1
        check(abs(float(col["samples/s"]) - float(r["throughput_samples_per_s"])) <=
              1e-3 * float(r["throughput_samples_per_s"]) and
              abs(float(col["iteration_s"]) - float(r["iteration_time_s"])) <= 1e-3 * float(r["iteration_time_s"]) and
              col["MFU"] == f"{100 * float(r['mfu']):.1f}%" and
              col["tokens/s/GPU"] == f"{float(r['tokens_per_s_per_gpu']):.0f}" and
              col["bubble"] == f"{100 * float(r['bubble_fraction']):.1f}%" and
              col["pp"] == r["pp"] and col["micro_batch"] == r["micro_batch"] and
              all(abs(float(col[d + "_s"]) - float(r[f"exposed_{d}_s"])) <= 1e-3 * float(r["iteration_time_s"])
                  for d in ("dp", "pp")),
              f"point {r['config_id']}: the row's figures are the CSV's: {col}")
        memory = lines[3 + table.index(t)][-len(f"{float(r['peak_memory_bytes']) / gib:.1f} of "
                                              f"{float(r['memory_capacity_bytes']) / gib:.1f}"):]
        checks += 1
        check(memory == f"{float(r['peak_memory_bytes']) / gib:.1f} of {float(r['memory_capacity_bytes']) / gib:.1f}",
              f"point {r['config_id']}: memory per GPU of its capacity, GiB: {memory}")
    checks += 1
    check("e+" not in out and "e-" not in out.replace("same", ""), f"no scientific notation: {out}")

# The default shows 10; --top over the ok rows shows them all.
rc, out, _ = run(binary, "report", csv_path)
checks += 1
check(rc == 0 and len(out.splitlines()) == 2 + 1 + 10, f"10 rows by default: {out}")
rc, out, _ = run(binary, "report", csv_path, "--top", "100")
checks += 1
check(rc == 0 and f"the {len(best)} best" in out and len(out.splitlines()) == 2 + 1 + len(best),
      f"--top 100 shows all {len(best)} ok points: {out}")

# Bad input: exit 1, the file named; usage: exit 2.
missing = os.path.join(tmp, "missing.csv")
rc, out, err = run(binary, "report", missing)
checks += 1
check(rc == 1 and missing in err and out == "", f"a missing file: {rc} {err}")
yaml = os.path.join(ROOT, "experiments", "demo.yaml")
rc, _, err = run(binary, "report", yaml)
checks += 1
check(rc == 1 and f"{yaml}:1" in err and "not a CSV of this ddlsim version" in err, f"not a ddlsim CSV: {rc} {err}")
empty = os.path.join(tmp, "empty.csv")
open(empty, "w").close()
rc, _, err = run(binary, "report", empty)
checks += 1
check(rc == 1 and empty in err, f"an empty file: {rc} {err}")
thin = os.path.join(tmp, "thin.csv")
run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", thin, "--quiet", "--shard", "0/16",
    "--columns", "identity")
rc, _, err = run(binary, "report", thin)
checks += 1
check(rc == 1 and f"{thin}:1" in err and "no column 'status'" in err, f"a CSV without the columns: {rc} {err}")
rc, _, err = run(binary, "report", csv_path, "--top", "0")
checks += 1
check(rc == 2, f"--top 0: a usage error: {rc} {err}")

# A CSV of points that did not run: said, exit 0.
oom = os.path.join(tmp, "oom.csv")
run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", oom, "--quiet", "--set",
    "training.global_batch=1024", "--set", "sweep.training.micro_batch=[64]", "--set", "sweep.parallelism.pp=[1]")
rc, out, err = run(binary, "report", oom)
checks += 1
check(rc == 0 and out == f"{oom}: 1 point (1 oom); no point ran (status ok): nothing to rank\n",
      f"no ok point: {rc} {out}{err}")

finish("cli_report", checks)
