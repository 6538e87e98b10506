#!/usr/bin/python3
"""Checks g_step's moving average of G in two checkpoints of consecutive
steps k-1 and k (safetensors read with json + numpy):

  ema_k = decay ema_{k-1} + (1 - decay) net_k     for k > ema_start
  ema_k = net_k                                   for k <= ema_start

for every parameter and buffer of G (g.net.* but the optimiser state and
the generator). usage: check_ema.py PREV NEXT DECAY EMA_START
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
checked = 0
for k in names:
    net, ema = nxt["g.net." + k].astype(np.float64), nxt["g.ema." + k].astype(np.float64)
    if step <= start:
        want = net
    else:
        want = decay * prev["g.ema." + k].astype(np.float64) + (1 - decay) * net
    err = np.max(np.abs(ema - want) / (np.abs(want) + 1e-3))
    if err > 1e-5:
        sys.exit(f"FAIL: step {step}: g.ema.{k} differs from the moving average by {err:.3g} (relative)")
    checked += ema.size
moved = any(np.any(nxt["g.ema." + k] != nxt["g.net." + k]) for k in names)
if step > start and not moved:
    sys.exit(f"FAIL: step {step} > ema_start {start} but the average equals the network")
print(f"ok: step {step}: {len(names)} tensors, {checked} values of g.ema match")
