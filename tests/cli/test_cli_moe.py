"""Mixtures of experts and expert parallelism end to end: the issue's acceptance case (Mixtral-8x7B on two
DGX H100: ep 1 oom, ep 8 and 16 run, ep 16's all-to-alls over the NICs), the CSV columns (ep,
all_to_all_time_s, dropped_tokens, tokens/s and MFU over active parameters), load imbalance and
capacity through training.*, hierarchical and analytic all-to-alls, determinism, and bad input
(file:line: key, exit 1, nothing written)."""
import functools
import os
import sys

from common import ROOT, check, finish, read_csv, run, search_tables, workdir, write_experiment
from common import simulate as run_experiment

binary = sys.argv[1]
checks = 0
tmp = workdir()


experiment = functools.partial(write_experiment, tmp)  # experiment(name, body) -> path
simulate = functools.partial(run_experiment, binary)     # simulate(path, *extra) -> (rc, rows, stderr)


# The acceptance case: Mixtral-8x7B on 2 DGX H100 (16 GPUs), seq 4,096, micro-batch 1, full
# recompute, ZeRO 1. ep 1 holds all 46.7B parameters on every GPU: oom. ep 8 (one expert per GPU, the
# all-to-alls inside a node) and ep 16 (each expert over two GPUs, the all-to-alls across the nodes)
# run, and ep 16 sends more bytes through the NICs per GPU.
mixtral = experiment("mixtral16", """name: mixtral16
model: mixtral-8x7b
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 32, micro_batch: 1, seq: 4096, recompute: full}
parallelism: {schedule: 1f1b, dp: 16, zero: 1}
sweep:
  parallelism.ep: [1, 8, 16]
""")
rc, rows, err = simulate(mixtral)
checks += 6
check(rc == 0 and [r["ep"] for r in rows] == ["1", "8", "16"], f"Mixtral 16 GPUs ran: {err}")
if len(rows) == 3:
    one, eight, sixteen = rows
    check(one["status"] == "oom" and "weights" in one["message"], f"ep 1 is oom: {one['status']} {one['message']}")
    check(eight["status"] == "ok" and sixteen["status"] == "ok", f"ep 8 and 16 run: {eight['message']} {sixteen['message']}")
    if eight["status"] == sixteen["status"] == "ok":
        check(float(sixteen["inter_node_bytes_per_gpu"]) > float(eight["inter_node_bytes_per_gpu"]),
              "ep 16 sends more bytes per GPU across the nodes than ep 8")
        # The all-to-alls' share: ep 8's stay inside the node, so its inter-node bytes are the gradients'
        # alone; ep 16 adds (N-1)/N of every dispatch and combine: 2 shards x 4 all-to-alls x 32 layers x
        # 2 micro-batches of 4096 x 2 x 4096 x 2 bytes, half of it off the node.
        a2a_inter = 2 * 4 * 32 * 2 * 4096 * 2 * 4096 * 2 / 2
        check(float(sixteen["inter_node_bytes_per_gpu"]) >= a2a_inter,
              f"ep 16's all-to-alls cross the NICs: {sixteen['inter_node_bytes_per_gpu']} >= {a2a_inter}")
        # tokens/s = global batch x seq / time; MFU counts 6 x the active parameters + 12 l h s per token.
        t = float(eight["iteration_time_s"])
        flop_per_token = 6 * 12879925248 + 12 * 32 * 4096 * 4096
        check(abs(float(eight["tokens_per_s"]) - 32 * 4096 / t) < 1e-6 * 32 * 4096 / t and
              abs(float(eight["mfu"]) - 32 * 4096 / t * flop_per_token / (16 * 989.4e12)) < 1e-6,
              f"tokens/s and MFU over active parameters: {eight['tokens_per_s']} {eight['mfu']}")
        check(eight["active_parameters"] == "12879925248" and eight["model_parameters"] == "46702792704" and
              float(eight["all_to_all_time_s"]) > 0 and eight["dropped_tokens"] == "0",
              "the MoE columns: active parameters, exposed all-to-all time, no drops")

