#!/usr/bin/python3
"""PyTorch references for the double backward (tests/test_nn_ref_dbwd.c).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs_dbwd.py
It writes tests/ref/nn_ref_dbwd.safetensors (committed; the tests never
need torch).

Each case is a small network written with torch.nn.functional, layer by
layer the ganflow table the C test builds (the table is repeated in each
case's comment), with parameters named as ganflow's views ("0.weight",
"h.weight_orig"...). For an output weighting w the input gradient is

    g = torch.autograd.grad((D(x) * w).sum(), x, create_graph=True)[0]

and the penalty P = 1/2 sum g^2; P.backward() gives dP/dparam for every
parameter and dP/dx. Stored per case <c>: x, w, labels (conditional
cases), every parameter p.<view> and its gradient g.<view>, the spectral
norms' starting vectors b.<layer>.weight_u / weight_v (the C test writes
them to its buffers; one power iteration in the training forward, as
torch.nn.utils.spectral_norm in train mode), P (1) and dPdx.

Random layers (dropout, dropout2d, diffaugment) draw from ganflow's
generator, Philox4x32-10 with the state (seed 5, stream 9, offset 0) at
the forward (philox() below is <ganflow/rng.h>'s): the masks and uniforms
are the ones the engine draws, in table order. Batchnorm is in training
mode (batch statistics). The mbstd case also stores its forward y and
input gradient dx for an output gradient dy (the layer alone):
mbstd_fwd.{x, y, dy, dx}.
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(25)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_dbwd.safetensors"
SEED, STREAM = 5, 9

tensors = {}


def put(name, t):
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    a = np.ascontiguousarray(np.array(a, copy=True))
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    assert name not in tensors, name
    tensors[name] = a


def write_safetensors(path, meta):
    header = {"__metadata__": meta}
    off, blobs = 0, []
    for name, a in tensors.items():
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- ganflow's generator (<ganflow/rng.h>) ----

M32 = 0xFFFFFFFF


def philox(block, seed, stream):
    c = [block & M32, (block >> 32) & M32, stream & M32, (stream >> 32) & M32]
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


class Rng:
    """The network's generator: each draw of n words starts at the offset
    and moves it by ceil(n / 4) blocks, as the layers do."""

    def __init__(self):
        self.offset = 0

    def u01(self, n):
        out = np.empty(n, dtype=np.float32)
        for i in range(n):
            w = philox(self.offset + i // 4, SEED, STREAM)[i % 4]
            out[i] = np.float32(w >> 8) * np.float32(1.0 / 16777216.0)
        self.offset += (n + 3) // 4
        return out


def dropout(x, p, rng, channels):
    """dropout (each value) or dropout2d (each (sample, channel)): kept when
    u01 >= p, scaled by 1 / (1 - p) in float as the kernels do."""
    groups = x.shape[0] * (x.shape[1] if channels else int(np.prod(x.shape[1:])))
    keep = (rng.u01(groups) >= np.float32(p)).astype(np.float32) * (np.float32(1) / (np.float32(1) - np.float32(p)))
    m = torch.from_numpy(keep)
    m = m.view(x.shape[0], x.shape[1], *([1] * (x.dim() - 2))) if channels else m.view(x.shape)
    return x * m


def pick(u, k, off):
    v = int(np.floor(np.float32(u) * np.float32(k)))
    return min(v, k - 1) - off


def diffaugment(x, rng, what=7):
    """make_aug_refs.py's DiffAugment with the 7 uniforms per sample the
    layer draws."""
    n, c, h, w = x.shape
    u = rng.u01(n * 7).reshape(n, 7)
    out = []
    for i in range(n):
        t = x[i]
        if what & 1:
            t = t + float(np.float32(u[i, 0]) - np.float32(0.5))
            m = t.mean(dim=0, keepdim=True)
            t = (t - m) * float(np.float32(2) * u[i, 1]) + m
            m = t.mean()
            t = (t - m) * float(u[i, 2] + np.float32(0.5)) + m
        if what & 2:
            sh, sw = int(h * 0.125 + 0.5), int(w * 0.125 + 0.5)
            tx, ty = pick(u[i, 3], 2 * sh + 1, sh), pick(u[i, 4], 2 * sw + 1, sw)
            pad = F.pad(t, [sw, sw, sh, sh])
            t = pad[:, sh + tx:sh + tx + h, sw + ty:sw + ty + w]
        if what & 4:
            ch, cw = int(h * 0.5 + 0.5), int(w * 0.5 + 0.5)
            ox, oy = pick(u[i, 5], h + (1 - ch % 2), 0), pick(u[i, 6], w + (1 - cw % 2), 0)
            mask = torch.ones(h, w)
            mask[max(ox - ch // 2, 0):max(ox - ch // 2 + ch, 0), max(oy - cw // 2, 0):max(oy - cw // 2 + cw, 0)] = 0
            t = t * mask
        out.append(t)
    return torch.stack(out)


def mbstd(x, group, f):
    """StyleGAN2-ADA's MinibatchStdLayer."""
    n, c, h, w = x.shape
    g = min(group, n)
    y = x.reshape(g, -1, f, c // f, h, w)
    y = y - y.mean(dim=0)
    y = y.square().mean(dim=0)
    y = (y + 1e-8).sqrt()
    y = y.mean(dim=[2, 3, 4])
    y = y.reshape(-1, f, 1, 1)
    y = y.repeat(g, 1, h, w)
    return torch.cat([x, y], dim=1)


# ---- parameters ----

def lin(P, name, fin, fout, bias=True):
    b = 1.0 / fin ** 0.5
    P[name + ".weight"] = (torch.rand(fout, fin) * 2 - 1) * b
    if bias:
        P[name + ".bias"] = (torch.rand(fout) * 2 - 1) * b


def conv(P, name, cin, cout, kh, kw=None, bias=True, wname="weight"):
    kw = kw or kh
    b = 1.0 / (cin * kh * kw) ** 0.5
    P[name + "." + wname] = (torch.rand(cout, cin, kh, kw) * 2 - 1) * b
    if bias:
        P[name + ".bias"] = (torch.rand(cout) * 2 - 1) * b


def bnp(P, name, c):
    P[name + ".weight"] = 1 + 0.2 * torch.randn(c)
    P[name + ".bias"] = 0.2 * torch.randn(c)


def sn_weight(P, B, name, dim=0):
    """torch.nn.utils.spectral_norm's training forward: one power iteration
    on u, v (no gradient), sigma = u . W v with W = weight_orig viewed as
    (size(dim), -1)."""
    w = P[name + ".weight_orig"]
    wm = w if dim == 0 else w.transpose(0, 1)
    wm = wm.reshape(wm.shape[0], -1)
    if name + ".weight_u" not in B:
        B[name + ".weight_u"] = F.normalize(torch.randn(wm.shape[0]), dim=0, eps=1e-12)
        B[name + ".weight_v"] = F.normalize(torch.randn(wm.shape[1]), dim=0, eps=1e-12)
    with torch.no_grad():
        v = F.normalize(torch.mv(wm.t(), B[name + ".weight_u"]), dim=0, eps=1e-12)
        u = F.normalize(torch.mv(wm, v), dim=0, eps=1e-12)
    sigma = torch.dot(u, torch.mv(wm, v))
    return w / sigma


# ---- the cases ----

CASES = []


def case(name, batch, xshape, classes=0):
    def reg(fn):
        CASES.append((name, batch, xshape, classes, fn))
        return fn
    return reg


# {'linear', 6, 8}, {'lrelu', 0.2}, {'linear', 8, 8}, {'tanh'}, {'linear', 8, 5}, {'sigmoid'},
# {'linear', 5, 3}, {'relu'}, {'linear', 3, 1}, input_shape = {6}
@case("mlp", 3, (6,))
def mlp(P, B, x, labels, rng, init):
    if init:
        lin(P, "0", 6, 8), lin(P, "2", 8, 8), lin(P, "4", 8, 5), lin(P, "6", 5, 3), lin(P, "8", 3, 1)
        return
    h = F.leaky_relu(F.linear(x, P["0.weight"], P["0.bias"]), 0.2)
    h = torch.tanh(F.linear(h, P["2.weight"], P["2.bias"]))
    h = torch.sigmoid(F.linear(h, P["4.weight"], P["4.bias"]))
    h = F.relu(F.linear(h, P["6.weight"], P["6.bias"]))
    return F.linear(h, P["8.weight"], P["8.bias"])


# {'conv', 3, 4, 3, 2, 1}, {'relu'}, {'conv', 4, 4, 1, kw = 3, pw = 1}, {'lrelu', 0.2},
# {'conv', 4, 3, 5, 1, 2, bias = false}, {'tanh'}, {'flatten'}, {'linear', 48, 2}, input_shape = {3, 7, 7}
@case("conv", 2, (3, 7, 7))
def conv_case(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 3, 4, 3), conv(P, "2", 4, 4, 1, 3), conv(P, "4", 4, 3, 5, bias=False), lin(P, "7", 48, 2)
        return
    h = F.relu(F.conv2d(x, P["0.weight"], P["0.bias"], stride=2, padding=1))
    h = F.leaky_relu(F.conv2d(h, P["2.weight"], P["2.bias"], padding=(0, 1)), 0.2)
    h = torch.tanh(F.conv2d(h, P["4.weight"], None, padding=2))
    return F.linear(torch.flatten(h, 1), P["7.weight"], P["7.bias"])


# {'conv', 8, 8, 3, 1, 1}, {'tanh'}, {'conv', 8, 8, 3, 1, 1}, {'lrelu', 0.2}, {'gsp'},
# {'linear', 8, 1}, input_shape = {8, 12, 12}   (3x3 "same" convolutions of 12x12 planes: Winograd)
@case("winograd", 2, (8, 12, 12))
def winograd(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 8, 8, 3), conv(P, "2", 8, 8, 3), lin(P, "5", 8, 1)
        return
    h = torch.tanh(F.conv2d(x, P["0.weight"], P["0.bias"], padding=1))
    h = F.leaky_relu(F.conv2d(h, P["2.weight"], P["2.bias"], padding=1), 0.2)
    return F.linear(h.sum(dim=(2, 3)), P["5.weight"], P["5.bias"])


# {'tconv', 3, 4, 4, 2, 1}, {'tanh'}, {'upsample', 2}, {'conv', 4, 3, 3, 1, 1}, {'sigmoid'},
# {'upsample', 3}, {'avgpool', 3, 2, 1, count_include_pad = false}, {'conv', 3, 1, 3, 2, 1},
# {'flatten'}, input_shape = {3, 3, 3}      (the upsample x2 + conv runs fused, sub-pixel)
@case("tconv_up", 2, (3, 3, 3))
def tconv_up(P, B, x, labels, rng, init):
    if init:
        P["0.weight"] = (torch.rand(3, 4, 4, 4) * 2 - 1) / (4 * 16) ** 0.5
        P["0.bias"] = (torch.rand(4) * 2 - 1) / (4 * 16) ** 0.5
        conv(P, "3", 4, 3, 3), conv(P, "7", 3, 1, 3)
        return
    h = torch.tanh(F.conv_transpose2d(x, P["0.weight"], P["0.bias"], stride=2, padding=1))
    h = F.interpolate(h, scale_factor=2, mode="nearest")
    h = torch.sigmoid(F.conv2d(h, P["3.weight"], P["3.bias"], padding=1))
    h = F.interpolate(h, scale_factor=3, mode="nearest")
    h = F.avg_pool2d(h, 3, 2, 1, count_include_pad=False)
    return torch.flatten(F.conv2d(h, P["7.weight"], P["7.bias"], stride=2, padding=1), 1)


# {'conv', 2, 4, 3, 1, 1}, {'tanh', name = 'a'}, {'maxpool', 2}, {'conv', 4, 4, 3, 1, 1, name = 'r'},
# {'avgpool', 2, input = 'a'}, {'add', with = 'r'}, {'lrelu', 0.1}, {'reshape', 4, 9}, {'flatten'},
# {'linear', 36, 2}, input_shape = {2, 6, 6}
@case("pool_res", 2, (2, 6, 6))
def pool_res(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 2, 4, 3), conv(P, "r", 4, 4, 3), lin(P, "9", 36, 2)
        return
    a = torch.tanh(F.conv2d(x, P["0.weight"], P["0.bias"], padding=1))
    r = F.conv2d(F.max_pool2d(a, 2), P["r.weight"], P["r.bias"], padding=1)
    h = F.leaky_relu(F.avg_pool2d(a, 2) + r, 0.1)
    return F.linear(torch.flatten(h.reshape(B, 4, 9), 1), P["9.weight"], P["9.bias"])


# {'linear', 4, 8, name = 'z'}, {'split', 0, 3}, {'tanh', name = 'a'}, {'slice', from = 3, to = 8, input = 'z'},
# {'sigmoid'}, {'concat', with = 'a'}, {'linear', 8, 2}, input_shape = {4}
@case("concat_split", 3, (4,))
def concat_split(P, B, x, labels, rng, init):
    if init:
        lin(P, "z", 4, 8), lin(P, "6", 8, 2)
        return
    z = F.linear(x, P["z.weight"], P["z.bias"])
    a = torch.tanh(z[:, 0:3])
    h = torch.cat([torch.sigmoid(z[:, 3:8]), a], 1)
    return F.linear(h, P["6.weight"], P["6.bias"])


# {'conv', 2, 4, 3, 2, 1}, {'bn', 4, eps = 0.8}, {'lrelu', 0.2}, {'conv', 4, 4, 3, 1, 1}, {'bn', 4},
# {'tanh'}, {'flatten'}, {'linear', 36, 6}, {'bn', 6, affine = false}, {'sigmoid'}, {'linear', 6, 1},
# input_shape = {2, 6, 6}    (the first bn absorbs its lrelu)
@case("bn", 4, (2, 6, 6))
def bn_case(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 2, 4, 3), bnp(P, "1", 4), conv(P, "3", 4, 4, 3), bnp(P, "4", 4), lin(P, "7", 36, 6)
        lin(P, "10", 6, 1)
        return
    h = F.conv2d(x, P["0.weight"], P["0.bias"], stride=2, padding=1)
    h = F.leaky_relu(F.batch_norm(h, None, None, P["1.weight"], P["1.bias"], True, 0.1, 0.8), 0.2)
    h = F.conv2d(h, P["3.weight"], P["3.bias"], padding=1)
    h = torch.tanh(F.batch_norm(h, None, None, P["4.weight"], P["4.bias"], True, 0.1, 1e-5))
    h = F.linear(torch.flatten(h, 1), P["7.weight"], P["7.bias"])
    h = torch.sigmoid(F.batch_norm(h, None, None, None, None, True, 0.1, 1e-5))
    return F.linear(h, P["10.weight"], P["10.bias"])


# {'conv', 3, 4, 3, 1, 1}, {'instancenorm', 4, affine = true}, {'tanh'}, {'instancenorm', 4},
# {'lrelu', 0.2}, {'conv', 4, 1, 1}, {'flatten'}, input_shape = {3, 4, 4}
@case("instancenorm", 3, (3, 4, 4))
def instancenorm(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 3, 4, 3), bnp(P, "1", 4), conv(P, "5", 4, 1, 1)
        return
    h = F.conv2d(x, P["0.weight"], P["0.bias"], padding=1)
    h = torch.tanh(F.instance_norm(h, weight=P["1.weight"], bias=P["1.bias"], eps=1e-5))
    h = F.leaky_relu(F.instance_norm(h, eps=1e-5), 0.2)
    return torch.flatten(F.conv2d(h, P["5.weight"], P["5.bias"]), 1)


# {'conv', 2, 4, 3, 2, 1, sn = true}, {'lrelu', 0.2}, {'tconv', 4, 3, 3, 2, 1, output_padding = 1, sn = true},
# {'tanh'}, {'flatten'}, {'linear', 48, 2, sn = true}, input_shape = {2, 4, 4}
@case("sn", 2, (2, 4, 4))
def sn_case(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 2, 4, 3, wname="weight_orig")
        P["2.weight_orig"] = (torch.rand(4, 3, 3, 3) * 2 - 1) / 27 ** 0.5
        P["2.bias"] = (torch.rand(3) * 2 - 1) / 27 ** 0.5
        P["5.weight_orig"] = (torch.rand(2, 48) * 2 - 1) / 48 ** 0.5
        P["5.bias"] = (torch.rand(2) * 2 - 1) / 48 ** 0.5
        return
    h = F.leaky_relu(F.conv2d(x, sn_weight(P, init_B, "0"), P["0.bias"], stride=2, padding=1), 0.2)
    h = F.conv_transpose2d(h, sn_weight(P, init_B, "2", dim=1), P["2.bias"], stride=2, padding=1, output_padding=1)
    h = torch.tanh(h)
    return F.linear(torch.flatten(h, 1), sn_weight(P, init_B, "5"), P["5.bias"])


# {'embedding', 3, 16, input = 'label', sn = true}, {'reshape', 1, 4, 4, name = 'plane'},
# {'concat', input = 'x', with = 'plane'}, {'conv', 3, 4, 3, 1, 1, sn = true}, {'relu'}, {'gsp', name = 'h'},
# {'linear', 4, 1, sn = true}, {'proj', 3, 4, with = 'h', sn = true}, input_shape = {2, 4, 4}, classes = 3
@case("cond", 4, (2, 4, 4), classes=3)
def cond(P, B, x, labels, rng, init):
    if init:
        P["0.weight_orig"] = torch.randn(3, 16)
        conv(P, "3", 3, 4, 3, wname="weight_orig")
        P["6.weight_orig"] = (torch.rand(1, 4) * 2 - 1) / 2
        P["6.bias"] = (torch.rand(1) * 2 - 1) / 2
        P["7.weight_orig"] = torch.randn(3, 4)
        return
    plane = F.embedding(labels, sn_weight(P, init_B, "0")).reshape(B, 1, 4, 4)
    h = F.relu(F.conv2d(torch.cat([x, plane], 1), sn_weight(P, init_B, "3"), P["3.bias"], padding=1)).sum(dim=(2, 3))
    out = F.linear(h, sn_weight(P, init_B, "6"), P["6.bias"])
    return out + (F.embedding(labels, sn_weight(P, init_B, "7")) * h).sum(1, keepdim=True)


# {'linear', 5, 8}, {'dropout', 0.3}, {'tanh'}, {'reshape', 2, 2, 2}, {'conv', 2, 3, 1},
# {'dropout2d', 0.5}, {'sigmoid'}, {'flatten'}, {'linear', 12, 1}, input_shape = {5}
@case("dropout", 4, (5,))
def dropout_case(P, B, x, labels, rng, init):
    if init:
        lin(P, "0", 5, 8), conv(P, "4", 2, 3, 1), lin(P, "8", 12, 1)
        return
    h = torch.tanh(dropout(F.linear(x, P["0.weight"], P["0.bias"]), 0.3, rng, False))
    h = F.conv2d(h.reshape(B, 2, 2, 2), P["4.weight"], P["4.bias"])
    h = torch.sigmoid(dropout(h, 0.5, rng, True))
    return F.linear(torch.flatten(h, 1), P["8.weight"], P["8.bias"])


# {'diffaugment', 'color,translation,cutout'}, {'conv', 3, 4, 3, 2, 1}, {'tanh'}, {'gsp'}, {'linear', 4, 1},
# input_shape = {3, 8, 8}
@case("diffaugment", 3, (3, 8, 8))
def diffaugment_case(P, B, x, labels, rng, init):
    if init:
        conv(P, "1", 3, 4, 3), lin(P, "4", 4, 1)
        return
    h = torch.tanh(F.conv2d(diffaugment(x, rng), P["1.weight"], P["1.bias"], stride=2, padding=1))
    return F.linear(h.sum(dim=(2, 3)), P["4.weight"], P["4.bias"])


# {'conv', 2, 4, 3, 1, 1}, {'lrelu', 0.2}, {'mbstd', 2, 2}, {'conv', 6, 3, 3, 1, 1}, {'tanh'}, {'flatten'},
# {'linear', 27, 1}, input_shape = {2, 3, 3}
@case("mbstd", 4, (2, 3, 3))
def mbstd_case(P, B, x, labels, rng, init):
    if init:
        conv(P, "0", 2, 4, 3), conv(P, "3", 6, 3, 3), lin(P, "6", 27, 1)
        return
    h = F.leaky_relu(F.conv2d(x, P["0.weight"], P["0.bias"], padding=1), 0.2)
    h = torch.tanh(F.conv2d(mbstd(h, 2, 2), P["3.weight"], P["3.bias"], padding=1))
    return F.linear(torch.flatten(h, 1), P["6.weight"], P["6.bias"])


init_B = {}
for name, batch, xshape, classes, fn in CASES:
    P = {}
    init_B = {}
    fn(P, None, None, None, None, True)
    x = torch.randn(batch, *xshape)
    labels = torch.tensor([(i * 7 + 3) % classes for i in range(batch)]) if classes else None
    for k in list(P):
        P[k] = P[k].float().requires_grad_(True)
    xr = x.clone().requires_grad_(True)
    # the sn vectors are drawn at the first forward: run it once to make them
    if any(k.endswith("weight_orig") for k in P):
        fn(P, batch, xr, labels, Rng(), False)
    B0 = {k: v.clone() for k, v in init_B.items()}
    y = fn(P, batch, xr, labels, Rng(), False)
    w = torch.randn(*y.shape)
    g = torch.autograd.grad((y * w).sum(), xr, create_graph=True)[0]
    pen = 0.5 * (g * g).sum()
    pen.backward()
    put(f"{name}.x", x)
    put(f"{name}.w", w)
    if classes:
        put(f"{name}.labels", labels.to(torch.int32))
    for k, v in P.items():
        put(f"{name}.p.{k}", v)
        put(f"{name}.g.{k}", v.grad if v.grad is not None else torch.zeros_like(v))
    for k, v in B0.items():
        put(f"{name}.b.{k}", v)
    put(f"{name}.P", pen.reshape(1))
    put(f"{name}.dPdx", xr.grad)

# mbstd alone: forward and backward
x = torch.randn(4, 4, 3, 3, requires_grad=True)
y = mbstd(x, 2, 2)
dy = torch.randn(*y.shape)
y.backward(dy)
put("mbstd_fwd.x", x)
put("mbstd_fwd.y", y)
put("mbstd_fwd.dy", dy)
put("mbstd_fwd.dx", x.grad)

write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_dbwd.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(CASES)} cases, {len(tensors)} tensors, {total} bytes")
