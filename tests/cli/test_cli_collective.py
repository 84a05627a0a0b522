#!/usr/bin/env python3
"""`ddlsim collective`: the simulated collective in nccl-tests' layout, against published figures.

Oracles (docs/collectives.md cites them):
  - NVIDIA/nccl-tests issue 290 (NCCL maintainer): NDR 400 Gb/s NICs give 46-48 GB/s each, so a
    ring over the 8 rails of two DGX H100 reaches about 370-385 GB/s of bus bandwidth; one DGX H100
    with NVLink SHARP reaches about 476 GB/s (issue 212: "a peak busBw of ~480GB/s (algbw ~275GB/s)").
    Issue 17's acceptance bands: 300-420 GB/s on two nodes, 300-500 GB/s in one node.
  - NVIDIA/nccl-tests issue 309: on one 8-GPU H100 node NCCL picks Ring/LL from 8 B to 1 MB and
    NVLS/Simple from 2 MB up.
  - 8 bytes over 1,024 GPUs: a tree's logarithm, at most 200 us (issue 17).
  - All-to-all across N nodes of GPUs with a NIC each (NCCL maintainer, NVIDIA/nccl-tests issue 130):
    "on 2 nodes ... BusBW = 2x network bandwidth per GPU", in general N/(N-1)x; NDR NICs give 48-49
    GB/s each (issue 267), and "Alltoall cannot aggregate the bandwidth of multiple NICs".
nccl-tests' own definitions (src/*.cu): algbw = size / time; busbw = algbw x 2(n-1)/n (all-reduce),
x (n-1)/n (all-gather, reduce-scatter, all-to-all), x 1 (broadcast, send/recv); all-gather's count is
size / n, all-to-all's the count each rank sends each peer (size / n, rounded down to 16 bytes).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import FIXTURES, ROOT, check, finish, read_csv, run  # noqa: E402

binary = sys.argv[1]
checks = 0


def rows(stdout):
    """The result rows: size, count, type, redop, root, time, algbw, busbw, N/A, time, algbw, busbw, N/A, how..."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        t = line.split()
        out.append({"size": float(t[0]), "count": int(t[1]), "type": t[2], "redop": t[3], "root": int(t[4]),
                    "time_us": float(t[5]), "algbw": float(t[6]), "busbw": float(t[7]),
                    "time_in_us": float(t[9]), "how": " ".join(t[13:])})
    return out


def collective(*args):
    rc, out, err = run(binary, "collective", *args)
    return rc, rows(out) if rc == 0 else [], out, err


# Acceptance: 1 GiB all-reduce on two DGX H100 (16 GPUs), inside one, and 8 B over 1,024 GPUs.
rc, r, _, err = collective("--cluster", "dgx-h100x2", "-b", "1G", "-e", "1G")
checks += 1
check(rc == 0 and len(r) == 1 and 300 <= r[0]["busbw"] <= 420,
      f"1 GiB all-reduce on dgx-h100x2: busbw in 300-420 GB/s (nccl-tests #290: 8 x 46-48 GB/s): {r} {err}")
rc, r, _, err = collective("--cluster", "dgx-h100", "-b", "1G", "-e", "1G")
checks += 1
check(rc == 0 and len(r) == 1 and 300 <= r[0]["busbw"] <= 500 and r[0]["how"].startswith("nvls"),
      f"1 GiB all-reduce in one dgx-h100: NVLS, busbw in 300-500 GB/s (nccl-tests #290: ~476): {r} {err}")
rc, r, _, err = collective("--cluster", "dgx-h100x128", "-b", "8", "-e", "8")
checks += 1
check(rc == 0 and len(r) == 1 and r[0]["time_us"] <= 200 and "tree" in r[0]["how"],
      f"8 B all-reduce over 1,024 GPUs: a tree, at most 200 us: {r} {err}")

# The tuner as nccl-tests #309 reports it on one 8-GPU H100 node: Ring/LL up to 1 MB, NVLS/Simple from 2 MB.
rc, r, _, err = collective("--cluster", "dgx-h100", "-b", "8", "-e", "16G", "-f", "2")
checks += 2
check(rc == 0 and len(r) == 32, f"8 B to 16 GiB by 2: 32 sizes: {len(r)} {err}")
check(all(x["how"].startswith("ring/ll ") for x in r if x["size"] <= 2 ** 20) and
      all(x["how"].startswith("nvls/simple") for x in r if x["size"] >= 2 * 2 ** 20),
      f"ring/ll up to 1 MiB, nvls/simple from 2 MiB: {[(x['size'], x['how']) for x in r]}")
