"""Sweeps that outgrow one run: a sweep killed midway leaves a valid CSV of the points it finished,
and `--resume` completes it to the same CSV as an uninterrupted run (no duplicated or torn rows);
`--shard I/N` parts joined by `ddlsim merge` equal the unsharded CSV; merge refuses parts that
disagree. Rows are compared without sim_wall_time_s, the one column that measures the host."""
import csv
import os
import shutil
import signal
import subprocess
import sys
import time

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()
demo = os.path.join(ROOT, "experiments", "demo.yaml")
# 12 points of about 0.2 s each (1F1B over many micro-batches), so that a kill lands midway.
slow = ["--set", "training.global_batch=16384", "--set", "parallelism.schedule=1f1b",
        "--set", "sweep.training.micro_batch=[1,2,4,8]", "--set", "sweep.parallelism.pp=[2,4,8]"]


def rows_of(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r.pop("sim_wall_time_s")
    return rows


full = os.path.join(d, "full.csv")
rc, _, err = run(binary, "run", demo, "-o", full, "--quiet", *slow)
checks += 1
check(rc == 0 and len(read_csv(full)) == 12, f"the uninterrupted sweep: {err}")

# Kill a sweep once it has written some rows (a checkpoint after every row for the test).
killed = os.path.join(d, "killed.csv")
env = dict(os.environ, DDLSIM_CHECKPOINT_SECONDS="0")
p = subprocess.Popen([binary, "run", demo, "-o", killed, "--quiet", *slow], cwd=ROOT, env=env,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
deadline = time.time() + 60
partial = 0
while time.time() < deadline and p.poll() is None:
    try:
        partial = len(read_csv(killed))
    except (OSError, csv.Error):
        partial = 0
    if partial >= 3:
        os.killpg(p.pid, signal.SIGKILL)
        break
    time.sleep(0.02)
p.wait()
kept = rows_of(killed) if os.path.exists(killed) else []
reference = {r["config_id"]: r for r in rows_of(full)}
checks += 2
check(3 <= len(kept) < 12, f"the killed sweep left some rows, not all: {len(kept)}")
check(all(reference.get(r["config_id"]) == r for r in kept), "every row it left is whole and equal to the uninterrupted run's")

rc, _, err = run(binary, "run", demo, "-o", killed, *slow, "--resume")
checks += 3
check(rc == 0 and f"{len(kept)} kept from the earlier run" in err, f"--resume keeps the finished rows: {err.strip()}")
resumed = rows_of(killed)
check(resumed == rows_of(full), "the resumed CSV equals the uninterrupted one, row for row")
check(len({r["config_id"] for r in resumed}) == len(resumed), "no duplicated rows")

# --resume with another configuration keeps nothing that does not match.
rc, _, err = run(binary, "run", demo, "-o", killed, *slow, "--set", "training.dtype=fp16", "--resume")
checks += 1
check(rc == 0 and "kept from" not in err and all(r["dtype"] == "fp16" for r in read_csv(killed)),
      f"rows of another configuration are not kept: {err.strip()}")

# Crash isolation: a point whose process dies, or runs past --point-timeout, is an error row with
# the signal or the limit, and the other points are simulated as usual.
crash_csv = os.path.join(d, "crash.csv")
env = dict(os.environ, DDLSIM_CRASH_POINT="5")
p = subprocess.run([binary, "run", demo, "-o", crash_csv, "--quiet", *slow], cwd=ROOT, env=env, capture_output=True, text=True)
crashed = rows_of(crash_csv) if p.returncode == 0 else []
checks += 2
check(len(crashed) == 12 and crashed[5]["status"] == "error" and "signal 6" in crashed[5]["message"],
      f"the aborted point is an error row naming the signal: {p.stderr} {crashed[5] if len(crashed) > 5 else ''}")
check([r for i, r in enumerate(crashed) if i != 5] == [r for i, r in enumerate(rows_of(full)) if i != 5],
      "the other points are unaffected")
timeout_csv = os.path.join(d, "timeout.csv")
rc, _, err = run(binary, "run", demo, "-o", timeout_csv, "--quiet", *slow, "--point-timeout", "0.001")
timed = read_csv(timeout_csv) if rc == 0 else []
checks += 2
check(len(timed) == 12 and all(r["status"] == "error" and "--point-timeout 0.001 s" in r["message"] for r in timed),
      f"every point past a 1 ms limit is an error row naming the limit: {err}")
rc, _, err = run(binary, "run", demo, "-o", timeout_csv, "--point-timeout", "-3")
check(rc == 2 and "--point-timeout" in err, f"a negative limit is a usage error: {rc} {err}")

# Shards and merge.
parts = []
for i in range(3):
    part = os.path.join(d, f"part{i}.csv")
    rc, _, err = run(binary, "run", demo, "-o", part, "--quiet", *slow, "--shard", f"{i}/3")
    parts.append(part)
    checks += 1
    check(rc == 0 and [int(r["config_id"]) % 3 for r in read_csv(part)] == [i] * 4, f"shard {i}/3 holds its 4 points: {err}")
merged = os.path.join(d, "merged.csv")
rc, _, err = run(binary, "merge", parts[2], parts[0], parts[1], "-o", merged)
checks += 1
check(rc == 0 and rows_of(merged) == rows_of(full), f"merged shards equal the unsharded CSV: {err}")

other = os.path.join(d, "other.csv")
run(binary, "run", demo, "-o", other, "--quiet", *slow, "--set", "training.dtype=fp16", "--shard", "0/3")
rc, _, err = run(binary, "merge", parts[0], other, "-o", os.path.join(d, "bad.csv"))
checks += 1
check(rc != 0 and "differs" in err and not os.path.exists(os.path.join(d, "bad.csv")), f"disagreeing parts are refused: {rc} {err}")
with open(os.path.join(d, "cut.csv"), "w") as f:
    f.write(open(full).read()[:-40])
rc, _, err = run(binary, "merge", os.path.join(d, "cut.csv"), "-o", os.path.join(d, "bad2.csv"))
checks += 1
check(rc == 1 and "cut.csv:" in err and "line end" in err, f"a cut CSV is refused with file and line: {rc} {err}")
rc, _, err = run(binary, "run", demo, "-o", full, "--shard", "3/3")
checks += 1
check(rc == 2 and "--shard" in err, f"--shard 3/3 is a usage error: {rc} {err}")

# MPI: two ranks share the points and rank 0 writes the same CSV as the local run.
rc, version, _ = run(binary, "--version")
mpirun = shutil.which("mpirun")
mpi_csv = os.path.join(d, "mpi.csv")
if "MPI found" in version and mpirun:
    # OpenMPI's own allocations outlive MPI_Finalize: under the sanitizer build, leak reports from it
    # are not ddlsim's (ASan and UBSan still check everything else).
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", binary, "run", demo, "-o", mpi_csv,
                        "--mpi", *slow], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    checks += 1
    check(p.returncode == 0 and "2 MPI ranks" in p.stderr and rows_of(mpi_csv) == rows_of(full),
          f"mpirun -np 2 ddlsim run --mpi equals the local run: {p.returncode} {p.stderr[-400:]}")
else:
    rc, _, err = run(binary, "run", demo, "-o", mpi_csv, "--mpi", *slow)
    checks += 1
    check(rc == 1 and "without MPI" in err and not os.path.exists(mpi_csv), f"--mpi without MPI is refused: {rc} {err}")

# Zipped axes and a where constraint through the CLI: the kept points, with their full-product ids.
zipped = os.path.join(d, "zip.yaml")
with open(zipped, "w") as f:
    f.write("name: zipped\nmodel: gpt2-small\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
            "training: {global_batch: 64, micro_batch: 1, dtype: bf16}\nparallelism: {schedule: 1f1b, pp: 1, dp: 16}\n"
            "sweep:\n  training.micro_batch: [1, 2, 4]\n  zip:\n    parallelism.pp: [1, 2, 4, 8]\n"
            "    parallelism.dp: [16, 8, 4, 2]\n  parallelism.tp: [1, 2]\nwhere: pp * dp * tp == gpus\n")
zcsv = os.path.join(d, "zip.csv")
rc, _, err = run(binary, "run", zipped, "-o", zcsv, "--quiet")
zrows = read_csv(zcsv) if rc == 0 else []
checks += 2
check(len(zrows) == 12 and all(int(r["pp"]) * int(r["dp"]) * int(r["tp"]) == 16 for r in zrows),
      f"where keeps the 12 points of 16 GPUs out of 24: {len(zrows)} {err}")
check([int(r["config_id"]) for r in zrows] == list(range(0, 24, 2)), "kept points keep their full-product ids")
# --set pins a key of a zip group: it leaves the group, whose other keys still vary together.
rc, _, err = run(binary, "run", zipped, "-o", zcsv, "--quiet", "--set", "parallelism.dp=8")
zrows = read_csv(zcsv) if rc == 0 else []
checks += 1
check(rc == 0 and sorted((int(r["micro_batch"]), int(r["pp"]), int(r["tp"])) for r in zrows) ==
      sorted((b, p, t) for b in (1, 2, 4) for p, t in ((1, 2), (2, 1))) and all(r["dp"] == "8" for r in zrows),
      f"--set parallelism.dp=8 pins a zipped key, pp still swept: {rc} {err} {len(zrows)}")
with open(zipped, "a") as f:
    f.write("output: {csv: x.csv}\n")
rc, _, err = run(binary, "run", zipped, "-o", zcsv, "--set", "where=gpus > 100")
checks += 1
check(rc == 1 and "leaves none of the 24 points" in err, f"a constraint that keeps nothing is an error: {rc} {err}")

finish("cli_sweep", checks)
