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

# The checkpoint formats this version reads (metadata "format"), as
# GF_CKPT_FORMATS of <ganflow/ckpt.h>: training checkpoints, and single
# networks saved by gf_ckpt_save (the evaluator's classifier, `ganflow
# weights import`).
FORMATS = ("ganflow-checkpoint-1", "ganflow-nn-1")

# safetensors dtype -> bytes per element: the dtypes the C reader knows
# (core/nn/safetensors.c); a header naming another is corrupt
DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "U8": 1, "I32": 4, "I64": 8, "F64": 8, "BOOL": 1, "I8": 1, "I16": 2,
          "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}
# ganflow's own dtype names (gf_dtype_name), for messages about tensors it reads
GF_NAMES = {"F32": "f32", "F16": "f16", "BF16": "bf16", "U8": "u8", "I32": "i32", "I64": "i64"}
MAX_HEADER = 100 << 20  # the reference implementation's limit, as the C reader's
MAX_DIMS = 6


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


def shape_str(shape, dtype):
    """A shape and dtype as the C reader writes them in messages: "(100, 8192) f32"."""
    return "(" + ", ".join(str(d) for d in shape) + ") " + GF_NAMES.get(dtype, "?")


def _no_dup_keys(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"\"{k[:80]}\" given twice")
        seen[k] = v
    return seen


class SafetensorsFile:
    """A safetensors file: its header, metadata and raw tensor bytes.

    Opening it checks what the C reader (gf_st_open) checks, with the same
    messages: the header length against the file, the header's JSON and
    entries (dtype, shape, data_offsets), every tensor's byte range inside the
    data and of the size its dtype and shape need, no two tensors overlapping."""

    def __init__(self, path):
        self.path = path
        with open(self.path, "rb") as f:
            self.raw = bytearray(f.read())
        size = len(self.raw)
        if size < 8:
            raise CheckpointError(f"{self.path}: truncated safetensors file ({size} bytes, no header length)")
        hlen = struct.unpack("<Q", bytes(self.raw[:8]))[0]
        if hlen > MAX_HEADER or hlen > size - 8 or hlen < 2:
            raise CheckpointError(f"{self.path}: header length {hlen} does not fit the {size}-byte file "
                                  "(truncated or not safetensors)")
        try:
            header = json.loads(bytes(self.raw[8:8 + hlen]), object_pairs_hook=_no_dup_keys)
        except (ValueError, RecursionError) as e:
            raise CheckpointError(f"{self.path}: corrupt safetensors header: {e}") from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{self.path}: corrupt safetensors header: not a JSON object")
        self.data_start = 8 + hlen
        meta = header.pop("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise CheckpointError(f"{self.path}: corrupt safetensors header: __metadata__ must map strings to strings")
        self.meta = meta
        self.tensors = header
        self._check_entries()
        self._check_ranges(size - self.data_start)

    # ---- what the C reader checks ----

    def _corrupt(self, what):
        return CheckpointError(f"{self.path}: corrupt safetensors header: {what}")

    def _check_entries(self):
        for name, t in self.tensors.items():
            if not isinstance(t, dict):
                raise self._corrupt(f"entry of tensor \"{name[:80]}\" is not an object")
            for k in t:
                if k not in ("dtype", "shape", "data_offsets"):
                    raise self._corrupt(f"unexpected key \"{k[:40]}\" in tensor entry")
            if len(t) != 3:
                raise self._corrupt("tensor entry without dtype, shape or data_offsets")
            if not isinstance(t["dtype"], str) or t["dtype"] not in DTYPES:
                raise self._corrupt(f"unknown dtype \"{str(t['dtype'])[:40]}\"")
            shape, off = t["shape"], t["data_offsets"]
            if not isinstance(shape, list) or len(shape) > MAX_DIMS:
                raise self._corrupt("tensor with more than 6 dimensions" if isinstance(shape, list) else "bad shape")
            if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= (1 << 62) for d in shape):
                raise self._corrupt("bad shape")
            if (not isinstance(off, list) or len(off) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in off)):
                raise self._corrupt("expected a non-negative integer")

    def _check_ranges(self, data_size):
        spans = []
        for name, t in self.tensors.items():
            a, b = t["data_offsets"]
            numel = 1
            for d in t["shape"]:
                numel *= d
            if numel * 16 >= 1 << 64:
                raise CheckpointError(f"{self.path}: tensor '{name}' is impossibly large")
            if a > b or b > data_size:
                raise CheckpointError(f"{self.path}: tensor '{name}' has data_offsets [{a}, {b}] outside the "
                                      f"{data_size} data bytes (truncated file?)")
            need = numel * DTYPES[t["dtype"]]
            if b - a != need:
                raise CheckpointError(f"{self.path}: tensor '{name}' has {b - a} bytes, its dtype and shape need {need}")
            spans.append((a, b, name))
        spans.sort()
        for (a0, b0, n0), (a1, b1, n1) in zip(spans, spans[1:]):
            if a1 < b0 and b1 > a1:
                raise CheckpointError(f"{self.path}: tensors '{n0}' and '{n1}' overlap")

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
        """(buffer, offset, count, dtype) of a tensor's data: offsets are into self.raw
        (checked when the file was opened)."""
        t = self.tensors.get(name)
        if t is None:
            raise CheckpointError(f"{self.path}: no tensor '{name}'")
        dt = t["dtype"]
        if dt not in GF_NAMES:
            raise CheckpointError(f"{self.path}: tensor '{name}' has dtype {dt}, which ganflow does not read")
        a, _ = t["data_offsets"]
        count = 1
        for d in t["shape"]:
            count *= d
        return self.raw, self.data_start + a, count, dt


class Checkpoint(SafetensorsFile):
    """One checkpoint file (a path resolved as `resume=` takes it): a
    safetensors file of a checkpoint format this version reads (as
    gf_ckpt_open checks, with its message), and its parts."""

    def __init__(self, path):
        super().__init__(resolve(path))
        self._check_format()
        # parts: instances with a NAME.role, in the order of the metadata
        self.parts = [k[:-5] for k in self.meta if k.endswith(".role") and len(k) > 5]

    def _check_format(self):
        fmt = self.meta.get("format")
        if fmt in FORMATS:
            return
        reads = ", ".join(FORMATS)
        if fmt is None:
            raise CheckpointError(f"{self.path}: no checkpoint format in its metadata (\"format\"): not a ganflow "
                                  f"checkpoint; this version reads formats {reads}")
        why = "written by another version of ganflow" if fmt.startswith("ganflow-") else "not a ganflow checkpoint"
        raise CheckpointError(f"{self.path}: checkpoint format '{fmt[:64]}' is not one this version reads ({why}); "
                              f"it reads formats {reads}")

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

