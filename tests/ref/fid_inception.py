#!/usr/bin/python3
"""The FID Inception-v3 in PyTorch 1.13, for the tests and the benchmark of
`ganflow weights import` and the Inception features (tests/test_inception.c,
tests/bench/inception.sh).

The architecture follows the public description of pytorch-fid's
FIDInceptionA/C/E network (the Inception-v3 of TensorFlow's
pt_inception-2015-12-05 graph): module names, and so state-dict names, are
that network's, so a state dict saved from it is laid out like
pt_inception-2015-12-05-6726825d.pth. Written here from that description;
the weights are random (seeded), never downloaded.

    fid_inception.py ref OUTDIR [N]    model.pth (state dict), the bad state dicts of
                                       bad_files and ref.safetensors:
                                       images (N, 3, H, W) in [0, 255], x299 (their
                                       299x299 [-1, 1] input), pool3 (N, 2048), logits
                                       (N, 1008); grey (1, 1, H, W) and grey299
    fid_inception.py scores OUTDIR     scores.safetensors (2048-d features, 1008-way
                                       probabilities) and scores.txt (numpy/scipy FID, IS, KID)
    fid_inception.py bench N THREADS [BATCH]
                                       images/s of pool3 features on the CPU
"""
import json
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Basic(nn.Module):
    def __init__(s, cin, cout, k, stride=1, padding=0):
        super().__init__()
        s.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=padding, bias=False)
        s.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(s, x):
        return F.relu(s.bn(s.conv(x)))


def avg3(x):
    return F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)


class A(nn.Module):
    def __init__(s, cin, pf):
        super().__init__()
        s.branch1x1 = Basic(cin, 64, 1)
        s.branch5x5_1 = Basic(cin, 48, 1)
        s.branch5x5_2 = Basic(48, 64, 5, padding=2)
        s.branch3x3dbl_1 = Basic(cin, 64, 1)
        s.branch3x3dbl_2 = Basic(64, 96, 3, padding=1)
        s.branch3x3dbl_3 = Basic(96, 96, 3, padding=1)
        s.branch_pool = Basic(cin, pf, 1)

    def forward(s, x):
        return torch.cat([s.branch1x1(x), s.branch5x5_2(s.branch5x5_1(x)),
                          s.branch3x3dbl_3(s.branch3x3dbl_2(s.branch3x3dbl_1(x))),
                          s.branch_pool(avg3(x))], 1)


class B(nn.Module):
    def __init__(s, cin):
        super().__init__()
        s.branch3x3 = Basic(cin, 384, 3, stride=2)
        s.branch3x3dbl_1 = Basic(cin, 64, 1)
        s.branch3x3dbl_2 = Basic(64, 96, 3, padding=1)
        s.branch3x3dbl_3 = Basic(96, 96, 3, stride=2)

    def forward(s, x):
        return torch.cat([s.branch3x3(x), s.branch3x3dbl_3(s.branch3x3dbl_2(s.branch3x3dbl_1(x))),
                          F.max_pool2d(x, 3, 2)], 1)


class C(nn.Module):
    def __init__(s, cin, c7):
        super().__init__()
        s.branch1x1 = Basic(cin, 192, 1)
        s.branch7x7_1 = Basic(cin, c7, 1)
        s.branch7x7_2 = Basic(c7, c7, (1, 7), padding=(0, 3))
        s.branch7x7_3 = Basic(c7, 192, (7, 1), padding=(3, 0))
        s.branch7x7dbl_1 = Basic(cin, c7, 1)
        s.branch7x7dbl_2 = Basic(c7, c7, (7, 1), padding=(3, 0))
        s.branch7x7dbl_3 = Basic(c7, c7, (1, 7), padding=(0, 3))
        s.branch7x7dbl_4 = Basic(c7, c7, (7, 1), padding=(3, 0))
        s.branch7x7dbl_5 = Basic(c7, 192, (1, 7), padding=(0, 3))
        s.branch_pool = Basic(cin, 192, 1)

    def forward(s, x):
        b7 = s.branch7x7_3(s.branch7x7_2(s.branch7x7_1(x)))
        bd = x
        for m in (s.branch7x7dbl_1, s.branch7x7dbl_2, s.branch7x7dbl_3, s.branch7x7dbl_4, s.branch7x7dbl_5):
            bd = m(bd)
        return torch.cat([s.branch1x1(x), b7, bd, s.branch_pool(avg3(x))], 1)


class D(nn.Module):
    def __init__(s, cin):
        super().__init__()
        s.branch3x3_1 = Basic(cin, 192, 1)
        s.branch3x3_2 = Basic(192, 320, 3, stride=2)
        s.branch7x7x3_1 = Basic(cin, 192, 1)
        s.branch7x7x3_2 = Basic(192, 192, (1, 7), padding=(0, 3))
        s.branch7x7x3_3 = Basic(192, 192, (7, 1), padding=(3, 0))
        s.branch7x7x3_4 = Basic(192, 192, 3, stride=2)

    def forward(s, x):
        b7 = s.branch7x7x3_4(s.branch7x7x3_3(s.branch7x7x3_2(s.branch7x7x3_1(x))))
        return torch.cat([s.branch3x3_2(s.branch3x3_1(x)), b7, F.max_pool2d(x, 3, 2)], 1)


