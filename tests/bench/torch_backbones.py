#!/usr/bin/python3
"""The SNGAN and BigGAN networks of luaconf/backbones/{sngan,biggan}.lua
written layer by layer with torch.nn (Debian's python3-torch 1.13), from
the papers' architecture tables (Miyato et al. 2018 appendix B; Brock et
al. 2019 appendix B), independently of ganflow's tables: the baseline of
tests/bench/run backbone_step, and the parameter counts test_nn_backbones
checks ganflow's networks against.

usage: torch_backbones.py counts
         prints "NAME params" for the configurations test_nn_backbones builds
       torch_backbones.py step NAME BATCH ITERS REPEAT THREADS
         times full GAN iterations (n_dis D steps on real + fake batches,
         then one G step, hinge loss, Adam), prints images_per_s=X
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import spectral_norm

SN = spectral_norm


def maybe_sn(m, on):
    return SN(m) if on else m


class GBlock(nn.Module):
    """BN/cBN, ReLU, x2, conv3, BN/cBN, ReLU, conv3 + (x2, conv1)."""

    def __init__(self, cin, cout, norm, sn):
        super().__init__()
        self.b1, self.b2 = norm(cin), norm(cout)
        self.c1 = maybe_sn(nn.Conv2d(cin, cout, 3, 1, 1), sn)
        self.c2 = maybe_sn(nn.Conv2d(cout, cout, 3, 1, 1), sn)
        self.sc = maybe_sn(nn.Conv2d(cin, cout, 1), sn)

    def forward(self, x, c=None):
        h = F.interpolate(F.relu(self.b1(x, c) if c is not None else self.b1(x)), scale_factor=2)
        h = self.c1(h)
        h = self.c2(F.relu(self.b2(h, c) if c is not None else self.b2(h)))
        return h + self.sc(F.interpolate(x, scale_factor=2))


class DBlock(nn.Module):
    """[ReLU], conv3, ReLU, conv3, [pool] + shortcut (SNGAN/BigGAN D)."""

    def __init__(self, cin, cout, down, first):
        super().__init__()
        self.first, self.down = first, down
        self.c1, self.c2 = SN(nn.Conv2d(cin, cout, 3, 1, 1)), SN(nn.Conv2d(cout, cout, 3, 1, 1))
        self.learn = first or cin != cout or down
        if self.learn:
            self.sc = SN(nn.Conv2d(cin, cout, 1))

    def forward(self, x):
        h = x if self.first else F.relu(x)
        h = self.c2(F.relu(self.c1(h)))
        if self.down:
            h = F.avg_pool2d(h, 2)
        s = x
        if self.first:
            s = self.sc(F.avg_pool2d(s, 2) if self.down else s)
        elif self.learn:
            s = self.sc(s)
            if self.down:
                s = F.avg_pool2d(s, 2)
        return h + s


class CatBN(nn.Module):
    """SNGAN's categorical conditional BN: BN without affine, gain 1 + E_g[y], bias E_b[y]."""

    def __init__(self, c, classes):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=False)
        self.g, self.b = nn.Embedding(classes, c), nn.Embedding(classes, c)
        nn.init.zeros_(self.g.weight), nn.init.zeros_(self.b.weight)

    def forward(self, x, y):
        return self.bn(x) * (1 + self.g(y))[:, :, None, None] + self.b(y)[:, :, None, None]