# Load imbalance through the run: the busiest of 8 experts at 2x the mean makes the experts' phase and
# the all-to-alls slower; capacity 1.25 drops (2 - 1.25) / 8 of the token copies: the CSV counts them.
small = experiment("imbalance", """name: imbalance
model:
  name: mixtral-4-layers
  llama: {layers: 4, hidden: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, seq: 1024, vocab: 32000,
          moe: {experts: 8, top_k: 2, expert_ffn_hidden: 14336}}
cluster: dgx-h100
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1, seq: 1024, recompute: full}
parallelism: {dp: 8, ep: 8, zero: 1}
sweep:
  zip:
    training.load_imbalance: [1.0, 2.0, 2.0]
    training.capacity_factor: [0, 0, 1.25]
""")
rc, rows, err = simulate(small)
checks += 4
check(rc == 0 and len(rows) == 3 and all(r["status"] == "ok" for r in rows), f"imbalance sweep ran: {err}")
if len(rows) == 3 and all(r["status"] == "ok" for r in rows):
    uniform, busy, capped = rows
    check(float(busy["all_to_all_time_s"]) > 1.5 * float(uniform["all_to_all_time_s"]) and
          float(busy["iteration_time_s"]) > float(uniform["iteration_time_s"]),
          f"imbalance 2 slows the all-to-alls and the iteration: {uniform['all_to_all_time_s']} {busy['all_to_all_time_s']}")
    dropped = 4 * 8 * 1024 * 2 * (2 - 1.25) / 8  # layers x samples x tokens x top_k x dropped share
    check(busy["dropped_tokens"] == "0" and abs(float(capped["dropped_tokens"]) - dropped) < 0.5,
          f"capacity 1.25 drops {dropped} token copies: {capped['dropped_tokens']}")
    check(busy["load_imbalance"] == "2" and capped["capacity_factor"] == "1.25" and
          float(capped["iteration_time_s"]) < float(busy["iteration_time_s"]),
          "the CSV says the routing, and dropping the excess shortens the busiest GPU's work")

# Two nodes: a hierarchical all-to-all (fewer, larger inter-node messages) and the analytic fidelity
# (one timer per all-to-all) run; the same inputs give the same bytes twice.
two = experiment("two", """name: two
model: mixtral-8x7b
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 1, seq: 1024, recompute: full}
parallelism: {dp: 16, ep: 16, zero: 1}
sweep:
  parallelism.ep_collective: [direct, hierarchical]
  parallelism.ep_fidelity: [flow, analytic]
""")
rc, rows, err = simulate(two)
out_again = os.path.join(tmp, "again.csv")
rc2, _, _ = run(binary, "run", two, "-o", out_again, "--quiet", "-j", "1")
checks += 3
check(rc == 0 and len(rows) == 4 and all(r["status"] == "ok" for r in rows), f"direct/hierarchical x flow/analytic: {err}")
if rc == 0 and rc2 == 0:
    strip = lambda rs: [{k: v for k, v in r.items() if k != "sim_wall_time_s"} for r in rs]
    check(strip(rows) == strip(read_csv(out_again)), "the same CSV twice, at -j 2 and -j 1")
if len(rows) == 4:
    check(rows[0]["collective_fidelity"].endswith(";ep=flow") and rows[1]["collective_fidelity"].endswith(";ep=analytic")
          and int(rows[1]["sim_activities"]) < int(rows[0]["sim_activities"]) and rows[2]["ep_collective"] == "hierarchical",
          "collective_fidelity and ep_collective say what ran; analytic all-to-alls are timers")

# Tensor-parallel groups folded into one device (tp_aggregate, analytic tp collectives) change no
# number with expert parallelism either: DeepSeek-MoE-16B, tp 2 with SP, ep 4 over two nodes.
fold = experiment("fold", """name: fold
model: deepseek-moe-16b
cluster: dgx-h100x2
calibration: h100-sxm
training: {global_batch: 32, micro_batch: 1, seq: 2048, recompute: full}
parallelism: {schedule: 1f1b, dp: 8, tp: 2, sequence_parallel: true, zero: 1, ep: 4, tp_fidelity: analytic}
sweep:
  parallelism.tp_aggregate: [true, false]
""")
rc, rows, err = simulate(fold)
checks += 1
# collective_algorithms counts the simulated collectives: a folded group runs one where its tp ranks run tp.
differs = {"config_id", "collective_fidelity", "sim_activities", "sim_activities_estimate", "sim_memory_estimate_bytes",
           "sim_wall_time_s", "collective_algorithms"}
