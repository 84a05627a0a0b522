"""Modern dense LLM training end to end: the Llama zoo's parameter counts, ZeRO stages on Llama-3-70B,
context parallelism at 128k tokens, training.seq, tokens/s and MFU against their definitions, the model
column, and bad input (file:line: key)."""
import functools
import os
import sys

from common import check, finish, read_csv, run, workdir, write_experiment
from common import simulate as run_experiment

binary = sys.argv[1]
checks = 0
tmp = workdir()

# `ddlsim model NAME` prints Hugging Face's exact counts (config.json / safetensors of each checkpoint).
published = {"llama2-7b": 6738415616, "llama2-13b": 13015864320, "llama2-70b": 68976648192,
             "llama3-8b": 8030261248, "llama3-70b": 70553706496, "llama3.1-405b": 405853388800}
for name, count in published.items():
    rc, out, err = run(binary, "model", name)
    checks += 1
    check(rc == 0 and f"total parameters            {count} " in out, f"{name}: {count} parameters: {err}")


experiment = functools.partial(write_experiment, tmp)  # experiment(name, body) -> path
simulate = functools.partial(run_experiment, binary)     # simulate(path, *extra) -> (rc, rows, stderr)


# Llama-3-70B, 64 H100s, tp 8, dp 8, micro-batch 1, full recompute: ZeRO 0 is oom, and the peak falls
# strictly from stage 0 to 3 (the acceptance case).
path = experiment("l70", """name: l70
model: llama3-70b
cluster: dgx-h100x8
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 1, dtype: bf16, optimizer: adam, recompute: full}
parallelism: {schedule: 1f1b, pp: 1, dp: 8, tp: 8, tp_fidelity: analytic}
sweep:
  parallelism.zero: [0, 1, 2, 3]
""")
rc, rows, err = simulate(path)
checks += 1
check(rc == 0 and [r["zero"] for r in rows] == ["0", "1", "2", "3"], f"l70 runs: {err}")
if len(rows) == 4:
    checks += 2
    check(rows[0]["status"] == "oom" and all(r["status"] == "ok" for r in rows[1:]),
          f"zero 0 is oom, 1-3 run: {[(r['status'], r['message']) for r in rows]}")
    peaks = [float(r["peak_memory_bytes"]) for r in rows]
    check(all(a > b for a, b in zip(peaks, peaks[1:])), f"peak memory falls strictly with the stage: {peaks}")
    # The training state per GPU: 70.55B / tp 8 parameters; ZeRO paper: 16, 4 + 12/N, 2 + 14/N, 16/N bytes.
    # The oom message names the terms; stage 1's optimizer state is the 12 bytes over N = dp = 8.
    checks += 1
    p = 70553706496 / 8
    check(abs(peaks[0] - peaks[1] - 12 * p * (1 - 1 / 8)) / (12 * p) < 0.01,
          f"stage 0 -> 1 saves 12 P (1 - 1/N): {peaks[0] - peaks[1]:.4g} vs {12 * p * 7 / 8:.4g}")
    # tokens/s and MFU from their definitions (PaLM appendix B), with the CSV's own columns.
    for r in rows[1:]:
        t, seq, gb = float(r["iteration_time_s"]), int(r["seq"]), int(r["global_batch"])
        tokens = gb * seq / t
        l, h = 80, 8192
        mfu = tokens * (6 * float(r["model_parameters"]) + 12 * l * h * seq) / (64 * 989.4e12)
        checks += 3
        check(r["model"] == "llama3-70b" and seq == 8192, f"model column holds the name: {r['model']}")
        check(abs(float(r["tokens_per_s"]) / tokens - 1) < 1e-9, f"tokens_per_s = B s / t: {r['tokens_per_s']}")
        check(abs(float(r["mfu"]) / mfu - 1) < 1e-9, f"mfu = tokens/s (6N + 12 l h s) / (GPUs peak): {r['mfu']} vs {mfu}")

# Llama-3-8B at 131,072 tokens on 8 H100s with ZeRO 3: cp 1 x dp 8 is oom, cp 8 x dp 1 runs, and the
# ring's K/V steps cross the NVLink switch.
path = experiment("l8cp", """name: l8cp
model: llama3-8b
cluster: dgx-h100
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1, dtype: bf16, optimizer: adam, recompute: full, seq: 131072}
parallelism: {schedule: 1f1b, pp: 1, dp: 8, cp: 1, zero: 3}
sweep:
  zip:
    parallelism.dp: [8, 1]
    parallelism.cp: [1, 8]
""")
rc, rows, err = simulate(path)
checks += 1
check(rc == 0 and len(rows) == 2, f"l8cp runs: {err}")
if len(rows) == 2:
    checks += 3
    check(rows[0]["status"] == "oom", f"cp 1 x dp 8 at 128k tokens is oom: {rows[0]['status']} {rows[0]['message']}")
    check(rows[1]["status"] == "ok" and rows[1]["cp"] == "8" and rows[1]["gpus"] == "8",
          f"cp 8 x dp 1 runs: {rows[1]['status']} {rows[1]['message']}")
    check(rows[1]["seq"] == "131072" and float(rows[1]["comm_bytes_per_gpu"]) > 0, "training.seq sets the sequence")
    # Timeline: the ring steps and the ZeRO-3 gathers are on their tracks.
    trace_dir = os.path.join(tmp, "trace")
    rc, _, err = run(binary, "run", path, "-o", os.path.join(tmp, "t.csv"), "--quiet", "--trace-dir", trace_dir,
                     "--set", "sweep.zip={parallelism.dp: [2], parallelism.cp: [4]}", "--set", "training.seq=16384")
    names = open(os.path.join(trace_dir, "l8cp_0.json")).read() if rc == 0 else ""
    checks += 2
    check("cp kv s0 mb0 step1" in names and "cp dkv" in names, f"ring steps on the timeline: {err}")
    check("zero param all_gather" in names and "zero grad reduce_scatter" in names, "ZeRO gathers and scatters shown")

