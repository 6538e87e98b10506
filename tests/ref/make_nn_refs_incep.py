#!/usr/bin/python3
"""PyTorch references for the layer options the FID Inception network needs
(tests/test_nn_ref_incep.c): rectangular convolution kernels and padding
(kh/kw, ph/pw), average pooling with count_include_pad = False and a
stride, max pooling 3x3 stride 2, and Inception's BasicConv2d
(conv without bias, batchnorm eps = 0.001, ReLU).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs_incep.py
It writes tests/ref/nn_ref_incep.safetensors (committed; the test never
needs torch). Parameters come from make_nn_refs.py's hash formula, in
the order nn_fill_params (tests/test_nn_util.h) fills them.

Contents: layer.<case>.x, dy, y, dx and grad<i> for each parameter.
"""
import math
import os
import sys

import torch
import torch.nn as nn

_here = os.path.dirname(os.path.abspath(__file__))
_src = open(os.path.join(_here, "make_nn_refs.py")).read()
sys.argv = sys.argv[:1] + [sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_incep.safetensors"]
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


class BasicConv(nn.Module):   # {'conv', 3, 4, 3, bias = false}, {'bn', 4, eps = 0.001}, {'relu'}
    def __init__(s):
        super().__init__()
        s.conv = nn.Conv2d(3, 4, 3, bias=False)
        s.bn = nn.BatchNorm2d(4, eps=0.001)
    def forward(s, x): return torch.relu(s.bn(s.conv(x)))


# (name, module, input shape); the C test has the tables
cases = [
    ("conv_1x7", nn.Conv2d(4, 5, (1, 7), padding=(0, 3)), (2, 4, 6, 9)),
    ("conv_7x1", nn.Conv2d(3, 4, (7, 1), padding=(3, 0), bias=False), (2, 3, 8, 5)),
    ("conv_3x1_s2", nn.Conv2d(3, 4, (3, 1), stride=2, padding=(1, 0)), (2, 3, 9, 7)),
    ("avgpool_nopad", nn.AvgPool2d(3, 1, 1, count_include_pad=False), (2, 3, 5, 6)),
    ("avgpool_nopad_s2", nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 2, 7, 6)),
    ("maxpool_3s2", nn.MaxPool2d(3, 2), (2, 2, 9, 8)),
    ("maxpool_3s1p1", nn.MaxPool2d(3, 1, 1), (2, 2, 5, 6)),
    ("basicconv", BasicConv(), (3, 3, 6, 7)),
]

k = 3000
for name, mod, shape in cases:
    params = list(mod.named_parameters())
    k = fill_ours(params, k) + 1
    x = param_fill(shape, 500 + k, 1.0).requires_grad_(True)
    mod.train()
    y = mod(x)
    dy = param_fill(tuple(y.shape), 600 + k, 1.0)
    y.backward(dy)
    put(f"layer.{name}.x", x)
    put(f"layer.{name}.y", y)
    put(f"layer.{name}.dy", dy)
    put(f"layer.{name}.dx", x.grad)
    for i, (n, p) in enumerate(params):
        put(f"layer.{name}.grad{i}", p.grad)
    if name == "basicconv":   # eval mode after that one training forward
        mod.eval()
        with torch.no_grad():
            put(f"layer.{name}.y_eval", mod(x))

write_safetensors(OUT, tensors, {"generator": "tests/ref/make_nn_refs_incep.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes")
