#!/usr/bin/python3
"""The Python side of tests/bridge/test_bridge.sh: ganflow's outputs against
the PyTorch bridge's (ganflow.torch.load) and the exported ONNX model's.

    check_bridge.py g CKPT PART PREFIX        G on PREFIX.z.npy (+ PREFIX.labels.npy) vs PREFIX.images.npy
                                              (written by `ganflow sample npy=PREFIX`; the per-class
                                              G of class k on the rows labelled k)
    check_bridge.py net CKPT PART REF         a network on REF's "x" (+ "labels") vs its "y" and
                                              "features" (REF: written by net_forward)
    check_bridge.py onnx MODEL REF            the ONNX model (onnx.checker, input/output names and
                                              shapes, then values) on the same inputs as REF
                                              (a PREFIX of npy files or a net_forward file)

Each prints "max_abs_diff=<d>" lines and exits 1 when one is above TOL
(1e-4) or a check fails. onnx 1.12 (Debian 12) has no reference evaluator
(onnx.reference came with 1.13): then the model runs on the small NumPy
evaluator below, which knows the operators the bridge's exports use.
"""
import os
import sys

import numpy as np

TOL = 1e-4


def refs(ref):
    """(inputs, labels or None, expected outputs, features or None) of a reference."""
    if os.path.exists(ref + ".z.npy"):
        lab = ref + ".labels.npy"
        return (np.load(ref + ".z.npy"), np.load(lab) if os.path.exists(lab) else None,
                np.load(ref + ".images.npy"), None)
    from ganflow.checkpoint import SafetensorsFile
    import ganflow.torch as gt
    ck = SafetensorsFile(ref)   # net_forward's outputs: a safetensors file, not a checkpoint
    get = lambda n: gt._tensor(ck, n).numpy() if ck.has(n) else None
    return get("x"), get("labels"), get("y"), get("features")


def report(what, a, b):
    if a.shape != b.shape:
        print(f"FAIL {what}: shape {a.shape} vs {b.shape}")
        return 1
    d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
    ok = d <= TOL and np.isfinite(d)
    print(f"{what}: max_abs_diff={d:.3g} over {a.size} values (|ref| <= {float(np.abs(b).max()):.3g})"
          + ("" if ok else f" FAIL (> {TOL})"))
    return 0 if ok else 1


def check_torch(ckpt, part, ref):
    import torch
    import ganflow.torch as gt
    net = gt.load(ckpt, part=part)
    assert not net.training, "load() must return the module in eval mode"
    x, lab, y, feat = refs(ref)
    if not net.classes and net.cls >= 0 and lab is not None:
        # a per-class G: the rows ganflow sample made with it (label = its class)
        rows = lab == net.cls
        if not rows.any():
            print(f"FAIL: no image of class {net.cls} in {ref}")
            return 1
        x, lab, y = x[rows], None, y[rows]
    if bool(net.classes) != (lab is not None):
        print(f"FAIL: network classes={net.classes} but the reference {'has' if lab is not None else 'has no'} labels")
        return 1
    t = lambda a: None if a is None else torch.from_numpy(a)
    with torch.no_grad():
        fails = report(f"{part} ({net.role}) torch vs ganflow", net(t(x), t(lab)).numpy(), y)
        if feat is not None:
            fails += report(f"{part} features torch vs ganflow", net.node("features", t(x), t(lab)).numpy(), feat)
    return fails


# ---- ONNX ----

def _attrs(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(x, w, b, strides, pads):
    n, c, h, wd = x.shape
    co, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho = (xp.shape[2] - kh) // strides[0] + 1
    wo = (xp.shape[3] - kw) // strides[1] + 1
    cols = np.empty((n, ci, kh, kw, ho, wo), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + strides[0] * ho:strides[0], j:j + strides[1] * wo:strides[1]]
    y = np.einsum("nckluv,ockl->nouv", cols, w, optimize=True)
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def _tconv(x, w, b, strides, pads, opad):
    n, c, h, wd = x.shape
    _, co, kh, kw = w.shape
    full = np.zeros((n, co, (h - 1) * strides[0] + kh + opad[0], (wd - 1) * strides[1] + kw + opad[1]))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + strides[0] * h:strides[0], j:j + strides[1] * wd:strides[1]] += \
                np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    y = full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def _pool(x, k, strides, pads, op):
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    ho = (xp.shape[2] - k[0]) // strides[0] + 1
    wo = (xp.shape[3] - k[1]) // strides[1] + 1
    win = [xp[:, :, i:i + strides[0] * ho:strides[0], j:j + strides[1] * wo:strides[1]]
           for i in range(k[0]) for j in range(k[1])]
    return np.max(win, axis=0) if op == "max" else np.mean(win, axis=0)


