"""ddlsim bench: the scenarios list with their kinds, one scenario of each kind end to end into one
CSV (a simulation with the bare SimGrid DAG of the same size, the shipped sweep at -j 2, a small
synthetic trace import, trace files of the user's), and usage errors. Speed figures are not checked
here, only that they are there and positive (they belong to docs/performance.md, not to a timed
test)."""
import csv
import os
import sys

from common import FIXTURES, check, finish, run, workdir

binary = sys.argv[1]
checks = 0
out_dir = workdir()

rc, out, err = run(binary, "bench", "--list")
names = [line.split()[0] for line in out.splitlines() if line.strip()]
kinds = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}
checks += 1
check(rc == 0 and {"gpt3-175b-1024", "gpt3-175b-8192", "resnet50-dp64", "sweep-gpipe", "import-kineto",
                   "import-kineto-gz"} <= set(names), f"bench --list: {names} {err}")
checks += 1
check(kinds.get("gpt3-175b-1024") == "simulation" and kinds.get("sweep-gpipe") == "sweep"
      and kinds.get("import-kineto-gz") == "import" and set(kinds.values()) == {"simulation", "sweep", "import"},
      f"bench --list kinds: {kinds}")

path = os.path.join(out_dir, "bench.csv")
rc, out, err = run(binary, "bench", "resnet50-dp64", "-o", path)
rows = list(csv.DictReader(open(path))) if rc == 0 and os.path.exists(path) else []
checks += 1
check(rc == 0 and "ddlsim / bare SimGrid" in out and len(rows) == 1, f"bench resnet50-dp64: {err}")
if rows:
    r = rows[0]
    checks += 1
    check(int(r["gpus"]) == 64 and int(r["activities"]) > 1000 and float(r["wall_time_s"]) > 0
          and float(r["max_rss_bytes"]) > 1e6 and float(r["overhead_ratio"]) > 0 and float(r["simulated_iteration_s"]) > 0,
          f"bench CSV row: {r}")
    # The resource guard's estimates beside the measured figures: the same activity count, and a
    # memory estimate above the measured peak (it refuses late, not early), except under `make
    # sanitize`, whose shadow memory is no part of ddlsim's.
    sanitized = os.environ.get("DDLSIM_SANITIZED") == "1"
    checks += 1
    check(r["estimated_activities"] == r["activities"] and
          (sanitized or float(r["estimated_memory_bytes"]) > float(r["max_rss_bytes"])),
          f"guard estimates: {r['estimated_activities']} activities vs {r['activities']}, "
          f"{r['estimated_memory_bytes']} B vs {r['max_rss_bytes']} B")

# The other kinds, appended to the same CSV: one header, a row per scenario, units in the names.
rc, out, err = run(binary, "bench", "sweep-gpipe", "-j", "2", "-o", path)
checks += 1
check(rc == 0 and "points per second" in out, f"bench sweep-gpipe -j 2: {rc} {err}")
rc, out, err = run(binary, "bench", "import-kineto-gz", "--trace-size", "2MB", "--repeat", "2", "-o", path)
checks += 1
check(rc == 0 and "MB/s" in out, f"bench import-kineto-gz: {rc} {err}")
rc, out, err = run(binary, "bench", "import", os.path.join(FIXTURES, "kineto_small.json"),
                   os.path.join(FIXTURES, "nccl_tests_all_reduce.txt"), "-o", path)
checks += 1
check(rc == 0, f"bench import FILE FILE: {rc} {err}")
rows = list(csv.DictReader(open(path)))
header = open(path).readline().strip().split(",")
checks += 1
check([r["kind"] for r in rows] == ["simulation", "sweep", "import", "import", "import"]
      and {"wall_time_s", "max_rss_bytes", "points_per_s", "import_MB_per_s", "json_MB_per_s", "wall_time_spread_pct"}
      <= set(header), f"one CSV, a row per scenario: {[r['kind'] for r in rows]} {header}")
if len(rows) == 5:
    sweep, synthetic, small, nccl = rows[1], rows[2], rows[3], rows[4]
    checks += 1
    check(sweep["scenario"] == "sweep-gpipe" and int(sweep["jobs"]) == 2 and int(sweep["points"]) == 100
          and int(sweep["points_ok"]) == 100 and float(sweep["points_per_s"]) > 0 and float(sweep["max_rss_bytes"]) > 1e6
          and sweep["activities"] == "", f"sweep row: {sweep}")
    checks += 1
    check(synthetic["gzip"] == "yes" and 2e6 <= int(synthetic["json_bytes"]) < 2.01e6
          and 0 < int(synthetic["input_bytes"]) < int(synthetic["json_bytes"]) / 4 and int(synthetic["kernels"]) > 500
          and int(synthetic["collectives"]) > 20 and float(synthetic["import_MB_per_s"]) > 0
          and float(synthetic["json_MB_per_s"]) > float(synthetic["import_MB_per_s"]) and int(synthetic["repeat"]) == 2
          and float(synthetic["wall_time_spread_pct"]) >= 0, f"synthetic import row: {synthetic}")
    checks += 1
    check(small["scenario"] == "kineto_small.json" and small["gzip"] == "no" and small["input_bytes"] == small["json_bytes"]
          and int(small["kernels"]) == 3 and int(small["collectives"]) == 4 and float(small["import_MB_per_s"]) > 0
          and nccl["scenario"] == "nccl_tests_all_reduce.txt" and int(nccl["collectives"]) > 0,
          f"trace file rows: {small} {nccl}")

