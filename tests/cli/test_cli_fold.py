"""Exact symmetry folding (sim/Fold.hpp, docs/scale.md) end to end through `ddlsim run`.

Folded (the default) and unfolded (parallelism.fold_replicas: false), every CSV column but the
simulator's own bookkeeping (activities, wall time, the fold it says it used) agrees to 1e-9 on
flow-level points with gradient buckets, ZeRO 1-3, hybrid sharding, 1F1B and interleaved pipelines,
context parallelism, flow and analytic tensor parallelism, synchronised batch norm and fat trees,
with fewer activities; and Megatron's step, its column layers' backward split around their
collectives and its pipeline sends blocking or not. With tp_aggregate on and off (item 4 of issue 18) the CSV row, the per-GPU
device table and the timeline (process names and nodes, tracks, slices, counters) are the same.
Where symmetry does not hold (a straggler, a node of other GPUs, replicas straddling a fat tree's
leaves, tree all-reduces that meet other traffic while they run apart) the fold falls back by itself,
says so in collective_fidelity, and the numbers still agree. Tree all-reduces that run alone fold.
"""
import collections
import json
import os
import re
import sys

from common import check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0
out_dir = workdir()

# Columns that say how the point was simulated, not what it simulates.
BOOKKEEPING = {"config_id", "sim_activities", "sim_wall_time_s", "collective_fidelity", "sim_activities_estimate",
               "sim_memory_estimate_bytes"}
H100_NODE = ("gpu: {name: H100, memory: 80GiB}, intra_node: {bandwidth: 450GBps, latency: 2us}, "
             "nic: {count: 8, bandwidth: 400Gbps, latency: 3us}")


def experiment(name, model, cluster, training, parallelism, axes):
    return (f"name: {name}\nmodel: {model}\ncluster: {cluster}\ncalibration: h100-sxm\n"
            f"training: {{dtype: bf16, optimizer: adam, {training}}}\nparallelism: {{{parallelism}}}\n"
            f"sweep:\n{axes}")


def differences(a, b, skip=BOOKKEEPING):
    """Columns of two rows that differ by more than 1e-9 (relative) or as text."""
    out = []
    for k in a:
        if k in skip or a[k] == b[k]:
            continue
        try:
            x, y = float(a[k]), float(b[k])
            if abs(x - y) <= 1e-9 * max(abs(x), abs(y)):
                continue
        except ValueError:
            pass
        out.append(f"{k}: {a[k]} vs {b[k]}")
    return out