class E(nn.Module):
    def __init__(s, cin, maxpool):
        super().__init__()
        s.maxpool = maxpool
        s.branch1x1 = Basic(cin, 320, 1)
        s.branch3x3_1 = Basic(cin, 384, 1)
        s.branch3x3_2a = Basic(384, 384, (1, 3), padding=(0, 1))
        s.branch3x3_2b = Basic(384, 384, (3, 1), padding=(1, 0))
        s.branch3x3dbl_1 = Basic(cin, 448, 1)
        s.branch3x3dbl_2 = Basic(448, 384, 3, padding=1)
        s.branch3x3dbl_3a = Basic(384, 384, (1, 3), padding=(0, 1))
        s.branch3x3dbl_3b = Basic(384, 384, (3, 1), padding=(1, 0))
        s.branch_pool = Basic(cin, 192, 1)

    def forward(s, x):
        b3 = s.branch3x3_1(x)
        bd = s.branch3x3dbl_2(s.branch3x3dbl_1(x))
        bp = F.max_pool2d(x, 3, 1, 1) if s.maxpool else avg3(x)
        return torch.cat([s.branch1x1(x), s.branch3x3_2a(b3), s.branch3x3_2b(b3),
                          s.branch3x3dbl_3a(bd), s.branch3x3dbl_3b(bd), s.branch_pool(bp)], 1)


class FIDInception(nn.Module):
    def __init__(s):
        super().__init__()
        s.Conv2d_1a_3x3 = Basic(3, 32, 3, stride=2)
        s.Conv2d_2a_3x3 = Basic(32, 32, 3)
        s.Conv2d_2b_3x3 = Basic(32, 64, 3, padding=1)
        s.Conv2d_3b_1x1 = Basic(64, 80, 1)
        s.Conv2d_4a_3x3 = Basic(80, 192, 3)
        s.Mixed_5b = A(192, 32)
        s.Mixed_5c = A(256, 64)
        s.Mixed_5d = A(288, 64)
        s.Mixed_6a = B(288)
        s.Mixed_6b = C(768, 128)
        s.Mixed_6c = C(768, 160)
        s.Mixed_6d = C(768, 160)
        s.Mixed_6e = C(768, 192)
        s.Mixed_7a = D(768)
        s.Mixed_7b = E(1280, False)
        s.Mixed_7c = E(2048, True)
        s.fc = nn.Linear(2048, 1008)

    def pool3(s, x):
        x = s.Conv2d_2b_3x3(s.Conv2d_2a_3x3(s.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, 2)
        x = s.Conv2d_4a_3x3(s.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, 2)
        for m in (s.Mixed_5b, s.Mixed_5c, s.Mixed_5d, s.Mixed_6a, s.Mixed_6b, s.Mixed_6c, s.Mixed_6d, s.Mixed_6e,
                  s.Mixed_7a, s.Mixed_7b, s.Mixed_7c):
            x = m(x)
        return F.adaptive_avg_pool2d(x, 1).flatten(1)

    def forward(s, x):
        f = s.pool3(x)
        return f, s.fc(f)


def preprocess(img):
    """pytorch-fid's input pipeline: [0, 255] images (N, C, H, W), grey
    repeated to 3 channels, bilinear resize to 299 (align_corners = False),
    scaled to [-1, 1]."""
    x = img / 255.0
    if x.shape[1] == 1:
        x = x.repeat(1, 3, 1, 1)
    x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
    return 2 * x - 1


def make_model(seed, calib):
    """Random weights; the batchnorm statistics are those of the calibration
    batch (one training forward with momentum 1), so every layer's
    activations stay of order 1 through the 94 convolutions."""
    torch.manual_seed(seed)
    m = FIDInception()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.8, 1.2)
                mod.bias.uniform_(-0.1, 0.1)
                mod.momentum = 1.0
        m.train()
        m(calib)
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.momentum = 0.1
    m.eval()
    return m


def test_images(n, h, w, c, seed):
    """Smooth colour patterns plus noise, integer values in [0, 255]."""
    g = torch.Generator().manual_seed(seed)
    yy = torch.linspace(0, 1, h).view(1, 1, h, 1)
    xx = torch.linspace(0, 1, w).view(1, 1, 1, w)
    f = torch.rand(n, c, 1, 1, generator=g) * 6 + 1
    ph = torch.rand(n, c, 1, 1, generator=g) * 6
    base = 127.5 + 100 * torch.sin(f * xx * 3 + ph) * torch.cos(f * yy * 2 - ph)
    noise = torch.rand(n, c, h, w, generator=g) * 40 - 20
    return (base + noise).clamp(0, 255).round()


