"""Starts N ranks of a script on this machine, as `torch.distributed.run --standalone` would.

    python3 launch_ranks.py --nproc-per-node 2 run_point.py POINT.json OUT.json

Each rank is `python3 SCRIPT ARGS...` with torchrun's environment (MASTER_ADDR, MASTER_PORT, RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, and OMP_NUM_THREADS=1 unless set), so the script joins its
process group with init_process_group's env:// defaults, under this launcher or under torchrun alike.
ddlsim uses it instead of torchrun because Debian's PyTorch 1.13 cannot start torchrun on Python 3.11
(its Std.from_str("0") returns None there). When a rank fails, the others are stopped and the
launcher exits with the failed rank's status; the ranks' output is the launcher's. It imports no
torch, so the ranks' start is not delayed by a third import.
"""
import os
import signal
import socket
import subprocess
import sys
import time

#: Seconds between looks at the ranks.
POLL_S = 0.05
#: Seconds the other ranks get to stop after SIGTERM before SIGKILL.
STOP_GRACE_S = 10


def free_port():
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_environment(rank, world, port):
    """torchrun's variables for one rank on this one node."""
    env = dict(os.environ)
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0"})
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def stop(ranks):
    """SIGTERM to every rank still running, then SIGKILL to those that outlive the grace period."""
    for p in ranks:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in ranks:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run(world, command):
    """Runs `command` as `world` ranks; returns 0, or the first failed rank's exit status."""
    port = free_port()
    ranks = [subprocess.Popen([sys.executable] + command, env=rank_environment(r, world, port)) for r in range(world)]
    signal.signal(signal.SIGTERM, lambda *_: (stop(ranks), sys.exit(143)))
    try:
        while True:
            codes = [p.poll() for p in ranks]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                stop(ranks)
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        stop(ranks)
        return 130


def main(argv):
    if len(argv) < 4 or argv[1] != "--nproc-per-node" or not argv[2].isdigit() or int(argv[2]) < 1:
        print("usage: launch_ranks.py --nproc-per-node N SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    return run(int(argv[2]), argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
