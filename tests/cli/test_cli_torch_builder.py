"""The torch backend's module builder (sim/backends/torch/build_model.py) against ddlsim's own models.

`ddlsim execute --backend torch --prepare DIR` writes each point's model as ddlsim builds it; the
builder must turn every zoo generator into torch.nn modules with exactly ddlsim's parameter count
(and the published one where the zoo reproduces it: GPT-2 small 124,439,808, ResNet-50 25,557,032),
reject a count that differs, and run a training step of the layer kinds the CPU experiment does not
cover (Llama's grouped-query attention, RoPE, RMSNorm and SwiGLU; BERT's two losses). PyTorch is a
test dependency (python3-torch): without it this test fails."""
import json
import os
import sys

from common import ROOT, check, finish, run, workdir, write_experiment

binary = sys.argv[1]
checks = 0
try:
    import torch
except ImportError as e:  # a failure, not a skip: CI installs python3-torch (make test)
    print(f"FAIL: PyTorch is a test dependency (apt-get install python3-torch): {e}", file=sys.stderr)
    sys.exit(1)
sys.path.insert(0, os.path.join(ROOT, "sim", "backends", "torch"))
from build_model import BuildError, build_model, check_parameters, count_parameters, make_batch  # noqa: E402

d = workdir()
# Published counts: Hugging Face's and torchvision's (docs/models.md).
PUBLISHED = {"gpt2-small": 124439808, "resnet50": 25557032, "vgg16": 138357544, "alexnet": 61100840,
             "llama3-8b": 8030261248}
TINY = {"llama-tiny": "{name: llama-tiny, llama: {layers: 2, hidden: 64, heads: 4, kv_heads: 2, ffn_hidden: 128, "
                      "seq: 32, vocab: 256}}",
        "llama-tiny-eager": "{name: llama-tiny-eager, llama: {layers: 1, hidden: 64, heads: 4, kv_heads: 1, "
                            "ffn_hidden: 96, seq: 16, vocab: 128, attention: eager, dropout: true}}",
        "bert-tiny": "{name: bert-tiny, bert: {layers: 1, hidden: 64, heads: 4, seq: 32, vocab: 256}}",
        "gpt-flash": "{name: gpt-flash, gpt: {layers: 1, hidden: 64, heads: 4, seq: 32, vocab: 128, tied_embeddings: "
                     "false, attention: flash}}",
        "amoeba-tiny": "{name: amoeba-tiny, amoebanet: {layers: 3, filters: 16, image: 32, classes: 10}}",
        "resnet-gn": "{name: resnet-gn, resnet: {depth: 18, image: 32, classes: 10, width: 8, "
                     "normalization: group_norm, groups: 4}}"}
zoo = ["gpt2-small", "resnet50", "vgg16", "alexnet", "llama3-8b", "bert-large", "mlp-small", "amoebanet-d18"]
models = zoo + [TINY[k] for k in TINY]
path = write_experiment(d, "builder", f"""name: builder
model: gpt2-small
cluster: h100-1gpu
calibration: h100-sxm
training: {{global_batch: 2, micro_batch: 1, dtype: bf16, optimizer: adam}}
parallelism: {{pp: 1, dp: 1}}
sweep:
  model: [{", ".join(models)}]
""")
prepared = os.path.join(d, "points")
rc, out, err = run(binary, "execute", path, "--backend", "torch", "--prepare", prepared, "--quiet")
checks += 1
check(rc == 0 and f"{len(models)} point(s) of {len(models)}" in out, f"--prepare writes every point: {rc} {out} {err}")


def point(i):
    with open(os.path.join(prepared, f"point-{i}.json")) as f:
        return json.load(f)


def meta_device():
    """Builds on the meta device where this PyTorch can (no memory for Llama 3 8B), else on the CPU."""
    try:
        torch.nn.Linear(2, 2, device="meta")
        return "meta"
    except (RuntimeError, TypeError):
        return "cpu"


device = meta_device()
names = zoo + list(TINY)
for i, name in enumerate(names):
    if not os.path.exists(os.path.join(prepared, f"point-{i}.json")):
        checks += 1
        check(False, f"{name}: no point file")
        continue
    spec = point(i)["model"]
    checks += 1
    try:
        built = count_parameters(build_model(spec, device=device if name in zoo else "cpu"))
        check(built == int(spec["parameters"]), f"{name}: the torch model has {built:,} parameters, ddlsim's "
                                                f"{int(spec['parameters']):,}")
    except BuildError as e:
        check(False, f"{name}: {e}")
        continue
    if name in PUBLISHED:
        checks += 1
        check(built == PUBLISHED[name], f"{name}: {built:,} parameters, published {PUBLISHED[name]:,}")
    print(f"{name}: {built:,} parameters")

