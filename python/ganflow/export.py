"""`python3 -m ganflow.export CKPT OUT.onnx [part=g] [ema=true] [opset=13] [batch=1]`:
a part of a ganflow checkpoint as an ONNX model, through ganflow.torch and
torch.onnx.export. `ganflow export` runs this module.

The model's inputs are "z" (generators) or "x" (other parts), (batch, *input_shape)
float32, and "labels" (batch) int64 when the network is conditional; its output
is "images" (generators) or "y". The batch dimension is dynamic (a network with
StyleGAN2's minibatch stddev is traced with at least one whole group: its batches
must then be multiples of the group). Batchnorm
runs on its running statistics and dropout is off (eval mode), as `ganflow
sample` generates.

Exit status: 0, 1 (a bad checkpoint or part, an export failure), 2 (usage),
3 (PyTorch or ONNX missing).
"""
import sys

USAGE = "usage: ganflow export CHECKPOINT OUT.onnx [part=g] [ema=true] [opset=13] [batch=1]"


def fail(msg, code=1):
    print(f"ganflow export: {msg}", file=sys.stderr)
    return code


def main(argv):
    if len(argv) < 2 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    ckpt, out = argv[0], argv[1]
    opts = {"part": "g", "ema": "true", "opset": "13", "batch": "1"}
    for a in argv[2:]:
        k, eq, v = a.partition("=")
        if not eq or k not in opts:
            print(f"ganflow export: unknown argument '{a}' (part, ema, opset, batch)\n{USAGE}", file=sys.stderr)
            return 2
        opts[k] = v
    if opts["ema"] not in ("true", "false", "1", "0"):
        return fail(f"ema={opts['ema']}: give true or false", 2)
    try:
        opset, batch = int(opts["opset"]), int(opts["batch"])
    except ValueError:
        return fail("opset and batch must be integers", 2)
    if not 7 <= opset <= 17 or batch < 1:
        return fail("need 7 <= opset <= 17 and batch >= 1", 2)
    try:
        import torch
    except ImportError:
        return fail(f"PyTorch is missing for {sys.executable}: install python3-torch "
                    "(apt-get install python3-torch)", 3)
    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it to check the graph)
    except ImportError:
        onnx = None
    import ganflow.torch as gt
    from ganflow.checkpoint import CheckpointError
    try:
        net = gt.load(ckpt, part=opts["part"], ema=opts["ema"] in ("true", "1"))
    except CheckpointError as e:
        return fail(str(e))
    gen = net.role == "generator"
    # minibatch stddev groups min(group, batch) samples: the traced graph keeps
    # the group of the export's batch, so trace with a whole group (batches
    # that are multiples of it then run as in ganflow)
    groups = [m.group for m in net.modules() if isinstance(m, gt.MbStd)]
    if groups and batch < max(groups):
        batch = max(groups)
    x = torch.randn(batch, *net.input_shape)
    names = ["z" if gen else "x"]
    args = (x,)
    if net.classes:
        args = (x, torch.arange(batch, dtype=torch.int64) % net.classes)
        names.append("labels")
    outname = "images" if gen else "y"
    axes = {n: {0: "batch"} for n in names + [outname]}
    import warnings
    # torch 1.13 warns about every nn.Upsample (its scale is a prim::Constant); harmless
    warnings.filterwarnings("ignore", message="The shape inference of prim::Constant type is missing")
    try:
        with torch.no_grad():
            torch.onnx.export(net, args, out, input_names=names, output_names=[outname], dynamic_axes=axes,
                              opset_version=opset, do_constant_folding=True)
    except Exception as e:  # torch raises many kinds; name the part and the file
        return fail(f"exporting part '{net.part}' of {ckpt} to {out} failed: {e}")
    if onnx is not None:
        try:
            # torch 1.13's exporter leaves the image sizes of some graphs symbolic (StyleGAN2's
            # skip sums); the table fixes every dimension but the batch
            model = onnx.load(out)
            dims = model.graph.output[0].type.tensor_type.shape.dim
            if len(dims) == 1 + len(net.output_shape) and any(d.dim_param for d in dims[1:]):
                for d, v in zip(dims[1:], net.output_shape):
                    d.Clear()
                    d.dim_value = int(v)
                onnx.save(model, out)
            onnx.checker.check_model(onnx.load(out))
        except Exception as e:
            return fail(f"{out}: the exported model does not pass onnx.checker: {e}")
    shape = ", ".join(str(d) for d in net.output_shape)
    cond = f" + labels (0..{net.classes - 1})" if net.classes else ""
    print(f"{out}: part '{net.part}' ({net.role}{', EMA weights' if net.ema else ''}), "
          f"{names[0]} (batch, {', '.join(str(d) for d in net.input_shape)}){cond} -> {outname} (batch, {shape})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
