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


class BigGAN_G(nn.Module):
    """size 32: shared embedding, z in 4 chunks, 3 up-blocks of 4 ch with ccbn."""

    def __init__(self, ch, z=128, shared=128, channels=3, classes=10):
        super().__init__()
        self.ch, self.chunk = ch, z // 4
        self.shared = nn.Embedding(classes, shared)
        self.lin = SN(nn.Linear(self.chunk, 16 * 4 * ch))
        d = self.chunk + shared
        self.blocks = nn.ModuleList([GBlock(4 * ch, 4 * ch, lambda c: CCBN(c, d), True) for _ in range(3)])
        self.bn = nn.BatchNorm2d(4 * ch)
        self.out = SN(nn.Conv2d(4 * ch, channels, 3, 1, 1))

    def forward(self, z, y):
        zs = torch.split(z, self.chunk, 1)
        s = self.shared(y)
        h = self.lin(zs[0]).view(-1, 4 * self.ch, 4, 4)
        for i, b in enumerate(self.blocks):
            h = b(h, torch.cat([s, zs[i + 1]], 1))
        return torch.tanh(self.out(F.relu(self.bn(h))))


class BigGAN_D(nn.Module):
    """size 32: four blocks of 4 ch (the first two down-sample), head with projection."""

    def __init__(self, ch, channels=3, classes=10):
        super().__init__()
        c = 4 * ch
        self.blocks = nn.Sequential(DBlock(channels, c, True, True), DBlock(c, c, True, False),
                                    DBlock(c, c, False, False), DBlock(c, c, False, False))
        self.head = Head(c, classes)

    def forward(self, x, y=None):
        return self.head(self.blocks(x), y)


# name -> (G, D, z, classes, n_dis): the configurations of the quality
# table and of backbone_step (CPU widths, 32x32x1 Fashion-MNIST)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import pix2pix_counts  # noqa: E402  (U-Net and PatchGAN as the authors' code builds them)

CONFIGS = {
    "sngan": (lambda: SNGAN_G(32, 128, 1), lambda: SNGAN_D(32, 1), 128, 0, 5),
    "sngan_cond": (lambda: SNGAN_G(32, 128, 1, 10), lambda: SNGAN_D(32, 1, 10), 128, 10, 5),
    "biggan": (lambda: BigGAN_G(8, 128, 128, 1, 10), lambda: BigGAN_D(8, 1, 10), 128, 10, 4),
    "pix2pix": (lambda: pix2pix_counts.unet(1, 1, 5, ngf=32), lambda: pix2pix_counts.patch_d(2, ndf=32), 0, 0, 1),
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
