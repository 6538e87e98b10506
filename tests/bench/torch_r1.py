#!/usr/bin/python3
"""The PyTorch peer of bench_r1: the same D steps in PyTorch 1.13 on the CPU.

    torch_r1.py NET BATCH ITERS REPEAT THREADS GAMMA EVERY      (NET: dcgan, sngan)

prints "torch net=NET plain_ms=... r1_ms=... reg_ms=..." (best of REPEAT
runs of ITERS steps), the steps as StyleGAN2-ADA's loss.py computes them:
  plain  D(x) loss and D(G(z)) loss, each halved as ganflow's d_step
         weighs them, backward, Adam
  r1     "Dboth": x.requires_grad_(), the real loss and
         g = autograd.grad(D(x).sum(), x, create_graph=True) from the same
         forward, (loss + gamma/2 mean |g|^2 / 2).backward(), the fake half, Adam
  reg    "Dreg": a forward of the real batch, g, (EVERY gamma/2 mean |g|^2 / 2).backward(), Adam
The networks: the DC-GAN D of tests/bench/torch_dcgan.py (BCE) and the
SNGAN D of torch_backbones.py at ch = 32 (hinge). Each kind of step is timed
from the same initial weights and a fresh Adam, as bench_r1 times its own."""
import copy
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_backbones import SNGAN_D  # noqa: E402

name = sys.argv[1]
batch, iters, repeat, threads = (int(a) for a in sys.argv[2:6])
gamma, every = float(sys.argv[6]), int(sys.argv[7])
torch.set_num_threads(threads)
torch.manual_seed(1)


def blk(i, o, bn=True):
    layers = [nn.Conv2d(i, o, 3, 2, 1), nn.LeakyReLU(0.2, True), nn.Dropout2d(0.25)]
    return layers + ([nn.BatchNorm2d(o, 0.8)] if bn else [])


class DCGAN_D(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.Sequential(*blk(1, 16, False), *blk(16, 32), *blk(32, 64), *blk(64, 128))
        self.a = nn.Sequential(nn.Linear(128 * 2 * 2, 1), nn.Sigmoid())

    def forward(self, x):
        return self.a(self.m(x).flatten(1))


if name == "dcgan":
    D = DCGAN_D()

    def loss(out, real):
        return F.binary_cross_entropy(out, torch.full_like(out, 1.0 if real else 0.0))
else:
    D = SNGAN_D(32, 1)

    def loss(out, real):
        return F.relu(1 - out).mean() if real else F.relu(1 + out).mean()

D.train()
state0 = copy.deepcopy(D.state_dict())
opt = None
xr = torch.rand(batch, 1, 32, 32) * 2 - 1
xf = torch.rand(batch, 1, 32, 32) * 2 - 1


def plain():
    opt.zero_grad(set_to_none=True)
    (0.5 * loss(D(xr), True)).backward()
    (0.5 * loss(D(xf), False)).backward()
    opt.step()


def r1():
    opt.zero_grad(set_to_none=True)
    x = xr.detach().requires_grad_(True)
    out = D(x)
    g, = torch.autograd.grad(out.sum(), x, create_graph=True)
    pen = g.square().sum([1, 2, 3]).mean() * (gamma / 2)
    (0.5 * loss(out, True) + 0.5 * pen).backward()
    (0.5 * loss(D(xf), False)).backward()
    opt.step()


def reg():
    opt.zero_grad(set_to_none=True)
    x = xr.detach().requires_grad_(True)
    g, = torch.autograd.grad(D(x).sum(), x, create_graph=True)
    pen = g.square().sum([1, 2, 3]).mean() * (gamma / 2)
    (0.5 * every * pen).backward()
    opt.step()


def timed(step):
    # as bench_r1: each kind of step from the same weights and a fresh Adam
    # (a long run of one kind on the same two batches drives D's gradients
    # to subnormal floats, which slow the CPU and which training never sees)
    global opt
    D.load_state_dict(state0)
    opt = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    best = 1e30
    for rep in range(repeat + 1):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        ms = (time.perf_counter() - t) * 1e3 / iters
        if rep:  # the first run warms up
            best = min(best, ms)
    return best


print(f"torch net={name} plain_ms={timed(plain):.3f} r1_ms={timed(r1):.3f} reg_ms={timed(reg):.3f}", flush=True)