check(rc == 0 and len(rows) == 2 and rows[0]["status"] == "ok" and
      {k: v for k, v in rows[0].items() if k not in differs} == {k: v for k, v in rows[1].items() if k not in differs},
      f"folding tensor-parallel groups changes no number with ep 4: {err}")

# Bad input: file:line: key, exit 1, nothing written.
cases = {
    "ep_experts": ("parallelism: {dp: 8, ep: 3}", "bad.yaml:6: parallelism.ep: ep = 3 neither divides the 8 experts"),
    "ep_dp": ("parallelism: {dp: 4, pp: 2, ep: 8}", "bad.yaml:6: parallelism.ep: ep = 8 does not divide dp x cp = 4"),
    "ep_sp": ("parallelism: {dp: 4, tp: 2, ep: 4}", "bad.yaml:6: parallelism.ep: expert parallelism with tp > 1 needs "
                                                    "sequence_parallel: true"),
    "ep_algorithm": ("parallelism: {dp: 8, ep: 8, ep_collective: tree}",
                     "bad.yaml:6: parallelism.ep_collective: the expert all-to-alls are auto, direct or hierarchical"),
    "dp_direct": ("parallelism: {dp: 8, ep: 8, dp_collective: direct}",
                  "bad.yaml:6: parallelism.dp_collective: direct is the all-to-all algorithm of expert parallelism"),
}
for name, (parallelism, message) in cases.items():
    path = os.path.join(tmp, "bad.yaml")
    with open(path, "w") as f:
        f.write("name: bad\nmodel: mixtral-8x7b\ncluster: dgx-h100\ncalibration: h100-sxm\n"
                "training: {global_batch: 8, micro_batch: 1, seq: 1024}\n" + parallelism + "\n")
    out = os.path.join(tmp, name + ".csv")
    rc, _, err = run(binary, "run", path, "-o", out, "--quiet")
    checks += 1
    check(rc == 1 and message in err and not os.path.exists(out), f"{name}: exit 1 with '{message}': {rc} {err}")
# top_k above the experts, in an inline model: the model's own key and line.
path = os.path.join(tmp, "topk.yaml")
with open(path, "w") as f:
    f.write("name: bad\nmodel:\n  name: m\n  llama: {layers: 2, hidden: 256, heads: 4, ffn_hidden: 512, seq: 128, vocab: 100,\n"
            "          moe: {experts: 4, top_k: 6, expert_ffn_hidden: 512}}\ncluster: dgx-h100\ncalibration: h100-sxm\n"
            "training: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 8}\n")
rc, _, err = run(binary, "validate", path)
checks += 1
check(rc == 1 and "topk.yaml:5: model.llama.moe.top_k: top_k = 6 is more than the 4 experts" in err,
      f"top_k > experts: {err}")
# A routing setting for a dense model.
path = os.path.join(tmp, "dense.yaml")
with open(path, "w") as f:
    f.write("name: bad\nmodel: llama3-8b\ncluster: dgx-h100\ncalibration: h100-sxm\n"
            "training: {global_batch: 8, micro_batch: 1, seq: 1024, load_imbalance: 1.5}\nparallelism: {dp: 8}\n")
rc, _, err = run(binary, "validate", path)
checks += 1
check(rc == 1 and "dense.yaml:5: training.load_imbalance: model 'llama3-8b' has no mixture of experts" in err,
      f"load_imbalance on a dense model: {err}")

# docs/moe.md's table of experiments/moe.yaml (45 points, minutes at -j 2) against the golden CSV of that
# file, which CTest `golden` keeps byte-identical to what `ddlsim run experiments/moe.yaml` writes: the
# page's figures cannot drift from the simulator (issue 31, item 8).
def moe_table_rows():
    golden = read_csv(os.path.join(ROOT, "tests", "golden", "experiments", "moe.csv"))
    by = {(r["model"], r["gpus"], r["ep"], r["ep_collective"], r["load_imbalance"]): r for r in golden}
    rows = []
    for model, name, gpus_list in (("mixtral-8x7b", "8x7B", ("16", "64", "256")), ("mixtral-8x22b", "8x22B", ("64", "256"))):
        for gpus in gpus_list:
            collectives = [("8", "direct"), ("16", "direct")] + ([("16", "hierarchical")] if gpus == "16" else [])
            for ep, collective in collectives:
                cell = []
                for load in ("1", "2"):
                    r = by[(model, gpus, ep, collective, load)]
                    cell.append(f"{float(r['iteration_time_s']):.2f} s, {100 * float(r['mfu']):.1f}%, "
                                f"{float(r['all_to_all_time_s']):.3f} s")
                ep_text = ep if ep == "8" else f"{ep} {collective}"
                inter = float(by[(model, gpus, ep, collective, "1")]["inter_node_bytes_per_gpu"]) / 1e9
                rows.append(f"| {name} on {gpus} | {ep_text} | {cell[0]} | {cell[1]} | {inter:.1f} GB |")
    return rows


