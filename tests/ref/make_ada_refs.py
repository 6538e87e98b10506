#!/usr/bin/python3
"""Reference values of ganflow's ADA ops (backend ada_forward / ada_backward,
the `ada` layer: StyleGAN2-ADA's augmentation) from PyTorch 1.13 autograd.

StyleGAN2-ADA's AugmentPipe (Karras et al. 2020, training/augment.py of
stylegan2-ada-pytorch) is written out below from its maths with torch ops:
the geometric transforms compose into one 3x3 inverse map G_inv (output
pixel -> input point, pixel units about the image centre) in its order and
conventions (xflip, quarter turns, integer translation, isotropic scale,
rotation, anisotropic scale, rotation, fractional translation); the image
is padded by reflection (F.pad mode='reflect', as AugmentPipe) and sampled
once with F.affine_grid + F.grid_sample (bilinear, align_corners=False).
Departure, the one ganflow makes: AugmentPipe upsamples 2x with the sym6
wavelet before grid_sample and filters back down; here the sampling is
plain bilinear at the image's resolution. The colour transforms compose into
one 4x4 matrix C (brightness, contrast, luma flip, hue rotation,
saturation; one channel: the mean of C's first three rows).

The transforms' values are given (ganflow's gf_ada_draw, 15 per sample:
xflip, rot90, tx, ty, scale, rot_pre, aniso, rot_post, fx, fy, bright,
contrast, lumaflip, hue, sat); the padding is wide enough for every case
(checked), so reflection about the edges is all the padding there is.

For each case: x, draw, dy, y = aug(x), dx = the gradient of (y . dy).
usage: /usr/bin/python3 make_ada_refs.py [OUT] (default tests/ref/ada_ref.safetensors)"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/ada_ref.safetensors"
FIELDS = ["xflip", "rot90", "tx", "ty", "scale", "rot_pre", "aniso", "rot_post", "fx", "fy",
          "bright", "contrast", "lumaflip", "hue", "sat"]
IDENTITY = dict(xflip=0, rot90=0, tx=0, ty=0, scale=1, rot_pre=0, aniso=1, rot_post=0, fx=0, fy=0,
                bright=0, contrast=1, lumaflip=0, hue=0, sat=1)


def m3(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def translate2d(tx, ty):
    return m3([1, 0, tx], [0, 1, ty], [0, 0, 1])


def scale2d(sx, sy):
    return m3([sx, 0, 0], [0, sy, 0], [0, 0, 1])


def rotate2d(t):
    return m3([math.cos(t), -math.sin(t), 0], [math.sin(t), math.cos(t), 0], [0, 0, 1])


def geometric(d):
    """G_inv for one sample, as AugmentPipe composes it (G_inv = G_inv @ X)."""
    G = torch.eye(3, dtype=torch.float64)
    G = G @ torch.linalg.inv(scale2d(1 - 2 * d["xflip"], 1))          # scale2d_inv
    G = G @ torch.linalg.inv(rotate2d(-math.pi / 2 * d["rot90"]))     # rotate2d_inv(-pi/2 i)
    G = G @ torch.linalg.inv(translate2d(d["tx"], d["ty"]))           # translate2d_inv
    G = G @ torch.linalg.inv(scale2d(d["scale"], d["scale"]))
    G = G @ torch.linalg.inv(rotate2d(-d["rot_pre"]))                  # rotate2d_inv(-theta)
    G = G @ torch.linalg.inv(scale2d(d["aniso"], 1 / d["aniso"]))
    G = G @ torch.linalg.inv(rotate2d(-d["rot_post"]))
    G = G @ torch.linalg.inv(translate2d(d["fx"], d["fy"]))
    return G


def colour(d, channels):
    """C for one sample (C = X @ C)."""
    v = torch.tensor([1, 1, 1, 0], dtype=torch.float64) / math.sqrt(3)
    I4 = torch.eye(4, dtype=torch.float64)
    b, c = d["bright"], d["contrast"]
    C = I4.clone()
    C = torch.tensor([[1, 0, 0, b], [0, 1, 0, b], [0, 0, 1, b], [0, 0, 0, 1]], dtype=torch.float64) @ C
    C = torch.diag(torch.tensor([c, c, c, 1], dtype=torch.float64)) @ C
    C = (I4 - 2 * torch.outer(v, v) * d["lumaflip"]) @ C
    if channels > 1:
        t = d["hue"]
        vx, vy, vz = v[0].item(), v[1].item(), v[2].item()
        s, co = math.sin(t), math.cos(t)
        cc = 1 - co
        R = torch.tensor([[vx * vx * cc + co, vx * vy * cc - vz * s, vx * vz * cc + vy * s, 0],
                          [vy * vx * cc + vz * s, vy * vy * cc + co, vy * vz * cc - vx * s, 0],
                          [vz * vx * cc - vy * s, vz * vy * cc + vx * s, vz * vz * cc + co, 0],
                          [0, 0, 0, 1]], dtype=torch.float64)                # rotate3d(v, theta)
        C = R @ C
        C = (torch.outer(v, v) + (I4 - torch.outer(v, v)) * d["sat"]) @ C
    return C


def augment(x, draws):
    n, ch, h, w = x.shape
    out = []
    for i in range(n):
        d = {k: float(draws[i, j]) for j, k in enumerate(FIELDS)}
        img = x[i:i + 1]
        G = geometric(d)
        # the input points of the output grid stay inside the padding
        cx, cy = (w - 1) / 2, (h - 1) / 2
        ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64) - cy, torch.arange(w, dtype=torch.float64) - cx,
                                indexing="ij")
        pts = G[:2, :2] @ torch.stack([xs.flatten(), ys.flatten()]) + G[:2, 2:]
        assert pts[0].min() + cx > -(w - 1) + 1 and pts[0].max() + cx < 2 * (w - 1) - 1, "widen the padding"
        assert pts[1].min() + cy > -(h - 1) + 1 and pts[1].max() + cy < 2 * (h - 1) - 1, "widen the padding"
        padded = F.pad(img, [w - 1, w - 1, h - 1, h - 1], mode="reflect")
        hp, wp = padded.shape[2], padded.shape[3]
        theta = scale2d(2 / wp, 2 / hp) @ G @ torch.linalg.inv(scale2d(2 / w, 2 / h))
        grid = F.affine_grid(theta[:2, :].float().unsqueeze(0), [1, ch, h, w], align_corners=False)
        img = F.grid_sample(padded, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        C = colour(d, ch).float()
        img = img.reshape(1, ch, h * w)
        if ch == 3:
            img = C[:3, :3] @ img + C[:3, 3:]
        else:
            Cg = C[:3, :].mean(dim=0, keepdim=True)
            img = img * Cg[:, :3].sum(dim=1, keepdim=True) + Cg[:, 3:]
        out.append(img.reshape(1, ch, h, w))
    return torch.cat(out)


def draws_of(rows):
    return torch.tensor([[{**IDENTITY, **r}[k] for k in FIELDS] for r in rows], dtype=torch.float32)


# (name, shape, one dict of non-identity values per sample)
cases = [
    ("xflip", (2, 3, 8, 8), [dict(xflip=1), dict()]),
    ("rot90", (3, 2, 6, 9), [dict(rot90=1), dict(rot90=2), dict(rot90=3)]),
    ("xint", (2, 1, 8, 10), [dict(tx=2, ty=-1), dict(tx=-3, ty=2)]),
    ("scale", (2, 3, 8, 8), [dict(scale=1.3), dict(scale=0.8)]),
    ("rotate", (2, 3, 9, 9), [dict(rot_pre=0.4), dict(rot_post=-1.1)]),
    ("aniso", (2, 1, 8, 12), [dict(aniso=0.85), dict(aniso=1.2)]),
    ("xfrac", (2, 3, 8, 8), [dict(fx=0.3, fy=-0.45), dict(fx=-1.7, fy=0.6)]),
    ("brightness", (2, 3, 5, 5), [dict(bright=0.15), dict(bright=-0.3)]),
    ("contrast", (2, 3, 5, 5), [dict(contrast=1.4), dict(contrast=0.6)]),
    ("lumaflip", (2, 3, 5, 5), [dict(lumaflip=1), dict()]),
    ("hue", (2, 3, 5, 5), [dict(hue=0.9), dict(hue=-2.5)]),
    ("saturation", (2, 3, 5, 5), [dict(sat=0.6), dict(sat=2.3)]),
    ("color_grey", (3, 1, 5, 6), [dict(bright=0.2, contrast=1.3), dict(lumaflip=1, hue=0.7, sat=0.5),
                                  dict(contrast=0.7, lumaflip=1, bright=-0.1)]),
    ("all_rgb", (3, 3, 12, 12), [dict(xflip=1, rot90=1, tx=1, ty=-2, scale=1.1, rot_pre=0.3, aniso=0.9, rot_post=-0.2,
                                      fx=0.4, fy=-0.7, bright=0.1, contrast=1.2, lumaflip=1, hue=0.5, sat=0.8),
                                 dict(rot90=3, scale=0.9, rot_post=2.0, fx=-0.3, contrast=0.8, hue=-1.0, sat=1.5),
                                 dict()]),
    ("all_grey", (2, 1, 16, 12), [dict(xflip=1, rot90=2, tx=-2, ty=1, scale=1.2, rot_pre=-0.6, aniso=1.1, rot_post=0.1,
                                       fx=0.25, fy=0.5, bright=-0.05, contrast=1.1, lumaflip=1),
                                  dict(rot90=1, rot_pre=1.3, fy=-0.8, contrast=0.9)]),
]

tensors = {}
gen = torch.Generator().manual_seed(26)
for name, shape, rows in cases:
    x = torch.randn(*shape, generator=gen).requires_grad_(True)
    draw = draws_of(rows)
    dy = torch.randn(*shape, generator=gen)
    y = augment(x, draw)
    (y * dy).sum().backward()
    for k, v in (("x", x), ("draw", draw), ("dy", dy), ("y", y), ("dx", x.grad)):
        tensors[f"{name}.{k}"] = np.ascontiguousarray(v.detach().numpy().astype(np.float32))

header = {"__metadata__": {"generator": "tests/ref/make_ada_refs.py", "torch": torch.__version__,
                           "cases": ",".join(c[0] for c in cases)}}
off, blobs = 0, []
for k, a in tensors.items():
    b = a.astype(a.dtype.newbyteorder("<")).tobytes()
    header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
with open(OUT, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(f"{OUT}: {len(cases)} cases")
