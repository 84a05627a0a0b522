"""Helpers for the CLI tests: run the ddlsim binary, read its CSV, check with tolerances."""
import atexit
import csv
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SKIP = 77  # CTest SKIP_RETURN_CODE

failures = []


def run(binary, *args, cwd=None):
    p = subprocess.run([binary, *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def search_tables(out):
    """The ranked tables `ddlsim search parallel` prints (the search's, then --confirm's), rows as dicts by
    header."""
    found, header = [], None
    for line in out.splitlines():
        words = line.split()
        if words[:2] == ["rank", "tp"]:
            header = words
            found.append([])
        elif header and words and words[0].isdigit() and len(words) == len(header):
            found[-1].append(dict(zip(header, words)))
        else:
            header = None if not (words and words[0] == "-") else header
    return found


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def gpu_visible():
    """True when an NVIDIA GPU answers `nvidia-smi -L` (the CUDA paths then run for real)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and "GPU" in p.stdout


_workdirs = []


def _remove_unless_failed(d):
    # A failed test keeps its folder to look into (finish names it); DDLSIM_KEEP_TEST_DIRS=1 keeps all.
    if not failures and os.environ.get("DDLSIM_KEEP_TEST_DIRS") != "1":
        shutil.rmtree(d, ignore_errors=True)


def workdir():
    """A fresh temporary folder with the four-GPU cluster fixture, removed when the test ends (kept if it failed,
    or with DDLSIM_KEEP_TEST_DIRS=1): the suite once left 1,000 of them, gigabytes, in /tmp."""
    d = tempfile.mkdtemp(prefix="ddlsim_cli_")
    shutil.copy(os.path.join(FIXTURES, "node4.yaml"), d)
    atexit.register(_remove_unless_failed, d)
    _workdirs.append(d)
    return d


def write_experiment(directory, name, body):
    """Writes an experiment file `name`.yaml into `directory`; returns its path."""
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as f:
        f.write(body)
    return path


def simulate(binary, path, *extra):
    """`ddlsim run` of an experiment at -j 2 into a CSV beside it: (exit code, rows, stderr)."""
    out = path + ".csv"
    rc, _, err = run(binary, "run", path, "-o", out, "--quiet", "-j", "2", *extra)
    return rc, (read_csv(out) if rc == 0 else []), err


def finish(name, count):
    """Prints the plain closing line CI reads and exits non-zero on any failure."""
    failed = len(failures)
    print(f"{name}: {count - failed} passed, {failed} failed")
    if failed and _workdirs:
        print(f"{name}: its temporary folders are kept: {' '.join(_workdirs)}")
    sys.exit(1 if failed else 0)