class CCBN(nn.Module):
    """BigGAN's ccbn: BN without affine, gain 1 + SNLinear(c), bias SNLinear(c), no biases."""

    def __init__(self, c, d):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=False)
        self.g, self.b = SN(nn.Linear(d, c, bias=False)), SN(nn.Linear(d, c, bias=False))

    def forward(self, x, c):
        return self.bn(x) * (1 + self.g(c))[:, :, None, None] + self.b(c)[:, :, None, None]


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.theta = SN(nn.Conv2d(c, c // 8, 1, bias=False))
        self.phi = SN(nn.Conv2d(c, c // 8, 1, bias=False))
        self.g = SN(nn.Conv2d(c, c // 2, 1, bias=False))
        self.o = SN(nn.Conv2d(c // 2, c, 1, bias=False))
        self.gamma = nn.Parameter(torch.tensor(0.0))

    def forward(self, x):
        n, c, h, w = x.shape
        t = self.theta(x).view(n, c // 8, h * w)
        p = F.max_pool2d(self.phi(x), 2).view(n, c // 8, h * w // 4)
        g = F.max_pool2d(self.g(x), 2).view(n, c // 2, h * w // 4)
        beta = F.softmax(torch.bmm(t.transpose(1, 2), p), -1)
        return x + self.gamma * self.o(torch.bmm(g, beta.transpose(1, 2)).view(n, c // 2, h, w))


class Head(nn.Module):
    """ReLU, global sum pooling, SN linear to 1, plus the projection."""

    def __init__(self, c, classes):
        super().__init__()
        self.lin = SN(nn.Linear(c, 1))
        self.emb = SN(nn.Embedding(classes, c)) if classes else None

    def forward(self, h, y):
        h = torch.sum(F.relu(h), dim=(2, 3))
        out = self.lin(h)
        if self.emb is not None:
            out = out + torch.sum(self.emb(y) * h, 1, keepdim=True)
        return out


class SNGAN_G(nn.Module):
    """size 32: z -> 4x4 ch -> 3 up-blocks of ch -> BN, ReLU, conv3, tanh."""

    def __init__(self, ch, z=128, channels=3, classes=0):
        super().__init__()
        self.ch, self.classes = ch, classes
        self.lin = nn.Linear(z, 16 * ch)
        norm = (lambda c: CatBN(c, classes)) if classes else nn.BatchNorm2d
        self.blocks = nn.ModuleList([GBlock(ch, ch, norm, False) for _ in range(3)])
        self.bn = nn.BatchNorm2d(ch)
        self.out = nn.Conv2d(ch, channels, 3, 1, 1)

    def forward(self, z, y=None):
        h = self.lin(z).view(-1, self.ch, 4, 4)
        for b in self.blocks:
            h = b(h, y if self.classes else None)
        return torch.tanh(self.out(F.relu(self.bn(h))))


class SNGAN_D(nn.Module):
    """size 32: optimized block (down), down-block, two plain blocks, head."""

    def __init__(self, ch, channels=3, classes=0):
        super().__init__()
        self.blocks = nn.Sequential(DBlock(channels, ch, True, True), DBlock(ch, ch, True, False),
                                    DBlock(ch, ch, False, False), DBlock(ch, ch, False, False))
        self.head = Head(ch, classes)

    def forward(self, x, y=None):
        return self.head(self.blocks(x), y)


# BigGAN's architectures (Brock et al. 2019, appendix B, tables 4 and 6):
# channel multipliers of G's up-blocks from 4x4 and of D's blocks, which D
# blocks down-sample; self-attention after the block whose output is
# `attention` x `attention` (128: 64, in G and D).
BIGGAN_ARCH = {
    32: ((4, 4, 4, 4), (4, 4, 4, 4), (True, True, False, False)),
    128: ((16, 16, 8, 4, 2, 1), (1, 2, 4, 8, 16, 16), (True, True, True, True, True, False)),
}


class BigGAN_G(nn.Module):
    """Shared embedding, z in one chunk per up-block plus one for the linear layer, up-blocks with ccbn."""

    def __init__(self, ch, z=128, shared=128, channels=3, classes=10, size=32, attention=None):
        super().__init__()
        mult = BIGGAN_ARCH[size][0]
        if attention is None:
            attention = 64 if size == 128 else 0
        self.c0, self.chunk = mult[0] * ch, z // len(mult)
        self.shared = nn.Embedding(classes, shared)
        self.lin = SN(nn.Linear(self.chunk, 16 * self.c0))
        d = self.chunk + shared
        self.blocks = nn.ModuleList([GBlock(mult[i] * ch, mult[i + 1] * ch, lambda c: CCBN(c, d), True)
                                     for i in range(len(mult) - 1)])
        # after which block (index) the self-attention comes: its output is 4 * 2^(i+1) wide
        self.attn_at = [i for i in range(len(self.blocks)) if 4 << (i + 1) == attention]
        self.attn = Attention(mult[self.attn_at[0] + 1] * ch) if self.attn_at else None
        self.bn = nn.BatchNorm2d(mult[-1] * ch)
        self.out = SN(nn.Conv2d(mult[-1] * ch, channels, 3, 1, 1))

    def forward(self, z, y):
        zs = torch.split(z, self.chunk, 1)
        s = self.shared(y)
        h = self.lin(zs[0]).view(-1, self.c0, 4, 4)
        for i, b in enumerate(self.blocks):
            h = b(h, torch.cat([s, zs[i + 1]], 1))
            if i in self.attn_at:
                h = self.attn(h)
        return torch.tanh(self.out(F.relu(self.bn(h))))


class BigGAN_D(nn.Module):
    """Blocks of the architecture's widths (the first optimised), attention, head with projection."""

    def __init__(self, ch, channels=3, classes=10, size=32, attention=None):
        super().__init__()
        _, mult, down = BIGGAN_ARCH[size]
        if attention is None:
            attention = 64 if size == 128 else 0
        layers, cin, res = [], channels, size
        for i, m in enumerate(mult):
            layers.append(DBlock(cin, m * ch, down[i], i == 0))
            res //= 2 if down[i] else 1
            if res == attention and not any(isinstance(x, Attention) for x in layers):
                layers.append(Attention(m * ch))
            cin = m * ch
        self.blocks = nn.Sequential(*layers)
        self.head = Head(cin, classes)

    def forward(self, x, y=None):
        return self.head(self.blocks(x), y)



# ---- StyleGAN2 (StyleGAN2-ADA's training/networks.py: G with output skips,
# D residual), written with torch.nn.functional from the paper's code
# description; one noise strength per synthesis layer, a scalar, as
# SynthesisLayer's (ganflow's noise layer's default); the class embedding as ganflow's
# (an nn.Embedding row plus a bias, scaled: the same count as
# FullyConnectedLayer(classes, dim)) ----

SQRT2 = 2 ** 0.5
FIR = torch.tensor([1.0, 3.0, 3.0, 1.0])
FIR2 = (FIR[:, None] * FIR[None, :]) / FIR.sum() ** 2


def fir(x, up=1, down=1, pad=(0, 0), gain=1.0):
    """upfirdn2d with [1, 3, 3, 1]: zero insertion, pad, 4x4 filter, stride."""
    n, c, h, w = x.shape
    if up == 2:
        x = x.reshape(n, c, h, 1, w, 1)
        x = F.pad(x, [0, 1, 0, 0, 0, 1])
        x = x.reshape(n, c, h * 2, w * 2)
    x = F.pad(x, [pad[0], pad[1], pad[0], pad[1]])
    f = (FIR2 * gain).to(device=x.device, dtype=x.dtype)[None, None].repeat(c, 1, 1, 1)
    return F.conv2d(x, f, groups=c, stride=down)


def bias_act(x, b, act, gain, clamp, lr_mul=1.0):
    if b is not None:
        x = x + (b * lr_mul).reshape([1, -1] + [1] * (x.ndim - 2))
    if act == "lrelu":
        x = F.leaky_relu(x, 0.2)
    x = x * gain
    return x.clamp(-clamp, clamp) if clamp else x


def norm2(x, eps=1e-8):
    return x * (x.square().mean(dim=1, keepdim=True) + eps).rsqrt()


class FC(nn.Module):
    def __init__(self, fin, fout, act="linear", lr_mul=1.0, bias_init=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin) / lr_mul)
        self.bias = nn.Parameter(torch.full([fout], float(bias_init)))
        self.act, self.wg, self.lr_mul = act, lr_mul / fin ** 0.5, lr_mul

    def forward(self, x):
        x = x.matmul((self.weight * self.wg).t())
        return bias_act(x, self.bias, self.act, SQRT2 if self.act == "lrelu" else 1.0, None, self.lr_mul)


class Conv(nn.Module):
    """Conv2dLayer: [blur + stride 2 | downsample2d] conv, bias_act (gain, clamp scaled by the call's gain)."""

    def __init__(self, cin, cout, k, bias=True, act="lrelu", down=1, clamp=None, gain=1.0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, k, k))
        self.bias = nn.Parameter(torch.zeros(cout)) if bias else None
        self.k, self.down, self.act, self.wg = k, down, act, 1 / (cin * k * k) ** 0.5
        self.gain = (SQRT2 if act == "lrelu" else 1.0) * gain
        self.clamp = clamp * gain if clamp else None

    def forward(self, x):
        w = self.weight * self.wg
        if self.down == 2 and self.k == 1:
            x = F.conv2d(fir(x, down=2, pad=(1, 1)), w)
        elif self.down == 2:
            x = F.conv2d(fir(x, pad=(self.k // 2 + 1, self.k // 2 + 1)), w, stride=2)
        else:
            x = F.conv2d(x, w, padding=self.k // 2)
        return bias_act(x, self.bias, self.act, self.gain, self.clamp)


def modconv(x, w, s, demod, up, gain=1.0):
    """StyleGAN2-ADA's modulated_conv2d, not fused (its training path)."""
    s = s * gain
    x = x * s[:, :, None, None]
    if up == 2:   # w (in, out, k, k)
        y = F.conv_transpose2d(x, w, stride=2)
        y = fir(y, pad=(1, 1), gain=4.0)
        wo = w.transpose(0, 1)
    else:
        y = F.conv2d(x, w, padding=w.shape[-1] // 2)
        wo = w
    if demod:
        d = ((wo[None] * s[:, None, :, None, None]).square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
        y = y * d[:, :, None, None]
    return y


class SynthLayer(nn.Module):
    def __init__(self, cin, cout, wd, res, up=1, clamp=None):
        super().__init__()
        self.affine = FC(wd, cin, bias_init=1)
        self.weight = nn.Parameter(torch.randn(cin, cout, 3, 3) if up == 2 else torch.randn(cout, cin, 3, 3))
        self.noise_strength = nn.Parameter(torch.zeros([]))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.register_buffer("noise_const", torch.randn(res, res))
        self.up, self.clamp, self.res = up, clamp, res

    def forward(self, x, w):
        x = modconv(x, self.weight, self.affine(w), True, self.up)
        const = not self.training or getattr(self, "const_noise", False)   # const_noise: the reference tests
        noise = self.noise_const if const else torch.randn(x.shape[0], 1, self.res, self.res, device=x.device)
        x = x + noise * self.noise_strength
        return bias_act(x, self.bias, "lrelu", SQRT2, self.clamp)


class ToRGB(nn.Module):
    def __init__(self, cin, cout, wd, clamp=None):
        super().__init__()
        self.affine = FC(wd, cin, bias_init=1)
        self.weight = nn.Parameter(torch.randn(cout, cin, 1, 1))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.clamp, self.wg = clamp, 1 / cin ** 0.5

    def forward(self, x, w):
        x = modconv(x, self.weight, self.affine(w), False, 1, self.wg)
        return bias_act(x, self.bias, "linear", 1.0, self.clamp)


class Embed(nn.Module):
    """FullyConnectedLayer(classes, dim) of the one-hot label as ganflow writes it."""

    def __init__(self, classes, dim):
        super().__init__()
        self.table, self.bias = nn.Embedding(classes, dim), nn.Parameter(torch.zeros(dim))
        self.lr_mul = classes ** 0.5

    def forward(self, y):
        return norm2(self.table(y) + self.bias * self.lr_mul)


class SG2_G(nn.Module):
    def __init__(self, size=32, ch=512, z=512, wd=512, mapping=2, channels=3, classes=0, clamp=256):
        super().__init__()
        self.embed = Embed(classes, wd) if classes else None
        fin = z + (wd if classes else 0)
        self.mapping = nn.ModuleList([FC(fin if i == 0 else wd, wd, "lrelu", 0.01) for i in range(mapping)])
        self.register_buffer("w_avg", torch.zeros(wd))
        self.const = nn.Parameter(torch.randn(ch, 4, 4))
        self.layers, self.rgbs = nn.ModuleList(), nn.ModuleList()
        res = 4
        self.layers.append(SynthLayer(ch, ch, wd, 4, clamp=clamp))
        self.rgbs.append(ToRGB(ch, channels, wd, clamp))
        while res < size:
            res *= 2
            self.layers.append(SynthLayer(ch, ch, wd, res, up=2, clamp=clamp))
            self.layers.append(SynthLayer(ch, ch, wd, res, clamp=clamp))
            self.rgbs.append(ToRGB(ch, channels, wd, clamp))

    def forward(self, z, y=None):
        x = norm2(z)
        if self.embed is not None:
            x = torch.cat([x, self.embed(y)], 1)
        for m in self.mapping:
            x = m(x)
        w = x
        if self.training:
            self.w_avg.copy_(w.detach().mean(0).lerp(self.w_avg, 0.995))
        x = self.const[None].repeat(z.shape[0], 1, 1, 1)
        x = self.layers[0](x, w)
        img = self.rgbs[0](x, w)
        for i in range(1, len(self.rgbs)):
            x = self.layers[2 * i](self.layers[2 * i - 1](x, w), w)
            img = fir(img, up=2, pad=(2, 1), gain=4.0) + self.rgbs[i](x, w)
        return img


def mbstd(x, group=4):
    n, c, h, w = x.shape
    g = min(group, n)
    y = x.reshape(g, -1, 1, c, h, w)
    y = y - y.mean(dim=0)
    y = (y.square().mean(dim=0) + 1e-8).sqrt()
    y = y.mean(dim=[2, 3, 4]).reshape(-1, 1, 1, 1).repeat(g, 1, h, w)
    return torch.cat([x, y], 1)


class SG2_D(nn.Module):
    def __init__(self, size=32, ch=512, channels=3, classes=0, group=32, clamp=256, d_mapping=8):
        super().__init__()
        g = 0.5 ** 0.5
        self.fromrgb = Conv(channels, ch, 1, clamp=clamp)
        self.blocks = nn.ModuleList()
        res = size
        while res > 4:
            self.blocks.append(nn.ModuleList([Conv(ch, ch, 3, clamp=clamp), Conv(ch, ch, 3, down=2, clamp=clamp, gain=g),
                                              Conv(ch, ch, 1, bias=False, act="linear", down=2, gain=g)]))
            res //= 2
        self.group = group
        self.conv = Conv(ch + 1, ch, 3, clamp=clamp)
        self.fc = FC(ch * 16, ch, "lrelu")
        self.out = FC(ch, ch if classes else 1)
        if classes:
            self.embed = Embed(classes, ch)
            self.cmap = nn.ModuleList([FC(ch, ch, "lrelu", 0.01) for _ in range(d_mapping)])
        self.classes, self.ch = classes, ch

    def forward(self, x, y=None):
        x = self.fromrgb(x)
        for c0, c1, sk in self.blocks:
            x = sk(x) + c1(c0(x))
        x = self.conv(mbstd(x, self.group))
        x = self.out(self.fc(x.flatten(1)))
        if self.classes:
            c = self.embed(y)
            for m in self.cmap:
                c = m(c)
            x = (x * c).sum(dim=1, keepdim=True) / self.ch ** 0.5
        return x

# ---- R3GAN (Huang et al. 2024): the modern ResNet of luaconf/backbones/r3gan.lua
# written with torch.nn from the paper's description (grouped convolutions, no
# normalisation, [1, 2, 1] interpolative resampling, generative and
# discriminative bases), R3GAN's initialisation; widths, cardinality and blocks
# per stage from 4x4 up ----

def msr(m, gain=1.0):
    """N(0, gain^2 / fan_in) weights, zero biases (fan_in as PyTorch's: weight.size(1) * kernel)."""
    w = m.weight
    fan_in = w.shape[1] * (w[0][0].numel() if w.dim() > 2 else 1)
    with torch.no_grad():
        w.normal_(0, gain / fan_in ** 0.5)
        if getattr(m, "bias", None) is not None:
            m.bias.zero_()
    return m


def r3_up(x):
    """R3GAN's interpolative x2 upsampling: [1, 2, 1] convolved with [1, 1] is [1, 3, 3, 1], upfirdn2d's
    reference path (fir above: zero insertion and a depthwise conv, the fastest of the torch forms measured:
    a stride-2 transposed conv of the (N C, 1, H, W) planes, R3GAN's own reference, takes seconds backward)."""
    return fir(x, up=2, pad=(2, 1), gain=4.0)


def r3_down(x):
    return fir(x, down=2, pad=(1, 1))


class BiasLReLU(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(c))

    def forward(self, x):
        return F.leaky_relu(x + self.bias.view(1, -1, 1, 1), 0.2)


class R3Block(nn.Module):
    """1x1 expand, bias + lrelu, grouped kxk, bias + lrelu, 1x1 back (zero at init), + x."""

    def __init__(self, c, card, e, k, total):
        super().__init__()
        gain = (2 / (1 + 0.2 ** 2)) ** 0.5 * total ** -0.25
        self.l1 = msr(nn.Conv2d(c, c * e, 1, bias=False), gain)
        self.l2 = msr(nn.Conv2d(c * e, c * e, k, padding=(k - 1) // 2, groups=card, bias=False), gain)
        self.l3 = msr(nn.Conv2d(c * e, c, 1, bias=False), 0.0)
        self.a1, self.a2 = BiasLReLU(c * e), BiasLReLU(c * e)

    def forward(self, x):
        return x + self.l3(self.a2(self.l2(self.a1(self.l1(x)))))


class R3_G(nn.Module):
    def __init__(self, widths, card, blocks, z=64, channels=3, classes=0, embed=None, e=2, k=3):
        super().__init__()
        total = sum(blocks)
        embed = embed or z
        self.embed = msr(nn.Linear(classes, embed, bias=False)) if classes else None
        zd = z + (embed if classes else 0)
        self.basis = nn.Parameter(torch.randn(widths[0], 4, 4))
        self.basis_lin = msr(nn.Linear(zd, widths[0], bias=False))
        self.ups, self.stages = nn.ModuleList(), nn.ModuleList()   # stage i > 0: [1x1 where the width changes], x2
        for i, w in enumerate(widths):
            if i:
                self.ups.append(msr(nn.Conv2d(widths[i - 1], w, 1, bias=False)) if widths[i - 1] != w else nn.Identity())
            self.stages.append(nn.Sequential(*[R3Block(w, card[i], e, k, total) for _ in range(blocks[i])]))
        self.out = msr(nn.Conv2d(widths[-1], channels, 1, bias=False))

    def forward(self, z, y=None):
        if self.embed is not None:
            z = torch.cat([z, self.embed(F.one_hot(y, self.embed.in_features).to(z.dtype))], 1)
        x = self.stages[0](self.basis[None] * self.basis_lin(z)[:, :, None, None])
        for up, st in zip(self.ups, self.stages[1:]):
            x = st(r3_up(up(x)))
        return self.out(x)


class R3_D(nn.Module):
    def __init__(self, widths, card, blocks, channels=3, classes=0, embed=None, e=2, k=3):
        super().__init__()
        total = sum(blocks)
        n = len(widths)
        self.inp = msr(nn.Conv2d(channels, widths[-1], 1, bias=False))
        self.stages = nn.ModuleList()
        self.downs = nn.ModuleList()
        for i in range(n - 1, -1, -1):
            self.stages.append(nn.Sequential(*[R3Block(widths[i], card[i], e, k, total) for _ in range(blocks[i])]))
            if i:
                self.downs.append(msr(nn.Conv2d(widths[i], widths[i - 1], 1, bias=False)) if widths[i] != widths[i - 1]
                                  else nn.Identity())
        w = widths[0]
        out = (embed or w) if classes else 1
        self.basis = msr(nn.Conv2d(w, w, 4, groups=w, bias=False))
        self.basis_lin = msr(nn.Linear(w, out, bias=False))
        self.embed = msr(nn.Linear(classes, out, bias=False), out ** -0.5) if classes else None

    def forward(self, x, y=None):
        x = self.inp(x)
        for i, st in enumerate(self.stages):
            x = st(x)
            if i < len(self.downs):
                x = self.downs[i](r3_down(x))
        x = self.basis_lin(self.basis(x).flatten(1))
        if self.embed is not None:
            x = (x * self.embed(F.one_hot(y, self.embed.in_features).to(x.dtype))).sum(1, keepdim=True)
        return x


def r3(widths, card, blocks, z=64, channels=1, classes=0):
    n = len(widths)
    return (lambda: R3_G(widths, [card] * n, [blocks] * n, z, channels, classes),
            lambda: R3_D(widths, [card] * n, [blocks] * n, channels, classes), z, classes, 1)


# name -> (G, D, z, classes, n_dis): the configurations of the quality
# table and of backbone_step (CPU widths, 32x32x1 Fashion-MNIST)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import pix2pix_counts  # noqa: E402  (U-Net and PatchGAN as the authors' code builds them)

CONFIGS = {
    "sngan": (lambda: SNGAN_G(32, 128, 1), lambda: SNGAN_D(32, 1), 128, 0, 5),
    "sngan_cond": (lambda: SNGAN_G(32, 128, 1, 10), lambda: SNGAN_D(32, 1, 10), 128, 10, 5),
    "biggan": (lambda: BigGAN_G(8, 128, 128, 1, 10), lambda: BigGAN_D(8, 1, 10), 128, 10, 4),
    "biggan128": (lambda: BigGAN_G(8, 120, 128, 3, 5, 128), lambda: BigGAN_D(8, 3, 5, 128), 120, 5, 2),
    "stylegan2": (lambda: SG2_G(32, 32, 64, 64, 2, 1), lambda: SG2_D(32, 32, 1, group=4), 64, 0, 1),
    "stylegan2_cond": (lambda: SG2_G(32, 32, 64, 64, 2, 1, 10), lambda: SG2_D(32, 32, 1, 10, group=4), 64, 10, 1),
    "stylegan2_cifar": (lambda: SG2_G(), lambda: SG2_D(), 512, 0, 1),
    "stylegan2_cifar_cond": (lambda: SG2_G(classes=10), lambda: SG2_D(classes=10), 512, 10, 1),
    "pix2pix": (lambda: pix2pix_counts.unet(1, 1, 5, ngf=32), lambda: pix2pix_counts.patch_d(2, ndf=32), 0, 0, 1),
    "r3gan": r3([64] * 4, 8, 1),
    "r3gan_cond": r3([64] * 4, 8, 1, classes=10),
    "r3gan_cifar": r3([768] * 4, 96, 2, channels=3),
    "r3gan_cifar_cond": r3([768] * 4, 96, 2, channels=3, classes=10),
}


def count(m):
    return sum(p.numel() for p in m.parameters())


def step_paired(batch, iters, repeat):
    """pix2pix: D on (A, B) and (A, G(A)), G's loss BCE + 100 L1 (the authors' train loop)."""
    g, d = CONFIGS["pix2pix"][0]().train(), CONFIGS["pix2pix"][1]().train()
    og = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    a, b = torch.rand(batch, 1, 32, 32) * 2 - 1, torch.rand(batch, 1, 32, 32) * 2 - 1
    bce = nn.BCEWithLogitsLoss()

    def iteration():
        fake = g(a)
        od.zero_grad()
        pr, pf = d(torch.cat([a, b], 1)), d(torch.cat([a, fake.detach()], 1))
        ((bce(pr, torch.ones_like(pr)) + bce(pf, torch.zeros_like(pf))) * 0.5).backward()
        od.step()
        og.zero_grad()
        pf = d(torch.cat([a, fake], 1))
        (bce(pf, torch.ones_like(pf)) + 100 * F.l1_loss(fake, b)).backward()
        og.step()

    return iteration


def step(name, batch, iters, repeat, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    mg, md, z, classes, n_dis = CONFIGS[name]
    if not z:
        iteration = step_paired(batch, iters, repeat)
        iteration()
        best = 0.0
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(iters):
                iteration()
            best = max(best, iters * batch / (time.perf_counter() - t0))
        print(f"images_per_s={best:.3f}")
        return
    g, d = mg().train(), md().train()
    og = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.0, 0.9))
    od = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.0, 0.9))
    real = torch.rand(batch, 1, 32, 32) * 2 - 1
    labels = torch.randint(0, max(classes, 1), (batch,))
    y = labels if classes else None

    def iteration():
        for _ in range(n_dis):
            with torch.no_grad():
                fake = g(torch.randn(batch, z), y)
            od.zero_grad()
            loss = F.relu(1 - d(real, y)).mean() + F.relu(1 + d(fake, y)).mean()
            loss.backward()
            od.step()
        og.zero_grad()
        (-d(g(torch.randn(batch, z), y), y).mean()).backward()
        og.step()

    iteration()
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            iteration()
        best = max(best, iters * batch / (time.perf_counter() - t0))
    print(f"images_per_s={best:.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "counts":
        for name, (mg, md, *_) in CONFIGS.items():
            print(f"{name}.G {count(mg())}")
            print(f"{name}.D {count(md())}")
    else:
        step(sys.argv[2], *map(int, sys.argv[3:7]))
