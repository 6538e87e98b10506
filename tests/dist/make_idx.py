#!/usr/bin/env python3
"""Small IDX (MNIST layout) datasets for the distributed tests.

make_idx.py OUT_DIR N WORLD BATCH [SIZE]
writes OUT_DIR/{blocked,interleaved}-{images,labels}.idx: N random SIZExSIZE
images (seeded) with labels 0..9. "blocked" is the order a data-parallel run
of WORLD ranks reads (rank r reads the contiguous part [r L, r L + L), L =
N / WORLD, in batches of BATCH); "interleaved" holds the same records so
that one process reading it in batches of WORLD x BATCH sees, at step t,
exactly the union of the WORLD ranks' batches at step t.
"""
import random
import struct
import sys


def write(path_img, path_lab, recs, size):
    with open(path_img, "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, len(recs), size, size))
        for img, _ in recs:
            f.write(bytes(img))
    with open(path_lab, "wb") as f:
        f.write(struct.pack(">II", 0x00000801, len(recs)))
        f.write(bytes(lab for _, lab in recs))


def main():
    out, n, world, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    part = n // world
    assert part * world == n and part % batch == 0, "N must be WORLD x a multiple of BATCH"
    rng = random.Random(1234)
    recs = [([rng.randrange(256) for _ in range(size * size)], i % 10) for i in range(n)]
    inter = []
    for t in range(part // batch):
        for r in range(world):
            inter.extend(recs[r * part + t * batch: r * part + (t + 1) * batch])
    write(f"{out}/blocked-images.idx", f"{out}/blocked-labels.idx", recs, size)
    write(f"{out}/interleaved-images.idx", f"{out}/interleaved-labels.idx", inter, size)


if __name__ == "__main__":
    main()
