#!/usr/bin/python3
"""The PyTorch peer of bench_attention: BigGAN-PyTorch's Attention(ch)
(as tests/ref/make_nn_refs5.py writes it) forward + backward (input and
weight gradients) on the CPU, with and without spectral norm.

    torch_attention.py batch channels size threads iters repeat
prints "torch sn=0 ms=..." and "torch sn=1 ms=..." (best of repeat runs)."""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

batch, ch, size, threads, iters, repeat = (int(a) for a in sys.argv[1:7])
torch.set_num_threads(threads)


class Attention(nn.Module):
    def __init__(self, ch, sn):
        super().__init__()
        self.ch = ch
        wrap = nn.utils.spectral_norm if sn else (lambda m: m)
        self.theta = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.phi = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.g = wrap(nn.Conv2d(ch, ch // 2, 1, bias=False))
        self.o = wrap(nn.Conv2d(ch // 2, ch, 1, bias=False))
        self.gamma = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        ch, h, w = self.ch, x.shape[2], x.shape[3]
        theta = self.theta(x).view(-1, ch // 8, h * w)
        phi = F.max_pool2d(self.phi(x), [2, 2]).view(-1, ch // 8, h * w // 4)
        g = F.max_pool2d(self.g(x), [2, 2]).view(-1, ch // 2, h * w // 4)
        beta = F.softmax(torch.bmm(theta.transpose(1, 2), phi), -1)
        o = self.o(torch.bmm(g, beta.transpose(1, 2)).view(-1, ch // 2, h, w))
        return self.gamma * o + x


x = torch.randn(batch, ch, size, size, requires_grad=True)
dy = torch.randn(batch, ch, size, size)
for sn in (0, 1):
    m = Attention(ch, sn).train()
    best = 1e30
    for rep in range(repeat + 1):
        t = time.perf_counter()
        for _ in range(iters):
            m.zero_grad(set_to_none=True)
            x.grad = None
            m(x).backward(dy)
        ms = (time.perf_counter() - t) * 1e3 / iters
        if rep:   # the first run warms up
            best = min(best, ms)
    print(f"torch sn={sn} ms={best:.3f}", flush=True)
