"""The simulator's options end to end through `ddlsim run`: every shipped model (the memory verdict
agreeing with 16 bytes per parameter for bf16 + Adam) and cluster, partitioners, recomputation,
schedules (GPipe, 1F1B, interleaved), normalization, data-parallel collectives, tensor
parallelism and parameter servers."""
import os
import sys

from common import FIXTURES, ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
out_dir = workdir()

rc, out, err = run(binary, "model", "--list")
names = out.split()
checks += 1
check(rc == 0 and len(names) >= 17, f"ddlsim model --list: {names}")

csv_path = os.path.join(out_dir, "zoo.csv")
# Full recomputation keeps the activations of long-context models (Llama: 8,192 tokens) small, so that
# the training state decides the verdict.
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "-j", "2", "--quiet", "-o", csv_path,
                   "--set", "sweep.model=[" + ",".join(names) + "]", "--set", "training.recompute=full")
checks += 1
check(rc == 0, f"zoo sweep exits 0: {err}")
rows = read_csv(csv_path)
checks += 1
check([r["model"] for r in rows] == names, "one row per shipped model, in order")
capacity = 80e9 * 1.073741824  # dgx-h100x2: 80 GiB per GPU
for r in rows:
    checks += 1
    # Two stages hold about half the parameters each: training state alone decides the big ones.
    state_per_stage = 16 * float(r["model_parameters"]) / 2
    if state_per_stage > capacity:
        check(r["status"] == "oom" and "needs" in r["message"] and "capacity" in r["message"],
              f"{r['model']}: {state_per_stage / 1e9:.0f} GB of training state per stage must be oom: {r['status']} {r['message']}")
    else:
        check(r["status"] == "ok" and float(r["throughput_samples_per_s"]) > 0 and r["stage_blocks"].count("/") == 1,
              f"{r['model']}: {r['status']} {r['message']}")

