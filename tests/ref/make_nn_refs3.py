#!/usr/bin/python3
"""PyTorch references for spectral normalisation (tests/test_nn_ref3.c).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs3.py
It writes tests/ref/nn_ref3.safetensors (committed; the tests never need
torch), in the same hand-written safetensors format and with the same
hash-formula parameters (param_fill) as make_nn_refs.py.

Each case is torch.nn.utils.spectral_norm(module) (n_power_iterations 1,
eps 1e-12, dim 0, or 1 for ConvTranspose2d). Its weight_orig and bias come
from param_fill (scale 1/sqrt(fan_in), 1 for the embedding), k counting
from the case's base as in make_nn_refs.py; u and v start as
normalize(param_fill(k = base + 50)) and normalize(param_fill(k = base +
51)), stored as u_init and v_init so that the C test needs no normalisation of its
own.

Contents, per case sn.<case>:
  u_init, v_init            the starting weight_u, weight_v
  x<s>, dy<s> (s = 0, 1)    inputs and output gradients of two training
                            forwards (each updates u and v)
  y<s>, dx<s>, dweight<s>, dbias<s>, u<s>, v<s>
                            outputs, gradients (zeroed between the two),
                            u and v after forward s
  y_eval                    an eval forward of x0 after them (no iteration)
  idx<s>                    (embedding) the labels instead of x<s>
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
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref3.safetensors"

tensors = {}


def put(name, t):
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    a = np.ascontiguousarray(np.array(a, copy=True))
    assert name not in tensors, name
    tensors[name] = a


def write_safetensors(path, tensors, meta):
    """As make_nn_refs.py: 8-byte header length, JSON header, raw data."""
    header = {"__metadata__": meta}
    off = 0
    blobs = []
    for name, a in tensors.items():
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
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


def sn_case(name, mod, base, inputs, labels=False):
    w = mod.weight
    fan_in = w.shape[1] * (w.shape[2] * w.shape[3] if w.dim() == 4 else 1)
    s = 1.0 if labels else 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        w.copy_(param_fill(tuple(w.shape), base, s))
        if getattr(mod, "bias", None) is not None:
            mod.bias.copy_(param_fill(tuple(mod.bias.shape), base + 1, s))
    dim = 1 if isinstance(mod, nn.ConvTranspose2d) else 0
    mod = nn.utils.spectral_norm(mod, dim=dim)
    with torch.no_grad():
        mod.weight_u.copy_(F.normalize(param_fill(tuple(mod.weight_u.shape), base + 50, 1.0), dim=0, eps=1e-12))
        mod.weight_v.copy_(F.normalize(param_fill(tuple(mod.weight_v.shape), base + 51, 1.0), dim=0, eps=1e-12))
    put(f"sn.{name}.u_init", mod.weight_u)
    put(f"sn.{name}.v_init", mod.weight_v)
    mod.train()
    for step, x in enumerate(inputs):
        for p in mod.parameters():
            p.grad = None
        if labels:
            put(f"sn.{name}.idx{step}", x.to(torch.int32))
            y = mod(x)
        else:
            x = x.clone().requires_grad_(True)
            put(f"sn.{name}.x{step}", x)
            y = mod(x)
        dy = param_fill(tuple(y.shape), base + 60 + step, 1.0)
        y.backward(dy)
        put(f"sn.{name}.dy{step}", dy)
        put(f"sn.{name}.y{step}", y)
        if not labels:
            put(f"sn.{name}.dx{step}", x.grad)
        put(f"sn.{name}.dweight{step}", mod.weight_orig.grad)
        if getattr(mod, "bias", None) is not None:
            put(f"sn.{name}.dbias{step}", mod.bias.grad)
        put(f"sn.{name}.u{step}", mod.weight_u)
        put(f"sn.{name}.v{step}", mod.weight_v)
    mod.eval()
    with torch.no_grad():
        put(f"sn.{name}.y_eval", mod(inputs[0]))


sn_case("linear", nn.Linear(7, 5), 100, [param_fill((3, 7), 170, 1.0), param_fill((3, 7), 171, 1.0)])
sn_case("conv", nn.Conv2d(3, 6, 3, 2, 1), 200,
        [param_fill((2, 3, 9, 9), 270, 1.0), param_fill((2, 3, 9, 9), 271, 1.0)])
sn_case("tconv", nn.ConvTranspose2d(3, 4, 3, 2, 1, output_padding=1), 300,
        [param_fill((2, 3, 5, 5), 370, 1.0), param_fill((2, 3, 5, 5), 371, 1.0)])
sn_case("embedding", nn.Embedding(5, 4), 400,
        [torch.tensor([3, 0, 3, 4]), torch.tensor([1, 2, 2, 0])], labels=True)

write_safetensors(OUT, tensors, {"generator": "tests/ref/make_nn_refs3.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes")
