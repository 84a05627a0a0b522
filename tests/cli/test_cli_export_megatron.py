"""`ddlsim export megatron` (issue 31, item 7): a simulated point as Megatron-LM's launch command.
Every flag it prints must be one of Megatron-LM's (tests/fixtures/megatron-lm-arguments.txt, read
from its arguments.py); the published runs of experiments/validation.yaml come back as their own
configurations (NeMo's Llama 3 70B FP8 on 64 H100s, Meta's 126-layer 405B split over 16 stages with
one layer fewer on the first and the last); what Megatron-LM cannot run is refused at its key."""
import os
import shlex
import sys

from common import FIXTURES, ROOT, check, finish, run, workdir, write_experiment

binary = sys.argv[1]
checks = 0
tmp = workdir()
with open(os.path.join(FIXTURES, "megatron-lm-arguments.txt")) as f:
    megatron_flags = {line.strip() for line in f if line.startswith("--")}
VALIDATION = os.path.join(ROOT, "experiments", "validation.yaml")


def export(*args):
    """(rc, stdout, stderr, {flag: value or ''}, the torchrun words before the script)."""
    rc, out, err = run(binary, "export", "megatron", *args)
    command = " ".join(line for line in out.splitlines() if not line.startswith("#")).replace("\\\n", " ")
    words = shlex.split(command.replace(" \\ ", " "))
    flags, launcher = {}, []
    script = words.index("pretrain_gpt.py") if "pretrain_gpt.py" in words else len(words)
    launcher = words[:script]
    rest = words[script + 1:]
    for i, w in enumerate(rest):
        if w.startswith("--"):
            flags[w] = rest[i + 1] if i + 1 < len(rest) and not rest[i + 1].startswith("--") else ""
    return rc, out, err, flags, launcher


def expect(flags, expected, label):
    global checks
    for flag, value in expected.items():
        checks += 1
        check(flags.get(flag) == value, f"{label}: {flag} {value!r} (printed {flags.get(flag)!r})")


# NeMo 24.07's Llama 3 70B FP8 run (point 12): TP4 PP4 CP2 VP5, global batch 128, micro-batch 1.
rc, out, err, flags, launcher = export(VALIDATION, "--point", "12")
checks += 1
check(rc == 0 and flags, f"export megatron of a published run: {rc} {err}")
expect(flags, {"--tensor-model-parallel-size": "4", "--pipeline-model-parallel-size": "4",
               "--context-parallel-size": "2", "--num-virtual-stages-per-pipeline-rank": "5",
               "--sequence-parallel": "", "--tp-comm-overlap": "", "--use-distributed-optimizer": "",
               "--overlap-grad-reduce": "", "--overlap-param-gather": "", "--grad-reduce-in-bf16": "",
               "--bf16": "", "--fp8-format": "hybrid", "--micro-batch-size": "1", "--global-batch-size": "128",
               "--num-layers": "80", "--hidden-size": "8192", "--ffn-hidden-size": "28672",
               "--num-attention-heads": "64", "--group-query-attention": "", "--num-query-groups": "8",
               "--seq-length": "8192", "--swiglu": "", "--normalization": "RMSNorm",
               "--position-embedding-type": "rope", "--untie-embeddings-and-output-weights": "",
               "--disable-bias-linear": "", "--vocab-size": "128256", "--attention-backend": "flash"}, "NeMo Llama 3 70B")