# training.seq sweeps like any key: the attention term grows with s, so time per token does too.
path = experiment("seq", """name: seq
model: llama3-8b
cluster: dgx-h100
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1, recompute: full}
parallelism: {pp: 1, dp: 8, zero: 1}
sweep:
  training.seq: [2048, 8192]
""")
rc, rows, err = simulate(path)
checks += 1
check(rc == 0 and [r["seq"] for r in rows] == ["2048", "8192"] and all(r["status"] == "ok" for r in rows),
      f"training.seq sweeps: {err} {[r.get('message') for r in rows]}")
if len(rows) == 2:
    checks += 1
    check(float(rows[1]["compute_time_s"]) / 8192 > float(rows[0]["compute_time_s"]) / 2048,
          "longer sequences cost more compute per token (attention)")

# Bad input: file:line: key, exit 1 from validate.
cases = [
    ("kv_heads", "model: {name: t, llama: {layers: 2, hidden: 768, heads: 12, kv_heads: 5, ffn_hidden: 2048, seq: 1024, vocab: 1000}}\n"
                 "training: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 8}\n", ":4: model.llama.kv_heads: kv_heads = 5 does not divide heads = 12"),
    ("tp_kv", "model: {name: t, llama: {layers: 2, hidden: 768, heads: 12, kv_heads: 6, ffn_hidden: 2048, seq: 1024, vocab: 1000}}\n"
              "training: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 2, tp: 4}\n", ":6: parallelism.tp: tp = 4 neither divides the 6 K/V heads"),
    ("seq_cp", "model: llama3-8b\ntraining: {global_batch: 8, micro_batch: 1, seq: 1000}\nparallelism: {cp: 8}\n",
     ":5: training.seq: the sequence of 1000 tokens is not divisible by 2 x cp = 16"),
    ("zero", "model: llama3-8b\ntraining: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 8, zero: 4}\n",
     ":6: parallelism.zero: '4' is out of range [0, 3]"),
    ("cnn_seq", "model: resnet50\ntraining: {global_batch: 8, micro_batch: 1, seq: 128}\nparallelism: {dp: 8}\n",
     ":5: training.seq: model 'resnet50' has no sequence length to set"),
    ("zero_group", "model: llama3-8b\ntraining: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 8, zero: 1, zero_group: 3}\n",
     ":6: parallelism.zero_group: zero_group = 3 does not divide dp x cp = 8"),
    ("zero_group_1", "model: llama3-8b\ntraining: {global_batch: 8, micro_batch: 1}\nparallelism: {dp: 8, zero: 3, zero_group: 1}\n",
     ":6: parallelism.zero_group: zero_group = 1 shards nothing"),
]
for name, body, expected in cases:
    path = experiment(name, "name: bad\ncluster: dgx-h100\ncalibration: h100-sxm\n" + body)
    rc, out, err = run(binary, "validate", path)
    checks += 1
    check(rc == 1 and os.path.basename(path) + expected in err, f"{name}: rc {rc}: {err}")

# Megatron replicates K/V heads when tp exceeds them, and the row says so.
path = experiment("replicated", """name: replicated
model: {name: t, llama: {layers: 2, hidden: 1024, heads: 16, kv_heads: 2, ffn_hidden: 2048, seq: 1024, vocab: 1000}}
cluster: dgx-h100
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1}
parallelism: {dp: 1, tp: 8}
""")
rc, rows, err = simulate(path)
checks += 1
check(rc == 0 and rows and rows[0]["status"] == "ok" and "K/V heads replicated" in rows[0]["message"],
      f"replicated K/V heads are said: {err} {rows[0]['message'] if rows else ''}")

# Context parallelism with a pipeline: each cp rank sends its s/cp tokens of the residual stream to the
# next stage (4,096 tokens x 1,024 features x 2 bytes / cp 2 = 4 MiB per micro-batch of 1).
path = experiment("cp_pp", """name: cp_pp
model: {name: t, llama: {layers: 4, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 2048, seq: 4096, vocab: 1000}}
cluster: {use: dgx-h100, gpus: 4}
calibration: h100-sxm
training: {global_batch: 4, micro_batch: 1}
parallelism: {schedule: 1f1b, pp: 2, dp: 1, cp: 2}
""")
trace_dir = os.path.join(tmp, "cp_pp_trace")
rc, _, err = run(binary, "run", path, "-o", os.path.join(tmp, "cp_pp.csv"), "--quiet", "--trace-dir", trace_dir)
import json
events = json.load(open(os.path.join(trace_dir, "cp_pp_0.json")))["traceEvents"] if rc == 0 else []
sends = {float(e["args"]["bytes"]) for e in events if e.get("name", "").startswith("act s0->s1")}
checks += 1
check(rc == 0 and sends == {4096 * 1024 * 2 / 2}, f"a cp rank sends its s/cp tokens down the pipeline: {sends} {err}")

# BERT takes the run's attention kernel too (bidirectional: the whole square).
path = experiment("bert", """name: bert
model: bert-large
cluster: dgx-h100
calibration: h100-sxm
training: {global_batch: 8, micro_batch: 1, attention: flash}
parallelism: {dp: 8}
""")
rc, rows, err = simulate(path)
checks += 1
check(rc == 0 and rows and rows[0]["attention"] == "flash" and rows[0]["status"] == "ok", f"bert with flash: {err}")

finish("cli_llama", checks)
