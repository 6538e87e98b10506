#!/usr/bin/python3
"""Reference values of ganflow's DiffAugment ops (backend augment_forward /
augment_backward, the `diffaugment` layer) from PyTorch 1.13 autograd.

DiffAugment (Zhao et al. 2020) is written out below with torch ops from the
paper's description: brightness x + (u0 - 0.5); saturation (x - channel
mean) 2 u1 + channel mean; contrast (x - sample mean)(u2 + 0.5) + sample
mean; translation by randint(-s, s) rows/columns (s = int(H/8 + 0.5)),
zeros shifted in; cutout of an int(H/2 + 0.5) box at randint(0, H + 1 -
size % 2) - size // 2. The random draws are given: 7 uniforms per sample
(the layer draws them from the network's generator), turned into integers
as ganflow does (floor(u k)). The uniforms stay clear of those floors'
boundaries, so float rounding cannot move a shift.

For each case: x, u, dy, y = aug(x), dx = the gradient of (y . dy).
usage: /usr/bin/python3 make_aug_refs.py [OUT] (default tests/ref/aug_ref.safetensors)"""
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/aug_ref.safetensors"
COLOR, TRANSLATION, CUTOUT = 1, 2, 4


def pick(u, k, off):
    return min(int(math.floor(u * k)), k - 1) - off


def augment(x, u, what):
    n, c, h, w = x.shape
    out = []
    for i in range(n):
        t = x[i]
        if what & COLOR:
            t = t + (u[i, 0] - 0.5)
            m = t.mean(dim=0, keepdim=True)
            t = (t - m) * (2 * u[i, 1]) + m
            m = t.mean()
            t = (t - m) * (u[i, 2] + 0.5) + m
        if what & TRANSLATION:
            sh, sw = int(h * 0.125 + 0.5), int(w * 0.125 + 0.5)
            tx, ty = pick(u[i, 3], 2 * sh + 1, sh), pick(u[i, 4], 2 * sw + 1, sw)
            pad = torch.nn.functional.pad(t, [sw, sw, sh, sh])   # zeros around
            t = pad[:, sh + tx:sh + tx + h, sw + ty:sw + ty + w]  # output (r, c) = input (r + tx, c + ty)
        if what & CUTOUT:
            ch, cw = int(h * 0.5 + 0.5), int(w * 0.5 + 0.5)
            ox, oy = pick(u[i, 5], h + (1 - ch % 2), 0), pick(u[i, 6], w + (1 - cw % 2), 0)
            mask = torch.ones(h, w)
            mask[max(ox - ch // 2, 0):max(ox - ch // 2 + ch, 0), max(oy - cw // 2, 0):max(oy - cw // 2 + cw, 0)] = 0
            t = t * mask
        out.append(t)
    return torch.stack(out)


def safe_uniforms(n, gen, h, w):
    """Uniforms at least 0.01 (in units of 1/k) away from every floor boundary."""
    u = torch.rand(n, 7, generator=gen)
    ks = [1, 1, 1, 2 * int(h * 0.125 + 0.5) + 1, 2 * int(w * 0.125 + 0.5) + 1,
          h + (1 - int(h * 0.5 + 0.5) % 2), w + (1 - int(w * 0.5 + 0.5) % 2)]
    for j in range(3, 7):
        k = ks[j]
        u[:, j] = (torch.floor(u[:, j] * k) + 0.1 + 0.8 * torch.rand(n, generator=gen)) / k
    return u


tensors = {}
gen = torch.Generator().manual_seed(7)
cases = [("all_rgb", (3, 3, 8, 8), 7), ("all_grey", (4, 1, 12, 10), 7), ("color", (2, 3, 6, 6), 1),
         ("translation", (3, 2, 9, 7), 2), ("cutout", (3, 2, 9, 7), 4), ("trans_cut", (2, 1, 16, 16), 6)]
for name, shape, what in cases:
    x = torch.randn(*shape, generator=gen).requires_grad_(True)
    u = safe_uniforms(shape[0], gen, shape[2], shape[3])
    dy = torch.randn(*shape, generator=gen)
    y = augment(x, u, what)
    (y * dy).sum().backward()
    for k, v in (("x", x), ("u", u), ("dy", dy), ("y", y), ("dx", x.grad)):
        tensors[f"{name}.{k}"] = np.ascontiguousarray(v.detach().numpy().astype(np.float32))
    tensors[f"{name}.what"] = np.array([what], dtype=np.int32)

header = {"__metadata__": {"generator": "tests/ref/make_aug_refs.py", "torch": torch.__version__}}
off, blobs = 0, []
for k, a in tensors.items():
    b = a.astype(a.dtype.newbyteorder("<")).tobytes()
    header[k] = {"dtype": {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype], "shape": list(a.shape),
                 "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
with open(OUT, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(f"{OUT}: {len(cases)} cases")
