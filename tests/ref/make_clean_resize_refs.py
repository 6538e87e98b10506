#!/usr/bin/python3
"""PIL references for clean-fid's resize (gf_fid_resize_clean, tests/test_fid_clean.c).

Run once with Debian's /usr/bin/python3 (python3-pil) from the repository
root:   /usr/bin/python3 tests/ref/make_clean_resize_refs.py
It writes tests/ref/clean_resize_ref.bin (committed; the test needs no
Python): for each case below, every STRIDE-th value of the 3x299x299
result, float32 little-endian, cases one after the other.

Each image is (c, h, w) in [0, 255], value i of case k = 127.5 u + 127.5 in float (nn_fill),
u = hash24(i, k) / 2^23 - 1 (make_nn_refs.py's hash24, vectorised here). As clean-fid's
"clean" resizer (cleanfid/resize.py, make_resizer("PIL", False, "bicubic")):
each channel a float PIL image (mode "F") resized to 299x299 with
Image.BICUBIC, clipped to [0, 255]; grey images give three equal channels.
"""
import numpy as np
from PIL import Image

CASES = [(1, 32, 32), (3, 37, 23), (1, 400, 600)]   # (c, h, w): up, mixed, down (antialiased)
STRIDE = 31
OUT = 299


def image(k, c, h, w):
    i = np.arange(c * h * w, dtype=np.uint64)
    x = (i * np.uint64(2654435761) + np.uint64((k + 1) * 97531)) & np.uint64(0xFFFFFFFF)
    for shift, mul in ((15, 2246822519), (13, 3266489917)):
        x ^= x >> np.uint64(shift)
        x = (x * np.uint64(mul)) & np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(16)
    h24 = (x >> np.uint64(8)).astype(np.float64)
    u = (h24 / 8388608.0 - 1.0).astype(np.float32)
    return ((np.float32(127.5) * u).astype(np.float32) + np.float32(127.5)).astype(np.float32).reshape(c, h, w)


out = []
for k, (c, h, w) in enumerate(CASES):
    x = image(k, c, h, w)
    chans = []
    for ch in range(3):
        img = Image.fromarray(x[ch if c == 3 else 0], mode="F")
        chans.append(np.asarray(img.resize((OUT, OUT), resample=Image.BICUBIC)).clip(0, 255))
    y = np.stack(chans).astype(np.float32).reshape(-1)
    out.append(y[::STRIDE])
np.concatenate(out).astype("<f4").tofile("tests/ref/clean_resize_ref.bin")
print("tests/ref/clean_resize_ref.bin:", sum(len(o) for o in out), "values")