def run_numpy(model, feeds):
    """Evaluates an ONNX graph with NumPy (float64): the operators of the bridge's exports."""
    from onnx import numpy_helper
    env = {i.name: numpy_helper.to_array(i).astype(np.float64) if i.data_type == 1 else numpy_helper.to_array(i)
           for i in model.graph.initializer}
    env.update(feeds)
    env[""] = None
    for node in model.graph.node:
        a, i = _attrs(node), [env[n] for n in node.input]
        op = node.op_type
        if op == "Constant":
            v = numpy_helper.to_array(a["value"])
            out = v.astype(np.float64) if v.dtype == np.float32 else v
        elif op == "Cast":
            out = i[0].astype({1: np.float64, 6: np.int32, 7: np.int64}[a["to"]])
        elif op == "Gather":
            out = np.take(i[0], i[1], axis=a.get("axis", 0))
        elif op == "Concat":
            out = np.concatenate(i, axis=a["axis"])
        elif op == "Gemm":
            A = i[0].T if a.get("transA") else i[0]
            B = i[1].T if a.get("transB") else i[1]
            out = a.get("alpha", 1.0) * A @ B + (a.get("beta", 1.0) * i[2] if len(i) > 2 else 0)
        elif op == "MatMul":
            out = i[0] @ i[1]
        elif op == "Add":
            out = i[0] + i[1]
        elif op == "Mul":
            out = i[0] * i[1]
        elif op == "Div":
            out = i[0] / i[1]
        elif op == "Transpose":
            out = np.transpose(i[0], a.get("perm"))
        elif op == "ReduceSum":
            axes = tuple(int(d) for d in i[1]) if len(i) > 1 and i[1] is not None else None
            out = np.sum(i[0], axis=axes, keepdims=bool(a.get("keepdims", 1)))
        elif op == "Shape":
            out = np.array(i[0].shape, dtype=np.int64)
        elif op == "Unsqueeze":
            out = np.expand_dims(i[0], tuple(int(d) for d in i[1]))
        elif op == "Reshape":
            shape = [int(d) if d != 0 else i[0].shape[k] for k, d in enumerate(i[1])]
            out = i[0].reshape(shape)
        elif op == "Flatten":
            ax = a.get("axis", 1)
            out = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
        elif op == "BatchNormalization":
            x, g, b, m, v = i
            sh = (1, -1) + (1,) * (x.ndim - 2)
            out = (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + a.get("epsilon", 1e-5)) * g.reshape(sh) + b.reshape(sh)
        elif op == "Resize":
            if a.get("mode", b"nearest") != b"nearest" or a.get("coordinate_transformation_mode") != b"asymmetric":
                raise NotImplementedError(f"Resize {a}")
            s = [int(round(f)) for f in i[2]]
            out = i[0]
            for ax, f in enumerate(s):
                out = np.repeat(out, f, axis=ax) if f != 1 else out
        elif op == "Conv":
            if any(d != 1 for d in a.get("dilations", [1, 1])):
                raise NotImplementedError(f"Conv {a}")
            g, b = a.get("group", 1), i[2] if len(i) > 2 else None
            ci, co = i[0].shape[1] // g, i[1].shape[0] // g   # groups: StyleGAN2's depthwise FIR filter
            out = np.concatenate([_conv(i[0][:, k * ci:(k + 1) * ci], i[1][k * co:(k + 1) * co],
                                        None if b is None else b[k * co:(k + 1) * co], a.get("strides", [1, 1]),
                                        a.get("pads", [0] * 4)) for k in range(g)], axis=1)
        elif op == "Pad":
            if a.get("mode", b"constant") != b"constant":
                raise NotImplementedError(f"Pad {a}")
            p, r = [int(d) for d in i[1]], i[0].ndim
            value = float(i[2]) if len(i) > 2 and i[2] is not None else 0.0
            out = np.pad(i[0], [(p[k], p[k + r]) for k in range(r)], constant_values=value)
        elif op == "ConvTranspose":
            if "output_shape" in a or any(d != 1 for d in a.get("dilations", [1, 1])):
                raise NotImplementedError(f"ConvTranspose {a}")
            g, b = a.get("group", 1), i[2] if len(i) > 2 else None
            ci, co = i[0].shape[1] // g, i[1].shape[1]   # weight (in, out/g, k, k): R3GAN's depthwise basis
            out = np.concatenate([_tconv(i[0][:, k * ci:(k + 1) * ci], i[1][k * ci:(k + 1) * ci],
                                         None if b is None else b[k * co:(k + 1) * co], a.get("strides", [1, 1]),
                                         a.get("pads", [0] * 4), a.get("output_padding", [0, 0])) for k in range(g)],
                                 axis=1)
        elif op in ("MaxPool", "AveragePool"):
            if a.get("ceil_mode", 0) or (op == "AveragePool" and not a.get("count_include_pad", 0)
                                         and any(a.get("pads", [0]))):
                raise NotImplementedError(f"{op} {a}")
            out = _pool(i[0], a["kernel_shape"], a.get("strides", [1, 1]), a.get("pads", [0] * 4),
                        "max" if op == "MaxPool" else "avg")
        elif op == "Relu":
            out = np.maximum(i[0], 0)
        elif op == "LeakyRelu":
            out = np.where(i[0] >= 0, i[0], a.get("alpha", 0.01) * i[0])
        elif op == "Tanh":
            out = np.tanh(i[0])
        elif op == "Sigmoid":
            out = 1 / (1 + np.exp(-i[0]))
        elif op == "Softmax":
            e = np.exp(i[0] - i[0].max(axis=a.get("axis", -1), keepdims=True))
            out = e / e.sum(axis=a.get("axis", -1), keepdims=True)
        elif op == "Sub":
            out = i[0] - i[1]
        elif op == "Sqrt":
            out = np.sqrt(i[0])
        elif op == "ReduceMean":
            out = np.mean(i[0], axis=tuple(a["axes"]) if "axes" in a else None, keepdims=bool(a.get("keepdims", 1)))
        elif op == "Clip":
            lo = i[1] if len(i) > 1 and i[1] is not None else -np.inf
            hi = i[2] if len(i) > 2 and i[2] is not None else np.inf
            out = np.clip(i[0], lo, hi)
        elif op == "Expand":
            out = i[0] * np.ones([int(d) for d in i[1]], dtype=i[0].dtype)
        elif op == "Tile":
            out = np.tile(i[0], [int(d) for d in i[1]])
        elif op == "ConstantOfShape":
            v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
            out = np.full([int(d) for d in i[0]], v.reshape(-1)[0], dtype=np.float64 if v.dtype == np.float32 else v.dtype)
        elif op == "Equal":
            out = i[0] == i[1]
        elif op == "Where":
            out = np.where(i[0], i[1], i[2])
        elif op == "Slice":
            starts, ends = [int(d) for d in i[1]], [int(d) for d in i[2]]
            axes = [int(d) for d in i[3]] if len(i) > 3 and i[3] is not None else list(range(len(starts)))
            steps = [int(d) for d in i[4]] if len(i) > 4 and i[4] is not None else [1] * len(starts)
            sl = [slice(None)] * i[0].ndim
            for st, en, ax, sp in zip(starts, ends, axes, steps):
                sl[ax] = slice(st, en, sp)
            out = i[0][tuple(sl)]
        elif op in ("Identity", "Dropout"):
            out = i[0]
        else:
            raise NotImplementedError(f"operator {op} (node {node.name})")
        env[node.output[0]] = out
    return [env[o.name] for o in model.graph.output]


