#!/usr/bin/python3
"""Baseline of bench_feed: a PyTorch DataLoader feeding 64x64 batches from a
folder of JPEGs, the way a torchvision pipeline does it (ImageFolder, PIL
decoding, Resize(64) of the shorter side, CenterCrop(64), ToTensor,
Normalize to [-1, 1]). torchvision is not packaged for Debian 12, so the
same steps are written out with PIL, numpy and torch (python3-torch,
python3-pil, python3-numpy).

usage: /usr/bin/python3 torch_feed.py DIR [--workers 2] [--batch 64] [--size 64] [--epochs 1]
Prints one line: images=N seconds=S images_per_s=R steady_images_per_s=R2
(steady: from the first batch on, worker start-up excluded).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
from PIL import Image

EXTS = (".jpg", ".jpeg", ".png")


class Folder(torch.utils.data.Dataset):
    """DIR/<class>/<image>, classes and files in sorted order (ImageFolder)."""

    def __init__(self, root, size):
        self.size = size
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.items = []
        for label, c in enumerate(classes):
            for dirpath, _, files in sorted(os.walk(os.path.join(root, c))):
                for f in sorted(files):
                    if f.lower().endswith(EXTS):
                        self.items.append((os.path.join(dirpath, f), label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        w, h = img.size
        s = self.size / min(w, h)
        nw, nh = max(self.size, round(w * s)), max(self.size, round(h * s))
        img = img.resize((nw, nh), Image.BILINEAR)
        x0, y0 = (nw - self.size) // 2, (nh - self.size) // 2
        img = img.crop((x0, y0, x0 + self.size, y0 + self.size))
        t = torch.from_numpy(np.asarray(img, dtype=np.float32)).permute(2, 0, 1)
        return t / 127.5 - 1.0, label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = Folder(a.dir, a.size)
    if len(ds) == 0:
        sys.exit("torch_feed: no images in " + a.dir)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    n = 0
    steady_n = 0
    t0 = time.time()
    t_first = None
    for _ in range(a.epochs):
        for x, y in loader:
            assert x.shape[1:] == (3, a.size, a.size) and x.dtype == torch.float32
            n += x.shape[0]
            if t_first is None:
                t_first = time.time()
            else:
                steady_n += x.shape[0]
    t = time.time() - t0
    ts = time.time() - t_first
    print("images=%d seconds=%.3f images_per_s=%.1f steady_images_per_s=%.1f" % (n, t, n / t, steady_n / ts))


if __name__ == "__main__":
    main()
