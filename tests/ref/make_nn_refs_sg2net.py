#!/usr/bin/python3
"""References for tests/test_nn_ref_sg2net.c: the StyleGAN2 networks of
luaconf/backbones/stylegan2.lua at a tiny width (32 -> 8x8, 4 channels,
2 image channels, 3 classes, conv_clamp 1 so that clamps happen), built
by tests/bench/torch_backbones.py's SG2_G and SG2_D (StyleGAN2-ADA's
networks written with torch.nn.functional in PyTorch 1.13, independently
of ganflow's tables), their weights renamed to ganflow's checkpoint
names. For each of G and D: the input, labels, weights ("<case>.p.<view>",
buffers "<case>.b.<view>"), the output y, the gradients of L = <w, y>
with respect to the input and to every parameter ("<case>.g.<view>"); G's
w_avg after one training forward; for D the double backward of
P = 1/2 |dL/dx|^2 (R1's, through the cmap head: "<case>.P", "dPdx",
"<case>.g2.<view>"). G's noise is its noise_const in training too
(noise = "const"), as ganflow's random draws are not PyTorch's.

    /usr/bin/python3 tests/ref/make_nn_refs_sg2net.py [tests/ref/nn_ref_sg2net.safetensors]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import torch_backbones as tb  # noqa: E402
from ref_file import put, store_case, tensors, write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_sg2net.safetensors"
torch.manual_seed(7)




def fc(names, m, p):
    names[p + "_fc.weight"], names[p + "_fc.bias"] = m.weight, m.bias


def synth(names, bufs, m, p):
    names[p + "_affine.weight"], names[p + "_affine.bias"] = m.affine.weight, m.affine.bias
    names[p + "_conv.weight"], names[p + "_noise.noise_strength"], names[p + ".bias"] = m.weight, m.noise_strength, m.bias
    bufs[p + "_noise.noise_const"] = m.noise_const.reshape(-1)


def rgb(names, m, p):
    names[p + "_affine.weight"], names[p + "_affine.bias"] = m.affine.weight, m.affine.bias
    names[p + "_conv.weight"], names[p + ".bias"] = m.weight, m.bias


def conv(names, m, p):
    names[p + "_conv.weight"] = m.weight
    if m.bias is not None:
        names[p + ".bias"] = m.bias


def g_names(g):
    names, bufs = {}, {}
    names["c_embed_table.weight"], names["c_embed_bias.bias"] = g.embed.table.weight, g.embed.bias
    for i, m in enumerate(g.mapping):
        fc(names, m, f"map{i}")
    names["b4_const.const"] = g.const
    synth(names, bufs, g.layers[0], "b4_conv1")
    rgb(names, g.rgbs[0], "b4_torgb")
    for i in range(1, len(g.rgbs)):
        res = 4 << i
        synth(names, bufs, g.layers[2 * i - 1], f"b{res}_conv0")
        synth(names, bufs, g.layers[2 * i], f"b{res}_conv1")
        rgb(names, g.rgbs[i], f"b{res}_torgb")
    return names, bufs


def d_names(d, size):
    names = {}
    conv(names, d.fromrgb, f"b{size}_fromrgb")
    res = size
    for c0, c1, sk in d.blocks:
        conv(names, c0, f"b{res}_conv0")
        conv(names, c1, f"b{res}_conv1")
        conv(names, sk, f"b{res}_skip")
        res //= 2
    conv(names, d.conv, "b4_conv")
    fc(names, d.fc, "b4_fc")
    fc(names, d.out, "b4_out")
    names["cmap_embed_table.weight"], names["cmap_embed_bias.bias"] = d.embed.table.weight, d.embed.bias
    for i, m in enumerate(d.cmap):
        fc(names, m, f"cmap{i}")
    return names, {}


def run(name, net, names, bufs, x, labels, dbwd):
    for p in net.parameters():   # biases away from 0 and strengths (0-dim) on, so every term counts
        with torch.no_grad():
            if p.dim() <= 1 and not p.abs().sum():
                p.normal_(0, 0.3)
    assert len(names) == len(list(net.parameters())), (len(names), len(list(net.parameters())))
    store_case(name, lambda xr: net(xr, labels), x, names, bufs, labels, dbwd)


B = 4
# G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2, channels = 2, classes = 3, clamp = 1, noise = "const" }
g = tb.SG2_G(size=8, ch=4, z=6, wd=5, mapping=2, channels=2, classes=3, clamp=1.0).train()
for m in g.layers:
    m.const_noise = True
names, bufs = g_names(g)
put("g.w_avg0", g.w_avg)
labels = torch.tensor([0, 2, 1, 2])
run("g", g, names, bufs, torch.randn(B, 6), labels, False)
put("g.w_avg", g.w_avg)   # after the training forward
# D{ size = 8, ch = 4, channels = 2, classes = 3, mbstd = 2, d_mapping = 2, clamp = 1 }
d = tb.SG2_D(size=8, ch=4, channels=2, classes=3, group=2, clamp=1.0, d_mapping=2).train()
names, bufs = d_names(d, 8)
run("d", d, names, bufs, torch.randn(B, 2, 8, 8), torch.tensor([1, 0, 2, 1]), True)

write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_sg2net.py", "torch": torch.__version__})
print(f"{OUT}: {len(tensors)} tensors, {sum(a.nbytes for a in tensors.values())} bytes")