peak = max(x["busbw"] for x in r)
checks += 1
check(440 <= peak <= 500, f"NVLS peak bus bandwidth near nccl-tests #212's ~480 GB/s: {peak}")

# nccl-tests' columns: count, algbw, busbw and the in-place copy, for every operation.
for op, factor, count_div in (("all_reduce", lambda n: 2 * (n - 1) / n, 1), ("all_gather", lambda n: (n - 1) / n, 8),
                              ("reduce_scatter", lambda n: (n - 1) / n, 8), ("broadcast", lambda n: 1, 1),
                              ("all_to_all", lambda n: (n - 1) / n, 8), ("send_recv", lambda n: 1, 1)):
    rc, r, out, err = collective("--cluster", "dgx-h100", "--gpus", "8", "--op", op, "-b", "64K", "-e", "64M", "-f", "8")
    checks += 1
    ok = rc == 0 and len(r) == 4 and "# Collective test starting:" in out
    for x in r:
        # the printed time has two decimals: algbw from it is off by up to 0.005 / time
        ok = ok and abs(x["algbw"] - x["size"] / (x["time_us"] * 1e3)) <= 0.01 + x["algbw"] * (1e-3 + 0.006 / x["time_us"])
        ok = ok and abs(x["busbw"] - x["algbw"] * factor(8)) <= 0.01 + 1e-3 * x["busbw"]
        ok = ok and x["count"] == x["size"] / 4 / count_div and x["time_in_us"] == x["time_us"]
        ok = ok and x["root"] == (0 if op == "broadcast" else -1) and x["type"] == "float"
        # nccl-tests prints "none" where nothing is reduced (all_gather.cu, broadcast.cu, alltoall.cu)
        ok = ok and x["redop"] == ("sum" if op in ("all_reduce", "reduce_scatter", "send_recv") else "none")
    check(ok, f"{op}: nccl-tests' size, count, algbw and busbw columns: {r} {err}")

# All-to-all (alltoall_perf): 1 GiB across 2 and 8 DGX H100, N/(N-1) x a NIC's 48 GB/s within 10%
# (nccl-tests #130, #267); NCCL's p2p path: LL for small exchanges, Simple for large, direct under auto,
# a forced hierarchical exchange slower than direct (PXN loads the NICs alike already).
for cluster, nodes in (("dgx-h100x2", 2), ("dgx-h100x8", 8)):
    rc, r, out, err = collective("--cluster", cluster, "--op", "all_to_all", "-b", "1G", "-e", "1G")
    band = nodes / (nodes - 1) * 48
    checks += 1
    check(rc == 0 and len(r) == 1 and 0.9 * band <= r[0]["busbw"] <= 1.1 * band and
          r[0]["how"] == "direct/simple flow" and "alltoall_perf" in out,
          f"1 GiB all-to-all on {cluster}: busbw {nodes}/{nodes - 1} x 48 GB/s within 10%: {r} {err}")
rc, r, _, err = collective("--cluster", "dgx-h100x2", "--op", "all_to_all", "-b", "8", "-e", "1G", "-f", "8")
checks += 1
check(rc == 0 and len(r) == 10 and [x["size"] for x in r[:3]] == [0, 0, 512] and r[2]["count"] == 8 and
      all(x["how"].startswith("direct/ll ") for x in r if x["size"] <= 2 ** 18) and
      all(x["how"].startswith("direct/simple ") for x in r if x["size"] >= 2 ** 24) and
      all(10 <= x["time_us"] <= 12 for x in r[:3]),
      f"all-to-all sizes as alltoall_perf rounds them, LL then Simple, NCCL's latencies: {r} {err}")
rc, r, _, err = collective("--cluster", "dgx-h100x2", "--op", "alltoall_perf", "-b", "256M", "-e", "256M",
                           "--algo", "hierarchical")
