"""`ddlsim export torchtitan` (issue 31, item 7): a simulated point as torchtitan's TOML job
configuration. Every key it writes must be a field of torchtitan's JobConfig, and every Literal
field one of its values (tests/fixtures/torchtitan-job-config-keys.txt, read from job_config.py);
the pipeline's model chunks are the ones ddlsim simulated (an explicit balance comes back block for
block; Meta's 405B split, 126 layers plus the embedding and the output over 16 x 8 chunks, one
block each); what torchtitan cannot run is refused at its key."""
import os
import sys
import tomllib

from common import FIXTURES, ROOT, check, finish, run, workdir, write_experiment

binary = sys.argv[1]
checks = 0
tmp = workdir()
KNOWN = {}
with open(os.path.join(FIXTURES, "torchtitan-job-config-keys.txt")) as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            key, _, values = line.strip().partition(":")
            KNOWN[key.strip()] = set(values.strip().split("|")) if values.strip() else None
VALIDATION = os.path.join(ROOT, "experiments", "validation.yaml")


def export(*args):
    """(rc, stdout, stderr, the parsed TOML or {})."""
    rc, out, err = run(binary, "export", "torchtitan", *args)
    try:
        return rc, out, err, tomllib.loads(out) if rc == 0 else {}
    except tomllib.TOMLDecodeError as e:
        return rc, out, err + f"\nnot TOML: {e}", {}


def expect(job, expected, label):
    global checks
    for dotted, value in expected.items():
        table, key = dotted.split(".", 1)
        checks += 1
        got = job.get(table, {}).get(key)
        check(got == value, f"{label}: {dotted} = {value!r} (written {got!r})")


def known_keys(job, label):
    """Every table.key is torchtitan's, every Literal value one it accepts."""
    global checks
    for table, entries in job.items():
        for key, value in entries.items():
            checks += 1
            dotted = f"{table}.{key}"
            check(dotted in KNOWN, f"{label}: {dotted} is not a field of torchtitan's JobConfig")
            if KNOWN.get(dotted):
                check(value in KNOWN[dotted], f"{label}: {dotted} = {value!r} is not one of {sorted(KNOWN[dotted])}")


def blocks(layers):
    return ["tok_embeddings"] + [f"layers.{i}" for i in range(layers)] + ["norm", "output"]


# NeMo 24.07's Llama 3 70B FP8 run (point 12) with ZeRO 2: TP4 PP4 CP2 VP5, global batch 128.
rc, out, err, job = export(VALIDATION, "--point", "12", "--set", "parallelism.zero=2")
checks += 1
check(rc == 0 and job, f"export torchtitan of a published run: {rc} {err}")
known_keys(job, "Llama 3 70B")
expect(job, {"model.name": "llama3", "model.flavor": "70B", "model.converters": ["float8"],
             "parallelism.tensor_parallel_degree": 4, "parallelism.context_parallel_degree": 2,
             "parallelism.context_parallel_rotate_method": "alltoall", "parallelism.pipeline_parallel_degree": 4,
             "parallelism.pipeline_parallel_schedule": "Interleaved1F1B",
             "parallelism.pipeline_parallel_microbatch_size": 1, "parallelism.data_parallel_replicate_degree": 1,
             "parallelism.data_parallel_shard_degree": 2, "parallelism.fsdp_reshard_after_forward": "never",
             "parallelism.enable_async_tensor_parallel": True, "training.compile": True,
             "training.local_batch_size": 64, "training.global_batch_size": 128, "training.seq_len": 8192,
             "training.mixed_precision_param": "bfloat16", "activation_checkpoint.mode": "none",
             "optimizer.name": "AdamW"}, "Llama 3 70B")
parts = job.get("parallelism", {}).get("module_fqns_per_model_part", [])
checks += 1
check(len(parts) == 20 and all(parts) and sum(parts, []) == blocks(80),
      f"4 x 5 chunks covering every module once, in order: {parts}")
checks += 1
check("# simulated with framework megatron" in out and "--nnodes 8 --nproc-per-node 8" in out,
      f"the framework's note and the launch line: {out[:600]}")

# Meta's 405B (point 37): one block per chunk, the embedding and the output alone at the ends.
rc, out, err, job = export(VALIDATION, "--point", "37", "--set", "parallelism.zero=2")
parts = job.get("parallelism", {}).get("module_fqns_per_model_part", [])
checks += 1
check(rc == 0 and parts == [[b] for b in blocks(126)[:-2]] + [["norm", "output"]],
      f"405B: 128 chunks of one block each: {rc} {err} {parts[:3]} ... {parts[-2:]}")
