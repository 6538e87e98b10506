"""Unpickles a PyTorch state dict (.pth) into a plain safetensors file, for
`ganflow weights import` (core/cli/cmd_weights.c), which does every check and
the mapping onto a ganflow network itself: this module only turns pickle
into bytes a C program can read.

    python3 -m ganflow.pth2st IN.pth OUT.safetensors

Every tensor of the state dict is written under its own name, as float32
(integer tensors such as BatchNorm's num_batches_tracked as int64), in the
file's order. The pickle is read with torch.load(weights_only = True): a
state dict holds tensors and nothing that runs code. Exit status 0, or 1
with a message naming the file on stderr.
"""
import json
import struct
import sys


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    header["__metadata__"] = {"format": "pth2st"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in tensors:
            f.write(data)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: python3 -m ganflow.pth2st IN.pth OUT.safetensors\n")
        return 2
    src, dst = argv[1], argv[2]
    try:
        import torch
    except ImportError as e:
        sys.stderr.write(f"{src}: reading a .pth needs PyTorch (apt-get install python3-torch): {e}\n")
        return 1
    try:
        sd = torch.load(src, map_location="cpu", weights_only=True)
    except Exception as e:   # noqa: BLE001 - any unpickling failure is the file's
        sys.stderr.write(f"{src}: not a readable PyTorch file ({type(e).__name__}: {e})\n")
        return 1
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict) or not sd:
        sys.stderr.write(f"{src}: holds a {type(sd).__name__}, not a state dict of tensors\n")
        return 1
    out = []
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            sys.stderr.write(f"{src}: entry '{name}' is a {type(t).__name__}, not a tensor\n")
            return 1
        t = t.detach().cpu().contiguous()
        if t.is_floating_point():
            out.append((name, "F32", t.shape, t.float().numpy().astype("<f4").tobytes()))
        else:
            out.append((name, "I64", t.shape, t.long().numpy().astype("<i8").tobytes()))
    write_safetensors(dst, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
