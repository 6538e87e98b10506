#!/usr/bin/python3
"""PyTorch references for grouped convolutions and R3GAN's layers
(tests/test_nn_ref_r3gan.c, test_layers).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs_r3.py
It writes tests/ref/nn_ref_r3.safetensors (committed; the tests never need
torch).

Each case is a small network written with torch.nn.functional, layer by
layer the ganflow table the C test builds (repeated in each case's
comment), parameters named as ganflow's views: grouped convolutions
(F.conv2d / F.conv_transpose2d with groups) on the CPU backend's generic,
direct (depthwise) and Winograd paths, and the parts of R3GAN's networks
as the paper and its code describe them: the generative basis (a learned
4x4 image per channel times a bias-free linear map of z), the
discriminative basis (a depthwise 4x4 conv, then a bias-free linear map),
the interpolative x2 up- and downsampling with the [1, 2, 1] filter (its
4x4 kernel from [1, 2, 1] convolved with [1, 1], applied as a stride-2
transposed conv / conv of each plane) and the residual block (1x1, bias +
LeakyReLU 0.2, grouped 3x3, bias + LeakyReLU 0.2, 1x1, plus the input).
Stored per case (ref_file.run_cases): x, the output weighting w, the
parameters, the output, the gradients of L = <w, y> and the double
backward of P = 1/2 |dL/dx|^2 (create_graph=True).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from ref_file import CASES, case, randn, run_cases, tensors, write_safetensors

torch.set_num_threads(1)
torch.manual_seed(36)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_r3.safetensors"

def lowpass(weights):
    """The interpolative resamplers' kernel: weights convolved with [1, 1], outer product, sum 1."""
    k = np.convolve(weights, [1, 1]).reshape(1, -1)
    k = torch.tensor(k.T @ k, dtype=torch.float32)
    return k / k.sum()


K121 = lowpass([1, 2, 1])


def up2(x):
    n, c, h, w = x.shape
    y = F.conv_transpose2d(x.reshape(n * c, 1, h, w), 4 * K121[None, None], stride=2, padding=1)
    return y.reshape(n, c, 2 * h, 2 * w)


