#!/usr/bin/env python3
"""Chakra execution traces through the CLI: `ddlsim export chakra` then `model: {chakra: DIR}` gives
the same simulated iteration (every CSV number equal but the host's wall time) on a pipeline +
data-parallel point with gradient buckets and on a tensor-parallel one; a point whose tensor groups
are folded into one device imports (rank by rank) to the same iteration time; keys that contradict
the traces, a cluster of the wrong size and a truncated file are refused naming file, line, key or node."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import check, finish, read_csv, run, workdir  # noqa: E402

binary = sys.argv[1]
d = workdir()
count = 0


def write(name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def same_row(a, b, what):
    """Every column equal, but the host's wall time, the experiment's name, how compute was costed and
    how much was simulated: `ddlsim run` folds symmetric ranks (docs/scale.md), the import simulates
    every rank of the export (checked to be at least as much)."""
    global count
    # An imported workload's exposed communication is not split by dimension (docs/csv.md: a third
    # party's collectives carry none), so those columns are the export's alone.
    skip = {"sim_wall_time_s", "experiment", "compute_costs", "sim_activities",
            "exposed_tp_s", "exposed_dp_s", "exposed_pp_s", "exposed_cp_s"}
    count += 1
    check(int(b["sim_activities"] or 0) >= int(a["sim_activities"] or 0),
          f"{what}: the import simulates every rank: {b['sim_activities']} < {a['sim_activities']}")
    numbers = 0
    for key in a:
        if key in skip:
            continue
        count += 1
        check(a[key] == b[key], f"{what}: {key} exported {a[key]!r} but imported {b[key]!r}")
        numbers += number(a[key]) is not None
    count += 1
    check(numbers >= 25, f"{what}: only {numbers} numeric columns compared")


def round_trip(name, experiment, cluster, import_extra=""):
    src = write(f"{name}.yaml", experiment)
    out = os.path.join(d, f"{name}_et")
    rc, stdout, stderr = run(binary, "export", "chakra", src, "-o", out)
    check(rc == 0, f"{name}: export exit {rc}: {stderr}")
    rc, _, stderr = run(binary, "run", src, "-o", os.path.join(d, f"{name}.csv"), "--quiet")
    check(rc == 0, f"{name}: run exit {rc}: {stderr}")
    imp = write(f"{name}_import.yaml", f"name: {name}-import\nmodel: {{chakra: {name}_et}}\ncluster: {cluster}\n"
                                       f"calibration: h100-sxm\n{import_extra}")
    rc, _, stderr = run(binary, "run", imp, "-o", os.path.join(d, f"{name}_import.csv"), "--quiet")
    check(rc == 0, f"{name}: import exit {rc}: {stderr}")
    return read_csv(os.path.join(d, f"{name}.csv"))[0], read_csv(os.path.join(d, f"{name}_import.csv"))[0], out


# 1. Pipeline + data parallelism, 1F1B, gradient buckets overlapped with the backward pass.
pp_dp = """name: ppdp
model: gpt2-small
cluster: node4.yaml
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 2, dtype: bf16, optimizer: adam}
parallelism: {schedule: 1f1b, pp: 2, dp: 2, dp_bucket: 25MiB}
"""
a, b, pp_dir = round_trip("ppdp", pp_dp, "node4.yaml",
                          "training: {global_batch: 16}\nparallelism: {pp: 2, schedule: 1f1b}\n")
count += 2
check(a["status"] == "ok" and b["status"] == "ok", f"pp+dp statuses {a['status']} {b['status']}: {b['message']}")
check(b["compute_costs"] == "chakra", f"imported compute_costs {b['compute_costs']}")
same_row(a, b, "pp+dp")
files = sorted(f for f in os.listdir(pp_dir) if f.endswith(".et"))
count += 2
check(files == [f"ppdp.{r}.et" for r in range(4)], f"export wrote {files}")
with open(os.path.join(pp_dir, "comm_groups.json")) as f:
    groups = json.load(f)
check(sorted(groups.values()) == [[0, 1], [2, 3]], f"process groups {groups}: the dp pair of each stage")

# 2. Tensor parallelism (tp 4 within a node) with pipeline and data parallelism, rank by rank.
tp = """name: tp
model: gpt2-small
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 2, dtype: bf16, optimizer: adam}
parallelism: {schedule: 1f1b, pp: 2, dp: 2, tp: 4, tp_fidelity: analytic, tp_aggregate: false}
"""
a, b, _ = round_trip("tp", tp, "dgx-h100x2")
count += 1
check(a["status"] == "ok" and b["status"] == "ok", f"tp statuses {a['status']} {b['status']}: {b['message']}")
same_row(a, b, "tp")
# 2a. Megatron's step with its asynchronous tensor-parallel backward: each column layer's backward is
# two compute nodes (ddlsim_part), the collectives beside them; the import prices each part alone.
megatron = tp.replace("name: tp", "name: megatron").replace("optimizer: adam}", "optimizer: adam, framework: megatron}") \
    .replace("tp: 4,", "tp: 4, sequence_parallel: true,")
a, b, mdir = round_trip("megatron", megatron, "dgx-h100x2")
count += 2
check(a["status"] == "ok" and b["status"] == "ok" and a.get("tp_backward_overlap") == "true",
      f"megatron statuses {a['status']} {b['status']} {a.get('tp_backward_overlap')!r}: {b['message']}")
same_row(a, b, "megatron")
with open(os.path.join(mdir, "megatron.0.et"), "rb") as f:
    check(b"weight_gradient" in f.read(), "the export names the weight gradient's part")
# 2b. A mixture of experts with expert parallelism (ep 4 over dp 8) and an uneven expert load: the
# dispatch and combine all-to-alls go out as Chakra ALL_TO_ALL nodes and carry their per-member loads.
moe = """name: moe
model: {name: tiny-moe, llama: {layers: 2, hidden: 512, heads: 8, ffn_hidden: 1024, seq: 256, vocab: 1000,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 512, load_imbalance: 1.5}}}
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 2, dtype: bf16, optimizer: adam}
parallelism: {schedule: 1f1b, pp: 2, dp: 8, ep: 4}
"""
a, b, _ = round_trip("moe", moe, "dgx-h100x2")
count += 2
check(a["status"] == "ok" and b["status"] == "ok", f"moe statuses {a['status']} {b['status']}: {b['message']}")
check(a["all_to_all_time_s"] not in ("", "0"), f"moe: the all-to-alls are exposed: {a['all_to_all_time_s']!r}")
same_row(a, b, "moe")
# The same point with its tensor groups folded into one device each (the default): the export is
# still rank by rank, and simulating it gives the folded run's iteration time.
a, b, _ = round_trip("tpfold", tp.replace(", tp_aggregate: false", "").replace("name: tp", "name: tpfold"), "dgx-h100x2")
count += 3
check("+aggregated;fold=tp4" in a["collective_fidelity"], f"folded point's fidelity {a['collective_fidelity']}")
check(a["iteration_time_s"] == b["iteration_time_s"],
      f"folded {a['iteration_time_s']} s vs its per-rank export {b['iteration_time_s']} s")
check(int(b["sim_activities"]) > int(a["sim_activities"]), "the per-rank import simulates every rank")

# 3. A sweep: --point chooses; without it the export is a usage error.
sweep = write("sweep.yaml", pp_dp.replace("name: ppdp", "name: swp") + "sweep:\n  training.micro_batch: [1, 2]\n")
rc, _, stderr = run(binary, "export", "chakra", sweep, "-o", os.path.join(d, "swp"))
count += 3
check(rc == 2 and "--point" in stderr, f"export of a 2-point sweep without --point: exit {rc}: {stderr}")
rc, _, stderr = run(binary, "export", "chakra", sweep, "-o", os.path.join(d, "swp"), "--point", "1")
check(rc == 0, f"export --point 1: exit {rc}: {stderr}")
check(os.path.exists(os.path.join(d, "swp", "swp.3.et")), "export --point 1 wrote 4 ranks")

# 4. Keys that contradict the traces, or that they fix, are refused at file:line: key.
bad = write("bad_keys.yaml", "name: bad\nmodel: {chakra: ppdp_et}\ncluster: node4.yaml\ncalibration: h100-sxm\n"
                             "training: {global_batch: 32}\nparallelism:\n  pp: 4\n  dp_bucket: 1MiB\n")
rc, _, stderr = run(binary, "run", bad, "-o", os.path.join(d, "bad.csv"))
count += 4
check(rc == 1, f"contradicting keys: exit {rc}")
check("bad_keys.yaml:5: training.global_batch" in stderr and "= 16" in stderr, f"global_batch: {stderr}")
check("bad_keys.yaml:7: parallelism.pp" in stderr and "parallelism.pp = 2" in stderr, f"pp: {stderr}")
check("bad_keys.yaml:8: parallelism.dp_bucket" in stderr, f"dp_bucket: {stderr}")

# 5. A cluster with another number of GPUs: the point is invalid, with both counts.
wrong = write("wrong_cluster.yaml", "name: wrong\nmodel: {chakra: ppdp_et}\ncluster: dgx-h100x2\ncalibration: h100-sxm\n")
rc, _, stderr = run(binary, "validate", wrong)
count += 2
check(rc == 1, f"4 ranks on 16 GPUs: validate exit {rc}")
check("wrong_cluster.yaml:3: cluster" in stderr and "4 ranks" in stderr and "16 GPUs" in stderr, stderr)

# 6. A truncated rank file: exit 1, the message names the file and the node.
trunc = os.path.join(d, "trunc_et")
os.makedirs(trunc)
for f in files:
    with open(os.path.join(pp_dir, f), "rb") as src, open(os.path.join(trunc, f), "wb") as dst:
        data = src.read()
        dst.write(data[:-10] if f == "ppdp.1.et" else data)
cut = write("trunc.yaml", "name: trunc\nmodel: {chakra: trunc_et}\ncluster: node4.yaml\ncalibration: h100-sxm\n")
rc, _, stderr = run(binary, "run", cut, "-o", os.path.join(d, "trunc.csv"))
count += 2
check(rc == 1, f"truncated trace: exit {rc}")
check("trunc.yaml:2: model.chakra" in stderr and "ppdp.1.et" in stderr and "node " in stderr, stderr)

# 7. search and execute change or run the model, which the traces fix: refused.
for args in (["search", "microbatch"], ["search", "parallel"], ["execute", "--backend", "host", "-o", os.path.join(d, "x.csv")]):
    rc, _, stderr = run(binary, *args, os.path.join(d, "ppdp_import.yaml"))
    count += 1
    check(rc == 1 and "Chakra workload" in stderr, f"{' '.join(args[:2])} of a Chakra workload: exit {rc}: {stderr}")

# 8. An imported workload draws its timeline like any point.
rc, _, stderr = run(binary, "run", os.path.join(d, "ppdp_import.yaml"), "-o", os.path.join(d, "t.csv"), "--quiet",
                    "--trace-dir", os.path.join(d, "timeline"))
timeline = [f for f in os.listdir(os.path.join(d, "timeline")) if f.endswith(".json")] if rc == 0 else []
count += 1
check(rc == 0 and len(timeline) == 1, f"timeline of an import: exit {rc}, files {timeline}: {stderr}")
if timeline:
    with open(os.path.join(d, "timeline", timeline[0])) as f:
        events = json.load(f)["traceEvents"]
    count += 1
    check(sum(1 for e in events if e.get("ph") == "X") > 50, "timeline of an import has its slices")

# 9. The guard counts the export's own graph, every GPU's tasks unfolded (issue 31, item 1): a point
# that simulates folded within the limit is refused up front when its export would not be, exit 1,
# nothing written.
big = write("big.yaml", pp_dp.replace("name: ppdp", "name: big"))
rc, _, stderr = run(binary, "export", "chakra", big, "-o", os.path.join(d, "big_et"), "--set", "limits.max_memory=1MiB")
count += 1
check(rc == 1 and "limits.max_memory" in stderr and not os.path.exists(os.path.join(d, "big_et")),
      f"an export over the memory limit is refused before anything is written: exit {rc}: {stderr}")
# Files are written rank by rank, with progress on stderr when asked.
env = dict(os.environ, DDLSIM_PROGRESS_INTERVAL_SECONDS="0")
p = subprocess.run([binary, "export", "chakra", big, "-o", os.path.join(d, "big_et"), "--progress", "always"],
                   capture_output=True, text=True, timeout=300, env=env)
count += 1
check(p.returncode == 0 and "progress [4/4] 100%" in p.stderr, f"export progress: exit {p.returncode}: {p.stderr}")
p = subprocess.run([binary, "export", "chakra", big, "-o", os.path.join(d, "big_quiet"), "--progress", "never"],
                   capture_output=True, text=True, timeout=300, env=env)
count += 1
check(p.returncode == 0 and "progress" not in p.stderr, f"--progress never: {p.stderr}")

# 10. Rank maps (`--rank-map`, docs/chakra.md#rank-maps): alike ranks written once as templates. For
# each layout above (and context parallelism's ring below), the map holds fewer files than ranks,
# imports to the same row as the per-rank files, and exporting the mapped workload again writes every
# rank's file byte for byte as the per-rank export did.
cp = """name: cp
model: {name: tiny-llama, llama: {layers: 4, hidden: 512, heads: 8, kv_heads: 2, ffn_hidden: 1024, seq: 2048,
        vocab: 1000}}
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1, dtype: bf16, optimizer: adam}
parallelism: {schedule: 1f1b, pp: 2, dp: 2, cp: 2, tp: 2, tp_fidelity: analytic, tp_aggregate: false}
"""
a, b, _ = round_trip("cp", cp, "dgx-h100x2")
count += 1
check(a["status"] == "ok" and b["status"] == "ok" and a["exposed_cp_s"] not in ("", "0"),
      f"cp statuses {a['status']} {b['status']}, exposed cp {a['exposed_cp_s']!r}: {b['message']}")
same_row(a, b, "cp")


def rank_map_check(name, cluster, import_extra, ranks, most_templates):
    global count
    out = os.path.join(d, f"{name}_map")
    rc, stdout, stderr = run(binary, "export", "chakra", os.path.join(d, f"{name}.yaml"), "-o", out, "--rank-map")
    templates = sorted(f for f in os.listdir(out) if f.endswith(".et")) if rc == 0 else []
    count += 3
    check(rc == 0 and f"templates for {ranks} ranks" in stdout, f"{name}: --rank-map exit {rc}: {stdout}{stderr}")
    check(0 < len(templates) <= most_templates and os.path.exists(os.path.join(out, "rank_map.json")),
          f"{name}: {len(templates)} templates for {ranks} ranks (at most {most_templates}): {templates}")
    imp = write(f"{name}_map_import.yaml", f"name: {name}\nmodel: {{chakra: {name}_map}}\ncluster: {cluster}\n"
                                           f"calibration: h100-sxm\n{import_extra}")
    rc, _, stderr = run(binary, "run", imp, "-o", os.path.join(d, f"{name}_map.csv"), "--quiet")
    check(rc == 0, f"{name}: import of the rank map: exit {rc}: {stderr}")
    if rc == 0:
        plain = read_csv(os.path.join(d, f"{name}_import.csv"))[0]
        mapped = read_csv(os.path.join(d, f"{name}_map.csv"))[0]
        for key in plain:
            if key not in ("sim_wall_time_s", "experiment"):
                count += 1
                check(plain[key] == mapped[key], f"{name}: {key} per rank {plain[key]!r}, from the map {mapped[key]!r}")
    back = os.path.join(d, f"{name}_back")
    rc, _, stderr = run(binary, "export", "chakra", imp, "-o", back)
    count += 1
    check(rc == 0, f"{name}: export of the mapped workload: exit {rc}: {stderr}")
    for r in range(ranks if rc == 0 else 0):
        with open(os.path.join(d, f"{name}_et", f"{name}.{r}.et"), "rb") as f1, \
             open(os.path.join(back, f"{name}.{r}.et"), "rb") as f2:
            count += 1
            check(f1.read() == f2.read(), f"{name}: rank {r} rebuilt from its template differs from its export")
    return out


pp_map = rank_map_check("ppdp", "node4.yaml", "training: {global_batch: 16}\nparallelism: {pp: 2, schedule: 1f1b}\n",
                        4, 2)
rank_map_check("tp", "dgx-h100x2", "", 16, 2)
rank_map_check("megatron", "dgx-h100x2", "", 16, 2)
rank_map_check("moe", "dgx-h100x2", "", 16, 16)
# Context parallelism's ring: the two positions send and receive in opposite orders, so a stage has
# two templates (one per position), shared by its tensor-parallel pair and its replicas.
rank_map_check("cp", "dgx-h100x2", "", 16, 4)

# A map that does not fit its templates, or lost its groups, is refused naming the file and key.
with open(os.path.join(pp_map, "rank_map.json")) as f:
    good = json.load(f)
broken = json.loads(json.dumps(good))
broken["ranks"][1]["peers"] = []
renamed = json.loads(json.dumps(good))
renamed["ranks"][0]["groups"][0] = "77"  # rank 0 leaves its group: its partner's collectives have no match
cases = [("peers", broken, "rank_map.json: ranks[1]", "peer slot"),
         ("group", renamed, "process group", ""),
         ("schema", dict(good, schema="other"), "rank_map.json: schema", "ddlsim-rank-map.1"),
         ("template", dict(good, templates=["ppdp.t9.et"] + good["templates"][1:]), "ppdp.t9.et", "")]
for what, doc, where, words in cases:
    with open(os.path.join(pp_map, "rank_map.json"), "w") as f:
        json.dump(doc, f)
    rc, _, stderr = run(binary, "run", os.path.join(d, "ppdp_map_import.yaml"), "-o", os.path.join(d, "x.csv"))
    count += 1
    check(rc == 1 and where in stderr and words in stderr and "model.chakra" in stderr,
          f"a rank map with a bad {what}: exit {rc}: {stderr}")
with open(os.path.join(pp_map, "rank_map.json"), "w") as f:
    json.dump(good, f)
# An export into a folder that holds traces (the map, or per-rank files) would mix the two: refused,
# nothing written.
before = sorted(os.listdir(pp_map))
for args in (["--rank-map"], []):
    rc, _, stderr = run(binary, "export", "chakra", os.path.join(d, "ppdp.yaml"), "-o", pp_map, *args)
    count += 1
    check(rc == 1 and "already holds Chakra traces" in stderr and sorted(os.listdir(pp_map)) == before,
          f"an export into a folder of traces {args}: exit {rc}: {stderr}")
os.rename(os.path.join(pp_map, "comm_groups.json"), os.path.join(d, "groups.json"))
rc, _, stderr = run(binary, "run", os.path.join(d, "ppdp_map_import.yaml"), "-o", os.path.join(d, "x.csv"))
count += 1
check(rc == 1 and "comm_groups.json: missing" in stderr, f"a rank map without its groups: exit {rc}: {stderr}")

finish("cli_chakra", count)