rc2, r2, _, _ = collective("--cluster", "dgx-h100x2", "--op", "all_to_all", "-b", "256M", "-e", "256M")
checks += 1
check(rc == 0 and rc2 == 0 and r[0]["how"] == "hierarchical/simple flow" and r[0]["time_us"] > r2[0]["time_us"],
      f"a forced hierarchical all-to-all is slower than NCCL's direct one with PXN: {r} {r2} {err}")
rc_flow, r_flow, _, _ = collective("--cluster", "dgx-h100x2", "--op", "all_to_all", "-b", "64M", "-e", "64M",
                                   "--fidelity", "flow")
rc_an, r_an, _, _ = collective("--cluster", "dgx-h100x2", "--op", "all_to_all", "-b", "64M", "-e", "64M",
                               "--fidelity", "analytic")
checks += 1
check(rc_flow == 0 and rc_an == 0 and abs(r_flow[0]["time_us"] - r_an[0]["time_us"]) <= 0.011,
      f"all-to-all alone on the network: flows and the closed form agree: {r_flow} {r_an}")

# Sizes as nccl-tests steps them: -f multiplies, -i adds; -d sets the type.
rc, r, _, _ = collective("--cluster", "dgx-h100", "-b", "8", "-e", "128", "-f", "2", "-d", "half")
checks += 1
check([x["size"] for x in r] == [8, 16, 32, 64, 128] and all(x["type"] == "half" and x["count"] == x["size"] / 2 for x in r),
      f"-b 8 -e 128 -f 2 -d half: {r}")
rc, r, _, _ = collective("--cluster", "dgx-h100", "-b", "1M", "-e", "3M", "-i", "1M")
checks += 1
check([x["size"] for x in r] == [2 ** 20, 2 * 2 ** 20, 3 * 2 ** 20], f"-i 1M steps: {r}")

# Forced algorithm and protocol, and a fallback on a cluster without NVLS.
rc, r, _, _ = collective("--cluster", "dgx-h100", "-b", "1G", "-e", "1G", "--algo", "ring", "--proto", "simple")
checks += 1
check(rc == 0 and r[0]["how"] == "ring/simple flow" and 400 <= r[0]["busbw"] <= 450,
      f"--algo ring --proto simple in one node: the NVLink's 450 GB/s less latency: {r}")
rc, r, _, _ = collective("--cluster", "dgx-a100", "-b", "1G", "-e", "1G", "--algo", "nvls")
checks += 1
check(rc == 0 and r[0]["how"].startswith("ring/"), f"--algo nvls without NVLS falls back to ring: {r}")
rc_flow, r_flow, _, _ = collective("--cluster", "dgx-h100x2", "-b", "256M", "-e", "256M", "--fidelity", "flow")
rc_an, r_an, _, _ = collective("--cluster", "dgx-h100x2", "-b", "256M", "-e", "256M", "--fidelity", "analytic")
checks += 1
check(rc_flow == 0 and rc_an == 0 and abs(r_flow[0]["time_us"] - r_an[0]["time_us"]) <= 1e-6 * r_an[0]["time_us"] + 0.01,
      f"alone on the network, flows and the closed form agree: {r_flow} {r_an}")

# The output is an nccl-tests log: `calibrate import` reads it, and --compare of it against itself is 0%.
tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ddlsim_collective_{os.getpid()}")
os.makedirs(tmp, exist_ok=True)
log = os.path.join(tmp, "sim.txt")
rc, out, err = run(binary, "collective", "--cluster", "dgx-h100x2", "-b", "1K", "-e", "64M", "-f", "4")
with open(log, "w") as f:
    f.write(out)
records = os.path.join(tmp, "sim.jsonl")
rc2, _, err2 = run(binary, "calibrate", "import", log, "-o", records)
lines = open(records).read().splitlines() if rc2 == 0 else []
checks += 1
check(rc == 0 and rc2 == 0 and sum('"group_size":16' in l.replace(" ", "") for l in lines) == 9,
      f"calibrate import reads the output: 9 all-reduce records over 16 ranks: {err} {err2} {lines[:2]}")
rc, out, err = run(binary, "collective", "--cluster", "dgx-h100x2", "--compare", log)
errors = [float(l.split()[3]) for l in out.splitlines() if l.strip() and not l.startswith("#")]
checks += 1
check(rc == 0 and len(errors) == 9 and all(abs(e) < 0.05 for e in errors) and "# mean absolute error: 0.0%" in out,
      f"--compare against its own log: 0% at every size: {out} {err}")

