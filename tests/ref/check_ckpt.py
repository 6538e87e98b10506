#!/usr/bin/env python3
"""Reads a checkpoint written by `test_nn_ckpt --write PATH` from Python and
checks it: the safetensors byte layout with json + struct, then the tensors
through numpy and through torch (loaded into the equivalent
torch.nn.Sequential), whichever are installed. Exits 77 (skipped) when
neither numpy nor torch is available.

usage: check_ckpt.py PATH"""
import json
import struct
import sys

path = sys.argv[1]
raw = open(path, "rb").read()
(hlen,) = struct.unpack("<Q", raw[:8])
assert (8 + hlen) % 8 == 0, "data section not 8-byte aligned"
header = json.loads(raw[8:8 + hlen])
data = raw[8 + hlen:]
meta = header.pop("__metadata__")
assert meta["format"] == "ganflow-nn-1", meta
assert meta["note"] == "written by test_nn_ckpt --write", meta

# what write_known() stores
params = [0.25 * i - 1.0 for i in range(10)]
expect = {
    "net.0.weight": ("F32", [2, 3], params[0:6]),
    "net.0.bias": ("F32", [2], params[6:8]),
    "net.1.running_mean": ("F32", [2], [10.0, 11.0]),
    "net.1.running_var": ("F32", [2], [12.0, 13.0]),
    "net.rng": ("I64", [3], [11, 12, 0]),
    "step": ("I64", [1], [1234]),
    "rng": ("I64", [3], [5, 6, 7]),
}
# the batchnorm's gamma and beta follow the linear layer's 8 parameters
params += [0.25 * 10 - 1.0, 0.25 * 11 - 1.0]
expect["net.1.weight"] = ("F32", [2], params[8:10])
expect["net.1.bias"] = ("F32", [2], params[10:12])
assert set(header) == set(expect), sorted(header)
end = 0
for name, (dt, shape, values) in expect.items():
    e = header[name]
    assert e["dtype"] == dt and e["shape"] == shape, (name, e)
    a, b = e["data_offsets"]
    fmt = "<%d%s" % (len(values), "f" if dt == "F32" else "q")
    assert b - a == struct.calcsize(fmt), (name, a, b)
    got = list(struct.unpack(fmt, data[a:b]))
    assert got == values, (name, got, values)
    end = max(end, b)
assert end == len(data), "trailing bytes after the tensors"
readers = ["json+struct"]

try:
    import numpy as np
    for name, (dt, shape, values) in expect.items():
        a, b = header[name]["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4" if dt == "F32" else "<i8").reshape(shape)
        assert np.array_equal(arr.reshape(-1), np.array(values, dtype=arr.dtype)), name
    readers.append("numpy " + np.__version__)
except ImportError:
    pass

try:
    import torch
    import torch.nn as nn
    sd = {}
    for name, (dt, shape, values) in expect.items():
        if not name.startswith("net.") or name == "net.rng":
            continue
        a, b = header[name]["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(shape)
        sd[name[len("net."):]] = t
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(m.endswith("num_batches_tracked") for m in missing), (missing, unexpected)
    assert torch.equal(model[0].weight, torch.tensor(params[0:6]).reshape(2, 3))
    assert torch.equal(model[1].running_var, torch.tensor([12.0, 13.0]))
    readers.append("torch " + torch.__version__)
except ImportError:
    pass

if len(readers) == 1:
    print("check_ckpt: SKIP: neither numpy nor torch in " + sys.executable + " (the format checked with json+struct)")
    sys.exit(77)
print("check_ckpt: %s read by %s" % (path, ", ".join(readers)))
