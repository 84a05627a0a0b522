"""torch.nn modules from ddlsim's layer list: the zoo model a point simulates, as real PyTorch.

`ddlsim execute --backend torch` writes each point's model as ddlsim builds it (models/Model.hpp,
models/Layer.hpp): one entry per layer, in topological order, with the layers it reads, its output
shape per sample, its parameters and what its kind needs (sim/backends/TorchPoint.hpp writes them).
build_model() turns that list into one nn.Module whose forward runs the layers in the same order:

    model = build_model(point["model"], device="cpu")
    loss = model(inputs, targets)          # the sum of the model's softmax_loss layers
    count_parameters(model) == point["model"]["parameters"]

Tensors are batched: a sequence is (batch, tokens, features), an image (batch, channels, height,
width). Attention takes a fused QKV input and runs eager softmax attention, or
F.scaled_dot_product_attention for `flash` where this PyTorch has it. A linear layer tied to an
embedding uses the embedding table's first `vocab` rows. Works with PyTorch 1.13 and 2.x.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

#: The probability of every dropout layer (ddlsim's default rate, Hugging Face GPT-2's and BERT's).
DROPOUT_RATE = 0.1
#: Epsilon of layer and RMS normalisation (PyTorch's LayerNorm default; Llama's RMSNorm uses 1e-5 too).
NORM_EPS = 1e-5
#: RoPE's base frequency (Llama 2).
ROPE_BASE = 10000.0


class BuildError(Exception):
    """A layer list this builder cannot turn into modules; the message names the layer."""


def _has_sdpa():
    """True when this PyTorch has F.scaled_dot_product_attention (2.0 and later)."""
    return hasattr(F, "scaled_dot_product_attention")


def _gelu(x):
    """GPT-2's GELU (tanh approximation) where this PyTorch has it, else the exact one."""
    try:
        return F.gelu(x, approximate="tanh")
    except TypeError:  # before PyTorch 1.12
        return F.gelu(x)


class Embedding(nn.Module):
    """Token lookup in one table of vocab + positions rows, plus the position rows (learned positions)."""

    def __init__(self, vocab, positions, hidden, device):
        super().__init__()
        self.vocab, self.positions = vocab, positions
        self.table = nn.Embedding(vocab + positions, hidden, device=device)

    def forward(self, ids):
        x = self.table(ids)
        if self.positions:
            x = x + self.table.weight[self.vocab:self.vocab + ids.shape[1]]
        return x

    def token_rows(self):
        """The token rows of the table: what a tied LM head multiplies by."""
        return self.table.weight[:self.vocab]


class Linear(nn.Module):
    """y = x W^T + b on the last dimension; an image input is flattened to one token first."""

    def __init__(self, in_features, out_features, bias, device, tied_to=None):
        super().__init__()
        self.tied = [tied_to] if tied_to is not None else []  # a list: not registered as a child
        self.linear = None if tied_to is not None else nn.Linear(in_features, out_features, bias=False, device=device)
        self.bias = nn.Parameter(torch.zeros(out_features, device=device)) if bias else None

    def forward(self, x):
        if x.dim() == 4:
            x = x.reshape(x.shape[0], 1, -1)
        weight = self.tied[0].token_rows() if self.tied else self.linear.weight
        return F.linear(x, weight, self.bias)


class Attention(nn.Module):
    """Self-attention core on fused QKV ((heads + 2 kv_heads) x head_dim features): softmax(QK^T/sqrt(d)) V."""

    def __init__(self, layer, tokens, device):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = layer["heads"], layer["kv_heads"], layer["head_dim"]
        self.causal, self.flash = layer["causal"], layer["attention"] == "flash" and _has_sdpa()
        self.dropout = DROPOUT_RATE if layer["dropout"] else 0.0
        if self.causal and not self.flash:
            # A plain attribute, not a buffer: DDP would broadcast it, and gloo broadcasts no bool tensors.
            self.mask = torch.ones(tokens, tokens, dtype=torch.bool, device=device).triu(1)

    def forward(self, qkv):
        b, s, _ = qkv.shape
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        q, k, v = qkv.split([h * d, kv * d, kv * d], dim=-1)
        q = q.reshape(b, s, h, d).transpose(1, 2)
        k = k.reshape(b, s, kv, d).transpose(1, 2)
        v = v.reshape(b, s, kv, d).transpose(1, 2)
        if kv < h:  # grouped-query attention: each K/V head serves h / kv query heads
            k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                                 is_causal=self.causal)
        else:
            out = self._eager(q, k, v, s)
        return out.transpose(1, 2).reshape(b, s, h * d)

    def _eager(self, q, k, v, s):
        """Hugging Face GPT-2's eager path: scores, mask, softmax (fp32 under autocast), cast, dropout, PV."""
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if self.causal:
            scores = scores.masked_fill(self.mask[:s, :s], torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1).to(v.dtype)
        probs = F.dropout(probs, self.dropout, self.training)
        return torch.matmul(probs, v)


