"""The file side of the reference generators (make_nn_refs_sg2*.py,
make_nn_refs_mix.py, make_nn_refs_pl.py, make_nn_refs_r3*.py): named
float32 arrays collected in order and written as one safetensors file (F32
little-endian, the JSON header padded to 8 bytes, the metadata the tests
print); one case's output, gradients and double backward (store_case)
and the layer cases of make_nn_refs_sg2.py and make_nn_refs_r3.py (the
case decorator, run_cases); and the tiny conditional StyleGAN2 G of
the mixing and path-length references (tests/bench/torch_backbones.py's
SG2_G), its mapping and the view names ganflow gives its parameters. Each generator
is its own process, so the collection is this module's state.

    from ref_file import put, tensors, write_safetensors
"""
import json
import struct

import numpy as np
import torch

tensors = {}


def put(name, t):
    """Adds a copy of t (a tensor or array) as float32 under a new name."""
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert name not in tensors, name
    tensors[name] = np.ascontiguousarray(a).astype(np.float32)


def write_safetensors(path, meta):
    header = {"__metadata__": meta}
    off, blobs = 0, []
    for name, a in tensors.items():
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


CASES = []


def case(name, batch, xshape, dbwd=True):
    """Registers the decorated fn(P, B, x, init) as a case of run_cases (into CASES, in order)."""
    def reg(fn):
        CASES.append((name, batch, xshape, dbwd, fn))
        return fn
    return reg


def randn(*shape, scale=1.0):
    return torch.randn(*shape) * scale


def store_case(name, f, x, params, bufs=None, labels=None, dbwd=True, form=None):
    """Stores one case: <name>.x (and .labels, as floats), the output weighting .w, the output .y = f(x) of the
    network whose parameters are params (ganflow's view -> tensor requiring grad), the gradients of
    L = sum(w * y): .dx and per parameter .p.<view> and .g.<view>, buffers .b.<view>; with dbwd the double
    backward of P = 1/2 |dL/dx|^2: .P, .dPdx, .g2.<view>. form(view, t) maps a tensor to ganflow's layout."""
    form = form or (lambda view, t: t)
    xr = x.clone().requires_grad_(True)
    y = f(xr)
    w = torch.randn(*y.shape)
    keys = list(params)
    ps = [params[k] for k in keys]
    grads = torch.autograd.grad((y * w).sum(), [xr] + ps, create_graph=dbwd)
    put(f"{name}.x", x)
    if labels is not None:
        put(f"{name}.labels", labels.float())
    put(f"{name}.w", w)
    put(f"{name}.y", y)
    put(f"{name}.dx", grads[0])
    for k, v, g in zip(keys, ps, grads[1:]):
        put(f"{name}.p.{k}", form(k, v))
        put(f"{name}.g.{k}", form(k, g))
    for k, v in (bufs or {}).items():
        put(f"{name}.b.{k}", v)
    if dbwd:
        pen = 0.5 * (grads[0] * grads[0]).sum()
        g2 = torch.autograd.grad(pen, [xr] + ps, allow_unused=True)
        put(f"{name}.P", pen.reshape(1))
        put(f"{name}.dPdx", g2[0])
        for k, v, g in zip(keys, ps, g2[1:]):
            put(f"{name}.g2.{k}", form(k, g if g is not None else torch.zeros_like(v)))


def run_cases(cases):
    """Stores each case (name, batch, xshape, dbwd, fn) with store_case. fn(P, B, x, init) fills the
    parameters P and buffers B (init) or computes the output."""
    for name, batch, xshape, dbwd, fn in cases:
        P, Bf = {}, {}
        fn(P, Bf, None, True)
        for k in list(P):
            P[k] = P[k].float().requires_grad_(True)
        store_case(name, lambda xr: fn(P, Bf, xr, False), torch.randn(batch, *xshape), P, Bf, dbwd=dbwd)


def tiny_g_names(g):
    """ganflow's view names of the parameters and noise buffers of SG2_G(size=8, classes > 0): (names, bufs)."""
    names, bufs = {}, {}
    names["c_embed_table.weight"], names["c_embed_bias.bias"] = g.embed.table.weight, g.embed.bias
    for i, m in enumerate(g.mapping):
        names[f"map{i}_fc.weight"], names[f"map{i}_fc.bias"] = m.weight, m.bias
    names["b4_const.const"] = g.const
    for p, m in zip(["b4_conv1", "b8_conv0", "b8_conv1"], g.layers):
        names[p + "_affine.weight"], names[p + "_affine.bias"] = m.affine.weight, m.affine.bias
        names[p + "_conv.weight"], names[p + "_noise.noise_strength"], names[p + ".bias"] = m.weight, m.noise_strength, m.bias
        bufs[p + "_noise.noise_const"] = m.noise_const.reshape(-1)
    for p, m in zip(["b4_torgb", "b8_torgb"], g.rgbs):
        names[p + "_affine.weight"], names[p + "_affine.bias"] = m.affine.weight, m.affine.bias
        names[p + "_conv.weight"], names[p + ".bias"] = m.weight, m.bias
    assert len(names) == len(list(g.parameters())), (len(names), len(list(g.parameters())))
    return names, bufs


def tiny_g(tb, zd):
    """tests/bench/torch_backbones.py's SG2_G as ganflow's G{ size = 8, ch = 4, z = zd, w = 5, mapping = 2,
    channels = 2, classes = 3, clamp = 1, noise = "const" } in training mode, its zero biases and noise
    strengths (one per layer, 0-dim) drawn from N(0, 0.3^2) so that every term counts."""
    g = tb.SG2_G(size=8, ch=4, z=zd, wd=5, mapping=2, channels=2, classes=3, clamp=1.0).train()
    for m in g.layers:
        m.const_noise = True
    for p in g.parameters():
        with torch.no_grad():
            if p.dim() <= 1 and not p.abs().sum():
                p.normal_(0, 0.3)
    return g


def tiny_mapping(tb, g, z, y):
    """The mapping of tiny_g: norm2(z) with the label's embedding, then its layers (w before w_avg)."""
    x = torch.cat([tb.norm2(z), g.embed(y)], 1)
    for m in g.mapping:
        x = m(x)
    return x
