#!/usr/bin/python3
"""PyTorch references for conditional batchnorm, the `cbn` layer kind
(tests/test_nn_ref4.c).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs4.py
It writes tests/ref/nn_ref4.safetensors (committed; the tests never need
torch). The helpers (hash24, param_fill, put, write_safetensors) are those
of make_nn_refs.py, whose opening part up to the DC-GAN is run here.

The module (CBN below) is BigGAN's ccbn written with PyTorch's own ops:
F.batch_norm without affine (running statistics, momentum, eps), then
(1 + gain(c)) * . + bias(c) per sample and channel, gain and bias two
nn.Embedding(classes, C) (classes = k) or two nn.Linear(D, C, bias)
(cond = c), each wrapped in torch.nn.utils.spectral_norm with sn = true.
The cond cases take c from the network input: the C test's table splits a
flat input into c and the normalised part, so dx holds c's gradient too.

Parameters follow nn_fill_params (tests/test_nn_util.h) in our view order
(gain.weight[_orig], [gain.bias], bias.weight[_orig], [bias.bias]): weights
U * 1/sqrt(shape[1]), biases with their weight's scale, k counting from the
case's base. Spectral norm's u and v start where the engine's do before
gf_net_init: every element 1/sqrt(length).

Contents, per case cbn.<case>:
  x<s>, dy<s> (s = 0, 1)   inputs and output gradients of two training
                           forwards, labels<s> (i32) for the classes cases
  y<s>, dx<s>, grad<s>.<i> outputs and gradients (zeroed between the two
                           steps), parameter i in our view order
  buf.<i>                  buffers after both steps, in our view order
                           (running_mean, running_var, gain.weight_u,
                           gain.weight_v, bias.weight_u, bias.weight_v)
  y_eval                   an eval forward of x0 (labels0) after them

Case resblock is the issue's ResNet block (BigGAN's G block): two 3x3 convs
with spectral norm, two cond cBNs with spectral norm, ReLUs, nearest
upsampling, the 1x1 shortcut and the residual add.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

_here = os.path.dirname(os.path.abspath(__file__))
_src = open(os.path.join(_here, "make_nn_refs.py")).read()
sys.argv = sys.argv[:1] + [sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref4.safetensors"]
exec(_src[:_src.index("# ---- the seed DC-GAN")])   # noqa: S102 - our own helpers


class CBN(nn.Module):
    def __init__(s, c, classes=0, d=0, bias=False, sn=False, eps=1e-5, momentum=0.1, act=None):
        super().__init__()
        if classes:
            s.gain, s.bias = nn.Embedding(classes, c), nn.Embedding(classes, c)
        else:
            s.gain, s.bias = nn.Linear(d, c, bias=bias), nn.Linear(d, c, bias=bias)
        if sn:
            s.gain = nn.utils.spectral_norm(s.gain)
            s.bias = nn.utils.spectral_norm(s.bias)
        s.register_buffer("running_mean", torch.zeros(c))
        s.register_buffer("running_var", torch.ones(c))
        s.eps, s.momentum, s.act = eps, momentum, act

    def forward(s, x, cond):
        h = F.batch_norm(x, s.running_mean, s.running_var, None, None, s.training, s.momentum, s.eps)
        shape = (x.shape[0], x.shape[1]) + (1,) * (x.dim() - 2)
        y = h * (1 + s.gain(cond)).view(shape) + s.bias(cond).view(shape)
        return s.act(y) if s.act else y


class Split(nn.Module):
    """The C tables' {'split', 0, d, name = 'c'}, {'split', d, n}, {'reshape', ...}, {'cbn', ..., cond = 'c'}."""
    def __init__(s, d, shape, cbn):
        super().__init__()
        s.d, s.shape, s.cbn = d, shape, cbn

    def forward(s, x):
        return s.cbn(x[:, s.d:].reshape((x.shape[0],) + s.shape), x[:, :s.d])


class ResBlock(nn.Module):
    """BigGAN's G block (BigGAN.py GBlock) on a flat input [c (d), x (cin, h, w)]:
    relu(cbn1(x, c)) -> up x2 -> conv 3x3 -> relu(cbn2(., c)) -> conv 3x3, plus the
    shortcut conv 1x1(up x2(x)); spectral norm on every conv and projection."""
    def __init__(s, d, cin, cout, hw):
        super().__init__()
        s.d, s.shape = d, (cin, hw, hw)
        sn = nn.utils.spectral_norm
        s.cbn1 = CBN(cin, d=d, sn=True)
        s.conv1 = sn(nn.Conv2d(cin, cout, 3, 1, 1))
        s.cbn2 = CBN(cout, d=d, sn=True)
        s.conv2 = sn(nn.Conv2d(cout, cout, 3, 1, 1))
        s.sc = sn(nn.Conv2d(cin, cout, 1))

    def forward(s, inp):
        c, x = inp[:, :s.d], inp[:, s.d:].reshape((inp.shape[0],) + s.shape)
        h = F.relu(s.cbn1(x, c))
        h = s.conv1(F.interpolate(h, scale_factor=2))
        h = s.conv2(F.relu(s.cbn2(h, c)))
        return h + s.sc(F.interpolate(x, scale_factor=2))


def fill_ours(params, k):
    """params: (name, tensor) in our view order. Mirrors nn_fill_params."""
    scale = 1.0
    for name, p in params:
        with torch.no_grad():
            if name.endswith("weight") or name.endswith("weight_orig"):
                scale = 1.0 / math.sqrt(p.shape[1] * (p.shape[2] * p.shape[3] if p.dim() == 4 else 1))
            p.copy_(param_fill(tuple(p.shape), k, scale))
        k += 1
    return k


