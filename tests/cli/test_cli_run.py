"""ddlsim run: CSV contract, consistency of the numbers, determinism, -j, --set, --trace-dir."""
import json
import os
import sys

from common import ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
tmp = workdir()
demo = os.path.join(ROOT, "experiments", "demo.yaml")

CONTRACT = ("config_id experiment model cluster calibration schedule pp dp tp gpus global_batch micro_batch "
            "num_micro_batches dtype status iteration_time_s throughput_samples_per_s bubble_fraction "
            "compute_time_s exposed_comm_time_s comm_bytes_per_gpu peak_memory_bytes memory_capacity_bytes "
            "sim_activities sim_wall_time_s message").split()

# 1. The demo sweep: contract columns, one row per point in config order, consistent numbers.
a = os.path.join(tmp, "a.csv")
rc, out, err = run(binary, "run", demo, "-o", a, "-j", "2")
checks += 1
check(rc == 0, f"demo run exits 0 (rc={rc}, stderr={err})")
rows = read_csv(a)
with open(a) as f:
    header = f.readline().strip().split(",")
checks += 1
check(header[: len(CONTRACT)] == CONTRACT, f"contract columns first: {header}")
checks += 1
check([int(r["config_id"]) for r in rows] == list(range(16)), "16 rows in config order")
statuses = [r["status"] for r in rows]
checks += 1
check(statuses.count("ok") == 15 and statuses.count("invalid") == 1, f"15 ok + 1 invalid: {statuses}")
for r in rows:
    if r["status"] == "invalid":
        checks += 1
        check("demo.yaml:14: training.micro_batch:" in r["message"] and "not divisible" in r["message"],
              f"invalid row names file:line and key: {r['message']}")
        checks += 1
        check(r["iteration_time_s"] == "", "no iteration time for an invalid point")
        continue
    t = float(r["iteration_time_s"])
    gb, mb, dp, pp = int(r["global_batch"]), int(r["micro_batch"]), int(r["dp"]), int(r["pp"])
    checks += 4
    check(t > 0, "positive iteration time")
    check(int(r["num_micro_batches"]) * mb * dp == gb, "M x micro_batch x dp = global_batch")
    check(pp * dp == int(r["gpus"]) == 16, "pp x dp = 16 GPUs")
    # The bubble against GPipe's closed form (K - 1) / (M + K - 1), computed here: exactly 0 without a
    # pipeline; with one, stage imbalance and exposed communication move it by a few points only.
    b, k, m = float(r["bubble_fraction"]), pp, int(r["num_micro_batches"])
    ideal = (k - 1) / (m + k - 1)
    check(b < 1e-9 if k == 1 else abs(b - ideal) < 0.08, f"bubble {b:.4f} vs GPipe's {ideal:.4f} (K {k}, M {m})")
    checks += 1
    check(float(r["peak_memory_bytes"]) <= float(r["memory_capacity_bytes"]), "fits in memory")
# A deeper pipeline at the same micro-batch size has a larger bubble (K-1)/(M+K-1).
by = {(int(r["pp"]), int(r["micro_batch"])): r for r in rows if r["status"] == "ok"}
checks += 1
check(float(by[(2, 1)]["bubble_fraction"]) < float(by[(8, 1)]["bubble_fraction"]), "bubble grows with pp")
# ... and for one pipeline depth, fewer micro-batches (larger micro-batch) mean a larger bubble.
checks += 1
check(float(by[(4, 1)]["bubble_fraction"]) < float(by[(4, 8)]["bubble_fraction"]), "bubble shrinks with M")

# 2. Determinism: same inputs, same bytes (the wall-time column aside), whatever -j.
b_csv = os.path.join(tmp, "b.csv")
rc, _, err = run(binary, "run", demo, "-o", b_csv, "-j", "1", "--quiet")


def without_wall_time(path):
    rows = read_csv(path)
    for r in rows:
        r.pop("sim_wall_time_s")
    return rows


checks += 1
check(rc == 0 and without_wall_time(a) == without_wall_time(b_csv), "two runs give identical CSVs")

