#!/usr/bin/python3
"""PyTorch references for the self-attention layer (tests/test_nn_ref5.c).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs5.py
It writes tests/ref/nn_ref5.safetensors (committed; the tests never need
torch), in the hand-written safetensors format of make_nn_refs.py, from
the same hash formula (param_fill).

The module is BigGAN-PyTorch's Attention(ch) (layers.py), written out
here: theta, phi, g, o 1x1 convolutions without bias (C/8, C/8, C/2
outputs; o: C/2 -> C), phi and g max-pooled 2x2, beta = softmax over the
pooled positions of theta^T phi, y = x + gamma * o(g beta^T). The
parameters are stored under the engine's view names (the C test copies
them in by name): theta and phi weights param_fill scale 0.4 (logits of
a few units: the softmax neither uniform nor saturated), g and o scale
1/sqrt(fan_in), gamma = 0.7
(a non-zero gamma: at 0 the attention branch would get no gradient).

Cases, batch 3, C = 16, 8x8:
  attn.plain.*   one training forward and backward: x, dy, y, dx, and the
                 gradient d<view> of every parameter (theta.weight ...
                 gamma); y_eval (the same forward in eval mode).
  attn.sn.*      every conv under torch.nn.utils.spectral_norm (one power
                 iteration per training forward): the parameters
                 (*.weight_orig, gamma), u_init/v_init per conv
                 (<conv>.weight_u/_v: normalize(param_fill)), then two
                 training forwards s = 0, 1 with x<s>, dy<s>, y<s>, dx<s>,
                 the gradients d<view><s> (zeroed between them) and the
                 buffers <conv>.weight_u<s>, weight_v<s> after forward s;
                 y_eval, an eval forward of x0 after them (no iteration).
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(0)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref5.safetensors"

tensors = {}


def put(name, t):
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    a = np.ascontiguousarray(np.array(a, copy=True, dtype=np.float32))
    assert name not in tensors, name
    tensors[name] = a


def write_safetensors(path, tensors, meta):
    """As make_nn_refs.py: 8-byte header length, JSON header, raw data."""
    header = {"__metadata__": meta}
    off = 0
    blobs = []
    for name, a in tensors.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def hash24(i, k):
    """make_nn_refs.py's hash (mirrored by nn_hash24 in test_nn_util.h)."""
    x = (i * 2654435761 + (k + 1) * 97531) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 2246822519) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 3266489917) & 0xFFFFFFFF
    x ^= x >> 16
    return x >> 8


def param_fill(shape, k, scale):
    n = int(np.prod(shape))
    h = np.array([hash24(i, k) for i in range(n)], dtype=np.float64)
    u = (h / 8388608.0 - 1.0).astype(np.float32)
    return torch.from_numpy((np.float32(scale) * u).astype(np.float32).reshape(shape))


class Attention(nn.Module):
    """BigGAN-PyTorch's Attention, with plain or spectral-normalised convs."""

    def __init__(self, ch, sn):
        super().__init__()
        self.ch = ch
        wrap = nn.utils.spectral_norm if sn else (lambda m: m)
        self.theta = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.phi = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.g = wrap(nn.Conv2d(ch, ch // 2, 1, bias=False))
        self.o = wrap(nn.Conv2d(ch // 2, ch, 1, bias=False))
        self.gamma = nn.Parameter(torch.tensor(0.0))

    def forward(self, x):
        ch, h, w = self.ch, x.shape[2], x.shape[3]
        theta = self.theta(x).view(-1, ch // 8, h * w)
        phi = F.max_pool2d(self.phi(x), [2, 2]).view(-1, ch // 8, h * w // 4)
        g = F.max_pool2d(self.g(x), [2, 2]).view(-1, ch // 2, h * w // 4)
        beta = F.softmax(torch.bmm(theta.transpose(1, 2), phi), -1)
        o = self.o(torch.bmm(g, beta.transpose(1, 2)).view(-1, ch // 2, h, w))
        return self.gamma * o + x


CONVS = ("theta", "phi", "g", "o")
B, C, H, W = 3, 16, 8, 8


def setup(name, sn, base):
    m = Attention(C, sn)
    wn = "weight_orig" if sn else "weight"
    with torch.no_grad():
        for i, c in enumerate(CONVS):
            conv = getattr(m, c)
            w = getattr(conv, wn)
            scale = 0.4 if c in ("theta", "phi") else 1.0 / math.sqrt(w.shape[1])
            w.copy_(param_fill(tuple(w.shape), base + i, scale))
            put(f"attn.{name}.{c}.{wn}", w)
            if sn:
                conv.weight_u.copy_(F.normalize(param_fill(tuple(conv.weight_u.shape), base + 10 + i, 1.0), dim=0,
                                                eps=1e-12))
                conv.weight_v.copy_(F.normalize(param_fill(tuple(conv.weight_v.shape), base + 20 + i, 1.0), dim=0,
                                                eps=1e-12))
                put(f"attn.{name}.{c}.weight_u", conv.weight_u)
                put(f"attn.{name}.{c}.weight_v", conv.weight_v)
        m.gamma.fill_(0.7)
        put(f"attn.{name}.gamma", m.gamma.reshape(1))
    return m, wn


def step(m, wn, name, base, suffix):
    m.train()
    for p in m.parameters():
        p.grad = None
    x = param_fill((B, C, H, W), base, 2.0).requires_grad_(True)
    y = m(x)
    dy = param_fill(tuple(y.shape), base + 1, 1.0)
    y.backward(dy)
    put(f"attn.{name}.x{suffix}", x)
    put(f"attn.{name}.dy{suffix}", dy)
    put(f"attn.{name}.y{suffix}", y)
    put(f"attn.{name}.dx{suffix}", x.grad)
    for c in CONVS:
        conv = getattr(m, c)
        put(f"attn.{name}.d{c}.{wn}{suffix}", getattr(conv, wn).grad)
        if wn == "weight_orig":
            put(f"attn.{name}.{c}.weight_u{suffix}", conv.weight_u)
            put(f"attn.{name}.{c}.weight_v{suffix}", conv.weight_v)
    put(f"attn.{name}.dgamma{suffix}", m.gamma.grad.reshape(1))
    return x


m, wn = setup("plain", False, 500)
x = step(m, wn, "plain", 550, "")
m.eval()
with torch.no_grad():
    put("attn.plain.y_eval", m(x))

m, wn = setup("sn", True, 600)
x0 = step(m, wn, "sn", 650, "0")
step(m, wn, "sn", 660, "1")
m.eval()
with torch.no_grad():
    put("attn.sn.y_eval", m(x0))

write_safetensors(OUT, tensors, {"generator": "tests/ref/make_nn_refs5.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes")
