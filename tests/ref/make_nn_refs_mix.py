#!/usr/bin/python3
"""References for tests/test_nn_ref_sg2net.c's style mixing case: the tiny
conditional StyleGAN2 G of make_nn_refs_sg2net.py (size 8: num_ws = 4, 4
channels, z 6, w 5, 3 classes, conv_clamp 1, noise_const in training) with
style mixing as StyleGAN2-ADA's training/loss.py does it, written here in
PyTorch 1.13 on tests/bench/torch_backbones.py's SG2_G: the mapping (its
normalisation, class embedding and layers) called twice with the same
modules, on z and on z2 with the same labels; w_avg moved by the first
call's w only; synthesis layer i reads ws[i] = w for i < cutoff, w2 from
the cutoff on, in StyleGAN2-ADA's order (b4 conv 0, b4 toRGB 1, b8 conv0 1,
b8 conv1 2, b8 toRGB 3).

z2 and the cutoff are ganflow's draws: the style_mix layer draws z2 (B x z
normals) and then two uniforms from the network's generator; this script
draws them with <ganflow/rng.h>'s Philox and Box-Muller (written below)
from a generator state it picks so that the cutoff is 2 (prob 1: the
batch always mixes): b4's layers and b8's conv0 read w, b8's conv1 and
toRGB read w2. The state goes into the file ("mix.rng": seed, stream,
offset) and the test sets the network's generator to it.

Saved: the input z, labels, z2, the cutoff, the weights ("mix.p.<view>",
buffers "mix.b.<view>"), the output y, the projection w, the gradients of
L = <w, y> with respect to z and every parameter ("mix.g.<view>"), and
w_avg after the training forward.

    /usr/bin/python3 tests/ref/make_nn_refs_mix.py [tests/ref/nn_ref_mix.safetensors]
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import torch_backbones as tb  # noqa: E402
from ref_file import put, tensors, tiny_g, tiny_g_names, tiny_mapping, write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_mix.safetensors"
torch.manual_seed(11)

B, ZD, NUM_WS, WANT_CUT = 4, 6, 4, 2
SEED, STREAM = 21, 3




# ---- ganflow's generator (<ganflow/rng.h>, core/nn/rng.c) ----

M32 = 0xFFFFFFFF


def philox(block, seed, stream):
    c = [block & M32, (block >> 32) & M32, stream & M32, (stream >> 32) & M32]
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def normals(offset, n):
    """gf_rng_normal: Box-Muller in double on the word pairs of each block"""
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        w = philox(offset + i // 4, SEED, STREAM)
        p = i % 4 & 2
        u1 = (w[p] + 0.5) * (1.0 / 4294967296.0)
        u2 = (w[p + 1] + 0.5) * (1.0 / 4294967296.0)
        r, a = math.sqrt(-2.0 * math.log(u1)), 6.283185307179586476925 * u2
        out[i] = r * math.sin(a) if i % 2 else r * math.cos(a)
    return out, offset + (n + 3) // 4


def uniforms(offset, n):
    w = [philox(offset + i // 4, SEED, STREAM)[i % 4] for i in range(n)]
    return [np.float32(x >> 8) * np.float32(1.0 / 16777216.0) for x in w]


def cutoff(u0, num_ws):
    """style_mix_row.h with prob 1: 1 + floor(u0 (num_ws - 1))"""
    return min(max(1 + int(np.float32(u0) * np.float32(num_ws - 1)), 1), num_ws - 1)


# a generator offset whose draw cuts at WANT_CUT
for start in range(0, 1000, 7):
    z2, after = normals(start, B * ZD)
    u = uniforms(after, 2)
    if cutoff(u[0], NUM_WS) == WANT_CUT:
        break
else:
    raise SystemExit("no offset gives the cutoff")
cut = cutoff(u[0], NUM_WS)
z2 = torch.from_numpy(z2.reshape(B, ZD))

# G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2, channels = 2, classes = 3, clamp = 1, noise = "const", mixing = 1 }
g = tiny_g(tb, ZD)


def mapping(z, y):
    return tiny_mapping(tb, g, z, y)


def forward(z, y):
    w, w2 = mapping(z, y), mapping(z2, y)
    g.w_avg.copy_(w.detach().mean(0).lerp(g.w_avg, 0.995))   # the first w only
    ws = [w if i < cut else w2 for i in range(NUM_WS)]
    x = g.const[None].repeat(z.shape[0], 1, 1, 1)
    x = g.layers[0](x, ws[0])
    img = g.rgbs[0](x, ws[1])
    for i in range(1, len(g.rgbs)):
        x = g.layers[2 * i](g.layers[2 * i - 1](x, ws[2 * i - 1]), ws[2 * i])
        img = tb.fir(img, up=2, pad=(2, 1), gain=4.0) + g.rgbs[i](x, ws[2 * i + 1])
    return img


names, bufs = tiny_g_names(g)

labels = torch.tensor([0, 2, 1, 2])
z = torch.randn(B, ZD)
keys = list(names)
params = [names[k] for k in keys]
zr = z.clone().requires_grad_(True)
y = forward(zr, labels)
w = torch.randn(*y.shape)
grads = torch.autograd.grad((y * w).sum(), [zr] + params)
put("mix.rng", [SEED, STREAM, start])
put("mix.cutoff", [cut])
put("mix.z2", z2)
put("mix.x", z)
put("mix.labels", labels.float())
put("mix.w", w)
put("mix.y", y)
put("mix.dx", grads[0])
for k, v, gr in zip(keys, params, grads[1:]):
    put(f"mix.p.{k}", v)
    put(f"mix.g.{k}", gr)
for k, v in bufs.items():
    put(f"mix.b.{k}", v)
put("mix.w_avg", g.w_avg)
# the same batch without mixing (the eval forward's picture: every layer reads w)
with torch.no_grad():
    cut = NUM_WS
    put("mix.y_nomix", forward(z, labels))

write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_mix.py", "torch": torch.__version__})
print(f"{OUT}: {len(tensors)} tensors, {sum(a.nbytes for a in tensors.values())} bytes; offset {start}, cutoff {WANT_CUT}")
