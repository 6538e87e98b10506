"""The PyTorch bridge: a part of a ganflow checkpoint as a torch.nn.Module.

    import torch, ganflow.torch
    G = ganflow.torch.load("runs/dcgan_fashion-.../checkpoints/ckpt-00002000.safetensors")
    images = G(torch.randn(16, *G.input_shape))          # conditional G: G(z, labels)

load() rebuilds the network from the part's layer table (metadata
"<part>.table", the nn engine's table: docs/nn.md) with one PyTorch module
per layer, registered under the layer's checkpoint name (its 0-based table
position or its `name`), so the module's state_dict names are the
checkpoint's: net.0.weight, net.label_embedding.weight, net.5.running_var.
The weights come from "<part>.net.<layer>.<param>"; every tensor the table
needs is checked (name, shape) before anything is loaded.

Layer kinds and their PyTorch modules (the nn engine's semantics):

    linear      nn.Linear(in, out, bias)
    conv        nn.Conv2d(in, out, k, stride, pad, bias, groups)
    tconv       nn.ConvTranspose2d(in, out, k, stride, pad, output_padding, bias, groups)
    upsample    nn.Upsample(scale_factor=scale, mode="nearest")
    bn          nn.BatchNorm1d on (C) or (C, L), nn.BatchNorm2d on (C, H, W) (eps, momentum, affine)
    relu, lrelu nn.ReLU, nn.LeakyReLU(slope)
    tanh, sigmoid, softmax (over the features: dim 1)
    dropout     nn.Dropout(p); dropout2d: nn.Dropout2d(p) on images, nn.Dropout1d(p) on (C, L)
    reshape     x.reshape(batch, *dims) (a -1 resolved from the input shape); flatten: torch.flatten(x, 1)
    embedding   nn.Embedding(classes, dim) of the labels
    concat      torch.cat((input, with), dim=1)
    maxpool     nn.MaxPool2d(k, stride, pad); avgpool: nn.AvgPool2d(k, stride, pad) (padding counted)
    add, gsp, split, instancenorm   x + with, x.sum((2, 3)), x[:, from:to], nn.InstanceNorm2d
    cbn         CondBatchNorm: F.batch_norm without affine, then (1 + gain(c)) * . + bias(c) per
                sample and channel, gain/bias nn.Embedding(classes, C) of the labels or
                nn.Linear(D, C, bias) of the `cond` source (BigGAN's ccbn)
    proj        Projection: input + <weight[labels], h> (h the `with` source), an nn.Embedding
    sn = true   torch.nn.utils.spectral_norm on linear, conv, tconv, embedding, proj and
                cbn's two projections
    attention   SAGAN/BigGAN self-attention (BigGAN-PyTorch's Attention): theta, phi, g, o
                1x1 nn.Conv2d without bias, gamma a (1)-tensor; sn = true on all four convs
    StyleGAN2's (docs/nn.md "StyleGAN2's layers"): linear/conv with eqlr = true (stored weight
                times lr_mul/sqrt(fan_in), bias times lr_mul), fir (upfirdn2d with the layer's
                filter), bias_act, noise (noise_const in eval, a fresh draw in train),
                const, modconv (modulate, convolve, demodulate), mbstd, norm2, dot, w_avg
                (w_avg.lerp(w, psi) in eval; `psi` attribute, from the table)
    ada, diffaugment  the identity (eval mode only: their training-mode draws are not reproduced)
    style_mix, style_w  the identity on one row (eval mode only, where ganflow never mixes: the
                mapping runs on w alone and every synthesis layer reads it)

Layers read the previous layer's output unless `input` names another node
("x", "label", a layer name, a 1-based position); the network's output is
the last layer's. The module is returned in eval mode (batchnorm on its
running statistics, no dropout), as `ganflow sample` generates by default;
.train() gives batch statistics.

EMA: load(..., ema=True) takes the moving average "<part>.ema.<layer>.<param>"
(g_step's `ema`) when the checkpoint holds any tensor "<part>.ema.*", as
`ganflow sample` and `ganflow eval` do; an average that lacks a tensor of
the network is refused naming it (CheckpointError), never replaced by the
trained weights. A part without any "<part>.ema.*" loads its trained
weights (module.ema tells which were loaded); ema=False always does.
"""
import torch
import torch.nn.functional as F
from torch import nn

from ganflow.checkpoint import Checkpoint, CheckpointError, shape_str

__all__ = ["load", "build", "GanflowNet", "CheckpointError"]

ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
             "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool}

ALIASES = {"conv2d": "conv", "deconv": "tconv", "convtranspose": "tconv", "conv_transpose": "tconv",
           "batchnorm": "bn", "bn1d": "bn", "bn2d": "bn", "leaky_relu": "lrelu", "leakyrelu": "lrelu",
           "view": "reshape", "embed": "embedding", "cat": "concat", "slice": "split",
           "instancenorm2d": "instancenorm", "in2d": "instancenorm", "ccbn": "cbn", "attn": "attention",
           "self_attention": "attention", "upfirdn2d": "fir", "constant": "const", "modulated_conv": "modconv",
           "minibatch_stddev": "mbstd", "normalize_2nd_moment": "norm2", "truncation": "w_avg",
           "augment": "diffaugment"}

