#!/usr/bin/python3
"""Baseline of bench_layers: the same modules as its rows, written with
torch.nn (Debian's python3-torch 1.13, CPU), timed for forward + backward
(input and parameter gradients) in training mode.

usage: /usr/bin/python3 torch_layers.py ROW BATCH ITERS REPEAT THREADS
Prints one line: ms_per_iter=X (the best of REPEAT timings of ITERS
iterations, after two warm-up iterations).
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import spectral_norm as SN


class UpBlock(nn.Module):
    """SN-ResNet up-block (BigGAN's G block without conditioning):
    BN, ReLU, nearest x2, SN conv 3x3, BN, ReLU, SN conv 3x3, plus the
    shortcut nearest x2 then SN conv 1x1."""

    def __init__(self, c):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
        self.c1 = SN(nn.Conv2d(c, c, 3, 1, 1))
        self.c2 = SN(nn.Conv2d(c, c, 3, 1, 1))
        self.sc = SN(nn.Conv2d(c, c, 1))

    def forward(self, x, y=None):
        h = F.interpolate(F.relu(self.bn1(x)), scale_factor=2)
        h = self.c2(F.relu(self.bn2(self.c1(h))))
        return h + self.sc(F.interpolate(x, scale_factor=2))


class CBN(nn.Module):
    """Conditional batch norm: BN without affine, gain 1 + E_g[y], bias E_b[y]."""

    def __init__(self, c, classes):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=False)
        self.gain = nn.Embedding(classes, c)
        self.bias = nn.Embedding(classes, c)

    def forward(self, x, y):
        g = 1 + self.gain(y)
        b = self.bias(y)
        return self.bn(x) * g[:, :, None, None] + b[:, :, None, None]


class Attention(nn.Module):
    """SAGAN/BigGAN self-attention with spectral norm on its 1x1 convs."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.theta = SN(nn.Conv2d(c, c // 8, 1, bias=False))
        self.phi = SN(nn.Conv2d(c, c // 8, 1, bias=False))
        self.g = SN(nn.Conv2d(c, c // 2, 1, bias=False))
        self.o = SN(nn.Conv2d(c // 2, c, 1, bias=False))
        self.gamma = nn.Parameter(torch.tensor(0.5))

    def forward(self, x, y=None):
        n, c, h, w = x.shape
        theta = self.theta(x).view(n, c // 8, h * w)
        phi = F.max_pool2d(self.phi(x), 2).view(n, c // 8, h * w // 4)
        g = F.max_pool2d(self.g(x), 2).view(n, c // 2, h * w // 4)
        beta = F.softmax(torch.bmm(theta.transpose(1, 2), phi), -1)
        o = self.o(torch.bmm(g, beta.transpose(1, 2)).view(n, c // 2, h, w))
        return x + self.gamma * o


# row -> (module, per-sample input shape, classes)
ROWS = {
    "upblock": (lambda: UpBlock(128), (128, 8, 8), 0),
    "cbn": (lambda: CBN(128, 10), (128, 16, 16), 10),
    "attention": (lambda: Attention(128), (128, 16, 16), 0),
}


def main():
    row, batch, iters, repeat, threads = sys.argv[1], *map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    make, shape, classes = ROWS[row]
    m = make().train()
    x = torch.randn(batch, *shape, requires_grad=True)
    y = torch.randint(0, max(classes, 1), (batch,))
    dy = torch.randn_like(m(x, y))

    def step():
        m.zero_grad(set_to_none=False)
        x.grad = None
        m(x, y).backward(dy)

    for _ in range(2):
        step()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        best = min(best, (time.perf_counter() - t0) / iters)
    print(f"ms_per_iter={best * 1e3:.4f}")


if __name__ == "__main__":
    main()
