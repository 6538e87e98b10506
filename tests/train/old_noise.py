#!/usr/bin/python3
"""A StyleGAN2 checkpoint as ganflow wrote it before the noise layer took
StyleGAN2's one strength per layer: every noise strength (the network's,
the moving average's, the optimiser's moments), a (1) tensor now, becomes
(C), C copies of its value (C: the noise layer's channels in the part's
layer table), and the layer tables lose the key `strength` (they had
none), so the old network computes what the new one does.

    old_noise.py IN.safetensors OUT.safetensors     (prints how many tensors it widened)
"""
import json
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = head.pop("__metadata__")
channels = {}   # (part, layer name) -> C
for key, text in meta.items():
    if key.endswith(".table"):
        table = json.loads(text)
        layers = table if isinstance(table, list) else [table[k] for k in sorted((k for k in table if k.isdigit()), key=int)]
        for l in layers:
            if isinstance(l, dict) and l.get("1") == "noise":
                channels[(key[:-len(".table")], l["name"])] = int(l["2"])
                l.pop("strength", None)   # tables of then name none
        meta[key] = json.dumps(table)
out, blobs, off, widened = {"__metadata__": meta}, [], 0, 0
for name, t in head.items():
    b = data[t["data_offsets"][0]:t["data_offsets"][1]]
    if name.endswith(".noise_strength"):
        part, layer = name.split(".")[0], name.split(".")[-2]
        c = channels[(part, layer)]
        assert t["shape"] == [1] and t["dtype"] == "F32", (name, t)
        b, t = b * c, dict(t, shape=[c])
        widened += 1
    out[name] = dict(t, data_offsets=[off, off + len(b)])
    off += len(b)
    blobs.append(b)
h = json.dumps(out).encode()
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print(widened)