def run_rows(name, text, *extra):
    path = os.path.join(out_dir, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(out_dir, name + ".csv")
    rc, _, err = run(binary, "run", path, "--quiet", "-j", "2", "-o", out, *extra)
    return read_csv(out) if rc == 0 else [], err


two_nodes = f"{{name: two, nodes: 2, gpus_per_node: 8, {H100_NODE}, fabric: {{latency: 2us}}}}"
four_nodes = f"{{name: four, nodes: 4, gpus_per_node: 8, {H100_NODE}, fabric: {{latency: 2us}}}}"
# NVLink SHARP in each node and SHARP in the fabric: the switches that reduce are folded with their node.
switches = (f"{{name: sw, nodes: 4, gpus_per_node: 8, gpu: {{name: H100, memory: 80GiB}}, "
            "intra_node: {bandwidth: 450GBps, latency: 2us, nvls: 2.6TBps}, "
            "nic: {count: 8, bandwidth: 400Gbps, latency: 3us}, fabric: {latency: 2us, sharp: true}}")
MOE = ("{name: m, llama: {layers: 4, hidden: 256, heads: 4, ffn_hidden: 512, seq: 128, vocab: 1000, "
       "moe: {experts: 8, top_k: 2, expert_ffn_hidden: 512, dense_layers: 1}}}")
fat_tree = (f"{{name: ft, nodes: 8, gpus_per_node: 8, {H100_NODE}, "
            "fabric: {latency: 2us, topology: fat_tree, nodes_per_leaf: 2, oversubscription: 2}}")
FOLD_AXIS = "  parallelism.fold_replicas: [false, true]\n"
cases = {
    # Flow-level tensor and data parallelism, 1F1B, buckets overlapping the last backward.
    "buckets": (experiment("buckets", "gpt3-1.3b", two_nodes, "global_batch: 64, micro_batch: 2",
                           "schedule: 1f1b, pp: 2, dp: 2, tp: 4, dp_bucket: 64MiB",
                           "  parallelism.dp_collective: [ring, hierarchical]\n" + FOLD_AXIS), "tp4xdp2"),
    # ZeRO 1, 2 and 3 (reduce-scatter, per-unit gathers, parameters gathered after the step).
    "zero": (experiment("zero", "gpt3-1.3b", four_nodes, "global_batch: 64, micro_batch: 2",
                        "schedule: 1f1b, pp: 2, dp: 4, tp: 4, dp_bucket: 32MiB",
                        "  parallelism.zero: [1, 2, 3]\n" + FOLD_AXIS), "tp4xdp2"),
    # Hybrid sharding: shard groups of 2 and 4 replicas, all-reduced across the groups.
    "hybrid": (experiment("hybrid", "gpt3-1.3b", two_nodes, "global_batch: 64, micro_batch: 2",
                          "schedule: 1f1b, pp: 1, dp: 8, tp: 2, zero: 3, dp_collective: ring",
                          "  parallelism.zero_group: [2, 4]\n" + FOLD_AXIS), "tp2xdp"),
    # Interleaved 1F1B with analytic tensor parallelism.
    "interleaved": (experiment("interleaved", "gpt3-1.3b", two_nodes, "global_batch: 64, micro_batch: 1",
                               "schedule: interleaved, virtual_stages: 2, pp: 4, dp: 2, tp: 2, tp_fidelity: analytic",
                               FOLD_AXIS), "tp2xdp2"),
    # Context parallelism: ring attention inside each cp group, sequence parallelism.
    "context": (experiment("context", "llama3-8b", two_nodes, "global_batch: 8, micro_batch: 1, seq: 16384, recompute: full",
                           "schedule: 1f1b, pp: 2, dp: 2, tp: 2, cp: 2, zero: 1, sequence_parallel: true",
                           "  parallelism.tp_fidelity: [flow, analytic]\n" + FOLD_AXIS), "tp2xdp2"),
    # Synchronised batch norm: blocking all-reduces of the statistics in every pass.
    "syncbn": (experiment("syncbn", "{name: r50, resnet: {depth: 50, normalization: sync_batch_norm}}", two_nodes,
                          "global_batch: 256, micro_batch: 16", "schedule: gpipe, pp: 2, dp: 8", FOLD_AXIS), "dp8"),
    # A 2:1 fat tree: replicas alike only in whole leaves' blocks.
    "fattree": (experiment("fattree", "gpt3-1.3b", fat_tree, "global_batch: 128, micro_batch: 2",
                           "schedule: 1f1b, pp: 2, dp: 8, tp: 4, dp_bucket: 64MiB, tp_fidelity: analytic",
                           FOLD_AXIS), "tp4xdp2"),
    # NCCL's tuner (collective: auto, the default) on a rail-optimised multi-node cluster: a replica
    # group holds 4 GPUs of each node, so its rings run 4 channels over 4 NICs at once (the rails).
    "rails": (experiment("rails", "gpt3-1.3b", four_nodes, "global_batch: 64, micro_batch: 2",
                         "schedule: 1f1b, pp: 1, dp: 16, tp: 2, zero: 1, dp_bucket: 32MiB",
                         "  parallelism.dp_collective: [auto, ring]\n" + FOLD_AXIS), "tp2xdp"),
    # Reductions in the switches: NVLS inside the node (tensor parallelism), SHARP across nodes.
    "switches": (experiment("switches", "gpt3-1.3b", switches, "global_batch: 64, micro_batch: 2",
                            "schedule: 1f1b, pp: 2, dp: 4, tp: 4, dp_bucket: 32MiB",
                            "  parallelism.tp_collective: [auto, nvls]\n  parallelism.dp_collective: [auto, sharp]\n" +
                            FOLD_AXIS), "tp4xdp2"),
    # Expert parallelism (all-to-alls, the experts' own gradient groups): the tensor ranks fold, the
    # replicas not (their experts and loads differ), and the fold says so.
    "experts": (experiment("experts", MOE, two_nodes, "global_batch: 16, micro_batch: 2, recompute: full",
                           "schedule: 1f1b, pp: 1, dp: 8, tp: 2, zero: 1, sequence_parallel: true",
                           "  parallelism.ep: [2, 4]\n" + FOLD_AXIS), "tp2 (dp: expert parallelism (ep "),
    # Megatron's step: asynchronous column-layer backward (tp_backward_overlap), pipeline sends
    # blocking (Megatron-Core's 1F1B) and overlapped.
    "megatron": (experiment("megatron", "gpt3-1.3b", four_nodes,
                            "global_batch: 64, micro_batch: 2, framework: megatron",
                            "schedule: 1f1b, pp: 2, dp: 4, tp: 4, zero: 1, sequence_parallel: true, dp_bucket: 32MiB",
                            "  parallelism.overlap_p2p_comm: [false, true]\n" + FOLD_AXIS), "tp4xdp"),
}
for name, (text, fold) in cases.items():
    rows, err = run_rows(name, text)
    checks += 1
    check(rows and len(rows) % 2 == 0 and all(r["status"] == "ok" for r in rows), f"{name}: runs: {err}")
    for unfolded, folded in zip(rows[0::2], rows[1::2]):
        diff = differences(unfolded, folded)
        checks += 1
        check(not diff and int(folded["sim_activities"]) < int(unfolded["sim_activities"])
              and folded["collective_fidelity"].split(";fold=")[1].startswith(fold)
              and unfolded["collective_fidelity"].split(";fold=")[1].split(";")[0] == "off",
              f"{name}: folded = unfolded with fewer activities: {diff[:4]} "
              f"{unfolded['sim_activities']} -> {folded['sim_activities']} {folded['collective_fidelity']}")

# Falling back: a straggler and a node of slower GPUs break the symmetry; a tree all-reduce is not
# mapped onto itself by rotating its members; replicas straddling the fat tree's leaves fold in
# leaf-aligned blocks only. Each says why, and agrees with the unfolded run.
straggler = f"{{name: s, nodes: 2, gpus_per_node: 8, {H100_NODE}, fabric: {{latency: 2us}}, stragglers: [{{gpu: 5, speed: 0.8}}]}}"
fallbacks = {
    "straggler": (experiment("straggler", "gpt3-1.3b", straggler, "global_batch: 64, micro_batch: 2",
                             "schedule: 1f1b, pp: 2, dp: 2, tp: 4, dp_bucket: 64MiB", FOLD_AXIS),
                  "none (tp: GPU 4 runs at speed 1, GPU 5 at 0.8; dp: GPU 1 runs at speed 1, GPU 5 at 0.8)"),
    "mixed": (experiment("mixed", "gpt3-1.3b", "h100-a100-mixed", "global_batch: 64, micro_batch: 2",
                         "schedule: 1f1b, pp: 1, dp: 4, tp: 4, tp_fidelity: analytic", FOLD_AXIS),
              "none (tp: GPU 2 runs at speed 1, GPU 3 at 0.8; dp: GPU 0 runs at speed 1, GPU 8 at 0.315)"),
    # Binary-tree gradient all-reduces run apart (sim/Fold.hpp) while the flow-level tensor-parallel
    # all-reduces of the last micro-batch cross their GPUs' links: the replay sees them meet.
    "tree": (experiment("tree", "gpt3-1.3b", four_nodes, "global_batch: 64, micro_batch: 2",
                        "schedule: 1f1b, pp: 2, dp: 4, tp: 4, dp_collective: tree, dp_bucket: 64MiB", FOLD_AXIS),
             "tp4 (dp: replicas alike in blocks of 2 (a smaller shift: moving the dp ranks splits node 0); tree "
             "all_reduce over 4 GPUs: message 0 (28 -> 20) has no image from its sender's representative; run apart, "
             "it met other traffic on its links (tp all_reduce B s1 mb7 at 0.148876593 s))"),
    "leaves": (experiment("leaves", "gpt3-1.3b", fat_tree, "global_batch: 128, micro_batch: 2",
                          "schedule: 1f1b, pp: 1, dp: 16, tp: 4, tp_fidelity: analytic", FOLD_AXIS),
               "tp4xdp4 (dp: replicas alike in blocks of 4 (a smaller shift: moving the dp ranks does not map the "
               "fat tree's leaves one to one (node 1 of leaf 0)))"),
}
for name, (text, fold) in fallbacks.items():
    rows, err = run_rows(name, text)
    checks += 1
    check(len(rows) == 2 and all(r["status"] == "ok" for r in rows), f"{name}: runs: {err}")
    if len(rows) == 2:
        diff = differences(rows[0], rows[1])
        checks += 1
        check(not diff and rows[1]["collective_fidelity"].split(";fold=")[1] == fold,
              f"{name}: falls back and says so: {rows[1]['collective_fidelity']} {diff[:4]}")

# ZeRO 0 with dp_collective: auto over 16 nodes: NCCL's tuner runs 1 MiB gradient buckets as double
# binary trees, which no replica shift maps onto itself. They run apart (sim/Fold.hpp: their own links,
# checked free of other traffic while they run), so the replicas still fold, the estimate counts
# what the replay runs, and the numbers equal the unfolded run's.
trees_dir = os.path.join(out_dir, "tuned-tree-traces")
rows, err = run_rows("tuned-tree", experiment("tuned-tree", "gpt3-1.3b", "{use: dgx-h100x128, nodes: 16}",
                                              "global_batch: 64, micro_batch: 2",
                                              "schedule: 1f1b, pp: 1, dp: 16, tp: 8, dp_bucket: 1MiB", FOLD_AXIS),
                     "--trace-dir", trees_dir)
checks += 1
check(len(rows) == 2 and all(r["status"] == "ok" for r in rows), f"tuned-tree: runs: {err}")
if len(rows) == 2:
    diff = differences(rows[0], rows[1])
    fold = rows[1]["collective_fidelity"].split(";fold=")[1]
    estimate, simulated = float(rows[1]["sim_activities_estimate"]), float(rows[1]["sim_activities"])
    checks += 1
    check(not diff and fold == "tp8xdp16" and "double_tree" in rows[1]["collective_algorithms"]
          and simulated / 2 <= estimate <= 2 * simulated
          and 8 * simulated < float(rows[0]["sim_activities"]),
          f"tuned-tree: trees run apart, folded: {fold} {estimate} vs {simulated} {diff[:4]}")
    # The device table too: a tree's inner nodes send more than its leaves, and each GPU's bytes
    # are its own, not its orbit's mean.
    tables = [read_csv(os.path.join(trees_dir, f"tuned-tree_{i}_devices.csv")) for i in (0, 1)]
    diff = [f"gpu {a['device']}: {k} {a[k]} vs {b[k]}" for a, b in zip(*tables) for k in a
            if abs(float(a[k]) - float(b[k])) > 1e-9 * max(abs(float(a[k])), abs(float(b[k])), 1.0)]
    checks += 1
    check(len(tables[0]) == 128 and len(tables[1]) == 128 and not diff,
          f"tuned-tree: the device tables agree: {len(tables[0])} {len(tables[1])} {diff[:4]}")

# tp_fidelity: auto (the default) takes the closed form where it equals the flow-level ring: tp a whole
# node's GPUs (whose links carry nothing else), a ring, and a profile without comm_compute_slowdown
# (a closed-form tensor-parallel collective is stream work, a flow-level one slows the compute it
# overlaps: sim/CommOverlap.hpp); flows otherwise, and with tp_collective: auto (NCCL's tuner may run
# a chain or NVLS inside the node). Equal up to SimGrid's event-time precision (1e-9 s).
no_slowdown = os.path.join(out_dir, "no-slowdown.yaml")
with open(os.path.join(os.path.dirname(__file__), "..", "..", "calibration", "profiles", "h100-sxm.yaml")) as src, \
        open(no_slowdown, "w") as dst:
    dst.write("".join(line for line in src if "comm_compute_slowdown" not in line))
auto = experiment("auto", "gpt3-1.3b", four_nodes, "global_batch: 64, micro_batch: 2",
                  "schedule: 1f1b, pp: 2, dp: 2, tp: 8, dp_bucket: 64MiB, tp_collective: ring",
                  "  parallelism.tp_fidelity: [flow, auto]\n")
rows, err = run_rows("auto", auto.replace("calibration: h100-sxm", "calibration: " + no_slowdown))
checks += 1
time_diff = abs(float(rows[0]["iteration_time_s"]) - float(rows[1]["iteration_time_s"])) if len(rows) == 2 else 1
check(len(rows) == 2 and time_diff < 5e-9
      and rows[1]["collective_fidelity"].startswith("dp=flow;tp=analytic+aggregated;")
      and int(rows[1]["sim_activities"]) < int(rows[0]["sim_activities"]),
      f"tp_fidelity auto: the closed form where exact: {err} {time_diff} {[r['collective_fidelity'] for r in rows]}")
rows, err = run_rows("auto-slowdown", auto)
checks += 1
check(len(rows) == 2 and rows[1]["collective_fidelity"].startswith("dp=flow;tp=flow+aggregated;"),
      f"tp_fidelity auto: flows with a comm_compute_slowdown: {err} {[r['collective_fidelity'] for r in rows]}")
rows, err = run_rows("auto4", experiment("auto4", "gpt3-1.3b", four_nodes, "global_batch: 64, micro_batch: 2",
                                         "schedule: 1f1b, pp: 2, dp: 4, tp: 4", "  parallelism.pp: [2]\n"))
checks += 1
check(len(rows) == 1 and rows[0]["collective_fidelity"].startswith("dp=flow;tp=flow+aggregated;"),
      f"tp_fidelity auto: flows where two tensor groups share a node: {err} {[r['collective_fidelity'] for r in rows]}")

# tp_aggregate on and off: the CSV row, the device table and the timeline are the same.
timeline_dir = os.path.join(out_dir, "traces")
rows, err = run_rows("aggregate", experiment(
    "aggregate", "gpt3-1.3b", two_nodes, "global_batch: 32, micro_batch: 2",
    "schedule: 1f1b, pp: 2, dp: 2, tp: 4, tp_fidelity: analytic, dp_bucket: 64MiB",
    "  parallelism.tp_aggregate: [false, true]\n"), "--trace-dir", timeline_dir)
checks += 1
check(len(rows) == 2 and all(r["status"] == "ok" for r in rows), f"tp_aggregate on and off run: {err}")


def timeline(path):
    """The timeline as multisets: processes, slices (process, track kind, name, times, args) and counters."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    process = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    track = {(e["pid"], e["tid"]): re.sub(r" #\d+$", "", e["args"]["name"]) for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = collections.Counter(
        (process[e["pid"]], track[(e["pid"], e["tid"])], e["name"], e["ts"], e["dur"], json.dumps(e.get("args"), sort_keys=True))
        for e in events if e["ph"] == "X")
    counters = collections.Counter((process[e["pid"]], e["name"], e["ts"], json.dumps(e["args"], sort_keys=True))
                                   for e in events if e["ph"] == "C")
    flows = collections.Counter(e["ph"] for e in events if e["ph"] in ("s", "t", "f"))
    return sorted(process.values()), slices, counters, flows


if len(rows) == 2:
    diff = differences(rows[0], rows[1])
    checks += 1
    check(not diff and int(rows[1]["sim_activities"]) < int(rows[0]["sim_activities"]),
          f"tp_aggregate changes no column: {diff}")
    tables = [read_csv(os.path.join(timeline_dir, f"aggregate_{k}_devices.csv")) for k in (0, 1)]
    checks += 1
    check(len(tables[0]) == 16 and all(not differences(a, b, skip={"gpus"}) for a, b in zip(*tables))
          and [r["device"] for r in tables[0]] == [r["device"] for r in tables[1]],
          f"tp_aggregate: the same device table, a row per GPU: {len(tables[0])} rows")
    names, slices, counters, flows = zip(*(timeline(os.path.join(timeline_dir, f"aggregate_{k}.json")) for k in (0, 1)))
    checks += 1
    check(names[0] == names[1] and len(names[0]) == 16 and "gpu12 (node 1)" in names[0],
          f"tp_aggregate: one process per GPU with its node: {names[1][:10]}")
    checks += 1
    check(slices[0] == slices[1] and counters[0] == counters[1] and flows[0] == flows[1],
          f"tp_aggregate: the same slices, tracks and counters: {len(slices[0] - slices[1])} and "
          f"{len(slices[1] - slices[0])} slices, {len(counters[0] - counters[1])} counter samples differ")
    inter = [s for s in slices[1] if s[1] == "inter-node links" and s[0].startswith("gpu0 ")]
    checks += 1
    check(inter and all('"kind": "activation"' in s[5] or '"role"' in s[5] for s in inter),
          f"pipeline sends between nodes sit on inter-node tracks: {inter[:2]}")

# Stream chains (sim/Replay.cpp run_chain, sim/CommOverlap.cpp run_chain): a GPU's consecutive
# stream tasks (compute, closed-form tensor-parallel collectives folded onto it) run as one timer,
# with the profile's compute slowdown (every shipped profile has one) and without. Against a timer
# per task (--no-stream-chains): every column, the device table and the timeline are the same.
chain_cases = {name: cases[name][0] for name in ("interleaved", "context", "syncbn", "fattree", "experts")}
chain_cases.update({name: fallbacks[name][0] for name in ("straggler", "mixed")})
chain_cases["no-slowdown"] = auto.replace("calibration: h100-sxm", "calibration: " + no_slowdown)
chain_cases["aggregate"] = experiment(
    "aggregate", "gpt3-1.3b", two_nodes, "global_batch: 32, micro_batch: 2, recompute: full",
    "schedule: 1f1b, pp: 2, dp: 2, tp: 4, tp_fidelity: analytic, dp_bucket: 64MiB",
    "  parallelism.tp_aggregate: [false, true]\n")
for name, text in chain_cases.items():
    traces = {k: os.path.join(out_dir, f"chains-{name}-{k}") for k in ("on", "off")}
    chained, err_on = run_rows(f"chains-{name}", text, "--trace-dir", traces["on"])
    single, err_off = run_rows(f"chains-{name}-off", text, "--no-stream-chains", "--trace-dir", traces["off"])
    checks += 1
    check(chained and len(chained) == len(single) and all(r["status"] == "ok" for r in chained + single),
          f"stream chains, {name}: runs: {err_on} {err_off}")
    for i, (a, b) in enumerate(zip(chained, single)):
        diff = differences(a, b, skip={"sim_wall_time_s"})
        stem = os.path.splitext(os.path.basename(text.split("name: ", 1)[1].split("\n", 1)[0]))[0]
        views = [timeline(os.path.join(traces[k], f"{stem}_{i}.json")) for k in ("on", "off")]
        checks += 1
        check(not diff and views[0] == views[1],
              f"stream chains, {name} point {i}: the same row and timeline as a timer per task: {diff[:4]}")

finish("cli_fold", checks)
