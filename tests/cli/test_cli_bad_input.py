"""The bad-input catalogue: each bad input gets its exact exit code (1 bad input, 2 usage), a
message naming the place of the error (file:line: key, or file:line for a trace), and nothing
written. One table row per case; every case runs in a fresh folder with relative paths, so the
expected message is exact."""
import glob
import os
import re
import shutil
import sys
import tempfile

from common import FIXTURES, ROOT, check, finish, read_csv, run, workdir

binary = sys.argv[1]
checks = 0

GOOD = """name: t
model: gpt2-small
cluster: node4.yaml
calibration: h100-sxm
training: {global_batch: 16, micro_batch: 2, dtype: bf16}
parallelism: {schedule: gpipe, pp: 2, dp: 2}
"""
NODE4 = open(os.path.join(FIXTURES, "node4.yaml")).read()


def inline_cluster(nodes, gpus, extra=""):
    return (f"cluster: {{name: c, nodes: {nodes}, gpus_per_node: {gpus}, gpu: {{memory: 80GiB}}, "
            f"intra_node: {{bandwidth: 100GBps}}, nic: {{bandwidth: 100GBps}}, fabric: {{latency: 1us}}{extra}}}")


def exp(old=None, new=None, append=""):
    """GOOD with one replacement and/or lines appended."""
    text = GOOD if old is None else GOOD.replace(old, new)
    assert old is None or text != GOOD, old
    return text + append


RUN = ["run", "exp.yaml", "-o", "out.csv"]
IMPORT = ["calibrate", "import", "trace.json", "-o", "out.jsonl"]
FIT = ["calibrate", "fit", "records.jsonl", "--base", "h100-sxm", "-o", "out.yaml"]
KERNEL = '{"type":"kernel","name":"k","duration_s":1e-05,"op":"gemm","flop":1e9,"dtype":"bf16"}\n'

