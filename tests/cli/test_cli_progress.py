"""`ddlsim run`'s progress (issue 18, item 5; issue 31, item 5): on a terminal (a pseudo-terminal here),
one line rewritten in place where a point running for over 2 s shows its simulated time, the share
of its estimated activities simulated, its elapsed time and an ETA. In a pipe (CI's logs), `--progress
auto` (the default) and `always` write a plain line every 5 s instead, `never` and --quiet nothing;
`always` writes plain lines on a terminal too. The 2 s threshold and the 5 s interval are lowered
through DDLSIM_PROGRESS_AFTER_SECONDS and DDLSIM_PROGRESS_INTERVAL_SECONDS so that the test does not
depend on the machine's speed."""
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


def piped(*args, env):
    """Runs ddlsim with stderr a pipe; returns (exit code, stderr)."""
    p = subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env})
    return p.returncode, p.stderr


# In a pipe: plain lines, one every DDLSIM_PROGRESS_INTERVAL_SECONDS (5 s by default), for a sweep of
# 16 points and for one long point (its simulated time, share and ETA). The demo's sweep takes 0.1 to 2 s
# depending on the machine's load, so the interval is 0 here (a line at every point's end or report),
# which does not depend on the machine's speed; the throttle is checked at the default interval below.
demo = os.path.join(ROOT, "experiments", "demo.yaml")
plain = re.compile(r"^ddlsim: progress \[(\d+)/16\] (\d+)%, elapsed ([\d.]+)s(, eta [\d.]+s)?$")
for mode in ("auto", "always"):
    rc, err = piped("run", demo, "-o", os.path.join(out_dir, f"{mode}.csv"), "--progress", mode, "--set",
                    "parallelism.fold_replicas=false", env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0"})
    lines = [line for line in err.splitlines() if line.startswith("ddlsim: progress")]
    matched = [plain.match(line) for line in lines]
    checks += 1
    check(rc == 0 and len(lines) >= 2 and all(matched) and "\r" not in err and "\x1b" not in err,
          f"--progress {mode} in a pipe: plain lines: {err[-400:]!r}")
    done = [int(m.group(1)) for m in matched if m]
    elapsed = [float(m.group(3)) for m in matched if m]
    checks += 1
    check(done == sorted(done) and elapsed == sorted(elapsed) and done and done[-1] == 16,
          f"--progress {mode}: the sweep's progress in order, the last at 16/16: {lines}")
    checks += 1
    check(err.splitlines()[-1].startswith("ddlsim: wrote 16 row(s)"), f"the summary follows: {err[-200:]!r}")
# The default is auto; at the default interval a sweep this short writes no progress line at all.
rc, err = piped("run", demo, "-o", os.path.join(out_dir, "default.csv"), env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0"})
checks += 1
check(rc == 0 and "ddlsim: progress [" in err, f"auto by default: {err[-300:]!r}")
rc, err = piped("run", demo, "-o", os.path.join(out_dir, "short.csv"), "--shard", "0/16", env={})
checks += 1
check(rc == 0 and "progress" not in err, f"a sweep shorter than the interval writes no progress line: {err!r}")
for args in (["--progress", "never"], ["--quiet"]):
    rc, err = piped("run", demo, "-o", os.path.join(out_dir, "never.csv"), *args,
                    env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0.1"})
    checks += 1
    check(rc == 0 and "progress" not in err and "elapsed" not in err, f"{args}: no progress: {err[-300:]!r}")
# --quiet --progress always: the progress lines without the summary.
rc, err = piped("run", demo, "-o", os.path.join(out_dir, "qa.csv"), "--quiet", "--progress", "always",
                env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0"})
checks += 1
check(rc == 0 and "ddlsim: progress [" in err and "wrote" not in err, f"--quiet --progress always: {err[-300:]!r}")
# One long point, by default in a pipe: its own progress on plain lines, never the terminal's line.
rc, err = piped("run", *point, "-o", os.path.join(out_dir, "long.csv"),
                env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0.2", "DDLSIM_PROGRESS_AFTER_SECONDS": "0"})
checks += 1
check(rc == 0 and re.search(r"^ddlsim: progress \[0/1\] 0%, elapsed [\d.]+s; point 0: [\d.e+-]+ s simulated, "
                            r"\d+% of ~[\d.e+]+ activities, [\d.]+s, eta [\d.]+s$", err, re.M),
      f"a running point's progress on a plain line: {err[-400:]!r}")
checks += 1
check(rc == 0 and "\r" not in err and "\x1b" not in err, f"a pipe never gets the terminal's line: {err[-200:]!r}")
# always on a terminal: plain lines, no carriage return.
rc, text = on_terminal("run", demo, "-o", os.path.join(out_dir, "t.csv"), "--progress", "always",
                       env={"DDLSIM_PROGRESS_INTERVAL_SECONDS": "0"})
checks += 1
check(rc == 0 and "ddlsim: progress [" in text and "\r[" not in text and "\x1b[K" not in text,
      f"--progress always on a terminal: plain lines: {text[-300:]!r}")
rc, _, err = run(binary, "run", demo, "-o", os.path.join(out_dir, "bad.csv"), "--progress", "sometimes")
checks += 1
check(rc == 2 and "auto, always, never" in err, f"--progress sometimes: a usage error: {rc} {err!r}")

finish("cli_progress", checks)
