#!/usr/bin/python3
"""Checks g_step's moving average of G in two checkpoints of consecutive
steps k-1 and k (safetensors read with json + numpy):

  ema_k = decay ema_{k-1} + (1 - decay) net_k     for k > ema_start
  ema_k = net_k                                   for k <= ema_start

for every parameter and buffer of G (g.net.* but the optimiser state and
the generator), except spectral norm's vectors: past ema_start, u and v of
a weight W_orig are one power iteration on the averaged weight from the
averaged u (v = W^T u / |W^T u|, u = W v / |W v|). usage: check_ema.py
PREV NEXT DECAY EMA_START
Exits 0 when every tensor matches (float32 rounding), 1 naming the first
that does not."""
import json
import struct
import sys

import numpy as np


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}.get(e["dtype"])
        if dt is not None:
            out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(e["shape"])
    return out, meta


prev, _ = load(sys.argv[1])
nxt, meta = load(sys.argv[2])
decay, start = float(sys.argv[3]), int(sys.argv[4])
step = int(nxt["g.step"][0])
names = [k[len("g.net."):] for k in nxt if k.startswith("g.net.") and ".opt." not in k and k != "g.net.rng"]
if not names or any("g.ema." + k not in nxt for k in names):
    sys.exit(f"FAIL: {sys.argv[2]} lacks g.ema.* for some of {names[:3]}...")


def average(k):
    return decay * prev["g.ema." + k].astype(np.float64) + (1 - decay) * nxt["g.net." + k].astype(np.float64)


def unit(x):
    return x / max(np.linalg.norm(x), 1e-12)


def iterated(k):
    """u or v of an SN weight after the power iteration on the average
    (the weights the G backbones normalise are (out, ...): PyTorch's dim 0)"""
    base = k[:-2]
    w = average(base + "_orig")
    w = w.reshape(w.shape[0], -1)
    u0 = average(base + "_u")
    if u0.size != w.shape[0]:
        sys.exit(f"FAIL: {base}_u has {u0.size} values for a weight of {w.shape[0]} rows")
    v = unit(w.T @ u0)
    return unit(w @ v) if k.endswith("_u") else v


sn_vectors = 0
checked = 0
for k in names:
    net, ema = nxt["g.net." + k].astype(np.float64), nxt["g.ema." + k].astype(np.float64)
    sn = k[-2:] in ("_u", "_v") and k[:-2] + "_orig" in names
    if step <= start:
        want = net
    elif sn:
        want = iterated(k)
        sn_vectors += 1
    else:
        want = average(k)
    err = np.max(np.abs(ema - want) / (np.abs(want) + 1e-3))
    if err > 1e-5:
        sys.exit(f"FAIL: step {step}: g.ema.{k} differs from the moving average by {err:.3g} (relative)")
    checked += ema.size
moved = any(np.any(nxt["g.ema." + k] != nxt["g.net." + k]) for k in names)
if step > start and not moved:
    sys.exit(f"FAIL: step {step} > ema_start {start} but the average equals the network")
print(f"ok: step {step}: {len(names)} tensors ({sn_vectors} spectral norm vectors), {checked} values of g.ema match")