# kinds that read a second source (`with`)
WITH = ("concat", "add", "proj", "modconv", "dot")


class TableError(CheckpointError):
    """A layer table the bridge cannot build; names the layer as the engine does: "layer N (type)"."""


# ---- the layer table (a JSON tree of the engine's gf_value) ----

def _arg(v, i):
    """Positional argument i (0-based) of a table entry: a list item, or key "i+1" of a map."""
    if isinstance(v, list):
        return v[i] if i < len(v) else None
    if isinstance(v, dict):
        return v.get(str(i + 1))
    return None


def _nargs(v):
    n = 0
    while _arg(v, n) is not None:
        n += 1
    return n


def _key(v, k):
    return v.get(k) if isinstance(v, dict) else None


class _Layer:
    """One table entry, parsed: kind, checkpoint key, sources and hyper-parameters."""

    def __init__(self, index, v):
        self.index = index
        t = _arg(v, 0)
        self.type = t if isinstance(t, str) else "?"
        self.v = v
        if not isinstance(t, str):
            raise self.error("has no type name as its first item")
        self.kind = ALIASES.get(t, t)
        self.pos = [_arg(v, i) for i in range(1, _nargs(v))]
        name = _key(v, "name")
        self.name = name if isinstance(name, str) else ""
        self.key = self.name or str(index)

    def error(self, msg):
        return TableError(f"layer {self.index + 1} ({self.type}): {msg}")

    def get(self, i, key, default):
        """Positional argument i (after the type) or the named key, else default."""
        if key is not None and _key(self.v, key) is not None:
            return _key(self.v, key)
        if i is not None and i < len(self.pos):
            return self.pos[i]
        return default

    def int(self, i, key, default=None):
        x = self.get(i, key, default)
        if not isinstance(x, (int, float)) or isinstance(x, bool) or x != int(x):
            raise self.error(f"{key or 'argument %d' % (i + 2)} must be an integer, got {x!r}")
        return int(x)


# ---- modules the engine has and torch.nn spells differently ----

class Reshape(nn.Module):
    """The engine's reshape: per-sample dims (a -1 already resolved)."""

    def __init__(self, dims):
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x):
        return x.reshape(x.shape[0], *self.dims)

    def extra_repr(self):
        return f"dims={self.dims}"


class Concat(nn.Module):
    """The engine's concat: the input, then `with`, along the channels (dim 1)."""

    def forward(self, x, y):
        return torch.cat((x, y), dim=1)


class Add(nn.Module):
    """The engine's add: the input plus `with` (a residual sum)."""

    def forward(self, x, y):
        return x + y


class GlobalSumPool(nn.Module):
    """The engine's gsp: the sum over H and W, (N, C, H, W) -> (N, C)."""

    def forward(self, x):
        return x.sum(dim=(2, 3))


class Split(nn.Module):
    """The engine's split: features from..to-1 of a flat input, x[:, from:to]."""

    def __init__(self, lo, hi):
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return x[:, self.lo:self.hi]

    def extra_repr(self):
        return f"from={self.lo}, to={self.hi}"


class CondBatchNorm(nn.Module):
    """The engine's cbn: batchnorm without affine (running statistics running_mean,
    running_var), then (1 + gain(c)) * x + bias(c) per sample and channel; gain and bias
    are nn.Embedding(classes, C) of the labels or nn.Linear(D, C, bias) of a cond source."""

    def __init__(self, c, classes, dim, bias, eps, momentum, sn):
        super().__init__()
        if classes:
            self.gain, self.bias = nn.Embedding(classes, c), nn.Embedding(classes, c)
        else:
            self.gain, self.bias = nn.Linear(dim, c, bias=bias), nn.Linear(dim, c, bias=bias)
        if sn:
            self.gain = nn.utils.spectral_norm(self.gain)
            self.bias = nn.utils.spectral_norm(self.bias)
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.eps, self.momentum = eps, momentum

    def forward(self, x, cond):
        h = nn.functional.batch_norm(x, self.running_mean, self.running_var, None, None, self.training,
                                     self.momentum, self.eps)
        shape = (x.shape[0], x.shape[1]) + (1,) * (x.dim() - 2)
        return h * (1 + self.gain(cond)).view(shape) + self.bias(cond).view(shape)


class Projection(nn.Embedding):
    """The engine's proj: the unconditional output (N, 1) plus <weight[labels], h>."""

    def forward(self, x, h, labels):
        return x + (super().forward(labels) * h).sum(1, keepdim=True)