# Options: every partitioner, explicit balance, recomputation, GPipe vs 1F1B on one model.
variants = [
    ["--set", "parallelism.partition=balanced"],
    ["--set", "parallelism.partition=uniform"],
    ["--set", "parallelism.balance=[4,10]"],
    ["--set", "training.recompute=full"],
    ["--set", "training.recompute=selective"],
    ["--set", "parallelism.schedule=gpipe"],
]
results = {}
for v in variants:
    path = os.path.join(out_dir, "v.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path, *v)
    row = read_csv(path)[0] if rc == 0 else {}
    checks += 1
    check(rc == 0 and row.get("status") == "ok", f"{v}: {err} {row.get('message')}")
    results[v[1]] = row
checks += 1
check(results["parallelism.balance=[4,10]"].get("stage_blocks") == "4/10", "explicit balance is used")
path = os.path.join(out_dir, "base.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path)
base = read_csv(path)[0] if rc == 0 else {}
checks += 1
check(float(results["training.recompute=full"]["activation_memory_bytes"]) < float(base["activation_memory_bytes"])
      and float(results["training.recompute=full"]["iteration_time_s"]) > float(base["iteration_time_s"]),
      "full recomputation trades memory for time")
checks += 1
check(float(results["parallelism.schedule=gpipe"]["activation_memory_bytes"]) >= float(base["activation_memory_bytes"]),
      "GPipe stashes at least as much as 1F1B")

# Normalization: the batch that batch-norm statistics see, and what SyncBN's all-reduces cost.
norms = {}
for norm in ["batch_norm", "sync_batch_norm", "group_norm"]:
    path = os.path.join(out_dir, "n.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "model={name: r18, resnet: {depth: 18, normalization: " + norm + "}}",
                       "--set", "training.global_batch=64", "--set", "training.micro_batch=4")
    norms[norm] = read_csv(path)[0] if rc == 0 else {}
    checks += 1
    check(rc == 0 and norms[norm].get("status") == "ok", f"{norm}: {err}")
checks += 1
check(norms["batch_norm"].get("bn_batch") == "4", f"BN sees the micro-batch: {norms['batch_norm'].get('bn_batch')}")
checks += 1
check(norms["sync_batch_norm"].get("bn_batch") == "32", "SyncBN sees micro-batch x dp = 4 x 8")
checks += 1
# Not applicable to GN: empty in every row, so the default column set leaves the column out.
check("bn_batch" not in norms["group_norm"] and norms["group_norm"].get("status") == "ok", "GN: no bn_batch column")
checks += 1
check(float(norms["sync_batch_norm"]["iteration_time_s"]) > float(norms["batch_norm"]["iteration_time_s"])
      and int(norms["sync_batch_norm"]["sim_activities"]) > int(norms["batch_norm"]["sim_activities"]),
      "SyncBN adds all-reduces in forward and backward")

# Data-parallel collectives on pure data parallelism across the two nodes (dp = 16).
coll = {}
for name, extra in [("ring", []), ("hierarchical", ["--set", "parallelism.dp_collective=hierarchical"]),
                    ("analytic", ["--set", "parallelism.dp_fidelity=analytic"]),
                    ("bucketed", ["--set", "parallelism.dp_bucket=25MiB"])]:
    path = os.path.join(out_dir, "c.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "parallelism.pp=1", *extra)
    coll[name] = read_csv(path)[0] if rc == 0 else {}
    checks += 1
    check(rc == 0 and coll[name].get("status") == "ok", f"{name}: {err}")
t = {k: float(v["iteration_time_s"]) for k, v in coll.items()}
checks += 1
# The default (NCCL's tuner) spreads its ring over every NIC of both nodes (rails), as hierarchical
# spreads its per-local-rank rings: both cross the nodes at 8 NICs' bandwidth; the flat ring has
# fewer phases to wait for (docs/collectives.md).
check(t["ring"] <= t["hierarchical"], f"the default ring over the rails is at least as fast as hierarchical across nodes: {t}")
checks += 1
check(abs(t["analytic"] - t["ring"]) / t["ring"] < 1e-6 and coll["analytic"]["collective_fidelity"].startswith("dp=analytic;tp=flow;fold=dp2 (")
      and int(coll["analytic"]["sim_activities"]) < int(coll["ring"]["sim_activities"]),
      f"an uncontended ring: analytic = flow, with fewer activities: {t}")
checks += 1
check(t["bucketed"] < t["ring"] and float(coll["bucketed"]["exposed_comm_time_s"]) < float(coll["ring"]["exposed_comm_time_s"]),
      f"gradient buckets overlap the backward: {t}")

# Interleaved 1F1B: less bubble than 1F1B, more activation memory; invalid when M % pp != 0.
inter = {}
for name, extra in [("1f1b", []), ("v2", ["--set", "parallelism.schedule=interleaved", "--set", "parallelism.virtual_stages=2"]),
                    ("bad", ["--set", "parallelism.schedule=interleaved", "--set", "training.global_batch=24"])]:
    path = os.path.join(out_dir, "i.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "model=gpt2-xl", "--set", "parallelism.pp=4", "--set", "training.global_batch=64", *extra)
    inter[name] = read_csv(path)[0] if os.path.exists(path) else {"rc": rc, "err": err}
    os.remove(path) if os.path.exists(path) else None
checks += 1
check(inter["v2"].get("status") == "ok" and inter["v2"]["stage_blocks"].count("/") == 7
      and float(inter["v2"]["bubble_fraction"]) < float(inter["1f1b"]["bubble_fraction"])
      and float(inter["v2"]["activation_memory_bytes"]) > float(inter["1f1b"]["activation_memory_bytes"]),
      f"interleaved v=2: 8 chunks, less bubble, more activations: {inter['v2']}")
checks += 1
# A single point that cannot be simulated is refused (exit 1, nothing written) with its reason.
check(inter["bad"].get("rc") == 1 and "micro-batches (6) divisible by pp (4)" in inter["bad"].get("err", ""),
      f"M % pp != 0 is refused for interleaving: {inter['bad']}")

# Every shipped cluster runs (data-parallel collectives analytic: the 8,192-GPU cluster's flat
# ring would be 33 M messages); the mixed cluster is slower than two H100 nodes and reports its
# smallest GPU's memory.
# (Single-GPU clusters cannot hold the fixture's two stages: they run with pp = 1 below.)
shipped = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "sim", "clusters")) if f.endswith(".yaml"))
single = [c for c in shipped if c.endswith("-1gpu")]  # h100-1gpu, h200-1gpu
clusters = [c for c in shipped if c not in single]
path = os.path.join(out_dir, "clusters.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path, "-j", "2",
                   "--set", "training.global_batch=8192",
                   "--set", "parallelism.dp_fidelity=analytic", "--set", "sweep.cluster=[" + ",".join(clusters) + "]")
by_cluster = {r["cluster"]: r for r in read_csv(path)} if rc == 0 else {}
checks += 1
check(rc == 0 and sorted(by_cluster) == clusters and all(r["status"] == "ok" for r in by_cluster.values()),
      f"every shipped cluster runs: {err} {[(r['cluster'], r['status'], r['message']) for r in by_cluster.values()]}")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path, "--set", "parallelism.pp=1",
                   "--set", "sweep.cluster=[" + ",".join(single) + "]")
