"""The calibration loop without a GPU: microbenchmark-style records (made here from a roofline with
known constants) -> `ddlsim calibrate fit` -> `calibrate report` -> `ddlsim run` with the fitted
profile. Two record sets whose every kernel time differs by a factor 2 must give compute times that
differ by exactly 2 (log-log tables and the roofline both scale). A fitted all-reduce curve must time
the data-parallel all-reduces. `calibrate collect` either runs ddlsim-collect (built with CUDA: its
plan, and a clear refusal without a GPU) or says that it was not built."""
import json
import os
import sys

from common import FIXTURES, ROOT, check, finish, gpu_visible, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
d = workdir()

PEAK_BF16 = 989.4e12  # h100-sxm, the base profile
BANDWIDTH = 3.35e12


def records(path, scale, alpha, bus):
    """GEMMs (compute-bound at 60% of peak), pointwise kernels (memory-bound at 80%), 5 us per kernel,
    times x scale; a 4-rank all-reduce t = alpha + S / bus."""
    lines = [{"type": "provenance", "source": "test", "device": "synthetic H100"}]
    point = 0
    n = 64
    while n <= 16384:
        point += 1
        flop, traffic = 2.0 * n ** 3, 3.0 * n * n * 2
        t = 5e-6 + max(flop / (PEAK_BF16 * 0.6), traffic / (BANDWIDTH * 0.8))
        for run_noise in (1.01, 1.0, 0.995):
            lines.append({"type": "kernel", "name": "gemm", "op": "gemm", "duration_s": t * scale * run_noise, "flop": flop,
                          "bytes": traffic, "dtype": "bf16", "point": point})
        n *= 2
    b = 1e3
    while b <= 1e11:
        point += 1
        t = 5e-6 + b / (BANDWIDTH * 0.8)
        lines.append({"type": "kernel", "name": "pw", "op": "pointwise", "duration_s": t * scale, "flop": 0, "bytes": b,
                      "dtype": "fp32", "point": point})
        b *= 4
    s = 1024.0
    while s <= 2 ** 31:
        lines.append({"type": "collective", "collective": "all_reduce", "bytes": s, "dtype": "float", "group_size": 4,
                      "duration_s": alpha + s / bus, "source": "kernel", "name": "nccl"})
        s *= 2
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def fit(name, scale, alpha=20e-6, bus=50e9):
    recs, prof = os.path.join(d, name + ".jsonl"), os.path.join(d, name + ".yaml")
    records(recs, scale, alpha, bus)
    rc, out, err = run(binary, "calibrate", "fit", recs, "--base", "h100-sxm", "-o", prof)
    return rc, err, prof


rc, err, prof1 = fit("one", 1.0)
checks += 1
check(rc == 0 and "2 kernel tables" in err and "1 fitted collectives" in err, f"calibrate fit: {rc} {err}")
rc2, err2, prof2 = fit("two", 2.0)
checks += 1
check(rc2 == 0, f"calibrate fit (x2): {err2}")

rc, out, err = run(binary, "calibrate", "report", prof1)
checks += 1
check(rc == 0 and "kernel tables" in out and "gemm" in out and "pointwise" in out and "held-out median error" in out,
      f"calibrate report shows tables and collectives: {out} {err}")
table_line = [l for l in out.splitlines() if l.strip().startswith("gemm ")]
checks += 1
check(len(table_line) == 1 and "bf16" in table_line[0] and " 9 " in table_line[0], f"the gemm table has 9 points: {table_line}")

exp = os.path.join(d, "calib.yaml")
with open(exp, "w") as f:
    f.write("name: calib\nmodel: mlp-toy\ncluster: node4.yaml\ncalibration: h100-sxm\n"
            "training: {global_batch: 64, micro_batch: 16, dtype: bf16}\n"
            "parallelism: {schedule: gpipe, pp: 1, dp: 4}\n")
rows = {}
for name, profile in (("base", "h100-sxm"), ("one", prof1), ("two", prof2)):
    csv_path = os.path.join(d, name + ".csv")
    rc, out, err = run(binary, "run", exp, "--quiet", "-o", csv_path, "--set", "calibration=" + profile)
    checks += 1
    check(rc == 0, f"run with {name}: {err}")
    rows[name] = read_csv(csv_path)[0] if rc == 0 else {}

if all(rows.values()):
    one, two, base = rows["one"], rows["two"], rows["base"]
    checks += 5
    check(base["compute_costs"] == "roofline" and base["collective_times"] == "links", f"base: {base['compute_costs']} {base['collective_times']}")
    check(one["status"] == "ok" and one["compute_costs"] == "tables+roofline", f"fitted: {one['status']} {one['compute_costs']}")
    ratio = float(two["compute_time_s"]) / float(one["compute_time_s"])
    check(abs(ratio - 2) < 2e-3, f"kernels twice as slow give twice the compute time: ratio {ratio}")
    fitted = one["collective_times"]
    check(fitted.startswith("fitted ") and fitted.split()[1].split("/")[0] == fitted.split()[1].split("/")[1],
          f"every 4-rank all-reduce is timed from the fitted curve: {fitted}")
    check(float(one["compute_time_s"]) != float(base["compute_time_s"]), "the fitted tables change the compute time")