def down2(x):
    n, c, h, w = x.shape
    return F.conv2d(x.reshape(n * c, 1, h, w), K121[None, None], stride=2, padding=1).reshape(n, c, h // 2, w // 2)


def bias_lrelu(x, b):
    return F.leaky_relu(x + b.view(1, -1, 1, 1), 0.2)


# {'conv', 8, 12, 3, 1, 1, groups = 4}, {'tanh'}, {'conv', 12, 6, 3, 2, 1, groups = 3, bias = false}, {'tanh'},
# {'conv', 6, 6, 3, 1, 1, groups = 6}, {'tanh'}, {'conv', 6, 12, 1, groups = 2}, input_shape = {8, 7, 7}
@case("gconv", 2, (8, 7, 7))
def gconv(P, B, x, init):
    if init:
        P["0.weight"], P["0.bias"] = randn(12, 2, 3, 3, scale=0.5), randn(12, scale=0.3)
        P["2.weight"] = randn(6, 4, 3, 3, scale=0.4)
        P["4.weight"], P["4.bias"] = randn(6, 1, 3, 3, scale=0.5), randn(6, scale=0.3)
        P["6.weight"], P["6.bias"] = randn(12, 3, 1, 1, scale=0.5), randn(12, scale=0.3)
        return
    h = torch.tanh(F.conv2d(x, P["0.weight"], P["0.bias"], padding=1, groups=4))
    h = torch.tanh(F.conv2d(h, P["2.weight"], stride=2, padding=1, groups=3))
    h = torch.tanh(F.conv2d(h, P["4.weight"], P["4.bias"], padding=1, groups=6))
    return F.conv2d(h, P["6.weight"], P["6.bias"], groups=2)


# {'conv', 16, 16, 3, 1, 1, groups = 2}, {'tanh'}, {'conv', 16, 24, 3, 1, 1, groups = 2, bias = false},
# input_shape = {16, 12, 12}    (both on the Winograd path: 8 channels a group at 12x12)
@case("gconv_winograd", 2, (16, 12, 12))
def gconv_winograd(P, B, x, init):
    if init:
        P["0.weight"], P["0.bias"] = randn(16, 8, 3, 3, scale=0.2), randn(16, scale=0.3)
        P["2.weight"] = randn(24, 8, 3, 3, scale=0.2)
        return
    h = torch.tanh(F.conv2d(x, P["0.weight"], P["0.bias"], padding=1, groups=2))
    return F.conv2d(h, P["2.weight"], padding=1, groups=2)


# {'tconv', 6, 4, 4, 2, 1, groups = 2}, {'tanh'}, {'tconv', 4, 4, 3, 1, 1, groups = 4, bias = false},
# input_shape = {6, 3, 3}
@case("gtconv", 2, (6, 3, 3))
def gtconv(P, B, x, init):
    if init:
        P["0.weight"], P["0.bias"] = randn(6, 2, 4, 4, scale=0.3), randn(4, scale=0.3)
        P["2.weight"] = randn(4, 1, 3, 3, scale=0.5)
        return
    h = torch.tanh(F.conv_transpose2d(x, P["0.weight"], P["0.bias"], stride=2, padding=1, groups=2))
    return F.conv_transpose2d(h, P["2.weight"], padding=1, groups=4)


# R3GAN's generative basis and the discriminative one after it:
# {'linear', 5, 6, bias = false, name = 'lin'}, {'reshape', 6, 1, 1},
# {'tconv', 6, 6, 4, groups = 6, bias = false, name = 'basis'}, {'tanh'},
# {'conv', 6, 6, 4, groups = 6, bias = false, name = 'dbasis'}, {'flatten'},
# {'linear', 6, 3, bias = false, name = 'dlin'}, input_shape = {5}
@case("bases", 3, (5,))
def bases(P, B, x, init):
    if init:
        P["lin.weight"], P["basis.weight"] = randn(6, 5, scale=0.5), randn(6, 1, 4, 4)
        P["dbasis.weight"], P["dlin.weight"] = randn(6, 1, 4, 4, scale=0.25), randn(3, 6, scale=0.4)
        return
    h = P["basis.weight"].view(1, 6, 4, 4) * F.linear(x, P["lin.weight"]).view(-1, 6, 1, 1)   # R3GAN's formula
    h = torch.tanh(h)
    h = F.conv2d(h, P["dbasis.weight"], groups=6)
    return F.linear(h.view(h.shape[0], -1), P["dlin.weight"])


# R3GAN's up layer (1x1 where the width changes, then x2) and down layer (x2 down, then 1x1):
# {'conv', 3, 4, 1, bias = false, name = 'uc'}, {'fir', up = 2, name = 'up'}, {'tanh'},
# {'fir', down = 2, name = 'down'}, {'conv', 4, 2, 1, bias = false, name = 'dc'}, input_shape = {3, 5, 4}
@case("resample", 2, (3, 5, 4))
def resample(P, B, x, init):
    if init:
        P["uc.weight"], P["dc.weight"] = randn(4, 3, 1, 1, scale=0.6), randn(2, 4, 1, 1, scale=0.5)
        return
    h = torch.tanh(up2(F.conv2d(x, P["uc.weight"])))
    return F.conv2d(down2(h), P["dc.weight"])


# R3GAN's residual block, twice (the second from the first's output), cardinality 4:
# per block b: {'conv', 8, 16, 1, bias = false, name = b .. '_l1'}, {'bias_act', 16, gain = 1, name = b .. '_a1'},
# {'conv', 16, 16, 3, 1, 1, groups = 4, bias = false, name = b .. '_l2'}, {'bias_act', 16, gain = 1, name = b .. '_a2'},
# {'conv', 16, 8, 1, bias = false, name = b .. '_l3'}, {'add', with = <the block's input>, name = b};
# blocks b0 (input x) and b1 (input b0), input_shape = {8, 6, 6}
@case("block", 2, (8, 6, 6))
def block(P, B, x, init):
    if init:
        for b in ("b0", "b1"):
            P[b + "_l1.weight"], P[b + "_a1.bias"] = randn(16, 8, 1, 1, scale=0.5), randn(16, scale=0.3)
            P[b + "_l2.weight"], P[b + "_a2.bias"] = randn(16, 4, 3, 3, scale=0.3), randn(16, scale=0.3)
            P[b + "_l3.weight"] = randn(8, 16, 1, 1, scale=0.3)
        return
    for b in ("b0", "b1"):
        y = bias_lrelu(F.conv2d(x, P[b + "_l1.weight"]), P[b + "_a1.bias"])
        y = bias_lrelu(F.conv2d(y, P[b + "_l2.weight"], padding=1, groups=4), P[b + "_a2.bias"])
        x = x + F.conv2d(y, P[b + "_l3.weight"])
    return x


# the resamplers' 4-tap form: [1, 2, 1] convolved with [1, 1] is StyleGAN2's [1, 3, 3, 1]
assert torch.equal(K121, torch.outer(torch.tensor([1.0, 3, 3, 1]), torch.tensor([1.0, 3, 3, 1])) / 64)
run_cases(CASES)
write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_r3.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(CASES)} cases, {len(tensors)} tensors, {total} bytes")
