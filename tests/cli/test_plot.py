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
# `ddlsim run --plot` draws the experiment's own figure (output.plot) next to the CSV.
rc, out, err = run(binary, "run", os.path.join(ROOT, "experiments", "gpipe_bm.yaml"), "-o", os.path.join(tmp, "bm.csv"),
                   "--quiet", "--plot", "--set", "sweep.parallelism.pp=[2]", "--set", "sweep.training.micro_batch=[8,16]")
bm_png = os.path.join(tmp, "bm.png")
checks += 1
check(rc == 0 and out.strip() == bm_png and os.path.exists(bm_png) and open(bm_png, "rb").read()[:4] == b"\x89PNG",
      f"run --plot draws plot_bm.py's figure: {rc} {out} {err}")
# Without a python3 that has matplotlib: a message, exit 1, the CSV kept.
env = dict(os.environ, DDLSIM_PYTHON="/nonexistent/python3")
p = subprocess.run([binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", os.path.join(tmp, "np.csv"),
                    "--quiet", "--plot"], capture_output=True, text=True, env=env, cwd=ROOT)
checks += 1
check(p.returncode == 1 and "--plot needs a python3 with matplotlib" in p.stderr and os.path.exists(os.path.join(tmp, "np.csv")),
      f"no python: {p.returncode} {p.stderr}")
# A plot script that does not exist is named with a guess.
with open(os.path.join(tmp, "badplot.yaml"), "w") as f:
    f.write(open(os.path.join(ROOT, "experiments", "demo.yaml")).read().replace(
        "output: {csv: results/demo.csv}", "output: {csv: results/demo.csv, plot: plot_throughpt.py}"))
rc, out, err = run(binary, "validate", os.path.join(tmp, "badplot.yaml"))
checks += 1
check(rc == 1 and "output.plot: unknown plot script 'plot_throughpt.py' (did you mean 'plot_throughput.py'?)" in err,
      f"bad output.plot: {rc} {err}")
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
    "plot_moe.py": ("moe.yaml", ["--set", "sweep.zip=[{model: [mixtral-8x7b], cluster.gpus: [16], parallelism.pp: [1], "
                                 "training.global_batch: [16]}, {parallelism.ep: [8, 16], parallelism.ep_collective: "
                                 "[direct, hierarchical]}]", "--set", "sweep.training.load_imbalance=[1.0, 2.0]"]),
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