# A slow measured all-reduce (1 GB/s) must slow the iteration compared with a fast one (1 TB/s).
_, _, slow = fit("slow", 1.0, bus=1e9)
_, _, fast = fit("fast", 1.0, bus=1e12)
times = []
for profile in (slow, fast):
    csv_path = os.path.join(d, "ar.csv")
    rc, out, err = run(binary, "run", exp, "--quiet", "-o", csv_path, "--set", "calibration=" + profile)
    times.append(float(read_csv(csv_path)[0]["iteration_time_s"]) if rc == 0 else 0)
checks += 1
check(times[0] > times[1] > 0, f"a slower measured all-reduce gives a longer iteration: {times}")

# Nothing to fit: a clear error, exit 1, no profile.
empty = os.path.join(d, "empty.jsonl")
with open(empty, "w") as f:
    f.write('{"type":"provenance","source":"test"}\n{"type":"kernel","name":"k","duration_s":1e-5}\n')
out_profile = os.path.join(d, "none.yaml")
rc, out, err = run(binary, "calibrate", "fit", empty, "--base", "h100-sxm", "-o", out_profile)
checks += 1
check(rc == 1 and "nothing to fit" in err and not os.path.exists(out_profile), f"nothing to fit: {rc} {err}")

# calibrate collect: the collector when built, else a clear refusal.
collector = os.path.join(os.path.dirname(binary), "ddlsim-collect")
target = os.path.join(d, "collected.jsonl")
rc, version, err = run(binary, "--version")
checks += 1
check(os.path.exists(collector) == ("CUDA toolkit found" in version), f"ddlsim-collect is built exactly when CUDA was found: {version}")
if os.path.exists(collector):
    rc, out, err = run(binary, "calibrate", "collect", "--plan", "--quick")
    checks += 1
    check(rc == 0 and len(out.splitlines()) >= 250 and "gemm bf16 m=4096 n=4096 k=4096" in out and " GPUs" not in out,
          f"collect --plan on one GPU: kernels and copies, no collective: {rc} {err}")
    rc, out, err = run(binary, "calibrate", "collect", "--plan", "--quick", "--gpus", "8")
    groups = {line.split("\t")[1].split(" over ")[1] for line in out.splitlines() if " over " in line}
    checks += 1
    check(rc == 0 and groups == {"2 GPUs", "4 GPUs", "8 GPUs"} and "send_recv bf16 2097152 B over 2 GPUs" in out,
          f"collect --plan --gpus 8: collectives over groups of 2, 4 and 8 GPUs in bf16: {rc} {groups} {err}")
    # A workload's launches join the plan at their exact shapes and layouts (the step's own kernels).
    workload = os.path.join(d, "step.json")
    with open(workload, "w") as f:
        json.dump({"format": "ddlsim-workload-1", "label": "t", "devices": 1, "dtype": "bf16", "tasks": [
            {"kind": "compute", "device": 0, "after": [], "launches": [
                {"op": "gemm", "dtype": "bf16", "m": 2048, "n": 768, "k": 3072, "batch": 1, "layout": "nt"},
                {"op": "gemm", "dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "batch": 1}]}]}, f)
    rc, with_workload, err = run(binary, "calibrate", "collect", "--plan", "--quick", "--workload", workload)
    checks += 1
    check(rc == 0 and len(with_workload.splitlines()) == len(out.splitlines()) - 225 + 1 and
          "gemm bf16 m=2048 n=768 k=3072 nt" in with_workload,
          f"collect --plan --workload adds the workload's one new launch: {rc} {err}")
    rc, _, err = run(binary, "calibrate", "collect", "--plan", "--workload", os.path.join(d, "missing.json"))
    checks += 1
    check(rc == 1 and "missing.json" in err, f"collect --workload of a missing file: {rc} {err}")
    rc, out, err = run(binary, "calibrate", "collect", "--quick", "-o", target)
    checks += 1
    gpu = gpu_visible()
    if gpu:
        check(rc == 0 and os.path.getsize(target) > 0, f"collect on a GPU writes records: {rc} {err}")
    else:
        check(rc == 1 and "no CUDA GPU is visible" in err and not os.path.exists(target),
              f"collect without a GPU refuses cleanly: {rc} {err}")
    rc, out, err = run(binary, "calibrate", "collect", "--bogus")
    checks += 1
    check(rc == 2, f"collect with an unknown option is a usage error: {rc} {err}")
else:
    rc, out, err = run(binary, "calibrate", "collect", "--quick", "-o", target)
    checks += 1
    check(rc == 1 and "ddlsim-collect" in err and not os.path.exists(target), f"collect without the collector: {rc} {err}")

finish("cli_calibrate", checks)
