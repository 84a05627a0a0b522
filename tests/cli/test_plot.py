"""plots/plot_throughput.py draws a PNG from a ddlsim CSV (skipped without matplotlib)."""
import importlib.util
import os
import subprocess
import sys

from common import ROOT, SKIP, check, finish, run, workdir

binary = sys.argv[1]
if importlib.util.find_spec("matplotlib") is None:
    print("matplotlib is not installed for this python3: skipped (apt-get install python3-matplotlib)")
    sys.exit(SKIP)
tmp = workdir()
checks = 0
csv_path = os.path.join(tmp, "demo.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", csv_path, "--quiet")
checks += 1
check(rc == 0, f"demo runs: {err}")
png = os.path.join(tmp, "demo.png")
p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "plot_throughput.py"), csv_path, "-o", png],
                   capture_output=True, text=True)
checks += 1
check(p.returncode == 0, f"plot script exits 0: {p.stderr}")
with open(png, "rb") as f:
    data = f.read()
checks += 2
check(data[:8] == b"\x89PNG\r\n\x1a\n", "a PNG file")
check(len(data) > 10000, f"a real figure, not an empty canvas ({len(data)} bytes)")
# A CSV that is not ddlsim's is refused with a message.
bad = os.path.join(tmp, "bad.csv")
with open(bad, "w") as f:
    f.write("a,b\n1,2\n")
p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "plot_throughput.py"), bad], capture_output=True, text=True)
checks += 1
check(p.returncode != 0 and "not a ddlsim results CSV" in p.stderr, f"bad CSV refused: {p.stderr}")

# The seed studies' plots, each on a small run of its experiment: a PNG of some size, and a refusal
# of a CSV that is not ddlsim's.
def draw(script, source, *extra):
    png = os.path.join(tmp, script + ".png")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", script), source, "-o", png, *extra],
                       capture_output=True, text=True)
    data = open(png, "rb").read() if os.path.exists(png) else b""
    return p, data


runs = {
    "plot_bm.py": ("gpipe_bm.yaml", ["--set", "sweep.parallelism.pp=[2,4]", "--set", "sweep.training.micro_batch=[4,8,16]"]),
    "plot_grid.py": ("grid_shapes.yaml", ["--set", "sweep.cluster=[dgx-a100x8]", "--set", "sweep.parallelism.tp=[1,2,4]"]),
    "plot_memory.py": ("gpipe_bm.yaml", ["--set", "sweep.parallelism.pp=[4]"]),
    "plot_recipes.py": ("llama3_recipes.yaml", []),
}
for script, (experiment, sets) in runs.items():
    source = os.path.join(tmp, script + ".csv")
    rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", experiment), "-o", source, "--quiet", *sets)
    p, data = draw(script, source)
    checks += 2
    check(rc == 0 and p.returncode == 0 and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000,
          f"{script} draws {experiment}: {err} {p.stderr}")
    p, _ = draw(script, bad)
    check(p.returncode != 0 and "not a ddlsim results CSV" in p.stderr, f"{script} refuses a foreign CSV: {p.stderr}")
traces = os.path.join(tmp, "timeline")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "gpipe_bm.yaml"), "-o", os.path.join(tmp, "g.csv"), "--quiet",
                 "--set", "sweep.parallelism.pp=[4]", "--set", "sweep.training.micro_batch=[16]", "--trace-dir", traces)
p, data = draw("plot_gantt.py", os.path.join(traces, "gpipe_bm_0.json"))
checks += 2
check(rc == 0 and p.returncode == 0 and len(data) > 10000, f"plot_gantt.py draws a timeline: {err} {p.stderr}")
p, _ = draw("plot_gantt.py", bad)
check(p.returncode != 0 and "not a ddlsim timeline" in p.stderr, f"plot_gantt.py refuses a non-timeline: {p.stderr}")
finish("plot", checks)