# (label, argv, {file: text}, exit code, substrings of stderr). A text of None makes a directory.
CASES = [
    # --- syntax errors
    ("malformed flow mapping", RUN, {"exp.yaml": "name: t\ntraining: {global_batch: 16\n"}, 1,
     ["exp.yaml:3: YAML syntax error"]),
    ("tab in indentation", RUN, {"exp.yaml": exp("model: gpt2-small", "model:\tgpt2-small\n\t x: 1")}, 1,
     ["exp.yaml:3: YAML syntax error: illegal tab"]),
    ("duplicate key", RUN, {"exp.yaml": exp(append="name: u\n")}, 1, ["exp.yaml:7: name: duplicate key"]),
    ("binary garbage", RUN, {"exp.yaml": "\x00\x01\x02 {[:\n"}, 1, ["exp.yaml:1:"]),
    ("empty experiment file", RUN, {"exp.yaml": ""}, 1, ["exp.yaml:1: an experiment file must be a mapping"]),
    ("a list instead of a mapping", RUN, {"exp.yaml": "- 1\n- 2\n"}, 1, ["exp.yaml:1: an experiment file must be a mapping"]),
    ("a sweep key given twice", RUN,
     {"exp.yaml": exp(append="sweep:\n  zip: {parallelism.pp: [1, 2]}\n  zip: {parallelism.dp: [1, 2]}\n")}, 1,
     ["exp.yaml:9: sweep.zip: duplicate key"]),
    ("bad where expression", RUN, {"exp.yaml": exp(append="where: pp ** 2\n")}, 1,
     ["exp.yaml:7: where: at character 5: unexpected '*'"]),
    # --- unknown keys
    ("unknown top-level key", RUN, {"exp.yaml": exp(append="trainig: {}\n")}, 1, ["exp.yaml:7: trainig: unknown key (did you mean 'training'?)"]),
    ("unknown nested key", RUN, {"exp.yaml": exp("dp: 2}", "dp: 2, ppp: 1}")}, 1,
     ["exp.yaml:6: parallelism.ppp: unknown key (did you mean 'pp'?)"]),
    ("unknown swept key", RUN, {"exp.yaml": exp(append="sweep: {parallelism.dq: [1]}\n")}, 1,
     ["exp.yaml:7: parallelism.dq: unknown key"]),
    # --- strict units: a size, time, bandwidth or rate without a unit is refused with a guess
    ("bandwidth without a unit", RUN, {"exp.yaml": exp("node4.yaml", "c.yaml"),
                                       "c.yaml": NODE4.replace("bandwidth: 100GBps", "bandwidth: 400")}, 1,
     ["c.yaml:6: intra_node.bandwidth: '400' has no unit: a bandwidth needs one (did you mean 400Gbps (bits per "
      "second) or 400GBps (bytes per second)?)"]),
    ("latency without a unit", RUN, {"exp.yaml": exp("node4.yaml", "c.yaml"),
                                     "c.yaml": NODE4.replace("latency: 1us", "latency: 3")}, 1,
     ["c.yaml:6: intra_node.latency: '3' has no unit: a time needs one (did you mean 3us or 3ms?)"]),
    ("memory without a unit", RUN, {"exp.yaml": exp("node4.yaml", "c.yaml"),
                                    "c.yaml": NODE4.replace("memory: 80GiB", "memory: 80")}, 1,
     ["c.yaml:5: gpu.memory: '80' has no unit: a size in bytes needs one (did you mean 80GiB or 80MiB?)"]),
    ("unknown key in a cluster file", RUN, {"exp.yaml": exp("node4.yaml", "c.yaml"), "c.yaml": NODE4 + "gpus_per_nod: 3\n"},
     1, ["c.yaml:7: gpus_per_nod: unknown key"]),
    ("unknown key and name in a model file", RUN,
     {"exp.yaml": exp("gpt2-small", "m.yaml"), "m.yaml": open(os.path.join(FIXTURES, "bad_model.yaml")).read()}, 1,
     ["m.yaml:4: layers[0].type: unknown value 'convolution'", "m.yaml:5: layers[1].widht: unknown key"]),
    ("unknown parameter in a profile", RUN,
     {"exp.yaml": exp("h100-sxm", "p.yaml"), "p.yaml": open(os.path.join(FIXTURES, "bad_profile.yaml")).read()}, 1,
     ["p.yaml:7: parameters.peak_flops_fp64: unknown key", "p.yaml:6: parameters.compute_efficiency.value"]),
    ("unknown --set key", RUN + ["--set", "training.foo=1"], {"exp.yaml": GOOD}, 1,
     ["--set training.foo=1: training.foo: unknown key"]),
    ("unknown limit", RUN, {"exp.yaml": exp(append="limits: {max_flows: 3}\n")}, 1, ["exp.yaml:7: limits.max_flows: unknown key"]),
    # --- wrong types
    ("text for an integer", RUN, {"exp.yaml": exp("micro_batch: 2", "micro_batch: four")}, 1,
     ["exp.yaml:5: training.micro_batch: 'four' is not an integer"]),
    ("fraction for an integer", RUN, {"exp.yaml": exp("pp: 2", "pp: 1.5")}, 1, ["exp.yaml:6: parallelism.pp: '1.5' is not an integer"]),
    ("text for a boolean", RUN, {"exp.yaml": exp("dp: 2}", "dp: 2, tp_aggregate: maybe}")}, 1,
     ["exp.yaml:6: parallelism.tp_aggregate: 'maybe' is not a boolean"]),
    ("list for a mapping", RUN, {"exp.yaml": exp("training: {global_batch: 16, micro_batch: 2, dtype: bf16}", "training: [16, 2]")},
     1, ["exp.yaml:5: training: expected a mapping"]),
    ("unknown enum value", RUN, {"exp.yaml": exp("dtype: bf16", "dtype: fp13")}, 1,
     ["exp.yaml:5: training.dtype: unknown value 'fp13' (did you mean 'fp16'?) (expected one of: fp32, tf32, fp16, bf16, fp8)"]),
    ("unknown unit", RUN, {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(1, 4).replace("100GBps}, nic", "10 furlongs}, nic"))},
     1, ["exp.yaml:3: cluster.intra_node.bandwidth: unknown unit 'furlongs'"]),
    ("not-a-number quantity", RUN, {"exp.yaml": exp("dtype: bf16}", "dtype: bf16, memory_reserve: .nan}")}, 1,
     ["exp.yaml:5: training.memory_reserve: '.nan' is not a number"]),
    ("number past double range", RUN, {"exp.yaml": exp("global_batch: 16", "global_batch: 1e400")}, 1,
     ["exp.yaml:5: training.global_batch: '1e400' is not an integer"]),
    # --- negative or zero sizes
    ("zero global batch", RUN, {"exp.yaml": exp("global_batch: 16", "global_batch: 0")}, 1,
     ["exp.yaml:5: training.global_batch: '0' is out of range"]),
    ("negative micro-batch", RUN, {"exp.yaml": exp("micro_batch: 2", "micro_batch: -2")}, 1,
     ["exp.yaml:5: training.micro_batch: '-2' is out of range [1, 1000000]"]),
    ("negative memory reserve", RUN, {"exp.yaml": exp("dtype: bf16}", "dtype: bf16, memory_reserve: -1GiB}")}, 1,
     ["exp.yaml:5: training.memory_reserve: '-1GiB' must not be negative"]),
    ("unknown memory check", RUN, {"exp.yaml": exp("dtype: bf16}", "dtype: bf16, memory_check: maybe}")}, 1,
     ["exp.yaml:5: training.memory_check: unknown value 'maybe'", "(expected one of: refuse, warn)"]),
    ("unknown gradient dtype", RUN, {"exp.yaml": exp("dtype: bf16}", "dtype: bf16, grad_dtype: fp13}")}, 1,
     ["exp.yaml:5: training.grad_dtype: unknown value 'fp13'"]),
    ("zero bandwidth", RUN, {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(1, 4).replace("100GBps}, nic", "0GBps}, nic"))},
     1, ["exp.yaml:3: cluster.intra_node.bandwidth: '0GBps' must be greater than 0"]),
    ("zero GPU memory", RUN, {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(1, 4).replace("80GiB", "0GiB"))}, 1,
     ["exp.yaml:3: cluster.gpu.memory: '0GiB' must be greater than 0"]),
    ("zero max_activities", RUN, {"exp.yaml": exp(append="limits: {max_activities: 0}\n")}, 1,
     ["exp.yaml:7: limits.max_activities: '0' must be greater than 0"]),
    # --- absurd values
    ("10^9 GPUs", RUN, {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(1000000000, 1))}, 1,
     ["exp.yaml:3: cluster.nodes: '1000000000' is out of range [1, 131072]"]),
    ("10^6-way data parallelism: over the activity limit", RUN,
     {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(16384, 64)).replace("pp: 2, dp: 2", "pp: 1, dp: 1048576, dp_collective: ring")
      .replace("global_batch: 16, micro_batch: 2", "global_batch: 1048576, micro_batch: 1")}, 1,
     # folded (docs/scale.md): the 2.2e12 messages of the rings over 16,384 nodes of 64 replicas each,
     # the nodes folded into one
     ["exp.yaml:6: parallelism.dp: this point would need about 1.34e+08 SimGrid activities", "over limits.max_activities = 1e+08"]),
    ("10^9 micro-batches: over the activity limit", RUN,
     {"exp.yaml": exp("global_batch: 16, micro_batch: 2", "global_batch: 1000000000, micro_batch: 1").replace("pp: 2, dp: 2", "pp: 4, dp: 1")
      .replace("gpipe", "1f1b")}, 1,
     ["exp.yaml:5: training.global_batch: this point would need about", "1000000000 micro-batches x pp 4"]),
    ("10^6 micro-batches under a lower limit", RUN,
     {"exp.yaml": exp("global_batch: 16, micro_batch: 2", "global_batch: 1000000, micro_batch: 1").replace("pp: 2, dp: 2", "pp: 4, dp: 1")
      + "limits: {max_activities: 1e6}\n"}, 1,
     ["exp.yaml:5: training.global_batch: this point would need about 1.4e+07 SimGrid activities", "limits.max_activities = 1e+06"]),
    ("over the memory limit", RUN, {"exp.yaml": exp(append="limits: {max_memory: 1MiB}\n")}, 1,
     ["exp.yaml:5: training.global_batch: simulating this point would take about", "over limits.max_memory = 1.00 MiB"]),
    ("absurd micro-batch size", RUN, {"exp.yaml": exp("micro_batch: 2", "micro_batch: 10000000")}, 1,
     ["exp.yaml:5: training.micro_batch: '10000000' is out of range"]),
    ("absurd layer repeat", RUN,
     {"exp.yaml": exp("gpt2-small", "{name: m, input: {features: 16}, layers: [{name: l, type: linear, out: 16, repeat: 100000000}]}")},
     1, ["exp.yaml:2: model.layers[0].repeat: '100000000' is out of range [1, 100000]"]),
    # --- contradictory parallelism
    ("pp x dp does not match the GPUs", RUN, {"exp.yaml": exp("dp: 2}", "dp: 3}")}, 1,
     ["exp.yaml:6: parallelism.pp: pp x dp x tp = 2 x 3 x 1 = 6 does not match the 4 GPUs"]),
    ("global batch not divisible", RUN, {"exp.yaml": exp("global_batch: 16", "global_batch: 10")}, 1,
     ["exp.yaml:5: training.global_batch: global_batch 10 is not divisible by micro_batch x dp = 2 x 2 = 4"]),
    ("tp does not divide the heads", RUN,
     {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(1, 5)).replace("pp: 2, dp: 2", "pp: 1, dp: 1, tp: 5")
      .replace("global_batch: 16", "global_batch: 2")}, 1,
     ["exp.yaml:6: parallelism.tp: tp = 5 does not divide the 12 attention heads"]),
    ("tp_comm_overlap without Transformer Engine", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 1, tp: 2, sequence_parallel: true, tp_comm_overlap: true}")}, 1,
     ["exp.yaml:6: parallelism.tp_comm_overlap: tp_comm_overlap is Transformer Engine's userbuffers: it needs "
      "framework megatron, not ideal"]),
    ("tp_comm_overlap under Megatron-LM 2021", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 1, tp: 2, sequence_parallel: true, tp_comm_overlap: true}")
      .replace("dtype: bf16}", "dtype: bf16, framework: megatron-2021}")}, 1,
     ["exp.yaml:6: parallelism.tp_comm_overlap: tp_comm_overlap: Megatron-LM 2021 (framework megatron-2021) had no userbuffers"]),
    ("tp_comm_overlap without sequence parallelism", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 1, tp: 2, tp_comm_overlap: true}").replace("dtype: bf16}", "dtype: bf16, framework: megatron}")}, 1,
     ["exp.yaml:6: parallelism.tp_comm_overlap: tp_comm_overlap overlaps sequence parallelism's all-gathers and reduce-scatters: "
      "it needs sequence_parallel: true"]),
    ("tp_backward_overlap outside Megatron", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 1, tp: 2, tp_backward_overlap: true}")
      .replace("dtype: bf16}", "dtype: bf16, framework: pytorch}")}, 1,
     ["exp.yaml:6: parallelism.tp_backward_overlap: tp_backward_overlap is Megatron's asynchronous tensor-parallel "
      "backward: it needs framework megatron or megatron-2021, not pytorch"]),
    ("overlap_param_gather without the distributed optimizer", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 2, dp_bucket: 25MiB, overlap_param_gather: true}")}, 1,
     ["exp.yaml:6: parallelism.overlap_param_gather: overlap_param_gather moves the distributed optimizer's parameter "
      "gather into the forward: it needs zero 1 or 2 (zero 0 gathers nothing)"]),
    ("overlap_param_gather without gradient buckets", RUN,
     {"exp.yaml": exp("dp: 2}", "dp: 2, zero: 1, overlap_param_gather: true}")}, 1,
     ["exp.yaml:6: parallelism.overlap_param_gather: overlap_param_gather gathers in the gradient buckets "
      "(Megatron asserts --overlap-grad-reduce): it needs dp_bucket > 0"]),
    ("parameter servers with a pipeline", RUN, {"exp.yaml": exp("dp: 2}", "dp: 2, ps: {servers: 1}}")}, 1,
     ["exp.yaml:6: parallelism.ps: parameter servers are simulated for pure data parallelism"]),
    ("virtual stages over one stage", RUN,
     {"exp.yaml": exp("schedule: gpipe, pp: 2, dp: 2}", "schedule: interleaved, pp: 1, dp: 4, virtual_stages: 2}")}, 1,
     ["exp.yaml:6: parallelism.virtual_stages: virtual_stages = 2 interleaves model chunks over pipeline stages, "
      "and pp = 1 has one"]),
    ("virtual stages that do not divide the layers", RUN,
     {"exp.yaml": exp("schedule: gpipe, pp: 2, dp: 2}", "schedule: interleaved, pp: 2, dp: 2, virtual_stages: 4}")}, 1,
     ["exp.yaml:6: parallelism.virtual_stages: pp x virtual_stages = 8 model chunks divide neither the 12 layers "
      "of model 'gpt2-small' nor 14 (with the embedding and the loss): Megatron-Core splits them evenly; choose "
      "virtual_stages from 2, 3, 6, 7 (at pp 2)"]),
    ("virtual stages without interleaving", RUN, {"exp.yaml": exp("dp: 2}", "dp: 2, virtual_stages: 2}")}, 1,
     ["exp.yaml:6: parallelism.virtual_stages: virtual_stages > 1 needs schedule: interleaved"]),
    ("balance of the wrong length", RUN, {"exp.yaml": exp("dp: 2}", "dp: 2, partition: explicit, balance: [1, 2, 3]}")}, 1,
     ["exp.yaml:6: parallelism.balance: balance lists 3 stages but pp = 2"]),
    ("more stages than blocks", RUN,
     {"exp.yaml": exp("cluster: node4.yaml", inline_cluster(8, 8)).replace("pp: 2, dp: 2", "pp: 64, dp: 1")
      .replace("global_batch: 16", "global_batch: 2").replace("gpt2-small", "mlp-toy")}, 1,
     ["exp.yaml:6: parallelism.pp: pp = 64 stages for a model of only"]),
    ("every sweep point contradictory", RUN, {"exp.yaml": exp(append="sweep: {parallelism.dp: [3, 5]}\n")}, 1,
     ["exp.yaml:7: parallelism.dp:", "does not match the 4 GPUs"]),
    ("zipped lists of unequal length", RUN,
     {"exp.yaml": exp(append="sweep: {zip: {parallelism.dp: [1, 2], training.global_batch: [8]}}\n")}, 1,
     ["exp.yaml:7: sweep.zip.training.global_batch: has 1 values"]),
    # --- missing and unreadable files
    ("missing experiment", ["run", "nowhere.yaml", "-o", "out.csv"], {}, 1, ["nowhere.yaml: cannot open file"]),
    ("missing cluster file", RUN, {"exp.yaml": exp("node4.yaml", "nowhere.yaml")}, 1,
     ["exp.yaml:3: cluster: 'nowhere.yaml'", "cannot open file: No such file or directory"]),
    ("missing model file", RUN, {"exp.yaml": exp("gpt2-small", "./m.yaml")}, 1,
     ["exp.yaml:2: model: './m.yaml'", "cannot open file: No such file or directory"]),
    ("model file is a directory", RUN, {"exp.yaml": exp("gpt2-small", "./m.yaml"), "m.yaml": None}, 1,
     ["exp.yaml:2: model: './m.yaml'", "it is a directory"]),
    ("missing calibration profile", RUN, {"exp.yaml": exp("h100-sxm", "./p.yaml")}, 1,
     ["exp.yaml:4: calibration: './p.yaml'", "cannot open file"]),
    ("experiment is a directory", RUN, {"exp.yaml": None}, 1, ["exp.yaml: cannot read file: it is a directory"]),
    ("missing trace", IMPORT, {}, 1, ["trace.json: cannot open (No such file or directory)"]),
    ("trace is a directory", IMPORT, {"trace.json": None}, 1, ["trace.json: cannot read"]),
    ("missing records", FIT, {}, 1, ["records.jsonl: cannot open (No such file or directory)"]),
    # --- empty and broken traces
    ("empty trace file", IMPORT, {"trace.json": ""}, 1, ["trace.json: the file is empty"]),
    ("trace without GPU events", IMPORT, {"trace.json": '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm"}]}'},
     1, ["trace.json: traceEvents: no GPU kernel and no NCCL collective"]),
    ("truncated trace", IMPORT, {"trace.json": '{"traceEvents": [\n{"ph": "X", "cat": "kernel"'}, 1,
     ["trace.json:2: byte 45: expected '}', the text ends (truncated?)"]),
    ("JSON that is no trace", IMPORT, {"trace.json": '{"hello": 1}'}, 1,
     ["trace.json: neither a Kineto trace (traceEvents) nor nccl-tests output (results)"]),
    ("nccl-tests text without rows", IMPORT, {"trace.json": "# nccl-tests version 2.13.8\n# nothing ran\n"}, 1,
     ["trace.json: no nccl-tests result rows"]),
    ("empty records file", FIT, {"records.jsonl": ""}, 1, ["records.jsonl: holds no kernel, collective or host record"]),
    ("record of the wrong type", FIT, {"records.jsonl": KERNEL + '{"type":"kernel","name":"k","duration_s":"fast"}\n'}, 1,
     ["records.jsonl:2: duration_s: must be a number"]),
    ("record with an out-of-range integer", FIT, {"records.jsonl": KERNEL + '{"type":"kernel","name":"k","duration_s":1,"device":1e17}\n'},
     1, ["records.jsonl:2: device: must be an integer"]),
    ("records with nothing to fit", FIT, {"records.jsonl": '{"type":"kernel","name":"k","duration_s":1e-05}\n'}, 1,
     ["nothing to fit"]),
    # --- usage errors
    ("unknown option", RUN + ["--frobnicate"], {"exp.yaml": GOOD}, 2, ["unknown option for run: --frobnicate"]),
    ("bad -j", RUN + ["-j", "zero"], {"exp.yaml": GOOD}, 2, ["--jobs expects an integer"]),
    ("malformed --set", RUN + ["--set", "training.micro_batch"], {"exp.yaml": GOOD}, 1, ["expected --set dotted.key=value"]),
    ("bad --point-timeout", RUN + ["--point-timeout", "-3"], {"exp.yaml": GOOD}, 2,
     ["--point-timeout needs a positive number of seconds"]),
]