class Rotary(nn.Module):
    """RoPE on the Q and K parts of a fused QKV input (rotate-half form, as Hugging Face's Llama)."""

    def __init__(self, layer, tokens, device):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = layer["heads"], layer["kv_heads"], layer["head_dim"]
        d = self.head_dim
        inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
        angles = torch.outer(torch.arange(tokens, dtype=torch.float32, device=device), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)[:, None, :]  # (tokens, 1, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _rotate(self, x, s):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos[:s] + rotated * self.sin[:s]

    def forward(self, qkv):
        b, s, _ = qkv.shape
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        q, k, v = qkv.split([h * d, kv * d, kv * d], dim=-1)
        q = self._rotate(q.reshape(b, s, h, d), s).reshape(b, s, h * d)
        k = self._rotate(k.reshape(b, s, kv, d), s).reshape(b, s, kv * d)
        return torch.cat([q, k, v], dim=-1).to(qkv.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension, in fp32, scale only (Llama)."""

    def __init__(self, channels, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels, device=device))

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + NORM_EPS)
        return self.weight * normed.to(x.dtype)


class ChannelsLast(nn.Module):
    """A per-token normalisation applied to an image's channels (the channels moved last and back)."""

    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, x):
        if x.dim() != 4:
            return self.norm(x)
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Activation(nn.Module):
    """An element-wise nonlinearity by name."""

    FUNCTIONS = {"relu": F.relu, "gelu": _gelu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu}

    def __init__(self, function):
        super().__init__()
        self.function = self.FUNCTIONS[function]

    def forward(self, x):
        return self.function(x)


class SwiGLU(nn.Module):
    """silu(a) * b on the two halves a, b of the last dimension."""

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b


