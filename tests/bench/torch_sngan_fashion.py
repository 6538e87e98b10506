#!/usr/bin/python3
"""The unconditional SNGAN of pipelines/sngan_fashion.lua trained in PyTorch
1.13 (Debian's python3-torch) on Fashion-MNIST at 32x32, with the networks
of torch_backbones.py and the pipeline's settings (hinge loss, n_dis 5,
Adam 2e-4 with betas (0, 0.9), batch 64, a fresh fake batch per D step):
sample grids every 125 G steps, to compare a ganflow run's grids with
PyTorch's for the same configuration (the README's quality section).

usage: torch_sngan_fashion.py OUT_DIR [steps=250] [seed=1] [threads=2]
                              [ch_g=32] [ch_d=32]
         [images=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz]
writes OUT_DIR/grid-STEP.png (8x8 images of the same 64 noise vectors, G
in eval mode) and prints the losses every 25 steps.
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_backbones import SNGAN_D, SNGAN_G  # noqa: E402


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    out = sys.argv[1]
    opt = {"steps": "250", "seed": "1", "threads": "2", "ch_g": "32", "ch_d": "32",
           "images": "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"}
    for a in sys.argv[2:]:
        k, sep, v = a.partition("=")
        if not sep or k not in opt:
            sys.exit(f"torch_sngan_fashion.py: unknown argument '{a}' (known: {', '.join(opt)})")
        opt[k] = v
    steps, n_dis, batch, zdim = int(opt["steps"]), 5, 64, 128
    torch.set_num_threads(int(opt["threads"]))
    torch.manual_seed(int(opt["seed"]))
    os.makedirs(out, exist_ok=True)

    raw = gzip.open(opt["images"]).read()
    x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32)
    x = F.interpolate(torch.from_numpy(x / 127.5 - 1), size=32, mode="bilinear", align_corners=False)

    g = SNGAN_G(int(opt["ch_g"]), z=zdim, channels=1).train()
    d = SNGAN_D(int(opt["ch_d"]), channels=1).train()
    og = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.0, 0.9))
    od = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.0, 0.9))
    zgrid = torch.randn(64, zdim)
    order, pos = torch.randperm(len(x)), 0

    def grid(step):
        g.eval()
        with torch.no_grad():
            im = ((g(zgrid).clamp(-1, 1) + 1) * 127.5).round().byte()
        g.train()
        im = im.view(8, 8, 32, 32).permute(0, 2, 1, 3).reshape(256, 256)
        Image.fromarray(im.numpy()).save(os.path.join(out, f"grid-{step:05d}.png"))

    t0 = time.time()
    for step in range(1, steps + 1):
        for _ in range(n_dis):
            if pos + batch > len(x):
                order, pos = torch.randperm(len(x)), 0
            real = x[order[pos:pos + batch]]
            pos += batch
            with torch.no_grad():
                fake = g(torch.randn(batch, zdim))
            od.zero_grad()
            dr, df = d(real), d(fake)
            loss_d = F.relu(1 - dr).mean() + F.relu(1 + df).mean()
            loss_d.backward()
            od.step()
        og.zero_grad()
        loss_g = -d(g(torch.randn(batch, zdim))).mean()
        loss_g.backward()
        og.step()
        if step == 1 or step % 25 == 0:
            print(f"[{time.time() - t0:.0f}s] step {step} loss_g {loss_g.item():.4g} loss_d {loss_d.item():.4g} "
                  f"d_real {dr.mean().item():.4g} d_fake {df.mean().item():.4g}", flush=True)
        if step % 125 == 0 or step == steps:
            grid(step)


if __name__ == "__main__":
    main()