expect(job, {"model.flavor": "405B", "parallelism.pipeline_parallel_degree": 16,
             "parallelism.data_parallel_shard_degree": 64, "training.local_batch_size": 2048 // 64}, "405B")


BASE = ("name: e\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
        "training: {global_batch: 64, micro_batch: 2, dtype: bf16, framework: pytorch}\n")
# An explicit balance comes back block for block: 10 blocks (the embedding and 9 layers), then 24.
balance = write_experiment(tmp, "balance", BASE + "parallelism: {schedule: 1f1b, pp: 2, dp: 4, tp: 2, zero: 3, "
                "sequence_parallel: true, partition: explicit, balance: [10, 24]}\n")
rc, out, err, job = export(balance)
known_keys(job, "balance")
parts = job.get("parallelism", {}).get("module_fqns_per_model_part", [])
checks += 1
check(rc == 0 and parts == [blocks(32)[:10], blocks(32)[10:]],
      f"the explicit balance's chunks: {rc} {err} {parts}")
expect(job, {"model.flavor": "8B", "parallelism.pipeline_parallel_schedule": "1F1B",
             "parallelism.fsdp_reshard_after_forward": "always", "parallelism.data_parallel_shard_degree": 4,
             "parallelism.pipeline_parallel_microbatch_size": 2, "training.local_batch_size": 16,
             "training.compile": False}, "explicit balance")
checks += 1
check(rc == 0 and "# simulated with framework" not in out and "sequence parallelism" not in out,
      f"a PyTorch step with sequence parallelism needs no note: {out[:500]}")
# The same step under torch.compile: torchtitan's compile on, no framework note; CUDA graphs noted.
rc, out, err, job = export(balance, "--set", "training.framework=pytorch-compile")
expect(job, {"training.compile": True}, "pytorch-compile")
checks += 1
check(rc == 0 and "# simulated with framework" not in out and "CUDA graphs" not in out and
      "compiles each transformer block on its own" in out,
      f"pytorch-compile is what torchtitan's compile runs, a graph per block noted: {rc} {err} {out[:500]}")
rc, out, err, job = export(balance, "--set", "training.framework=pytorch-compile", "--set", "training.cuda_graphs=true")
checks += 1
check(rc == 0 and job.get("training", {}).get("compile") is True and "compiles without CUDA graphs" in out,
      f"CUDA graphs: torchtitan does not replay them, the note says so: {rc} {err} {out[:500]}")

# Plain data parallelism is DDP; without a pipeline torchtitan accumulates micro-batches.
ddp = write_experiment(tmp, "ddp", BASE + "parallelism: {dp: 16}\n")
rc, out, err, job = export(ddp)
known_keys(job, "DDP")
expect(job, {"parallelism.data_parallel_replicate_degree": 16, "parallelism.data_parallel_shard_degree": 1,
             "parallelism.pipeline_parallel_degree": 1, "training.local_batch_size": 2,
             "training.global_batch_size": 64}, "DDP")
checks += 1
check(rc == 0 and "module_fqns_per_model_part" not in job.get("parallelism", {}) and "100 MiB buckets" in out
      and "reduces float32 gradients" not in out,
      f"DDP: no chunks, torchtitan's bucket noted; float32 gradients, as simulated (autocast): {rc} {err} {out[:600]}")
rc, out, err, job = export(ddp, "--set", "training.grad_dtype=bf16")
checks += 1
check(rc == 0 and "reduces float32 gradients; the point reduced them in bf16" in out,
      f"DDP with bf16 gradients: torchtitan's float32 noted: {rc} {err} {out[:600]}")

# Checkpointing: selective-op is torchtitan's per-op policy as simulated; Megatron's selective (the
# attention core) exports the same job, saying what differs.
for recompute, noted in (("selective-op", False), ("selective", True)):
    rc, out, err, job = export(ddp, "--set", f"training.recompute={recompute}")
    known_keys(job, recompute)
    expect(job, {"activation_checkpoint.mode": "selective", "activation_checkpoint.selective_ac_option": "op"},
           recompute)
    checks += 1
    check(rc == 0 and ("simulate recompute: selective-op for torchtitan's" in out) == noted,
          f"recompute {recompute}: torchtitan's per-op checkpointing, noted only when the point simulated "
          f"another: {rc} {err} {out[:800]}")

# Hybrid sharding: ZeRO 3 within groups of 4 of the 8 replicas is HSDP, 2 replicated x 4 sharded;
# with cp 2 the shard degree counts whole context-parallel groups (zero_group 4 = 2 shards x cp 2).
for name, par, degrees in (("hsdp", "{dp: 8, tp: 2, zero: 3, zero_group: 4, sequence_parallel: true}", (2, 4)),
                           ("hsdp_cp", "{dp: 4, cp: 2, tp: 2, zero: 3, zero_group: 4, sequence_parallel: true}", (2, 2))):
    rc, out, err, job = export(write_experiment(tmp, name, BASE + f"parallelism: {par}\n"))
    known_keys(job, name)
    expect(job, {"parallelism.data_parallel_replicate_degree": degrees[0],
                 "parallelism.data_parallel_shard_degree": degrees[1],
                 "parallelism.fsdp_reshard_after_forward": "always"}, name)

# FP8 over plain data parallelism: torchao's float8 Linear converter, DDP replicas.
rc, out, err, job = export(write_experiment(tmp, "fp8_ddp", BASE.replace("dtype: bf16", "dtype: fp8")
                                            + "parallelism: {dp: 16}\n"))
known_keys(job, "fp8 DDP")
expect(job, {"model.converters": ["float8"], "float8.recipe_name": "tensorwise",
             "parallelism.data_parallel_replicate_degree": 16, "training.mixed_precision_param": "bfloat16"},
       "fp8 DDP")

# Refused at the key's line, exit 1, nothing on stdout.
for name, text, expected in [
        ("zero1.yaml", BASE + "parallelism:\n  dp: 16\n  zero: 1\n", ":8: parallelism.zero: torchtitan shards with FSDP2"),
        ("tp_ddp.yaml", BASE + "parallelism:\n  dp: 8\n  tp: 2\n", ":8: parallelism.tp: torchtitan replicates (DDP) only"),
        # FSDP over one shard is no FSDP: torchtitan would run this bf16 point in fp32
        ("tp_alone.yaml", BASE.replace("dtype: bf16", "dtype: bf16, global_batch: 4").replace("global_batch: 64, ", "")
         + "parallelism: {schedule: 1f1b, tp: 8, pp: 2, dp: 1, zero: 3}\n", ":5: training.dtype: torchtitan runs tensor or pipeline"),
        ("fp16.yaml", BASE.replace("dtype: bf16", "dtype: fp16") + "parallelism: {dp: 16, zero: 3}\n",
         ":5: training.dtype: torchtitan trains in bfloat16 or float32"),
        ("sgd.yaml", BASE.replace("dtype: bf16", "dtype: bf16, optimizer: sgd") + "parallelism: {dp: 16, zero: 3}\n",
         "training.optimizer: torchtitan's optimizers are Adam and AdamW"),
        ("llama2.yaml", BASE.replace("llama3-8b", "llama2-7b") + "parallelism: {dp: 16, zero: 3}\n",
         ":2: model: model 'llama2-7b' is not one of torchtitan's llama3 flavors"),
        # 8 K/V heads over tp 16; a sequence of 8,196 tokens in 2 x cp = 4 chunks, then over tp 2
        ("tp_kv.yaml", BASE + "parallelism: {tp: 16, dp: 1, zero: 3, sequence_parallel: true}\n",
         ":6: parallelism.tp: torchtitan splits the 8 K/V heads over tensor parallelism: tp 16 must divide them"),
        # a shard group of 2 GPUs cannot hold whole context-parallel groups of 4
        ("shard_cp.yaml", BASE + "parallelism: {dp: 2, cp: 4, tp: 2, zero: 3, zero_group: 2, sequence_parallel: true}\n",
         ":6: parallelism.zero_group: torchtitan shards over whole context-parallel groups: zero_group 2 must be a "
         "multiple of cp 4"),
        ("seq_cp.yaml", BASE.replace("framework: pytorch", "framework: pytorch, seq: 8196")
         + "parallelism: {tp: 2, cp: 2, dp: 4, zero: 3, sequence_parallel: true}\n",
         ":5: training.seq: torchtitan splits each sequence into 2 x cp = 4 chunks and their tokens over tp = 2 "
         "GPUs (sequence parallelism): seq 8196 must be a multiple of 8")]:
    path = write_experiment(tmp, name.removesuffix(".yaml"), text)
    rc, out, err, _ = export(path)
    checks += 1
    check(rc == 1 and out == "" and f"{path}{expected}" in err if expected.startswith(":")
          else rc == 1 and out == "" and expected in err, f"{name} refused at its key: {rc} {out[:200]} {err}")

# Several points and no --point: a usage error.
rc, out, err, _ = export(VALIDATION)
checks += 1
check(rc == 2 and "choose one with --point N" in err and out == "", f"several points need --point: {rc} {err}")

finish("cli_export_torchtitan", checks)