page = open(os.path.join(ROOT, "docs", "moe.md"), encoding="utf-8").read().splitlines()
expected = moe_table_rows()
for row in expected:
    checks += 1
    check(row in page, f"docs/moe.md's experiments/moe.yaml table lacks, from tests/golden/experiments/moe.csv: {row}")
checks += 1
check(sum(1 for line in page if line.startswith("| 8x")) == len(expected),
      "docs/moe.md's experiments/moe.yaml table has rows the golden CSV does not give")

# docs/moe.md's two search tables and their figures are what `ddlsim search parallel` prints now (seconds
# each at -j 2): the ranked rows, the layouts counted, the closed form's spread against the simulation.
def page_row(r, columns):
    cells = {"schedule": r["schedule"].replace(":v", ", v "), "estimate": f"{float(r['estimate_s']):.3f} s",
             "simulated": f"{float(r['simulated_s']):.3f} s", "tokens/s": f"{float(r['tokens/s']):,.0f}",
             "MFU": r["mfu"], "exposed a2a": f"{float(r['a2a_s']):.3f} s"}
    return "| " + " | ".join(cells.get(c, r.get(c, "?")) for c in columns) + " |"


moe_search = os.path.join(ROOT, "experiments", "moe_search.yaml")
text = " ".join(page)  # the page's prose, line breaks as spaces
for args, columns, counts, spread in (
        ([], ["rank", "tp", "pp", "dp", "ep", "zero", "mb", "schedule", "recompute", "estimate", "simulated", "tokens/s",
              "MFU", "exposed a2a"], "3,021 layouts, 2,810 fit", "0.4% slow to 3.4% fast"),
        (["--recompute", "full", "--schedules", "1f1b"],
         ["rank", "tp", "pp", "dp", "ep", "zero", "mb", "estimate", "simulated", "tokens/s", "MFU"],
         "1,118 layouts, 1,028 fit", "4.7% and 7.1% too fast")):
    rc, out, err = run(binary, "search", "parallel", moe_search, "-j", "2", *args, "-o", os.path.join(tmp, "moe_search.csv"))
    tables = search_tables(out) if rc == 0 else []
    rows = tables[0] if tables else []
    # "3021 layouts, 3021 valid, 2810 fit in memory; ..."
    numbers = [int(w) for w in (out.splitlines()[1] if rc == 0 else "").replace(",", " ").split() if w.isdigit()]
    said = f"{numbers[0]:,} layouts, {numbers[2]:,} fit" if len(numbers) >= 3 else ""
    checks += 1
    check(rc == 0 and len(rows) == 16 and said == counts and counts in text,
          f"docs/moe.md says {counts!r} for `search parallel moe_search.yaml {' '.join(args)}`: now {said!r} {err}")
    for r in rows[:6]:
        checks += 1
        check(page_row(r, columns) in page, f"docs/moe.md's table of `search parallel {' '.join(args)}` lacks "
                                            f"{page_row(r, columns)}")
    errors = sorted(100 * (float(r["estimate_s"]) / float(r["simulated_s"]) - 1) for r in rows)
    quoted = "" if len(errors) < 2 else (f"{errors[-1]:.1f}% slow to {-errors[0]:.1f}% fast" if not args else
                                         f"{-errors[1]:.1f}% and {-errors[0]:.1f}% too fast")
    checks += 1
    check(quoted == spread and spread in text,
          f"docs/moe.md's closed form against the simulation, {spread!r}, is {quoted!r} now")

finish("cli_moe", checks)