# 3. --set overrides and replaces axes; default output path comes from the file, relative to the cwd.
rc, _, err = run(binary, "run", demo, "--set", "training.global_batch=32", "--set",
                 "sweep.training.micro_batch=[1, 2]", "--set", "sweep.parallelism.pp=[2]", "--quiet", cwd=tmp)
rows = read_csv(os.path.join(tmp, "results", "demo.csv")) if rc == 0 else []
checks += 1
check(rc == 0 and len(rows) == 2 and all(r["global_batch"] == "32" for r in rows), f"--set applied ({err})")

# 4. Timelines: one Chrome trace (and its device table) per point, valid JSON with one track per GPU.
traces = os.path.join(tmp, "traces")
rc, _, err = run(binary, "run", demo, "-o", os.path.join(tmp, "c.csv"), "--set", "sweep.parallelism.pp=[4]",
                 "--set", "sweep.training.micro_batch=[4]", "--trace-dir", traces, "--quiet")
files = sorted(os.listdir(traces)) if os.path.isdir(traces) else []
checks += 1
check(rc == 0 and files == ["demo_0.json", "demo_0_devices.csv"], f"one timeline written: {files} {err}")
if files:
    with open(os.path.join(traces, "demo_0.json")) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    checks += 2
    gpus = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    check({gpus.get(e["pid"], "").split()[0] for e in events} == {f"gpu{g}" for g in range(16)}, "events on all 16 GPUs")
    check(any(e["name"] == "F s3 mb0" for e in events), "ops named by phase, stage and micro-batch")

# Every shipped experiment runs (simulation only; the large ones at smoke size): no error rows.
smoke = {"grid_shapes.yaml": ["--set", "sweep.cluster=[dgx-a100x8]", "--set", "sweep.parallelism.tp=[1,2,64]"],
         "moe.yaml": ["--set", "sweep.zip=[{model: [mixtral-8x7b, mixtral-8x22b], cluster.gpus: [16, 64], "
                      "parallelism.pp: [1, 4], training.global_batch: [16, 32]}, {parallelism.ep: [8, 16, 16], "
                      "parallelism.ep_collective: [direct, direct, hierarchical]}]",
                      "--set", "sweep.training.load_imbalance=[1.0, 2.0]"],
         # Two of the 40 published runs (ctest -R validation runs them all), light enough for `make sanitize`:
         # NeMo's Llama 3 70B (Megatron FP8, cp 2, interleaved) and Korthikanti et al.'s 530B on 280 GPUs.
         "validation.yaml": ["--shard", "12/20"]}
shipped = sorted(f for f in os.listdir(os.path.join(ROOT, "experiments")) if f.endswith(".yaml"))
for name in shipped:
    out_csv = os.path.join(tmp, "shipped_" + name + ".csv")
    rc, _, err = run(binary, "run", os.path.join(ROOT, "experiments", name), "-o", out_csv, "--quiet", "-j", "2",
                     *smoke.get(name, []))
    statuses = {r["status"] for r in read_csv(out_csv)} if rc == 0 else set()
    checks += 1
    check(rc == 0 and statuses and statuses <= {"ok", "oom", "invalid"} and "ok" in statuses,
          f"shipped experiment {name} runs: {rc} {statuses} {err}")
    # The resource guard's closed-form count (experiments/Resources.hpp) against the replay's own:
    # never below it, and within 5% above.
    for r in read_csv(out_csv) if rc == 0 else []:
        if r["status"] == "ok":
            real, estimate = float(r["sim_activities"]), float(r["sim_activities_estimate"])
            checks += 1
            check(real <= estimate <= 1.05 * real,
                  f"{name} point {r['config_id']}: estimated {estimate:.0f} activities, replayed {real:.0f}")
    # Determinism: a second run (here with another -j) gives the same bytes but for the host's wall time.
    again = os.path.join(tmp, "again_" + name + ".csv")
    run(binary, "run", os.path.join(ROOT, "experiments", name), "-o", again, "--quiet", "-j", "1", *smoke.get(name, []))

    def without_wall_time(path):
        rows = read_csv(path) if os.path.exists(path) else []
        for r in rows:
            r.pop("sim_wall_time_s")
        return rows
    checks += 1
    check(rc == 0 and without_wall_time(out_csv) == without_wall_time(again), f"{name}: two runs give the same CSV")

finish("cli_run", checks)
