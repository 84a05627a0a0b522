"""`ddlsim run`'s progress line (issue 18, item 5): on a terminal (a pseudo-terminal here), a point
running for over 2 s shows its simulated time, the share of its estimated activities simulated,
its elapsed time and an ETA; nothing of it in a pipe or with --quiet. The 2 s threshold is lowered
through DDLSIM_PROGRESS_AFTER_SECONDS so that the test does not depend on the machine's speed."""
import os
import pty
import re
import select
import subprocess
import sys

from common import ROOT, check, finish, run, workdir

binary = sys.argv[1]
checks = 0
out_dir = workdir()


def on_terminal(*args, env=None):
    """Runs ddlsim with stderr on a pseudo-terminal; returns (exit code, what it wrote there)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([binary, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL,
                         env={**os.environ, **(env or {})})
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=300), out.decode(errors="replace")


# GPT-3 13B on 64 GPUs, unfolded: about a million activities, a second or two.
point = [os.path.join(ROOT, "bench", "gpt3-13b-64-flow.yaml"), "--set", "parallelism.fold_replicas=false"]
rc, text = on_terminal("run", *point, "-o", os.path.join(out_dir, "a.csv"), env={"DDLSIM_PROGRESS_AFTER_SECONDS": "0"})
lines = [line for line in re.split(r"[\r\n]", text) if line.strip()]
shown = [line for line in lines if "point 0:" in line]
checks += 1
check(rc == 0 and shown, f"a running point's progress on a terminal: {rc} {lines[-3:]}")
pattern = re.compile(r"\[0/1\] +0%  elapsed [\d.]+s  eta [\d.]+s  \| point 0: [\d.e+-]+ s simulated, (\d+)% of "
                     r"~[\d.e+]+ activities, [\d.]+s, eta [\d.]+s\x1b\[K")
shares = [int(m.group(1)) for m in (pattern.search(line) for line in shown) if m]
checks += 1
check(shares and len(shares) == len(shown) and shares == sorted(shares) and all(0 <= s < 100 for s in shares),
      f"simulated time, share of the estimated activities, elapsed and ETA: {shown[:2]}")
checks += 1
check(lines and lines[-1].startswith("ddlsim: wrote 1 row(s)") and any(l.startswith("[1/1] 100%") for l in lines),
      f"the line ends with the sweep: {lines[-2:]}")

# A point under the threshold shows only the sweep's progress.
rc, text = on_terminal("run", os.path.join(ROOT, "experiments", "demo.yaml"), "-o", os.path.join(out_dir, "d.csv"),
                       "--shard", "0/1000")
checks += 1
check(rc == 0 and "[1/1] 100%" in text and "simulated" not in text, f"a short point: no point progress: {text[-200:]}")

# --quiet on a terminal, and a pipe: nothing of it.
rc, text = on_terminal("run", *point, "-o", os.path.join(out_dir, "q.csv"), "--quiet",
                       env={"DDLSIM_PROGRESS_AFTER_SECONDS": "0"})
checks += 1
check(rc == 0 and text == "", f"--quiet writes nothing on the terminal: {text[:200]!r}")
rc, _, err = run(binary, "run", *point, "-o", os.path.join(out_dir, "p.csv"))
checks += 1
check(rc == 0 and "\r" not in err and "simulated" not in err and "elapsed" not in err,
      f"no progress line in a pipe: {err[:200]!r}")

finish("cli_progress", checks)