checks += 1
check(rc == 0 and all(r["status"] == "ok" for r in read_csv(path)), f"the single-GPU clusters run with pp = 1: {err}")
if by_cluster:
    checks += 1
    check(float(by_cluster["h100-a100-mixed"]["iteration_time_s"]) > float(by_cluster["dgx-h100x2"]["iteration_time_s"])
          and float(by_cluster["h100-a100-mixed"]["memory_capacity_bytes"]) == 40 * 2**30,
          "the mixed cluster is paced by its A100s and reports 40 GiB")

# Tensor parallelism on GPT-3 1.3B (16 heads): less memory per GPU as tp grows, more traffic;
# analytic tensor-parallel collectives replace thousands of messages by timers; tp must divide the heads.
tps = {}
for name, extra in [("1", []), ("2", ["--set", "parallelism.tp=2"]), ("4", ["--set", "parallelism.tp=4"]),
                    ("4a", ["--set", "parallelism.tp=4", "--set", "parallelism.tp_fidelity=analytic"])]:
    path = os.path.join(out_dir, "t.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "model=gpt3-1.3b", "--set", "training.global_batch=64", *extra)
    tps[name] = read_csv(path)[0] if rc == 0 else {}
    checks += 1
    check(rc == 0 and tps[name].get("status") == "ok", f"tp {name}: {err}")
if all(tps.values()):
    mem = [float(tps[k]["peak_memory_bytes"]) for k in ("1", "2", "4")]
    sent = [float(tps[k]["comm_bytes_per_gpu"]) for k in ("1", "2", "4")]
    checks += 1
    check(mem[0] > mem[1] > mem[2] and sent[0] < sent[1] < sent[2], f"tp: memory {mem}, bytes {sent}")
    checks += 1
    check(int(tps["4a"]["sim_activities"]) < int(tps["4"]["sim_activities"]) / 2
          and tps["4a"]["collective_fidelity"] == "dp=flow;tp=analytic+aggregated;fold=tp4xdp2"
          and abs(float(tps["4a"]["iteration_time_s"]) / float(tps["4"]["iteration_time_s"]) - 1) < 1e-6,
          f"analytic tp: {tps['4a']['sim_activities']} vs {tps['4']['sim_activities']} activities")
# Folding each tensor-parallel group into one simulated device changes no number, only the work
# (tests/cli/test_cli_fold.py compares every column, the device table and the timeline), with the
# profile's comm_compute_slowdown (docs/kernels.md) and without: the representative's power state is
# every rank's (sim/CommOverlap.hpp).
no_slowdown = os.path.join(out_dir, "no-slowdown.yaml")
with open(os.path.join(ROOT, "calibration", "profiles", "h100-sxm.yaml")) as src, open(no_slowdown, "w") as dst:
    dst.write("".join(line for line in src if "comm_compute_slowdown" not in line))
timing = ["iteration_time_s", "throughput_samples_per_s", "bubble_fraction", "comm_bytes_per_gpu",
          "inter_node_bytes_per_gpu", "peak_memory_bytes", "achieved_flop_per_s_per_gpu", "tokens_per_s", "mfu"]
split = ["compute_time_s", "exposed_comm_time_s", "gpu_utilization"]
for profile, exact in (("h100-sxm", timing + split), (no_slowdown, timing + split)):
    path = os.path.join(out_dir, "fold.csv")
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "model=gpt3-1.3b", "--set", "training.global_batch=64", "--set", "parallelism.tp=4",
                       "--set", "parallelism.tp_fidelity=analytic", "--set", "parallelism.dp_bucket=64MiB",
                       "--set", "calibration=" + profile, "--set", "sweep.parallelism.tp_aggregate=[false, true]")
    fold = read_csv(path) if rc == 0 else []
    same = len(fold) == 2
    for col in timing + split:
        if same:
            x, y = float(fold[0][col]), float(fold[1][col])
            same = same and abs(x - y) <= (1e-9 if col in exact else 1e-3) * max(abs(x), 1e-30)
            if not same:
                print(f"{profile}: {col}: {x} vs {y}", file=sys.stderr)
    checks += 1
    check(same and int(fold[1]["sim_activities"]) * 4 <= int(fold[0]["sim_activities"]),
          f"tp_aggregate gives the same numbers with fewer activities ({os.path.basename(profile)}): {err}")
