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
finish("plot", checks)