def write_safetensors(path, tensors, meta=None):
    header, off, blobs = {}, 0, []
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dt = {torch.float32: "F32", torch.int64: "I64", torch.uint8: "U8"}[t.dtype]
        b = t.numpy().tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = meta or {}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def ref(out, n):
    torch.set_num_threads(2)
    images = test_images(n, 40, 56, 3, 7)
    grey = test_images(1, 33, 45, 1, 8)
    x = preprocess(images)
    m = make_model(1234, preprocess(test_images(4, 40, 56, 3, 9)))
    torch.save(m.state_dict(), f"{out}/model.pth")
    bad_files(out, m.state_dict())
    with torch.no_grad():
        p, l = m(x)
    write_safetensors(f"{out}/ref.safetensors", {"images": images, "x299": x, "pool3": p, "logits": l,
                                                 "grey": grey, "grey299": preprocess(grey)},
                      {"torch": torch.__version__})


def bad_files(out, sd):
    """State dicts `ganflow weights import` must refuse, each naming the
    first tensor at fault. ganflow checks the parameters in layer order,
    then the buffers, then what is left over, so the short files stop
    where the fault is."""
    names = list(sd)
    def upto(key):
        return {k: sd[k] for k in names[:names.index(key) + 1]}
    missing = upto("Mixed_5d.branch1x1.conv.weight")
    del missing["Mixed_5b.branch5x5_1.conv.weight"]
    torch.save(missing, f"{out}/missing.pth")
    shape = upto("Mixed_6b.branch7x7_2.conv.weight")
    shape["Mixed_6b.branch7x7_2.conv.weight"] = torch.zeros(128, 128, 7, 1)
    torch.save(shape, f"{out}/shape.pth")
    extra = dict(sd)
    extra["AuxLogits.fc.weight"] = torch.zeros(1000, 768)
    torch.save(extra, f"{out}/extra.pth")
    other = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8, 10))
    torch.save(other.state_dict(), f"{out}/other.pth")
    with open(f"{out}/model.pth", "rb") as f:
        head = f.read(1 << 16)
    with open(f"{out}/truncated.pth", "wb") as f:
        f.write(head)


def scores(out):
    """Pool3-like features (ReLU-floored, d = 2048) and 1008-way
    probabilities with numpy/scipy's FID (pytorch-fid's formula), IS and
    KID (torch-fidelity's, ganflow's subset sampler) from the definitions
    in tests/fixtures/eval/make_refs.py, in float64 from the float32 values
    written: scores.safetensors and scores.txt."""
    import importlib.util
    import os
    import numpy as np
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_refs", os.path.join(here, "../fixtures/eval/make_refs.py"))
    mr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mr)
    rng = np.random.default_rng(16)
    d, k = 2048, 1008
    basis = rng.normal(0, 0.4, size=(64, d))
    def feats(n, shift):
        z = rng.normal(0, 1, size=(n, 64))
        x = z @ basis + rng.normal(0, 0.5, size=(n, d)) + 0.3 + shift
        return np.maximum(x, 0).astype(np.float32)
    real, fake = feats(3000, 0.0), feats(2500, 0.05)
    logits = rng.normal(0, 3, size=(2500, k))
    p = np.exp(logits - logits.max(1, keepdims=True))
    probs = (p / p.sum(1, keepdims=True)).astype(np.float32)
    f = mr.fid(real, fake)
    ism, iss = mr.inception_score(probs, 10)
    km, ks = mr.kid(real, fake, 10, 1000, 777)
    write_safetensors(f"{out}/scores.safetensors", {"real": torch.from_numpy(real), "fake": torch.from_numpy(fake),
                                                    "probs": torch.from_numpy(probs)})
    with open(f"{out}/scores.txt", "w") as fp:
        for name, v in (("fid", f), ("is_mean", ism), ("is_std", iss), ("kid_mean", km), ("kid_std", ks)):
            fp.write(f"{name} {v!r}\n")


def bench(n, threads, batch=50):
    torch.set_num_threads(threads)
    m = make_model(1, preprocess(test_images(4, 64, 64, 3, 2)))
    x = preprocess(test_images(batch, 64, 64, 3, 3))
    n = max(n, 1)
    with torch.no_grad():
        m.pool3(x[:2])   # warm-up
        t0 = time.perf_counter()
        done = 0
        while done < n:
            b = min(batch, n - done)
            m.pool3(x[:b])
            done += b
        dt = time.perf_counter() - t0
    print(f"torch {torch.__version__} threads={threads} images={n} seconds={dt:.3f} images_per_s={n / dt:.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "ref":
        ref(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    elif sys.argv[1] == "scores":
        scores(sys.argv[2])
    elif sys.argv[1] == "bench":
        bench(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 50)
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