def check_onnx(path, ref):
    import onnx
    model = onnx.load(path)
    onnx.checker.check_model(model)
    x, lab, y, _ = refs(ref)
    ins = [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input]
    outs = [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]) for o in model.graph.output]
    print(f"{path}: onnx {onnx.__version__}, opset {model.opset_import[0].version}, inputs {ins}, outputs {outs}")
    fails = 0
    want_in = [("z" if ref_is_g(ref) else "x", ["batch"] + list(x.shape[1:]))]
    if lab is not None:
        want_in.append(("labels", ["batch"]))
    want_out = [("images" if ref_is_g(ref) else "y", ["batch"] + list(y.shape[1:]))]
    if ins != want_in or outs != want_out:
        print(f"FAIL {path}: expected inputs {want_in} and outputs {want_out}")
        fails += 1
    feeds = {want_in[0][0]: x.astype(np.float32)}
    if lab is not None:
        feeds["labels"] = lab.astype(np.int64)
    try:
        from onnx.reference import ReferenceEvaluator
        got = ReferenceEvaluator(model).run(None, feeds)[0]
        how = "onnx.reference"
    except ImportError:
        got = run_numpy(model, {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()})[0]
        how = "numpy evaluator"
    return fails + report(f"{os.path.basename(path)} ({how}) vs ganflow", np.asarray(got), y)


def ref_is_g(ref):
    return os.path.exists(ref + ".z.npy")


def main(argv):
    if len(argv) >= 4 and argv[0] in ("g", "net"):
        return 1 if check_torch(argv[1], argv[2], argv[3]) else 0
    if len(argv) >= 3 and argv[0] == "onnx":
        return 1 if check_onnx(argv[1], argv[2]) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