path = os.path.join(out_dir, "bad_tp.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "model=gpt3-1.3b", "--set", "sweep.parallelism.tp=[3,2]")
rows = read_csv(path) if rc == 0 else []
checks += 1
check(len(rows) == 2 and rows[0]["status"] == "invalid" and "does not divide the 16 attention heads" in rows[0]["message"]
      and rows[1]["status"] == "ok", f"tp = 3: {err} {[(r['status'], r['message']) for r in rows]}")

# Parameter servers: SSP with staleness 0 equals BSP; async is at least as fast and sees staleness.
ps_rows = {}
path = os.path.join(out_dir, "ps.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path, "-j", "2",
                   "--set", "model=resnet50", "--set", "cluster=h100-a100-mixed", "--set", "parallelism.pp=1",
                   "--set", "training.global_batch=448", "--set", "training.micro_batch=32",
                   "--set", "parallelism.ps={servers: 2, iterations: 6}",
                   "--set", "sweep.parallelism.ps.consistency=[bsp, ssp, async]")
ps_rows = {r["ps_consistency"]: r for r in read_csv(path)} if rc == 0 else {}
checks += 1
check(rc == 0 and sorted(ps_rows) == ["async", "bsp", "ssp:0"] and all(r["status"] == "ok" for r in ps_rows.values())
      and all(r["schedule"] == "parameter_server" and r["dp"] == "14" for r in ps_rows.values()),
      f"parameter servers: {err} {[(r['ps_consistency'], r['status'], r['message']) for r in ps_rows.values()]}")
if len(ps_rows) == 3:
    t = {k: float(v["throughput_samples_per_s"]) for k, v in ps_rows.items()}
    checks += 1
    check(t["ssp:0"] == t["bsp"] and t["async"] > t["bsp"] and float(ps_rows["bsp"]["staleness_max"]) == 0
          and float(ps_rows["async"]["staleness_max"]) >= 1, f"ps throughput {t}, async staleness {ps_rows['async']['staleness_max']}")
    # Each GPU over its own run: compute + exposed + bubble still make up iteration_time_s, which is
    # global_batch / throughput.
    for k, r in ps_rows.items():
        it = float(r["iteration_time_s"])
        parts = float(r["compute_time_s"]) + float(r["exposed_comm_time_s"]) + float(r["bubble_fraction"]) * it
        checks += 1
        check(abs(parts - it) <= 1e-6 * it and abs(float(r["throughput_samples_per_s"]) * it - 448) <= 1e-6 * 448,
              f"ps {k}: time decomposes ({parts} vs {it}), throughput = global_batch / time")
for ps in ["{servers: 2, placement: colocated}", "{hosts: [0, 8], consistency: async}"]:
    rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                       "--set", "model=resnet50", "--set", "parallelism.pp=1", "--set", "training.global_batch=512",
                       "--set", "training.micro_batch=32", "--set", "parallelism.ps=" + ps)
    r = read_csv(path)[0] if rc == 0 else {}
    checks += 1
    check(r.get("status") == "ok" and r.get("dp") == "16" and r.get("ps_servers") == "2", f"ps {ps}: {err} {r.get('message')}")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "parallelism.ps={hosts: [3, 3]}")
checks += 1
check(rc == 1 and "parallelism.ps.hosts: a GPU can host one server" in err, f"duplicate server hosts: {err}")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "parallelism.ps={servers: 2, consistency: bsp, staleness: 3}")
checks += 1
check(rc == 1 and "parallelism.ps.staleness: staleness applies to consistency: ssp" in err, f"bad ps: {err}")

# A cluster file in part: the first N GPUs of dgx-h100x128, N swept; a size the cluster cannot give
# is an invalid row (the sweep goes on), and a misspelt cluster gets a guess.
path = os.path.join(out_dir, "subset.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "cluster={use: dgx-h100x128, gpus: 16}", "--set", "parallelism.pp=1",
                   "--set", "sweep.cluster.gpus=[4, 16, 64, 12]")
rows = read_csv(path) if rc == 0 else []
checks += 2
check([(r["cluster"], r["gpus"], r["dp"], r["status"]) for r in rows] ==
      [("dgx-h100x128 (4 GPUs)", "4", "4", "ok"), ("dgx-h100x128 (16 GPUs)", "16", "16", "ok"),
       ("dgx-h100x128 (64 GPUs)", "64", "64", "invalid"), ("dgx-h100x128 (12 GPUs)", "1024", "1024", "invalid")],
      f"cluster subsets: {err} {[(r['cluster'], r['gpus'], r['dp'], r['status'], r['message']) for r in rows]}")
check(len(rows) == 4 and "global_batch 16 is not divisible" in rows[2]["message"]
      and "cluster.gpus: 12 GPUs are not a whole number of 8-GPU nodes" in rows[3]["message"],
      f"subset messages: {[r['message'] for r in rows]}")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "cluster={use: dgx-h100x12, gpus: 16}")
