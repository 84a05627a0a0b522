"""The timelines of the shipped experiments (the points cli_timeline checks) loaded into Perfetto's
trace processor, which the Perfetto UI runs on: it must import them without an error in its stats,
with every slice, flow and counter sample of the file, no slice nested in another (a track's lanes
never overlap), and a process per GPU.

DDLSIM_TRACE_PROCESSOR names the trace_processor_shell binary (or the `trace_processor` wrapper,
which takes the same flags). Without it the test is skipped (exit 77): the trace processor is a
download, which machines without internet cannot make."""
import csv
import io
import json
import os
import subprocess
import sys

from common import ROOT, SKIP, check, finish, read_csv, run, workdir
from timeline_rules import ONE_POINT, shipped_points

binary = sys.argv[1]
processor = os.environ.get("DDLSIM_TRACE_PROCESSOR", "")
if not processor:
    print("DDLSIM_TRACE_PROCESSOR is not set (path of Perfetto's trace_processor_shell): skipped")
    sys.exit(SKIP)
checks = 1
check(os.path.isfile(processor) and os.access(processor, os.X_OK),
      f"DDLSIM_TRACE_PROCESSOR={processor} is not an executable file")
if not os.access(processor, os.X_OK):
    finish("cli_timeline_perfetto", checks)

QUERY = """select
  (select count(*) from slice) as slices,
  (select count(*) from slice where depth > 0) as nested,
  (select count(*) from flow) as flows,
  (select count(distinct track_id) from counter) as counter_tracks,
  (select count(*) from counter) as counter_samples,
  (select count(*) from process where name like 'gpu%') as gpus,
  (select ifnull(group_concat(name || '=' || value, ' '), '') from stats
     where value > 0 and severity in ('error', 'data_loss')) as errors
"""
tmp = workdir()
query_file = os.path.join(tmp, "query.sql")
with open(query_file, "w") as f:
    f.write(QUERY)


def expected(trace):
    """What the trace processor should find in a timeline: from the file itself."""
    events = trace["traceEvents"]
    flows = {}
    for e in events:
        if e["ph"] in ("s", "t", "f"):
            flows[e["id"]] = flows.get(e["id"], 0) + 1
    counters = [e for e in events if e["ph"] == "C"]
    return {"slices": sum(e["ph"] == "X" for e in events), "nested": 0,
            "flows": sum(n - 1 for n in flows.values()),
            "counter_tracks": len({(c["pid"], c["name"], key) for c in counters for key in c["args"]}),
            "counter_samples": sum(len(c["args"]) for c in counters),
            "gpus": sum(e["ph"] == "M" and e["name"] == "process_name" for e in events), "errors": ""}


def loaded(path):
    """The query's one row as the trace processor prints it (CSV with a header), or its failure."""
    p = subprocess.run([processor, "-q", query_file, path], capture_output=True, text=True, timeout=600)
    lines = [line for line in p.stdout.splitlines() if line.strip()]
    if p.returncode != 0 or len(lines) < 2:
        return None, f"exit {p.returncode}: {p.stderr[-500:]}"
    header, row = next(csv.reader(io.StringIO(lines[-2]))), next(csv.reader(io.StringIO(lines[-1])))
    found = dict(zip(header, row))
    return {k: (v if k == "errors" else int(float(v))) for k, v in found.items()}, ""


for name, k in shipped_points(os.path.join(ROOT, "experiments")):
    out_csv = os.path.join(tmp, f"{name}_{k}.csv")
    rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", name), "--quiet", "-o", out_csv,
                     "--shard", f"{k}/{ONE_POINT}", "--trace-dir", tmp)
    rows = read_csv(out_csv) if rc == 0 else []
    checks += 1
    check(rows and rows[0]["status"] == "ok", f"{name} point {k} runs: {rc} {err}")
    if not rows or rows[0]["status"] != "ok":
        continue
    path = os.path.join(tmp, f"{rows[0]['experiment']}_{k}.json")
    with open(path) as f:
        want = expected(json.load(f))
    got, why = loaded(path)
    checks += 1
    check(got == want, f"{name} point {k} in Perfetto: {got or why}, want {want}")

finish("cli_timeline_perfetto", checks)