class Attention(nn.Module):
    """The engine's attention (SAGAN/BigGAN self-attention), BigGAN-PyTorch's
    Attention(ch): y = x + gamma * o(g beta^T), beta = softmax over the pooled
    positions of theta^T phi, phi and g max-pooled 2x2. gamma is a (1)-tensor
    as in the checkpoint (BigGAN's is 0-d)."""

    def __init__(self, ch, sn):
        super().__init__()
        self.ch = ch
        wrap = nn.utils.spectral_norm if sn else (lambda m: m)
        self.theta = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.phi = wrap(nn.Conv2d(ch, ch // 8, 1, bias=False))
        self.g = wrap(nn.Conv2d(ch, ch // 2, 1, bias=False))
        self.o = wrap(nn.Conv2d(ch // 2, ch, 1, bias=False))
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        ch, h, w = self.ch, x.shape[2], x.shape[3]
        theta = self.theta(x).reshape(-1, ch // 8, h * w)
        phi = nn.functional.max_pool2d(self.phi(x), [2, 2]).reshape(-1, ch // 8, h * w // 4)
        g = nn.functional.max_pool2d(self.g(x), [2, 2]).reshape(-1, ch // 2, h * w // 4)
        beta = torch.softmax(torch.bmm(theta.transpose(1, 2), phi), -1)
        o = self.o(torch.bmm(g, beta.transpose(1, 2)).reshape(-1, ch // 2, h, w))
        return x + self.gamma * o

    def extra_repr(self):
        return f"channels={self.ch}"


# ---- StyleGAN2's kinds ----

class EqLinear(nn.Module):
    """linear with eqlr: F.linear(x, weight * lr_mul / sqrt(in), bias * lr_mul)."""

    def __init__(self, fin, fout, bias, lr_mul):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(fout, fin))
        self.bias = nn.Parameter(torch.zeros(fout)) if bias else None
        self.wg, self.lr_mul = lr_mul / fin ** 0.5, lr_mul

    def forward(self, x):
        return F.linear(x, self.weight * self.wg, None if self.bias is None else self.bias * self.lr_mul)


class EqConv(nn.Module):
    """conv with eqlr: F.conv2d(x, weight * lr_mul / sqrt(in/groups kh kw), bias * lr_mul, stride, padding,
    groups=groups)."""

    def __init__(self, cin, cout, kh, kw, stride, ph, pw, bias, lr_mul, groups=1):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cout, cin // groups, kh, kw))
        self.bias = nn.Parameter(torch.zeros(cout)) if bias else None
        self.wg, self.lr_mul, self.stride, self.pad = lr_mul / (cin // groups * kh * kw) ** 0.5, lr_mul, stride, (ph, pw)
        self.groups = groups

    def forward(self, x):
        return F.conv2d(x, self.weight * self.wg, None if self.bias is None else self.bias * self.lr_mul,
                        self.stride, self.pad, groups=self.groups)


class Fir(nn.Module):
    """upfirdn2d: zeros inserted (up), padded (p0 before, p1 after), the 4x4 filter (gain
    included), every down-th pixel. Written with static shapes for ONNX: zero insertion by
    stacking, padding through the convolution's own (symmetric) padding and a slice."""

    def __init__(self, shape, up, down, p0, p1, gain):
        super().__init__()
        f = torch.tensor([1.0, 3.0, 3.0, 1.0])
        # not in the state: the engine's fir has no buffer (its ops build the filter)
        self.register_buffer("filter", ((f[:, None] * f[None, :]) / 64.0 * gain).reshape(16), persistent=False)
        self.c, self.h, self.w = shape
        self.up, self.down, self.p0, self.p1 = up, down, p0, p1

    def forward(self, x):
        c, h, w = self.c, self.h, self.w
        if self.up == 2:
            x = torch.stack([x, x * 0], dim=4).reshape(-1, c, h, 2 * w)
            x = torch.stack([x, x * 0], dim=3).reshape(-1, c, 2 * h, 2 * w)
            h, w = 2 * h, 2 * w
        f = self.filter.reshape(4, 4).flip([0, 1])[None, None].repeat(c, 1, 1, 1)
        q = max(self.p0, self.p1)
        y = F.conv2d(x, f, groups=c, stride=self.down, padding=q)
        if self.p0 != self.p1:   # (up = 2, down = 1)
            o = q - self.p0
            y = y[:, :, o:o + h + self.p0 + self.p1 - 3, o:o + w + self.p0 + self.p1 - 3]
        return y


class BiasAct(nn.Module):
    """clamp(act(x + lr_mul b) * gain, -clamp, clamp), the bias per channel."""

    def __init__(self, c, act, slope, gain, clamp, bias, lr_mul):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(c)) if bias else None
        self.act, self.slope, self.gain, self.clamp, self.lr_mul = act, slope, gain, clamp, lr_mul

    def forward(self, x):
        if self.bias is not None:
            x = x + (self.bias * self.lr_mul).reshape([1, -1] + [1] * (x.dim() - 2))
        if self.act == "relu":
            x = F.relu(x)
        elif self.act == "lrelu":
            x = F.leaky_relu(x, self.slope)
        x = x * self.gain
        return x.clamp(-self.clamp, self.clamp) if self.clamp > 0 else x


class Noise(nn.Module):
    """x + strength noise[n, h, w] (one strength, StyleGAN2's; or per channel, strength[c]):
    noise_const in eval (mode auto), a fresh draw in training."""

    def __init__(self, c, h, w, mode, per_channel=False):
        super().__init__()
        self.noise_strength = nn.Parameter(torch.zeros(c if per_channel else 1))
        self.register_buffer("noise_const", torch.zeros(h * w))
        self.mode, self.hw = mode, (h, w)

    def forward(self, x):
        mode = self.mode if self.mode != "auto" else ("random" if self.training else "const")
        if mode == "none":
            return x
        if mode == "random":
            noise = torch.randn(x.shape[0], 1, *self.hw, dtype=x.dtype, device=x.device)
        else:
            noise = self.noise_const.reshape(1, 1, *self.hw)
        return x + noise * self.noise_strength.reshape(1, -1, 1, 1)


class Const(nn.Module):
    """The learned constant input, repeated for the batch of x."""

    def __init__(self, c, h, w):
        super().__init__()
        self.const = nn.Parameter(torch.zeros(c, h, w))

    def forward(self, x):
        return self.const.unsqueeze(0).expand(x.shape[0], -1, -1, -1)


class ModConv(nn.Module):
    """Modulate x by the styles s, convolve (a stride-2 transposed conv with up = 2), demodulate."""

    def __init__(self, cin, cout, k, demod, up, pad):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cin, cout, k, k) if up == 2 else torch.zeros(cout, cin, k, k))
        self.demod, self.up, self.pad, self.gain = demod, up, pad, 1.0 / (cin * k * k) ** 0.5

    def forward(self, x, s):
        if not self.demod:
            s = s * self.gain
        x = x * s[:, :, None, None]
        if self.up == 2:
            y = F.conv_transpose2d(x, self.weight, stride=2, padding=self.pad)
            w = self.weight.transpose(0, 1)
        else:
            y = F.conv2d(x, self.weight, padding=self.pad)
            w = self.weight
        if self.demod:
            d = ((w[None] * s[:, None, :, None, None]).square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
            y = y * d[:, :, None, None]
        return y


class MbStd(nn.Module):
    """StyleGAN2's minibatch standard deviation (MinibatchStdLayer)."""

    def __init__(self, group, channels):
        super().__init__()
        self.group, self.channels = group, channels

    def forward(self, x):
        n, c, h, w = x.shape
        g = min(self.group, n)   # a traced model (ONNX) keeps the group of the export's batch
        f = self.channels
        y = x.reshape(g, -1, f, c // f, h, w)
        y = y - y.mean(dim=0)
        y = (y.square().mean(dim=0) + 1e-8).sqrt()
        y = y.mean(dim=[2, 3, 4]).reshape(-1, f, 1, 1).repeat(g, 1, h, w)
        return torch.cat([x, y], dim=1)


class Norm2(nn.Module):
    """normalize_2nd_moment: x / sqrt(mean(x^2) + eps) per sample."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * (x.square().mean(dim=1, keepdim=True) + self.eps).rsqrt()


class Dot(nn.Module):
    """scale * <x, with> per sample, (batch, 1)."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, w):
        return (x * w).sum(dim=1, keepdim=True) * self.scale


class EvalIdentity(nn.Module):
    """D's augmentation layers (ada: StyleGAN2-ADA's, with its buffer p; diffaugment) and G's
    style mixing (style_mix, style_w): the identity in eval mode, as in the engine; their
    training-mode draws are not reproduced."""

    def __init__(self, kind, p=False):
        super().__init__()
        self.kind = kind
        if p:
            self.register_buffer("p", torch.zeros(1))

    def forward(self, x):
        if self.training:
            raise NotImplementedError(f"the bridge runs {self.kind} only in eval mode (the identity)")
        return x


class WAvg(nn.Module):
    """The tracked mean of w: training moves it (beta), eval gives w_avg.lerp(w, psi)."""

    def __init__(self, c, beta, psi):
        super().__init__()
        self.register_buffer("w_avg", torch.zeros(c))
        self.beta, self.psi = beta, psi

    def forward(self, w):
        if self.training:
            with torch.no_grad():
                self.w_avg.copy_(w.detach().mean(dim=0).lerp(self.w_avg, self.beta))
            return w
        return w if self.psi == 1 else self.w_avg.lerp(w, self.psi)


# ---- the network ----

class GanflowNet(nn.Module):
    """A ganflow layer table as a torch module. forward(x, labels=None) returns the
    last layer's output; labels (int, (batch)) are needed when the table embeds them
    (conditional G and D). Attributes: input_shape (per sample), output_shape, classes
    (0 when unconditional), part, role, cls (class of a per-class part, -1 otherwise),
    ema (whether EMA weights were loaded)."""

    def __init__(self, table, input_shape=None):
        super().__init__()
        if isinstance(table, list):
            entries, opts = table, {}
        elif isinstance(table, dict):
            n = 0
            while str(n + 1) in table:
                n += 1
            entries = [table[str(i + 1)] for i in range(n)]
            opts = table
        else:
            raise TableError("network: the layer table must be a table of layers")
        if not entries:
            raise TableError("network: the layer table has no layers")
        shape = input_shape if input_shape is not None else opts.get("input_shape")
        if not shape:
            raise TableError("network: no input shape (the table has no input_shape)")
        self.input_shape = tuple(int(d) for d in shape)
        self.classes = int(opts.get("classes") or 0)
        self.part, self.role, self.cls, self.ema = None, None, -1, False
        self.net = nn.Module()   # the layers, under their checkpoint keys
        # nodes: "x", "label", then one per layer (its output); shapes per sample
        shapes = {"x": self.input_shape, "label": None}
        self.plan = []   # (key, input node, with node or None, output node, reads the labels)
        layers = []
        uses_label = False
        for i, v in enumerate(entries):
            l = _Layer(i, v)
            if l.name and (l.name in ("x", "label") or "." in l.name):
                raise l.error(f'name "{l.name}" is reserved or contains a dot')
            src = _key(v, "input")
            if src is not None:
                inp = self._source(l, layers, "input", src)
            elif l.kind == "embedding":
                inp = "label"
            else:
                inp = layers[-1].node if layers else "x"
            if l.kind in WITH and _key(v, "with") is None:
                raise l.error('needs with = <layer name, position, "x">')
            w = self._source(l, layers, "with", _key(v, "with")) if l.kind in WITH else None
            if l.kind == "cbn":   # the second source: the labels or `cond`
                cond = _key(v, "cond")
                w = "label" if cond is None else self._source(l, layers, "cond", cond)
            l.node = f"n{i}"
            if (inp == "label") != (l.kind == "embedding"):
                raise l.error("only an embedding reads the labels" if inp == "label"
                              else 'expects the labels as input (input = "label")')
            lab = l.kind == "proj" or (l.kind == "cbn" and w == "label")
            uses_label |= inp == "label" or lab
            mod, out = self._module(l, shapes[inp], shapes[w] if w else None)
            if l.get(None, "sn", False) and l.kind not in ("cbn", "attention"):   # those: on their own parts
                if l.kind not in ("linear", "conv", "tconv", "embedding", "proj"):
                    raise l.error("sn is not supported on this kind")
                # PyTorch's own: weight_orig, weight_u, weight_v (the engine's names);
                # dim 1 for transposed convolutions, as the engine
                mod = nn.utils.spectral_norm(mod)
            shapes[l.node] = out
            if l.kind in ("embedding", "proj") or lab:
                k = l.int(0, None) if l.kind != "cbn" else l.int(None, "classes")
                if self.classes and self.classes != k:
                    raise l.error(f"has {k} classes but the network has {self.classes}")
                self.classes = k
            try:
                self.net.add_module(l.key, mod)
            except KeyError:
                raise l.error(f'name "{l.key}" cannot be a torch module name') from None
            self.plan.append((l.key, inp, w, l.node, l.kind == "proj"))
            layers.append(l)
        if not uses_label:
            self.classes = 0
        self.output_shape = tuple(shapes[layers[-1].node])
        self.eval()

    @staticmethod
    def _source(l, layers, key, src):
        if isinstance(src, str):
            if src == "x":
                return "x"
            if src in ("label", "labels"):
                return "label"
            for p in layers:
                if p.name == src:
                    return p.node
            raise l.error(f'{key} = "{src}" names no earlier layer (nor "x" or "label")')
        if isinstance(src, (int, float)) and not isinstance(src, bool) and int(src) == src:
            if 1 <= src <= len(layers):
                return layers[int(src) - 1].node
            raise l.error(f"{key} = {src} is not an earlier layer (1..{len(layers)})")
        raise l.error(f"{key} must be a layer name or position, got {src!r}")

    @staticmethod
    def _module(l, s, ws):
        """(module, output shape per sample) of a layer reading shape s (and ws for concat)."""
        k = l.kind

        def image(channels=None):
            if s is None or len(s) != 3:
                raise l.error(f"expects an image input (C, H, W), got {s}")
            if channels is not None and s[0] != channels:
                raise l.error(f"expects {channels} input channels, got {s[0]}")

        if k == "linear":
            fin, fout = l.int(0, None), l.int(1, None)
            if s != (fin,):
                raise l.error(f"expects a flat input of {fin} features, got {s}")
            if l.get(None, "eqlr", False):
                return EqLinear(fin, fout, bool(l.get(None, "bias", True)), float(l.get(None, "lr_mul", 1))), (fout,)
            return nn.Linear(fin, fout, bias=bool(l.get(None, "bias", True))), (fout,)
        if k in ("conv", "tconv"):
            cin, cout, ks = l.int(0, None), l.int(1, None), l.int(2, None)
            stride, pad = l.int(3, "stride", 1), l.int(4, "pad", 0)
            bias = bool(l.get(None, "bias", True))
            groups = l.int(None, "groups", 1)
            image(cin)
            if groups < 1 or cin % groups or cout % groups:
                raise l.error(f"groups = {groups} must divide the {cin} input and {cout} output channels")
            if k == "conv":
                kh, kw = l.int(None, "kh", ks), l.int(None, "kw", ks)
                ph, pw = l.int(None, "ph", pad), l.int(None, "pw", pad)
                h, w = (s[1] + 2 * ph - kh) // stride + 1, (s[2] + 2 * pw - kw) // stride + 1
                if l.get(None, "eqlr", False):
                    return (EqConv(cin, cout, kh, kw, stride, ph, pw, bias, float(l.get(None, "lr_mul", 1)), groups),
                            (cout, h, w))
                return nn.Conv2d(cin, cout, (kh, kw), stride, (ph, pw), bias=bias, groups=groups), (cout, h, w)
            opad = l.int(5, "output_padding", 0)
            h, w = [(d - 1) * stride - 2 * pad + ks + opad for d in s[1:]]
            return (nn.ConvTranspose2d(cin, cout, ks, stride, pad, output_padding=opad, bias=bias, groups=groups),
                    (cout, h, w))
        if k == "upsample":
            scale = l.int(0, "scale", 2)
            mode = l.get(None, "mode", "nearest")
            if mode != "nearest":
                raise l.error('only mode = "nearest" is supported')
            image()
            return nn.Upsample(scale_factor=scale, mode="nearest"), (s[0], s[1] * scale, s[2] * scale)
        if k == "bn":
            c = l.int(0, None)
            eps, momentum = float(l.get(1, "eps", 1e-5)), float(l.get(2, "momentum", 0.1))
            affine = bool(l.get(None, "affine", True))
            if s is None or not 1 <= len(s) <= 3 or s[0] != c:
                raise l.error(f"expects {c} channels in (C), (C, L) or (C, H, W), got {s}")
            cls = nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d
            return cls(c, eps=eps, momentum=momentum, affine=affine), s
        if k == "relu":
            return nn.ReLU(), s
        if k == "lrelu":
            return nn.LeakyReLU(float(l.get(0, "slope", 0.01))), s
        if k == "tanh":
            return nn.Tanh(), s
        if k == "sigmoid":
            return nn.Sigmoid(), s
        if k == "dropout":
            return nn.Dropout(float(l.get(0, "p", 0.5))), s
        if k == "dropout2d":
            p = float(l.get(0, "p", 0.5))
            if len(s) < 2:
                raise l.error(f"expects (C, H, W) or (C, L) input, got {s}")
            return (nn.Dropout2d(p) if len(s) == 3 else nn.Dropout1d(p)), s
        if k == "softmax":
            if len(s) != 1:
                raise l.error(f"expects a flat input, got {s}")
            return nn.Softmax(dim=1), s
        if k == "flatten":
            n = 1
            for d in s:
                n *= d
            return nn.Flatten(1), (n,)
        if k == "reshape":
            dims = [int(d) for d in l.pos]
            n = 1
            for d in s:
                n *= d
            known = 1
            for d in dims:
                known *= d if d != -1 else 1
            if dims.count(-1) == 1 and known > 0 and n % known == 0:
                dims[dims.index(-1)] = n // known
            m = 1
            for d in dims:
                m *= d
            if m != n:
                raise l.error(f"cannot reshape {s} ({n} values) to {tuple(dims)}")
            return Reshape(dims), tuple(dims)
        if k == "embedding":
            classes, dim = l.int(0, None), l.int(1, None)
            return nn.Embedding(classes, dim), (dim,)
        if k == "concat":
            if ws is None or len(ws) != len(s) or tuple(ws[1:]) != tuple(s[1:]):
                raise l.error(f"cannot concatenate {s} and {ws} along the channels")
            return Concat(), (s[0] + ws[0],) + tuple(s[1:])
        if k == "add":
            if ws is None or tuple(ws) != tuple(s):
                raise l.error(f"shapes {s} and {ws} differ")
            return Add(), s
        if k == "gsp":
            image()
            return GlobalSumPool(), (s[0],)
        if k == "split":
            lo, hi = l.int(0, "from", None), l.int(1, "to", None)
            if s is None or len(s) != 1 or not 0 <= lo < hi <= s[0]:
                raise l.error(f"split {lo}..{hi} of {s}")
            return Split(lo, hi), (hi - lo,)
        if k == "instancenorm":
            c = l.int(0, None)
            image(c)
            return nn.InstanceNorm2d(c, eps=float(l.get(1, "eps", 1e-5)),
                                     affine=bool(l.get(None, "affine", False))), s
        if k == "cbn":
            c = l.int(0, None)
            eps, momentum = float(l.get(1, "eps", 1e-5)), float(l.get(2, "momentum", 0.1))
            classes = l.int(None, "classes", 0)
            if s is None or not 1 <= len(s) <= 3 or s[0] != c:
                raise l.error(f"expects {c} channels in (C), (C, L) or (C, H, W), got {s}")
            if not classes and (ws is None or len(ws) != 1):
                raise l.error(f"cond must be a flat source (D), got {ws}")
            dim = 0 if classes else ws[0]
            return CondBatchNorm(c, classes, dim, bool(l.get(None, "bias", False)), eps, momentum,
                                 bool(l.get(None, "sn", False))), s
        if k == "proj":
            classes, dim = l.int(0, "classes"), l.int(1, "dim")
            if s != (1,) or ws != (dim,):
                raise l.error(f"expects the unconditional output (1) and with = features ({dim}), got {s} and {ws}")
            return Projection(classes, dim), s
        if k == "attention":
            c = l.int(0, None)
            image(c)
            if c % 8:
                raise l.error(f"channels {c} is not a multiple of 8")
            if s[1] % 2 or s[2] % 2:
                raise l.error(f"input {s}: height and width must be even (2x2 max-pool)")
            return Attention(c, bool(l.get(None, "sn", False))), s
        if k == "fir":
            up, down = l.int(None, "up", 1), l.int(None, "down", 1)
            pad = l.get(None, "pad", None)
            if pad is None:
                if up == 2:
                    pad = [2, 1]
                elif down == 2:
                    pad = [1, 1]
                else:
                    raise l.error("needs pad (or up = 2 / down = 2)")
            if isinstance(pad, dict):
                pad = [pad.get("1"), pad.get("2")]
            p0, p1 = (int(pad[0]), int(pad[1])) if isinstance(pad, (list, tuple)) else (int(pad), int(pad))
            gain = float(l.get(None, "gain", up * up))
            image()
            h, w = [(d * up + p0 + p1 - 4) // down + 1 for d in s[1:]]
            return Fir(tuple(s), up, down, p0, p1, gain), (s[0], h, w)
        if k == "bias_act":
            c = l.int(0, "channels")
            act = l.get(None, "act", "lrelu")
            act = "linear" if act == "none" else act
            if s is None or s[0] != c:
                raise l.error(f"expects {c} channels, got {s}")
            gain = float(l.get(None, "gain", 1.0 if act == "linear" else 2 ** 0.5))
            return BiasAct(c, act, float(l.get(None, "slope", 0.2)), gain, float(l.get(None, "clamp", 0)),
                           bool(l.get(None, "bias", True)), float(l.get(None, "lr_mul", 1))), s
        if k == "noise":
            c = l.int(0, "channels")
            image(c)
            strength = l.get(None, "strength", "scalar")
            if strength not in ("scalar", "channel"):
                raise l.error('strength must be "scalar" (one per layer, StyleGAN2) or "channel" (one per channel)')
            return Noise(c, s[1], s[2], l.get(None, "mode", "auto"), strength == "channel"), s
        if k == "const":
            c, h, w = l.int(0, "channels"), l.int(1, "height"), l.int(2, "width")
            return Const(c, h, w), (c, h, w)
        if k == "modconv":
            cin, cout, ks = l.int(0, "cin"), l.int(1, "cout"), l.int(2, "k")
            up = l.int(None, "up", 1)
            pad = l.int(None, "pad", 0 if up == 2 else ks // 2)
            image(cin)
            if ws != (cin,):
                raise l.error(f"expects with = styles ({cin}), got {ws}")
            if up == 2:
                h, w = [(d - 1) * 2 - 2 * pad + ks for d in s[1:]]
            else:
                h, w = [d + 2 * pad - ks + 1 for d in s[1:]]
            return ModConv(cin, cout, ks, bool(l.get(None, "demod", True)), up, pad), (cout, h, w)
        if k == "mbstd":
            group, ch = l.int(0, "group", 4), l.int(1, "channels", 1)
            image()
            return MbStd(group, ch), (s[0] + ch, s[1], s[2])
        if k == "norm2":
            if s is None or len(s) != 1:
                raise l.error(f"expects a flat input, got {s}")
            return Norm2(float(l.get(None, "eps", 1e-8))), s
        if k == "dot":
            if s is None or len(s) != 1 or ws != s:
                raise l.error(f"expects two flat inputs of the same size, got {s} and {ws}")
            return Dot(float(l.get(None, "scale", 1.0))), (1,)
        if k == "w_avg":
            c = l.int(0, "channels")
            if s != (c,):
                raise l.error(f"expects a flat input ({c}), got {s}")
            return WAvg(c, float(l.get(None, "beta", 0.995)), float(l.get(None, "psi", 1.0))), s
        if k in ("ada", "diffaugment"):
            image()
            return EvalIdentity(k, p=k == "ada"), s
        if k in ("style_mix", "style_w"):
            if s is None or len(s) != 1:
                raise l.error(f"expects a flat input, got {s}")
            return EvalIdentity(k), s
        if k in ("maxpool", "avgpool"):
            ks = l.int(0, None)
            stride, pad = l.int(1, "stride", ks), l.int(2, "pad", 0)
            image()
            h, w = [(d + 2 * pad - ks) // stride + 1 for d in s[1:]]
            mod = nn.MaxPool2d(ks, stride, pad) if k == "maxpool" else nn.AvgPool2d(ks, stride, pad)
            return mod, (s[0], h, w)
        raise l.error("unknown layer type")

    def forward(self, x, labels=None):
        nodes = self._run(x, labels, None)
        return nodes[self.plan[-1][3]]

    def node(self, name, x, labels=None):
        """The output of the layer named `name` (e.g. the classifier's "features"),
        as the engine's gf_net_node gives it."""
        for key, _, _, out, _ in self.plan:
            if key == name:
                return self._run(x, labels, out)[out]
        raise KeyError(f"network: no layer named '{name}'")

    def _run(self, x, labels, stop):
        if self.classes:
            if labels is None:
                raise ValueError(f"this network takes labels: forward(x, labels) with labels in 0..{self.classes - 1}")
            labels = labels.long() if isinstance(labels, torch.Tensor) else torch.as_tensor(labels).long()
        nodes = {"x": x, "label": labels}
        mods = self.net._modules
        for key, inp, w, out, lab in self.plan:
            m = mods[key]
            args = (nodes[inp],) + ((nodes[w],) if w is not None else ()) + ((labels,) if lab else ())
            nodes[out] = m(*args)
            if out == stop:
                break
        return nodes


# ---- loading ----

def _tensor(ck, name):
    buf, off, count, dt = ck.bytes_of(name)
    t = torch.frombuffer(buf, dtype=ST_DTYPES[dt], count=count, offset=off)
    return t.reshape(ck.info(name)[1]).clone()


def build(table, input_shape=None):
    """A GanflowNet with the layers of `table` (a layer table as json.loads gives it,
    or a JSON string) and PyTorch's default initialisation."""
    if isinstance(table, (str, bytes)):
        import json
        table = json.loads(table)
    return GanflowNet(table, input_shape)


def _old_noise_strengths(ck, name, table):
    """gf_ckpt_table's rule: a noise layer that names no strength but whose checkpoint tensor holds one per
    channel (written before the layer took StyleGAN2's one per layer) is read with strength = "channel"."""
    layers = table if isinstance(table, list) else [table[k] for k in sorted((k for k in table if k.isdigit()), key=int)]
    for i, l in enumerate(layers):
        args = l if isinstance(l, dict) else {str(j + 1): v for j, v in enumerate(l)}
        if args.get("1") != "noise" or "strength" in args:
            continue
        key = f"{name}.net.{args.get('name', i)}.noise_strength"
        if ck.has(key) and int(torch.tensor(ck.info(key)[1]).prod()) > 1:
            args["strength"] = "channel"
            if isinstance(table, list):
                table[i] = args
            else:
                table[str(i + 1)] = args
    return table


def load(checkpoint, part="g", ema=True, device=None):
    """A part of a ganflow checkpoint as a GanflowNet, in eval mode.

    checkpoint  a checkpoint file, a run directory or its checkpoints folder (through
                checkpoints/latest), or a ganflow.checkpoint.Checkpoint
    part        an instance name ("g", "d", "clf", "g3" of a per-class checkpoint) or a
                role ("generator", "discriminator", "classifier": the first such part)
    ema         use the part's moving average ("<part>.ema.*") when the checkpoint has one
                (a g_step with `ema`); one missing a tensor is refused, as `ganflow sample`
                refuses it; False: the trained weights
    device      where the module goes (default: the CPU)

    Raises CheckpointError (a TableError for a table the bridge cannot build) naming the
    file, the part and the first tensor missing or of another shape."""
    ck = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(checkpoint)
    name = ck.find(part)
    try:
        net = GanflowNet(_old_noise_strengths(ck, name, ck.table(name)))
    except TableError as e:
        raise TableError(f"{ck.path}: part '{name}': {e}") from None
    net.part, net.role, net.cls = name, ck.role(name), ck.part_class(name)
    state = net.net.state_dict()
    prefix = f"{name}.net."
    wanted = [k for k in state if not k.endswith("num_batches_tracked")]
    # the C reader's rule (gf_ckpt_has_ema): any "<part>.ema.*" tensor is an
    # average, and then all of the network's must be there
    if ema and ck.names(f"{name}.ema."):
        prefix, net.ema = f"{name}.ema.", True
    new = {}
    # the C reader's checks and messages (gf_ckpt_load, gf_st_read, gf_ckpt_net)
    # parameters and buffers, then the generator state the C reader also
    # requires of a network (i64 [3]; not a weight, not loaded here)
    for k in wanted + ["rng"]:
        tname = prefix + k
        if not ck.has(tname):
            why = f"checkpoint {ck.path}: no tensor '{tname}' (the network has it)"
            if net.ema:
                why += (f": the moving average of '{name}' ({name}.ema.*) is incomplete; ema=False takes the "
                        f"trained weights ({name}.net.*)")
            raise CheckpointError(why)
        if k == "rng":
            dt, shape = ck.info(tname)
            if dt != "I64" or tuple(shape) != (3,):
                raise CheckpointError(f"{ck.path}: tensor '{tname}' is {shape_str(shape, dt)}, expected "
                                      f"{shape_str([3], 'I64')}")
            break
        dt, shape = ck.info(tname)
        if dt != "F32" or tuple(shape) != tuple(state[k].shape):
            raise CheckpointError(f"{ck.path}: tensor '{tname}' is {shape_str(shape, dt)}, expected "
                                  f"{shape_str(state[k].shape, 'F32')}")
        new[k] = _tensor(ck, tname).to(state[k].dtype)
    # parameters, then buffers, each in layer order: the first value the C
    # reader's finite check names
    order = [k for k, _ in net.net.named_parameters()] + [k for k, _ in net.net.named_buffers() if k in new]
    for k in order:
        bad = (~torch.isfinite(new[k].reshape(-1))).nonzero()
        if len(bad):
            i = int(bad[0])
            v = float(new[k].reshape(-1)[i])
            what = "nan" if v != v else "inf" if v > 0 else "-inf"
            raise CheckpointError(f"{ck.path}: {prefix}{k}[{i}] is {what}: the network '{name}' is not finite "
                                  "(a diverged run's checkpoint?)")
    for k in state:
        if k.endswith("num_batches_tracked"):
            new[k] = state[k]
    net.net.load_state_dict(new, strict=True)
    net.eval()
    return net.to(device) if device is not None else net