checks += 1
check(rc == 1 and "cluster.use: unknown cluster 'dgx-h100x12' (did you mean 'dgx-h100x128'?)" in err, f"bad use: {err}")

# Full recomputation reruns the forward's tensor-parallel collectives. Korthikanti et al. 2022
# ("Reducing Activation Recomputation in Large Transformer Models", section 4.2.2): tensor
# parallelism costs four all-reduces per transformer layer in a forward and backward pass, two in
# each; full recomputation runs the forward again, all-reduces included (Megatron-LM's
# CheckpointFunction.backward calls the checkpointed forward), so six. With only the tensor-parallel
# group (tp 2, no pipeline, no replica), the bytes each GPU sends and the time they take grow by 6/4
# exactly; selective recomputation (attention's core, no collective in it) leaves them as they were.
path = os.path.join(out_dir, "tp_recompute.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "model=gpt3-1.3b", "--set", "cluster={use: dgx-h100, gpus: 2}",
                   "--set", "training.global_batch=4", "--set", "training.micro_batch=1", "--set", "training.seq=1024",
                   "--set", "parallelism.pp=1", "--set", "parallelism.dp=1", "--set", "parallelism.tp=2",
                   "--set", "parallelism.tp_collective=ring", "--set", "parallelism.tp_fidelity=analytic",
                   "--set", "sweep.training.recompute=[none, selective, full]")
rec = {r["recompute"]: r for r in read_csv(path)} if rc == 0 else {}
checks += 1
check(rc == 0 and sorted(rec) == ["full", "none", "selective"] and all(r["status"] == "ok" for r in rec.values()),
      f"tp recompute points: {err}")
if len(rec) == 3:
    for col in ("comm_bytes_per_gpu", "exposed_comm_time_s"):
        none, selective, full = (float(rec[k][col]) for k in ("none", "selective", "full"))
        checks += 1
        check(selective == none and abs(full / none - 1.5) < 1e-9,
              f"{col}: full recomputation's tensor-parallel collectives 6/4 of none's: {none} {selective} {full}")

# Full recomputation reruns the context-parallel ring too: the recomputed forward of an attention layer
# passes its K/V around the cp ring again (Transformer Engine's AttnFuncWithCPAndKVP2P, rerun by
# Megatron's checkpoint). Each GPU sends, per attention layer and micro-batch, cp - 1 blocks of 1/cp of
# the sequence's K/V in forward and 2 (cp - 1) + 1 in backward; the rerun adds cp - 1 blocks. GPT-2
# small (models/zoo/gpt2-small.yaml: 12 layers, hidden 768, 1,024 tokens; multi-head, so K and V are
# 2 x 768 values a token), bf16, cp 2 on 2 GPUs, M = 2 micro-batches of 2: the extra bytes a GPU sends are
# M L (cp - 1) (2 h s b d) / cp, and nothing else moves (no tp, the gradient all-reduce unchanged).
# Selective recomputation reruns the eager attention core (softmax over the s x s scores: the whole
# attention layer here), so its ring too; FlashAttention is never recomputed selectively, so no rerun.
path = os.path.join(out_dir, "cp_recompute.csv")
rc, out, err = run(binary, "run", os.path.join(FIXTURES, "zoo_smoke.yaml"), "--quiet", "-o", path,
                   "--set", "cluster={use: dgx-h100, gpus: 2}", "--set", "training.global_batch=4",
                   "--set", "training.micro_batch=2", "--set", "parallelism.pp=1", "--set", "parallelism.dp=1",
                   "--set", "parallelism.cp=2", "--set", "sweep.training.recompute=[none, selective, full]",
                   "--set", "sweep.training.attention=[eager, flash]")
cp_rows = {(r["recompute"], r["attention"]): float(r["comm_bytes_per_gpu"]) for r in read_csv(path)} if rc == 0 else {}
checks += 1
check(len(cp_rows) == 6, f"cp recompute points: {err}")
if len(cp_rows) == 6:
    M, L, cp, h, s, b, d = 2, 12, 2, 768, 1024, 2, 2
    rerun = M * L * (cp - 1) * (2 * h * s * b * d) / cp
    for attention, selective_reruns in (("eager", True), ("flash", False)):
        none, selective, full = (cp_rows[(k, attention)] for k in ("none", "selective", "full"))
        checks += 2
        check(full - none == rerun, f"{attention}: full recomputation reruns the K/V ring: {full} - {none} vs {rerun}")
        check(selective - none == (rerun if selective_reruns else 0),
              f"{attention}: selective recomputation's ring: {selective} - {none}")

finish("cli_features", checks)