checks += 1
check(launcher[:5] == ["torchrun", "--nnodes", "8", "--nproc-per-node", "8"], f"64 GPUs as 8 nodes of 8: {launcher}")
# The bucket is 160 MiB of bf16 gradients: Megatron counts it in parameters.
expect(flags, {"--ddp-bucket-size": str(160 * 2**20 // 2)}, "bucket in parameters")
unknown = sorted(f for f in flags if f not in megatron_flags)
checks += 1
check(not unknown, f"every flag is Megatron-LM's (arguments.py): not {unknown}")

# Meta's 405B: 126 layers and the embedding and the loss as one layer each over 16 x 8 chunks
# (Llama 3 paper, 3.3.2); with one chunk per rank, one layer fewer on the first and the last stage.
rc, out, err, flags, _ = export(VALIDATION, "--point", "37")
expect(flags, {"--num-layers": "126", "--pipeline-model-parallel-size": "16",
               "--num-virtual-stages-per-pipeline-rank": "8", "--account-for-embedding-in-pipeline-split": "",
               "--account-for-loss-in-pipeline-split": ""}, "405B interleaved split")
checks += 1
check(not [f for f in flags if f not in megatron_flags] and "--decoder-first-pipeline-num-layers" not in flags,
      f"405B: every flag is Megatron-LM's, one way of splitting: {sorted(flags)}")
rc, out, err, flags, _ = export(VALIDATION, "--point", "37", "--set", "parallelism.schedule=1f1b",
                                "--set", "parallelism.virtual_stages=1")
expect(flags, {"--num-layers": "126", "--pipeline-model-parallel-size": "16",
               "--decoder-first-pipeline-num-layers": "7", "--decoder-last-pipeline-num-layers": "7"}, "405B 1F1B split")

# Megatron-LM 2021 rows (point 22, GPT 39B on 512 A100s): fp16, full recomputation, no sharding, and a
# note that the arguments run today's Megatron-Core.
rc, out, err, flags, _ = export(VALIDATION, "--point", "22")
expect(flags, {"--fp16": "", "--recompute-granularity": "full", "--recompute-method": "uniform",
               "--recompute-num-layers": "1", "--attention-backend": "unfused", "--position-embedding-type": "learned_absolute",
               "--normalization": "LayerNorm"}, "Megatron-LM 2021 row")
checks += 1
check("--use-distributed-optimizer" not in flags and "--swiglu" not in flags and "--disable-bias-linear" not in flags,
      "no sharding, a GeLU MLP with biases")
checks += 1
check("# simulated with framework megatron-2021" in out, f"the framework's note: {out[:300]}")

# Several points and no --point: a usage error.
rc, out, err, _, _ = export(VALIDATION)
checks += 1
check(rc == 2 and "choose one with --point N" in err and out == "", f"several points need --point: {rc} {err}")


BASE = ("name: e\nmodel: llama3-8b\ncluster: dgx-h100x2\ncalibration: h100-sxm\n"
        "training: {global_batch: 64, micro_batch: 1, dtype: bf16}\n")
# Refused at the key's line, exit 1, nothing on stdout.
gpipe = write_experiment(tmp, "gpipe", BASE + "parallelism: {schedule: gpipe, pp: 2, dp: 8, tp: 1}\n")
rc, out, err, _, _ = export(gpipe)
checks += 1
check(rc == 1 and out == "" and f"{gpipe}:6: parallelism.schedule: Megatron-LM pipelines with 1F1B" in err,
      f"GPipe refused at its line: {rc} {err}")
convnet = write_experiment(tmp, "resnet", BASE.replace("llama3-8b", "resnet50") + "parallelism: {dp: 16}\n")
rc, out, err, _, _ = export(convnet)
checks += 1
check(rc == 1 and out == "" and f"{convnet}:2: model: model 'resnet50' is not a decoder" in err,
      f"a convolutional network refused: {rc} {err}")
uneven = write_experiment(tmp, "uneven", BASE + "parallelism: {schedule: interleaved, pp: 2, virtual_stages: 3, dp: 8}\n")
rc, out, err, _, _ = export(uneven)
checks += 1
check(rc == 1 and "parallelism.virtual_stages: pp x virtual_stages = 6 model chunks divide neither the 32 layers" in err,
      f"an uneven interleaved split refused: {rc} {err}")
per_op = write_experiment(tmp, "per_op", BASE.replace("dtype: bf16}", "dtype: bf16, framework: pytorch, "
                                                       "recompute: selective-op}") + "parallelism: {dp: 16}\n")
rc, out, err, _, _ = export(per_op)
checks += 1
check(rc == 1 and out == "" and f"{per_op}:5: training.recompute: Megatron has no per-op checkpointing" in err,
      f"torchtitan's per-op checkpointing refused at its line: {rc} {err}")
# A spec-sheet point (framework ideal) exports with a note; ZeRO 3 as Megatron FSDP.
zero3 = write_experiment(tmp, "zero3", BASE + "parallelism: {schedule: 1f1b, pp: 1, dp: 16, zero: 3}\n")
rc, out, err, flags, _ = export(zero3)
expect(flags, {"--use-megatron-fsdp": "", "--data-parallel-sharding-strategy": "optim_grads_params",
               "--use-distributed-optimizer": "", "--ckpt-format": "fsdp_dtensor",
               "--tensor-model-parallel-size": "1", "--pipeline-model-parallel-size": "1"}, "ZeRO 3")
checks += 1
check(rc == 0 and out.count("# simulated with framework ideal") == 1, f"ideal's note: {out[:300]}")

checks += 1
check(not [f for f in flags if f not in megatron_flags], "ZeRO 3: every flag is Megatron-LM's")
# Userbuffers at tp 1: Megatron would drop sequence parallelism and then refuse --tp-comm-overlap.
tp1 = write_experiment(tmp, "tp1", BASE.replace("dtype: bf16}", "dtype: bf16, framework: megatron}") +
            "parallelism: {schedule: 1f1b, pp: 2, dp: 8, zero: 1, sequence_parallel: true, tp_comm_overlap: true}\n")
rc, out, err, flags, _ = export(tp1)
checks += 1
check(rc == 0 and "--tp-comm-overlap" not in flags and "--sequence-parallel" not in flags,
      f"no userbuffers nor sequence parallelism at tp 1: {rc} {err} {sorted(flags)}")
checks += 1
check("# ddlsim cut the stages by `partition: optimal`" in out, f"the partition's note: {out[:400]}")

# Megatron-Core always overlaps a column layer's backward collectives: a point simulated without it
# exports with a note saying so (and one simulated with it, the default, without).
for overlap in ("false", "true"):
    point = write_experiment(tmp, "backward_" + overlap, BASE.replace("dtype: bf16}", "dtype: bf16, framework: megatron}") +
                             f"parallelism: {{schedule: 1f1b, pp: 1, dp: 4, tp: 4, tp_backward_overlap: {overlap}}}\n")
    rc, out, err, flags, _ = export(point)
    checks += 1
    check(rc == 0 and (out.count("# simulated with tp_backward_overlap: false") == 1) == (overlap == "false"),
          f"tp_backward_overlap {overlap}: {rc} {err} {out[:300]}")

# Pipeline sends (parallelism.overlap_p2p_comm): Megatron-Core overlaps them in the interleaved schedule
# unless told not to, and never in 1F1B. The 405B (interleaved) exports the flag only when simulated
# blocking; its 1F1B twin notes a simulation with overlapped sends that Megatron would not run.
for value, flag in (([], False), (["--set", "parallelism.overlap_p2p_comm=false"], True)):
    rc, out, err, flags, _ = export(VALIDATION, "--point", "37", *value)
    checks += 1
    check(rc == 0 and ("--no-overlap-p2p-communication" in flags) == flag, f"interleaved sends {value}: {rc} {err}")
ONE_F_ONE_B = ["--set", "parallelism.schedule=1f1b", "--set", "parallelism.virtual_stages=1"]
for value, note in (([], False), (["--set", "parallelism.overlap_p2p_comm=true"], True)):
    rc, out, err, flags, _ = export(VALIDATION, "--point", "37", *ONE_F_ONE_B, *value)
    checks += 1
    check(rc == 0 and "--no-overlap-p2p-communication" not in flags and
          ("# simulated with overlap_p2p_comm: true" in out) == note, f"1F1B sends {value}: {rc} {err} {out[:300]}")

finish("cli_export_megatron", checks)
