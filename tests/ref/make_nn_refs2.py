#!/usr/bin/python3
"""PyTorch references for the layer kinds of issue 14 (tests/test_nn_ref2.c):
add, gsp, split, instancenorm, proj.

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs2.py
It writes tests/ref/nn_ref2.safetensors (committed; the tests never need
torch). The helpers (hash24, param_fill, put, write_safetensors) are those
of make_nn_refs.py, whose opening part up to the DC-GAN is run here, so
both files fill parameters by the same formula; nn_ref.safetensors is left
alone.

Parameters follow nn_fill_params (tests/test_nn_util.h) in our view order:
a 1-d weight and the bias after it are a normalisation's (1 + 0.1 u,
0.1 u), any other weight and its bias U * 1/sqrt(fan_in), fan_in =
shape[1] (times k*k for 4-d weights): embeddings included.

Contents: layer.<case>.x, dy, y, dx, d<param> (d<layer>.<param> when a
case has several layers with parameters), and labels (i32) for proj.
"""
import math
import os
import sys

import torch
import torch.nn as nn

_here = os.path.dirname(os.path.abspath(__file__))
_src = open(os.path.join(_here, "make_nn_refs.py")).read()
sys.argv = sys.argv[:1] + [sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref2.safetensors"]
exec(_src[:_src.index("# ---- the seed DC-GAN")])   # noqa: S102 - our own helpers


def fill_ours(params, k):
    """params: (name, tensor) in our view order. Mirrors nn_fill_params."""
    norm, scale = False, 1.0
    for name, p in params:
        with torch.no_grad():
            if name.endswith("weight"):
                norm = p.dim() == 1
                fan_in = p.shape[1] * (p.shape[2] * p.shape[3] if p.dim() == 4 else 1) if p.dim() >= 2 else 1
                scale = 1.0 / math.sqrt(fan_in)
                p.copy_(param_fill(tuple(p.shape), k, 0.1, 1.0) if norm else param_fill(tuple(p.shape), k, scale))
            else:
                p.copy_(param_fill(tuple(p.shape), k, 0.1 if norm else scale))
        k += 1
    return k


class Add(nn.Module):   # {'conv', 3, 3, 3, 1, 1}, {'add', with = 'x'}
    def __init__(s):
        super().__init__(); s.conv = nn.Conv2d(3, 3, 3, 1, 1)
    def forward(s, x): return s.conv(x) + x


class AddSelf(nn.Module):   # {'tanh', name = 't'}, {'add', with = 't'}: both inputs one node
    def forward(s, x):
        t = torch.tanh(x)
        return t + t


class Gsp(nn.Module):
    def forward(s, x): return torch.sum(x, dim=(2, 3))


class Split(nn.Module):
    def __init__(s, a, b):
        super().__init__(); s.a, s.b = a, b
    def forward(s, x): return x[:, s.a:s.b]


class Proj(nn.Module):   # {'linear', F, 1}, {'proj', classes, F, with = 'x'}
    def __init__(s, classes, f):
        super().__init__(); s.lin = nn.Linear(f, 1); s.embed = nn.Embedding(classes, f)
    def forward(s, h, y): return s.lin(h) + (s.embed(y) * h).sum(1, keepdim=True)


# (name, module, input shape, labels or None); the C test has the tables
cases = [
    ("add", Add(), (2, 3, 5, 5), None),
    ("add_self", AddSelf(), (2, 4, 3), None),
    ("gsp", Gsp(), (2, 3, 4, 5), None),
    ("split", Split(2, 7), (3, 10), None),
    ("split_keys", Split(0, 4), (3, 6), None),
    ("instancenorm", nn.InstanceNorm2d(4, affine=True), (3, 4, 5, 5), None),
    ("instancenorm_plain", nn.InstanceNorm2d(3), (2, 3, 4, 6), None),
    ("proj", Proj(5, 6), (4, 6), [3, 0, 4, 3]),
]

k = 1000
for name, mod, shape, labels in cases:
    params = list(mod.named_parameters())
    k = fill_ours(params, k) + 1
    x = param_fill(shape, 500 + k, 1.0).requires_grad_(True)
    mod.train()
    y = mod(x, torch.tensor(labels)) if labels is not None else mod(x)
    dy = param_fill(tuple(y.shape), 600 + k, 1.0)
    y.backward(dy)
    put(f"layer.{name}.x", x)
    put(f"layer.{name}.y", y)
    put(f"layer.{name}.dy", dy)
    put(f"layer.{name}.dx", x.grad)
    if labels is not None:
        put(f"layer.{name}.labels", torch.tensor(labels, dtype=torch.int32))
    for i, (n, p) in enumerate(params):
        put(f"layer.{name}.grad{i}", p.grad)

write_safetensors(OUT, tensors, {"generator": "tests/ref/make_nn_refs2.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes")
