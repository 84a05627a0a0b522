"""ddlsim bench: the scenarios list, one small scenario end to end (figures written to a CSV,
a bare SimGrid DAG of the same size run for comparison), and usage errors. Speed figures are not
checked here (they belong to docs/performance.md, not to a timed test)."""
import csv
import os
import sys

from common import check, finish, run, workdir

binary = sys.argv[1]
checks = 0
out_dir = workdir()

rc, out, err = run(binary, "bench", "--list")
names = [line.split()[0] for line in out.splitlines() if line.strip()]
checks += 1
check(rc == 0 and {"gpt3-175b-1024", "gpt3-175b-8192", "resnet50-dp64"} <= set(names), f"bench --list: {names} {err}")

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

rc, out, err = run(binary, "bench")
checks += 1
check(rc == 2, "bench without a scenario is a usage error")
rc, out, err = run(binary, "bench", "no-such-scenario")
checks += 1
check(rc == 1 and "no-such-scenario" in err and "gpt3-175b-1024" in err, f"unknown scenario: {err}")

finish("cli_bench", checks)