rc, out, err = run(binary, "bench")
checks += 1
check(rc == 2, "bench without a scenario is a usage error")
for args, what in [(["resnet50-dp64", "-j", "2"], "-j for a simulation scenario"),
                   (["sweep-gpipe", "--no-compare"], "--no-compare for a sweep"),
                   (["sweep-gpipe", "--trace-size", "1MB"], "--trace-size for a sweep"),
                   (["import-kineto", "--trace-size", "lots"], "a size that is not one"),
                   (["import"], "bench import without files"),
                   (["resnet50-dp64", "gpt3-175b-1024"], "two scenarios")]:
    rc, out, err = run(binary, "bench", *args)
    checks += 1
    check(rc == 2 and "ddlsim:" in err, f"{what} is a usage error: {rc} {err}")
rc, out, err = run(binary, "bench", "import", os.path.join(out_dir, "missing.json"))
checks += 1
check(rc == 1 and "missing.json" in err, f"bench import of a missing file: {rc} {err}")
other = os.path.join(out_dir, "other.csv")
with open(other, "w") as f:
    f.write("a,b\n1,2\n")
rc, out, err = run(binary, "bench", "import", os.path.join(FIXTURES, "kineto_small.json"), "-o", other)
checks += 1
check(rc == 1 and "header" in err and open(other).read() == "a,b\n1,2\n", f"a CSV with other columns is refused: {rc} {err}")
rc, out, err = run(binary, "bench", "no-such-scenario")
checks += 1
check(rc == 1 and "no-such-scenario" in err and "gpt3-175b-1024" in err, f"unknown scenario: {err}")

# docs/performance.md's allocator section, from the simulation row above and a stand-in for `make
# bench-allocator`'s CSV: the same row at twice the wall time (a 2.00x speed-up, same numbers), and
# a second scenario whose simulated iteration differs (said, not hidden).
if rows:
    glibc = os.path.join(out_dir, "bench-glibc.csv")
    slow = dict(rows[0], wall_time_s=str(2 * float(rows[0]["wall_time_s"])))
    moved = dict(rows[0], scenario="moved", simulated_iteration_s="1.5")
    with open(glibc, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows([slow, moved])
    ours = os.path.join(out_dir, "bench-ours.csv")
    with open(ours, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows([rows[0], dict(rows[0], scenario="moved", simulated_iteration_s="1.25")])
    page = os.path.join(out_dir, "performance.md")
    build = os.path.dirname(os.path.dirname(os.path.abspath(binary)))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "performance_md.py")
    rc, out, err = run(sys.executable, script, ours, "--build", build, "--glibc", glibc, "-o", page)
    text = open(page).read() if rc == 0 else ""
    _, version, _ = run(binary, "--version")
    checks += 1
    if "tcmalloc" in version:
        check("## The allocator" in text and "| 2.00x |" in text and "| yes |" in text and "| no: 1.5 / 1.25 |" in text
              and "tcmalloc" in text.split("**Build.**")[1].splitlines()[0],
              f"performance.md's allocator section: {rc} {err} {text[-1500:]}")
    else:
        check(rc == 0 and "## The allocator" not in text, f"a glibc build has no allocator section: {rc} {err}")
    # With `make bench-allocator`'s run of this build beside each glibc run (--glibc-peer), the
    # section compares with that run, not with the table's (here: 4x faster than glibc's).
    peer = os.path.join(out_dir, "bench-tcmalloc.csv")
    with open(peer, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerow(dict(rows[0], wall_time_s=str(0.5 * float(rows[0]["wall_time_s"]))))
    rc, out, err = run(sys.executable, script, ours, "--build", build, "--glibc", glibc, "--glibc-peer", peer,
                       "-o", page)
    text = open(page).read() if rc == 0 else ""
    checks += 1
    if "tcmalloc" in version:
        check("| 4.00x |" in text and "| 2.00x |" not in text and "| no: 1.5 / 1.25 |" in text,
              f"performance.md's allocator section against the peer runs: {rc} {err} {text[-1500:]}")
    else:
        check(rc == 0 and "## The allocator" not in text, f"a glibc build has no allocator section: {rc} {err}")

finish("cli_bench", checks)
