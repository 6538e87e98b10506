#!/usr/bin/python3
"""References for tests/test_nn_ref_sg2net.c's path-length case: g_step's
`pl` on a StyleGAN2 G, as StyleGAN2-ADA's training/loss.py defines it (in
w-space, per ws), on the tiny conditional G of make_nn_refs_sg2net.py
(size 8: num_ws = 4, 4 channels, z 6, w 5, 3 classes, conv_clamp 1,
noise_const in training), written here in PyTorch 1.13 on
tests/bench/torch_backbones.py's SG2_G:

    ws = mapping(z, c) broadcast to the num_ws synthesis inputs (with grad)
    img = synthesis(ws)
    g = d sum(img * y) / d ws                (create_graph: y the pl noise)
    L_i = sqrt(mean_k |g_ik|^2)               (sum over w's features, mean over the ws)
    a = a0 + decay (mean_i L_i - a0)          (the moving mean moves first)
    P = weight mean_i (L_i - a)^2

The noise y (a draw of N(0, 1) / sqrt(H W)) and a0 are inputs here, so the
test passes them in. Saved: z, labels, y, a0 ("pl.a0"), the lengths, the
new mean ("pl.a"), P ("pl.P"), the weights ("pl.p.<view>", buffers
"pl.b.<view>") and dP/d(every parameter) ("pl.g.<view>"): the mapping's
through ws, the synthesis's through the double backward.

    /usr/bin/python3 tests/ref/make_nn_refs_pl.py [tests/ref/nn_ref_pl.safetensors]
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import torch_backbones as tb  # noqa: E402
from ref_file import put, tensors, tiny_g, tiny_g_names, tiny_mapping, write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_pl.safetensors"
torch.manual_seed(13)

B, ZD, NUM_WS = 4, 6, 4
WEIGHT, DECAY, A0 = 2.0, 0.01, 0.05




# G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2, channels = 2, classes = 3, clamp = 1, noise = "const" }
g = tiny_g(tb, ZD)


def mapping(z, y):
    return tiny_mapping(tb, g, z, y)


def synthesis(ws):
    """StyleGAN2-ADA's order: b4 conv 0, b4 toRGB 1, b8 conv0 1, b8 conv1 2, b8 toRGB 3"""
    x = g.const[None].repeat(ws.shape[0], 1, 1, 1)
    x = g.layers[0](x, ws[:, 0])
    img = g.rgbs[0](x, ws[:, 1])
    for i in range(1, len(g.rgbs)):
        x = g.layers[2 * i](g.layers[2 * i - 1](x, ws[:, 2 * i - 1]), ws[:, 2 * i])
        img = tb.fir(img, up=2, pad=(2, 1), gain=4.0) + g.rgbs[i](x, ws[:, 2 * i + 1])
    return img


names, bufs = tiny_g_names(g)

labels = torch.tensor([1, 0, 2, 2])
z = torch.randn(B, ZD)
keys = list(names)
params = [names[k] for k in keys]
ws = mapping(z, labels).unsqueeze(1).repeat(1, NUM_WS, 1)
img = synthesis(ws)
y = torch.randn(*img.shape) / math.sqrt(img.shape[2] * img.shape[3])
(gws,) = torch.autograd.grad((img * y).sum(), [ws], create_graph=True)
lengths = gws.square().sum(2).mean(1).sqrt()
a = torch.tensor(A0).lerp(lengths.detach().mean(), DECAY)
P = WEIGHT * (lengths - a).square().mean()
# biases and noise strengths before a (piecewise linear) activation only move
# its mask: P does not depend on them (0, as ganflow's double backward gives)
grads = [torch.zeros_like(v) if gr is None else gr for v, gr in
         zip(params, torch.autograd.grad(P, params, allow_unused=True))]
put("pl.x", z)
put("pl.labels", labels.float())
put("pl.y", y)
put("pl.a0", [A0])
put("pl.lengths", lengths)
put("pl.a", a.reshape(1))
put("pl.P", P.reshape(1))
for k, v, gr in zip(keys, params, grads):
    put(f"pl.p.{k}", v)
    put(f"pl.g.{k}", gr)
for k, v in bufs.items():
    put(f"pl.b.{k}", v)

write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_pl.py", "torch": torch.__version__})
print(f"{OUT}: {len(tensors)} tensors, {sum(a.nbytes for a in tensors.values())} bytes; P {P.item():.6g}, "
      f"lengths {lengths.detach().numpy()}")