# A count that differs is caught: one more parameter in ddlsim's total, or a bias dropped from a layer.
spec = point(names.index("gpt2-small"))["model"]
model = build_model(spec, device=device)
checks += 3
check(check_parameters(model, spec) == 124439808, "gpt2-small passes its own check")
try:
    check_parameters(model, dict(spec, parameters=spec["parameters"] + 1))
    check(False, "a total one parameter off is not caught")
except BuildError as e:
    check("124,439,808 parameters, ddlsim's has 124,439,809" in str(e), f"the mismatch is named: {e}")
altered = json.loads(json.dumps(spec))
qkv = next(layer for layer in altered["layers"] if layer["name"] == "layer0.qkv")
qkv["bias"] = False
try:
    check_parameters(build_model(altered, device=device), altered)
    check(False, "a layer built without its bias is not caught")
except BuildError as e:
    check("124,437,504 parameters" in str(e), f"a dropped bias (2,304 parameters) is caught: {e}")

# What the zoo's generators emit beyond the CPU experiment: a training step of each tiny model.
for name in TINY:
    spec = point(names.index(name))["model"]
    torch.manual_seed(0)
    model = build_model(spec, device="cpu")
    x, targets = make_batch(spec, 2, "cpu", torch.Generator().manual_seed(1))
    loss = model(x, targets)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    checks += 1
    check(torch.isfinite(loss).item() and all(g is not None and torch.isfinite(g).all().item() for g in grads),
          f"{name}: a forward and backward step gives a finite loss ({loss.item():.3f}) and every gradient")
kinds = {layer["kind"] for name in TINY for layer in point(names.index(name))["model"]["layers"]}
checks += 1
check({"rotary", "rms_norm", "swiglu", "attention", "group_norm", "concat", "pooling"} <= kinds,
      f"the tiny models cover RoPE, RMSNorm, SwiGLU, attention, group norm, concat and pooling: {sorted(kinds)}")
llama = point(names.index("llama-tiny"))["model"]
attention = next(layer for layer in llama["layers"] if layer["kind"] == "attention")
checks += 1
check(attention["attention"] == "flash" and attention["causal"] and attention["kv_heads"] == 2 and
      attention["head_dim"] == 16, f"Llama's attention is causal flash GQA: {attention}")
gpt = point(names.index("gpt2-small"))["model"]
eager = next(layer for layer in gpt["layers"] if layer["kind"] == "attention")
act = next(layer for layer in gpt["layers"] if layer["kind"] == "activation")
head = next(layer for layer in gpt["layers"] if layer["name"] == "lm_head")
checks += 1
check(eager["attention"] == "eager" and eager["causal"] and eager["dropout"] and act["function"] == "gelu" and
      act["stash_inputs"] and head["tied_to"] == 0 and not head["bias"],
      "GPT-2: causal eager attention with dropout, GELU keeping its input, LM head tied to the embedding")
resnet = point(names.index("resnet50"))["model"]
pools = [layer for layer in resnet["layers"] if layer["kind"] == "pooling"]
relu = next(layer for layer in resnet["layers"] if layer["kind"] == "activation")
checks += 1
windows = [(p["mode"], p["global"], p.get("kernel"), p.get("stride"), p.get("padding")) for p in pools]
check(windows == [("max", False, 3, 2, 1), ("avg", True, None, None, None)] and relu["function"] == "relu" and
      relu["stash_output"],
      f"ResNet-50: a 3/2/1 max pool, a global average pool, ReLU keeping its output: {pools}")

# A mixture of experts is refused per point, with the layer named.
moe = write_experiment(d, "moe", """name: moe
model: {name: moe-tiny, llama: {layers: 1, hidden: 64, heads: 4, ffn_hidden: 128, seq: 16, vocab: 128,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 64}}}
cluster: h100-1gpu
calibration: h100-sxm
training: {global_batch: 2, micro_batch: 1, dtype: bf16, optimizer: adam}
parallelism: {pp: 1, dp: 1}
""")
rc, out, err = run(binary, "execute", moe, "--backend", "torch", "--prepare", os.path.join(d, "moe"))
checks += 1
check(rc == 1 and "0 point(s) of 1" in out, f"--prepare writes no point for a mixture of experts: {rc} {out} {err}")
finish("cli_torch_builder", checks)