# --compare on a log of 4 ranks: the op and the rank count come from the log; error = (sim - meas) / meas.
fixture = os.path.join(FIXTURES, "nccl_tests_all_reduce.txt")
rc, out, err = run(binary, "collective", "--cluster", "dgx-h100", "--compare", fixture)
table = [l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")]
ok = rc == 0 and [float(t[0]) for t in table] == [1024, 16384, 262144, 4194304, 16777216] and "(4 GPUs)" in out
for t in table if ok else []:
    measured, simulated, error = float(t[1]), float(t[2]), float(t[3])
    ok = ok and abs(error - 100 * (simulated - measured) / measured) < 0.06
checks += 1
check(ok and float(table[0][1]) == 12.5, f"--compare the 4-rank fixture: its sizes and per-size errors: {out} {err}")

# Measured curves know their topology (issue 17): an 8-GPU curve measured inside one node times an
# 8-GPU group in one node exactly, never a 16-GPU group across two nodes, and `collective_times` says so.
profile = os.path.join(tmp, "curves.yaml")
with open(os.path.join(ROOT, "calibration", "profiles", "h100-sxm.yaml")) as f:
    base = f.read()
alpha_us, bw = 23.0, 97e9   # made up, far from the links' own
with open(profile, "w") as f:
    f.write(base.replace("kind: analytic", "kind: measured") + f"""
collectives:
  - collective: all_reduce
    group_size: 8
    nodes: 1
    source: "made up"
    regimes:
      - {{min_bytes: 0B, max_bytes: 16GiB, alpha: {alpha_us}us, bandwidth: {bw / 1e9}GBps}}
""")
rc, r, _, err = collective("--cluster", "dgx-h100", "--calibration", profile, "-b", "1G", "-e", "1G")
checks += 1
check(rc == 0 and r[0]["how"].startswith("fitted") and abs(r[0]["time_us"] - (alpha_us + 2 ** 30 / bw * 1e6)) < 0.02,
      f"an 8-GPU curve times 8 GPUs in one node: alpha + S/bandwidth: {r} {err}")
rc, r, _, err = collective("--cluster", "dgx-h100x2", "--calibration", profile, "-b", "1G", "-e", "1G")
checks += 1
check(rc == 0 and r[0]["how"].startswith("ring/"), f"... but not 16 GPUs across 2 nodes: the links time it: {r} {err}")
demo_csv = os.path.join(tmp, "demo.csv")
rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", "demo.yaml"), "--quiet", "-o", demo_csv,
                 "--set", f"calibration={profile}", "--set", "sweep.parallelism.pp=[1,2]", "--set", "sweep.training.micro_batch=[1]")
times = {r["pp"]: r["collective_times"] for r in read_csv(demo_csv)} if rc == 0 else {}
checks += 1
check(times.get("1", "").startswith("links 1/1 (no curve for all_reduce x16 on 2 nodes)") and
      times.get("2", "").startswith("fitted 2/2"),
      f"collective_times: dp 16 over 2 nodes falls back to the links and says why; dp 8 in a node is fitted: {times} {err}")

# Bad input: exit 2 for usage, 1 for a file that does not exist.
for args, code in ((["--op", "all_reduce"], 2), (["--cluster", "dgx-h100", "--op", "allreduce_nope"], 2),
                   (["--cluster", "dgx-h100", "--gpus", "9"], 2), (["--cluster", "dgx-h100", "-d", "float33"], 2),
                   (["--cluster", "dgx-h100", "--algo", "fastest"], 2), (["--cluster", "no-such-cluster"], 1),
                   (["--cluster", "dgx-h100", "--compare", "/nonexistent.txt"], 1),
                   (["--cluster", "dgx-h100", "-b", "2G", "-e", "1G"], 2), (["--cluster", "dgx-h100", "--frobnicate"], 2)):
    rc, out, err = run(binary, "collective", *args)
    checks += 1
    check(rc == code and out == "" and err.strip(), f"collective {args}: exit {code} and a message, got {rc}: {err}")

finish("cli_collective", checks)