outputs = ("out.csv", "out.jsonl", "out.yaml")
for label, argv, files, code, needles in CASES:
    tmp = tempfile.mkdtemp(prefix="ddlsim_bad_")
    shutil.copy(os.path.join(FIXTURES, "node4.yaml"), tmp)
    for name, text in files.items():
        if text is None:
            os.mkdir(os.path.join(tmp, name))
        else:
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
    rc, out, err = run(binary, *argv, cwd=tmp)
    checks += 3
    check(rc == code, f"{label}: exit {code}, got {rc} ({err.strip()})")
    check(all(n in err for n in needles), f"{label}: message {needles!r} in {err!r}")
    check(not any(os.path.exists(os.path.join(tmp, o)) for o in outputs), f"{label}: nothing written")
    shutil.rmtree(tmp)
checks += 1
check(len(CASES) >= 40, f"the catalogue holds {len(CASES)} cases")
# The manual states the catalogue's size (docs/running.md, docs/testing.md): it must be this file's.
manual = "".join(open(p).read() for p in [os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md")))
stated = re.findall(r"catalogue(?: of|:) (\d+) bad inputs", manual)
checks += 1
check(len(stated) >= 2 and all(int(n) == len(CASES) for n in stated),
      f"the manual says {stated} bad inputs, the catalogue has {len(CASES)}")

tmp = workdir()
# validate reports every problem of a file at once.
with open(os.path.join(tmp, "two.yaml"), "w") as f:
    f.write(GOOD.replace("dtype: bf16", "dtype: fp13") + "extra: 1\n")
rc, out, err = run(binary, "validate", "two.yaml", cwd=tmp)
checks += 1
check(rc == 1 and "two.yaml:5: training.dtype" in err and "two.yaml:7: extra: unknown key" in err, f"validate lists both: {err}")

# A sweep with some impossible points: those become `invalid` rows and the others still run; a
# point over the resource limits is one of them.
with open(os.path.join(tmp, "mixed.yaml"), "w") as f:
    f.write(GOOD + "sweep: {parallelism.dp: [1, 2, 3], training.global_batch: [16, 4000000]}\nlimits: {max_activities: 1e6}\n")
rc, out, err = run(binary, "validate", "mixed.yaml", cwd=tmp)
checks += 1
check(rc == 0 and "6 point(s), 1 valid (0 of them out of memory), 5 invalid" in out, f"validate counts points: {out} {err}")
# validate checks memory as run would: a 175B model on one GPU is no clean file (exit 1, each point
# named with its stage and largest term) unless --allow-oom.
with open(os.path.join(tmp, "big.yaml"), "w") as f:
    f.write("name: big\nmodel: gpt3-175b\ncluster: h100-1gpu\ncalibration: h100-sxm\n"
            "training: {global_batch: 8, micro_batch: 1}\nparallelism: {pp: 1, dp: 1}\n"
            "sweep: {training.micro_batch: [1, 2]}\n")
rc, out, err = run(binary, "validate", "big.yaml", cwd=tmp)
checks += 2
check(rc == 1 and "2 point(s), 2 valid (2 of them out of memory), 0 invalid" in out, f"validate fails on oom: {rc} {out}")
check(err.count("oom point") == 2 and "(largest: " in err and "optimizer 1.91 TiB" in err and "capacity 80.00 GiB" in err,
      f"each oom point with its largest term: {err}")
rc, out, err = run(binary, "validate", "big.yaml", "--allow-oom", cwd=tmp)
checks += 1
check(rc == 0 and err.count("oom point") == 2, f"--allow-oom reports and exits 0: {rc} {err}")
rc, out, err = run(binary, "run", "mixed.yaml", "-o", "mixed.csv", cwd=tmp)
rows = read_csv(os.path.join(tmp, "mixed.csv")) if rc == 0 else []
checks += 2
check([r["status"] for r in rows] == ["invalid", "invalid", "ok", "invalid", "invalid", "invalid"],
      f"mixed sweep rows: {rows and [r['status'] for r in rows]}")
check(len(rows) == 6 and "mixed.yaml:7: training.global_batch: this point would need about" in rows[3]["message"],
      f"the guard's row names the swept key: {rows and rows[3]['message']}")

# Usage errors exit 2.
for args in (["run"], ["frobnicate"], [], ["model"], ["run", "a.yaml", "b.yaml"]):
    rc, _, err = run(binary, *args)
    checks += 1
    check(rc == 2 and re.search(r"see 'ddlsim( [a-z]+)* --help'", err), f"usage error for {args}: rc={rc} {err}")
for args in (["--help"], ["--version"]):
    rc, out, _ = run(binary, *args)
    checks += 1
    check(rc == 0 and "ddlsim" in out, f"{args} exits 0")
rc, out, _ = run(binary, "--version")
checks += 1
check("SimGrid 3.32" in out, f"--version names SimGrid: {out}")
# The commit is written at build time (cmake/GitHash.cmake): a checkout's HEAD, not the one CMake was
# configured at (a build after a pull or a merge used to report the old one).
git = shutil.which("git")
head = None
if git and os.path.exists(os.path.join(ROOT, ".git")):
    import subprocess
    p = subprocess.run([git, "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    head = p.stdout.strip() if p.returncode == 0 else None
if head:
    checks += 1
    check(f"(git {head}," in out, f"--version names the commit built ({head}): {out}")

finish("cli_bad_input", checks)