class Add(nn.Module):
    """The element-wise sum of the inputs (a residual connection)."""

    def forward(self, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class Concat(nn.Module):
    """The inputs joined along channels (images) or features (sequences)."""

    def forward(self, *xs):
        return torch.cat(xs, dim=1 if xs[0].dim() == 4 else -1)


class SoftmaxLoss(nn.Module):
    """Softmax and cross-entropy over the classes of every token (mean over tokens and samples)."""

    def forward(self, logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def _image(shape):
    return bool(shape["image"])


def _pooling(layer):
    """MaxPool2d / AvgPool2d, or their adaptive 1 x 1 forms for global pooling."""
    if layer["global"]:
        return nn.AdaptiveMaxPool2d(1) if layer["mode"] == "max" else nn.AdaptiveAvgPool2d(1)
    cls = nn.MaxPool2d if layer["mode"] == "max" else nn.AvgPool2d
    return cls(layer["kernel"], stride=layer["stride"], padding=layer["padding"])


def _norm(layer, device, options, notes):
    """The normalisation module of a norm layer (layer, RMS, batch, synchronised batch or group norm)."""
    kind, channels = layer["kind"], layer["channels"]
    if kind == "layer_norm":
        return ChannelsLast(nn.LayerNorm(channels, eps=NORM_EPS, device=device))
    if kind == "rms_norm":
        return ChannelsLast(RMSNorm(channels, device))
    if kind == "group_norm":
        return nn.GroupNorm(layer["groups"], channels, device=device)
    if kind == "sync_batch_norm" and options.get("sync_batch_norm", False):
        return nn.SyncBatchNorm(channels, device=device)
    if kind == "sync_batch_norm":
        notes.add("sync_batch_norm run as batch_norm (one process, or SyncBatchNorm needs CUDA)")
    return nn.BatchNorm2d(channels, device=device)


def _module(layer, index, modules, tokens, device, options, notes):
    """The module of layer `index`, given the modules of the layers before it."""
    kind = layer["kind"]
    if kind == "linear":
        tied = modules[layer["tied_to"]] if "tied_to" in layer else None
        if tied is not None and not isinstance(tied, Embedding):
            raise BuildError(f"linear '{layer['name']}' is tied to layer {layer['tied_to']}, which is no embedding")
        return Linear(layer["in_features"], layer["out_features"], layer["bias"], device, tied)
    if kind == "conv2d":
        return nn.Conv2d(layer["in_channels"], layer["out_channels"], tuple(layer["kernel"]), tuple(layer["stride"]),
                         tuple(layer["padding"]), groups=layer["groups"], bias=layer["bias"], device=device)
    if kind == "pooling":
        return _pooling(layer)
    if kind == "attention":
        if layer["attention"] == "flash" and not _has_sdpa():
            notes.add("flash attention run as eager attention (this PyTorch has no scaled_dot_product_attention)")
        return Attention(layer, tokens, device)
    if kind == "rotary":
        return Rotary(layer, tokens, device)
    if kind == "embedding":
        return Embedding(layer["vocab"], layer["positions"], layer["hidden"], device)
    if kind in ("layer_norm", "rms_norm", "batch_norm", "sync_batch_norm", "group_norm"):
        return _norm(layer, device, options, notes)
    simple = {"activation": lambda: Activation(layer["function"]), "swiglu": SwiGLU, "add": Add, "concat": Concat,
              "dropout": lambda: nn.Dropout(DROPOUT_RATE), "softmax_loss": SoftmaxLoss}
    if kind not in simple:
        raise BuildError(f"layer '{layer['name']}' is of kind {kind}, which the torch backend does not build")
    return simple[kind]()


def _last_uses(layers):
    """For each layer, the earlier outputs no layer after it reads (freed once it has run)."""
    last = {}
    for i, layer in enumerate(layers):
        for j in layer["inputs"]:
            last[j] = i
    release = [[] for _ in layers]
    for j, i in last.items():
        release[i].append(j)
    return release


class LayerModel(nn.Module):
    """ddlsim's layer DAG as one module: forward(inputs, targets) runs the layers in order, returns the loss."""

    def __init__(self, spec, device="cpu", options=None):
        super().__init__()
        self.notes = set()
        layers = spec["layers"]
        tokens = int(spec["input"]["tokens"])
        built = []
        for i, layer in enumerate(layers):
            if any(not 0 <= j < i for j in layer["inputs"]):
                raise BuildError(f"layer '{layer['name']}' reads a layer that is not before it")
            built.append(_module(layer, i, built, tokens, device, options or {}, self.notes))
        self.layers = nn.ModuleList(built)
        self.kinds = [layer["kind"] for layer in layers]
        self.inputs = [list(layer["inputs"]) for layer in layers]
        self.release = _last_uses(layers)
        self.losses = [i for i, kind in enumerate(self.kinds) if kind == "softmax_loss"]
        if not self.losses:
            raise BuildError(f"model '{spec['name']}' has no softmax_loss layer to train on")

    def forward(self, x, targets):
        """`targets` maps each softmax_loss layer's index to its class indices; returns the summed loss."""
        outputs, total = {}, None
        for i, layer in enumerate(self.layers):
            args = [outputs[j] for j in self.inputs[i]] or [x]
            if self.kinds[i] == "softmax_loss":
                loss = layer(args[0], targets[i])
                total = loss if total is None else total + loss
            else:
                outputs[i] = layer(*args)
            for j in self.release[i]:
                outputs.pop(j, None)
        return total


def build_model(spec, device="cpu", options=None):
    """The LayerModel of a point's `model` entry. `options`: {"sync_batch_norm": bool}. Raises BuildError."""
    return LayerModel(spec, device=device, options=options)


def count_parameters(model):
    """Trainable parameters, each shared tensor once (a tied LM head adds none)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_parameters(model, spec):
    """Raises BuildError when the built model's parameter count is not ddlsim's (spec['parameters'])."""
    built, expected = count_parameters(model), int(round(spec["parameters"]))
    if built != expected:
        raise BuildError(f"model '{spec['name']}': the torch model has {built:,} parameters, ddlsim's has "
                         f"{expected:,}: the emitted layers are not the zoo model")
    return built


def _class_count(spec, index):
    """Classes of softmax_loss layer `index`: the features of its input."""
    producer = spec["layers"][index]["inputs"]
    shape = spec["layers"][producer[0]]["output"] if producer else spec["input"]
    return int(shape["features"] * shape["height"] * shape["width"])


def _loss_tokens(spec, index):
    producer = spec["layers"][index]["inputs"]
    shape = spec["layers"][producer[0]]["output"] if producer else spec["input"]
    return int(shape["tokens"])


def make_batch(spec, samples, device, generator):
    """Random inputs and targets of `samples` samples: token ids for an embedding input, else floats."""
    shape, first = spec["input"], spec["layers"][0]
    if first["kind"] == "embedding":
        x = torch.randint(first["vocab"], (samples, int(shape["tokens"])), generator=generator)
    elif _image(shape):
        x = torch.randn(samples, int(shape["features"]), int(shape["height"]), int(shape["width"]), generator=generator)
    else:
        x = torch.randn(samples, int(shape["tokens"]), int(shape["features"]), generator=generator)
    targets = {}
    for i, layer in enumerate(spec["layers"]):
        if layer["kind"] == "softmax_loss":
            targets[i] = torch.randint(_class_count(spec, i), (samples, _loss_tokens(spec, i)),
                                       generator=generator).to(device)
    return x.to(device), targets