def case(name, mod, base, xs, labels, order, bufs):
    """order: parameter names in our view order; bufs: buffer names likewise."""
    named = dict(mod.named_parameters())
    params = [(n, named[n]) for n in order]
    assert len(params) == len(named), (name, list(named))
    fill_ours(params, base)
    with torch.no_grad():
        for sub in mod.modules():
            if hasattr(sub, "weight_u"):
                sub.weight_u.fill_(1.0 / math.sqrt(sub.weight_u.numel()))
                sub.weight_v.fill_(1.0 / math.sqrt(sub.weight_v.numel()))
    mod.train()
    for s, x in enumerate(xs):
        for _, p in params:
            p.grad = None
        x = x.clone().requires_grad_(True)
        if labels is not None:
            lab = torch.tensor(labels[s])
            y = mod(x, lab)
            put(f"cbn.{name}.labels{s}", lab.to(torch.int32))
        else:
            y = mod(x)
        dy = param_fill(tuple(y.shape), base + 60 + s, 1.0)
        y.backward(dy)
        put(f"cbn.{name}.x{s}", x)
        put(f"cbn.{name}.dy{s}", dy)
        put(f"cbn.{name}.y{s}", y)
        put(f"cbn.{name}.dx{s}", x.grad)
        for i, (_, p) in enumerate(params):
            put(f"cbn.{name}.grad{s}.{i}", p.grad)
    allb = dict(mod.named_buffers())
    for i, b in enumerate(bufs):
        put(f"cbn.{name}.buf.{i}", allb[b])
    mod.eval()
    with torch.no_grad():
        x0 = tensors[f"cbn.{name}.x0"]
        y = mod(torch.from_numpy(x0), torch.tensor(labels[0])) if labels is not None else mod(torch.from_numpy(x0))
        put(f"cbn.{name}.y_eval", y)


BUFS = ["running_mean", "running_var"]
SN_BUFS = BUFS + ["gain.weight_u", "gain.weight_v", "bias.weight_u", "bias.weight_v"]

# {'cbn', 4, classes = 5}, input (4, 3, 3)
case("classes", CBN(4, classes=5), 100,
     [param_fill((3, 4, 3, 3), 170, 1.0), param_fill((3, 4, 3, 3), 171, 1.0, 0.5)], [[3, 0, 4], [1, 1, 2]],
     ["gain.weight", "bias.weight"], BUFS)

# {'cbn', 4, classes = 3, sn = true}, {'lrelu', 0.2} (fused), input (4, 5)
case("classes_sn", CBN(4, classes=3, sn=True, act=nn.LeakyReLU(0.2)), 200,
     [param_fill((4, 4, 5), 270, 1.0), param_fill((4, 4, 5), 271, 2.0)], [[2, 0, 2, 1], [0, 0, 1, 2]],
     ["gain.weight_orig", "bias.weight_orig"], SN_BUFS)

# {'split', 0, 6, name = 'c'}, {'split', 6, 54, input = 'x'}, {'reshape', 3, 4, 4},
# {'cbn', 3, cond = 'c', bias = true}, {'relu'} (fused)
case("cond", Split(6, (3, 4, 4), CBN(3, d=6, bias=True, act=nn.ReLU())), 300,
     [param_fill((4, 54), 370, 1.0), param_fill((4, 54), 371, 1.0, -0.25)], None,
     ["cbn.gain.weight", "cbn.gain.bias", "cbn.bias.weight", "cbn.bias.bias"], ["cbn." + b for b in BUFS])

# {'split', 0, 5, name = 'c'}, {'split', 5, 11, input = 'x'},
# {'cbn', 6, eps = 1e-3, momentum = 0.2, cond = 'c', sn = true}: flat (C) input
case("cond_sn", Split(5, (6,), CBN(6, d=5, sn=True, eps=1e-3, momentum=0.2)), 400,
     [param_fill((5, 11), 470, 1.0), param_fill((5, 11), 471, 1.5)], None,
     ["cbn.gain.weight_orig", "cbn.bias.weight_orig"], ["cbn." + b for b in SN_BUFS])

# the ResNet block: {'split', 0, 5, name = 'c'}, {'split', 5, 69, input = 'x'},
# {'reshape', 4, 4, 4, name = 'xin'}, {'cbn', 4, cond = 'c', sn = true}, {'relu'}, {'upsample', 2},
# {'conv', 4, 3, 3, 1, 1, sn = true}, {'cbn', 3, cond = 'c', sn = true}, {'relu'},
# {'conv', 3, 3, 3, 1, 1, sn = true, name = 'res'}, {'upsample', 2, input = 'xin'},
# {'conv', 4, 3, 1, sn = true, name = 'sc'}, {'add', input = 'res', with = 'sc'}
case("resblock", ResBlock(5, 4, 3, 4), 500,
     [param_fill((3, 69), 570, 1.0), param_fill((3, 69), 571, 1.0, 0.3)], None,
     ["cbn1.gain.weight_orig", "cbn1.bias.weight_orig", "conv1.weight_orig", "conv1.bias",
      "cbn2.gain.weight_orig", "cbn2.bias.weight_orig", "conv2.weight_orig", "conv2.bias",
      "sc.weight_orig", "sc.bias"],
     ["cbn1." + b for b in SN_BUFS] + ["conv1.weight_u", "conv1.weight_v"] + ["cbn2." + b for b in SN_BUFS]
     + ["conv2.weight_u", "conv2.weight_v", "sc.weight_u", "sc.weight_v"])

write_safetensors(OUT, tensors, {"generator": "tests/ref/make_nn_refs4.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes")
