"""ganflow training checkpoints, read with plain Python (struct + json).

The layout is <ganflow/ckpt.h>'s: a safetensors file (8-byte little-endian
header length, a JSON header, raw little-endian data) holding the parts of
every training stage under the stage's instance name NAME:

    tensors   NAME.net.<layer>.<param>     parameters and batchnorm buffers
    metadata  NAME.role                    generator | discriminator | classifier
              NAME.table                   the network's layer table as JSON
              NAME.class                   class of a per-class pair, -1 otherwise

Paths may name a checkpoint file, a run directory or its checkpoints folder
(through checkpoints/latest), as `ganflow sample` accepts them. Nothing here
needs PyTorch; ganflow.torch turns the tensors into torch tensors.
"""
import json
import os
import struct

CKPT_DIR = "checkpoints"
LATEST = "latest"

# safetensors dtype -> (struct/numpy-ish name, bytes per element)
DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message names the file and what is wrong."""


def resolve(path):
    """The checkpoint file a path names: the file itself, or through
    checkpoints/latest of a run directory or a checkpoints folder."""
    if os.path.isdir(path):
        for d in (os.path.join(path, CKPT_DIR), path):
            latest = os.path.join(d, LATEST)
            if os.path.isfile(latest):
                with open(latest) as f:
                    name = f.read().strip()
                return name if os.path.isabs(name) else os.path.join(d, name)
        raise CheckpointError(f"'{path}' is a directory without {CKPT_DIR}/{LATEST} (give a checkpoint file)")
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file or directory")
    return path


class Checkpoint:
    """One checkpoint file: its header, metadata, parts and raw tensor bytes."""

    def __init__(self, path):
        self.path = resolve(path)
        with open(self.path, "rb") as f:
            self.raw = bytearray(f.read())
        if len(self.raw) < 8:
            raise CheckpointError(f"{self.path}: not a safetensors file (shorter than 8 bytes)")
        hlen = struct.unpack("<Q", bytes(self.raw[:8]))[0]
        if 8 + hlen > len(self.raw):
            raise CheckpointError(f"{self.path}: header of {hlen} bytes runs past the end of the file")
        try:
            header = json.loads(bytes(self.raw[8:8 + hlen]))
        except ValueError as e:
            raise CheckpointError(f"{self.path}: header is not JSON ({e})") from None
        self.data_start = 8 + hlen
        self.meta = header.pop("__metadata__", {}) or {}
        self.tensors = header
        # parts: instances with a NAME.role, in the order of the metadata
        self.parts = [k[:-5] for k in self.meta if k.endswith(".role") and len(k) > 5]

    # ---- parts ----

    def role(self, part):
        return self.meta.get(part + ".role")

    def part_class(self, part):
        try:
            return int(self.meta.get(part + ".class", "-1"))
        except ValueError:
            return -1

    def find(self, part):
        """The part a name selects: an instance name ("g", "g3") or a role
        ("generator", "discriminator", "classifier": the first part of that role)."""
        if part in self.parts:
            return part
        for p in self.parts:
            if self.role(p) == part:
                return p
        listed = ", ".join(f"{p} ({self.role(p)})" for p in self.parts) or "none"
        raise CheckpointError(f"{self.path} has no part '{part}' (its parts: {listed})")

    def table(self, part):
        """The part's layer table, as json.loads gives it."""
        text = self.meta.get(part + ".table")
        if text is None:
            raise CheckpointError(f"{self.path}: part '{part}' has no layer table (metadata '{part}.table')")
        try:
            return json.loads(text)
        except ValueError:
            raise CheckpointError(f"{self.path}: the layer table of part '{part}' is not JSON (a checkpoint "
                                  "written before tables were JSON: load it with this ganflow's `ganflow "
                                  "run ... resume=` and let it write a new checkpoint)") from None

    # ---- tensors ----

    def has(self, name):
        return name in self.tensors

    def names(self, prefix=""):
        return [n for n in self.tensors if n.startswith(prefix)]

    def info(self, name):
        """(dtype, shape) of a tensor."""
        t = self.tensors[name]
        return t["dtype"], list(t["shape"])

    def bytes_of(self, name):
        """(buffer, offset, count, dtype) of a tensor's data: offsets are into self.raw."""
        t = self.tensors.get(name)
        if t is None:
            raise CheckpointError(f"{self.path}: no tensor '{name}'")
        dt = t["dtype"]
        if dt not in DTYPES:
            raise CheckpointError(f"{self.path}: tensor '{name}' has dtype {dt}, which ganflow does not write")
        a, b = t["data_offsets"]
        count = 1
        for d in t["shape"]:
            count *= d
        if b - a != count * DTYPES[dt] or self.data_start + b > len(self.raw):
            raise CheckpointError(f"{self.path}: tensor '{name}' has a bad byte range")
        return self.raw, self.data_start + a, count, dt
