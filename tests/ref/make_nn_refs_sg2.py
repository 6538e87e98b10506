#!/usr/bin/python3
"""PyTorch references for StyleGAN2's layer kinds (tests/test_nn_ref_sg2.c).

Run once with Debian's /usr/bin/python3 (python3-torch 1.13) from the
repository root:   /usr/bin/python3 tests/ref/make_nn_refs_sg2.py
It writes tests/ref/nn_ref_sg2.safetensors (committed; the tests never
need torch).

Each case is a small network written with torch.nn.functional after
StyleGAN2-ADA's training/networks.py and torch_utils/ops (reference
paths), layer by layer the ganflow table the C test builds (repeated in
each case's comment), parameters named as ganflow's views. Stored per case
<c>: x, the output weighting w, every parameter p.<view>, buffers b.<view>
(noise_const), the output y, and for L = sum(w * y) the gradients
dx = dL/dx and g.<view> = dL/dparam, and the double backward of the
penalty P = 1/2 |dL/dx|^2 (torch.autograd.grad(create_graph=True): R1's
form for the discriminator's kinds, the path length's for the
generator's, whose input is w): P, dPdx and g2.<view> = dP/dparam.

The modulated convolution is computed here in the grouped-convolution form
(StyleGAN2-ADA's fused_modconv = True: one convolution per sample with its
own modulated, demodulated weight) and checked against the other form
(modulate the input, convolve with the shared weight, demodulate the
output: fused_modconv = False, ganflow's) before anything is written.
"""
import sys

import torch
import torch.nn.functional as F

from ref_file import CASES, case, randn, run_cases, tensors, write_safetensors

torch.set_num_threads(1)
torch.manual_seed(26)
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/ref/nn_ref_sg2.safetensors"
SQRT2 = 2.0 ** 0.5



# ---- the layers (StyleGAN2-ADA's reference formulas) ----

def eq_linear(x, P, name, lr_mul=1.0, bias=True):
    w = P[name + ".weight"]
    return F.linear(x, w * (lr_mul / w.shape[1] ** 0.5), P[name + ".bias"] * lr_mul if bias else None)


def eq_conv(x, P, name, stride=1, pad=0, bias=True):
    w = P[name + ".weight"]
    fan_in = w.shape[1] * w.shape[2] * w.shape[3]
    return F.conv2d(x, w / fan_in ** 0.5, P[name + ".bias"] if bias else None, stride=stride, padding=pad)


def bias_act(x, P, name, act="lrelu", gain=None, clamp=0.0, lr_mul=1.0, bias=True):
    if bias:
        x = x + (P[name + ".bias"] * lr_mul).view(1, -1, *([1] * (x.dim() - 2)))
    if act == "lrelu":
        x = F.leaky_relu(x, 0.2)
    elif act == "relu":
        x = F.relu(x)
    x = x * (gain if gain is not None else (1.0 if act == "linear" else SQRT2))
    return x.clamp(-clamp, clamp) if clamp > 0 else x


def upfirdn2d(x, up=1, down=1, pad=(0, 0), gain=1.0):
    """upfirdn2d's reference path with f = [1, 3, 3, 1] (separable, sum 1)."""
    n, c, h, w = x.shape
    if up > 1:
        x = x.reshape(n, c, h, 1, w, 1)
        x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
        x = x.reshape(n, c, h * up, w * up)
    x = F.pad(x, [pad[0], pad[1], pad[0], pad[1]])
    f1 = torch.tensor([1.0, 3.0, 3.0, 1.0])
    f = torch.outer(f1, f1) / 64.0 * gain
    f = f.flip([0, 1])   # upfirdn2d convolves (symmetric here)
    x = F.conv2d(x, f[None, None].repeat(c, 1, 1, 1), groups=c)
    return x[:, :, ::down, ::down]


def modconv_grouped(x, weight, s, demod, up, pad):
    """fused_modconv = True: per-sample weights, one grouped convolution.
    weight (cout, cin, k, k) as StyleGAN2's."""
    n, cin, h, w_ = x.shape
    cout, _, k, _ = weight.shape
    gain = 1.0 if demod else 1.0 / (cin * k * k) ** 0.5
    wm = weight[None] * s.reshape(n, 1, cin, 1, 1) * gain
    if demod:
        d = (wm.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
        wm = wm * d.reshape(n, cout, 1, 1, 1)
    xg = x.reshape(1, n * cin, h, w_)
    if up == 1:
        y = F.conv2d(xg, wm.reshape(n * cout, cin, k, k), padding=pad, groups=n)
    else:
        y = F.conv_transpose2d(xg, wm.transpose(1, 2).reshape(n * cin, cout, k, k), stride=2, padding=pad, groups=n)
    return y.reshape(n, cout, y.shape[2], y.shape[3])


def modconv_nonfused(x, weight, s, demod, up, pad):
    """fused_modconv = False: x * s, the shared weight, then * d."""
    n, cin = x.shape[:2]
    cout, _, k, _ = weight.shape
    gain = 1.0 if demod else 1.0 / (cin * k * k) ** 0.5
    xs = x * s.reshape(n, cin, 1, 1)
    if up == 1:
        y = F.conv2d(xs, weight * gain, padding=pad)
    else:
        y = F.conv_transpose2d(xs, (weight * gain).transpose(0, 1), stride=2, padding=pad)
    if demod:
        d = ((weight[None] * s.reshape(n, 1, cin, 1, 1)).square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
        y = y * d.reshape(n, cout, 1, 1)
    return y


FORMS_CHECKED = []


def modconv(x, P, name, s, demod=True, up=1, pad=None):
    w = P[name + ".weight"]
    if up == 2:
        w = w.transpose(0, 1)   # ganflow stores (cin, cout, k, k) with up = 2
    k = w.shape[2]
    pad = (k // 2 if up == 1 else 0) if pad is None else pad
    y = modconv_grouped(x, w, s, demod, up, pad)
    y2 = modconv_nonfused(x, w, s, demod, up, pad)
    err = ((y - y2).abs().max() / y.abs().max()).item()
    assert err < 1e-5, (name, err)
    FORMS_CHECKED.append(err)
    return y


def noise_const(x, P, B, name):
    """SynthesisLayer's noise_mode = 'const': one strength (1) for the layer, StyleGAN2-ADA's; or (C), one per channel."""
    return x + P[name + ".noise_strength"].view(1, -1, 1, 1) * B[name + ".noise_const"].view(1, 1, x.shape[2], x.shape[3])


# ---- the cases ----

# {'linear', 6, 8, eqlr = true, lr_mul = 0.01}, {'bias_act', 8, bias = false},
# {'linear', 8, 8, eqlr = true, lr_mul = 0.01, bias = false}, {'bias_act', 8, lr_mul = 0.01},
# {'linear', 8, 5, eqlr = true, bias_init = 1}, {'bias_act', 5, act = 'relu', clamp = 0.8},
# {'linear', 5, 2, eqlr = true}, {'bias_act', 2, act = 'linear', gain = 0.5}, input_shape = {6}
@case("eq_mlp", 3, (6,), True)
def eq_mlp(P, B, x, init):
    if init:
        P["0.weight"], P["0.bias"] = randn(8, 6, scale=100.0), randn(8)   # N(0, 1) / lr_mul
        P["2.weight"] = randn(8, 8, scale=100.0)
        P["3.bias"] = randn(8, scale=20.0)
        P["4.weight"], P["4.bias"] = randn(5, 8), 1 + 0.3 * randn(5)
        P["5.bias"] = 0.3 * randn(5)
        P["6.weight"], P["6.bias"] = randn(2, 5), randn(2)
        P["7.bias"] = randn(2)
        return
    h = bias_act(eq_linear(x, P, "0", 0.01), P, "1", bias=False)
    h = bias_act(eq_linear(h, P, "2", 0.01, bias=False), P, "3", lr_mul=0.01)
    h = bias_act(eq_linear(h, P, "4"), P, "5", act="relu", clamp=0.8)
    return bias_act(eq_linear(h, P, "6"), P, "7", act="linear", gain=0.5)


# {'conv', 2, 4, 3, 1, 1, eqlr = true, bias = false}, {'bias_act', 4, clamp = 1},
# {'fir', pad = 2}, {'conv', 4, 4, 3, 2, 0, eqlr = true, bias = false}, {'bias_act', 4, name = 'r'},
# {'fir', down = 2, input = 'x'}, {'conv', 2, 4, 1, eqlr = true, bias = false, name = 'sk'},
# {'add', with = 'r'}, {'flatten'}, {'linear', 36, 1, eqlr = true}, input_shape = {2, 6, 6}
@case("d_block", 3, (2, 6, 6), True)
def d_block(P, B, x, init):
    if init:
        P["0.weight"], P["1.bias"] = randn(4, 2, 3, 3), 0.3 * randn(4)
        P["3.weight"], P["r.bias"] = randn(4, 4, 3, 3), 0.3 * randn(4)
        P["sk.weight"] = randn(4, 2, 1, 1)
        P["9.weight"], P["9.bias"] = randn(1, 36), randn(1)
        return
    h = bias_act(eq_conv(x, P, "0", pad=1, bias=False), P, "1", clamp=1.0)
    h = eq_conv(upfirdn2d(h, pad=(2, 2)), P, "3", stride=2, bias=False)
    r = bias_act(h, P, "r")
    sk = eq_conv(upfirdn2d(x, down=2, pad=(1, 1)), P, "sk", bias=False)
    return eq_linear(torch.flatten(sk + r, 1), P, "9")


# {'fir', up = 2}, {'conv', 2, 3, 3, 1, 1, eqlr = true}, {'bias_act', 3, act = 'linear', clamp = 0.7},
# {'fir', pad = 1, gain = 4}, {'conv', 3, 2, 3, 1, 1, eqlr = true, lr_mul = 0.5}, {'bias_act', 2},
# input_shape = {2, 3, 4}
@case("fir_up", 2, (2, 3, 4), True)
def fir_up(P, B, x, init):
    if init:
        P["1.weight"], P["1.bias"], P["2.bias"] = randn(3, 2, 3, 3), randn(3), 0.3 * randn(3)
        P["4.weight"], P["4.bias"] = randn(2, 3, 3, 3, scale=2.0), randn(2)
        P["5.bias"] = 0.3 * randn(2)
        return
    h = upfirdn2d(x, up=2, pad=(2, 1), gain=4.0)
    h = bias_act(eq_conv(h, P, "1", pad=1), P, "2", act="linear", clamp=0.7)
    h = upfirdn2d(h, pad=(1, 1), gain=4.0)
    w = P["4.weight"]
    h = F.conv2d(h, w * (0.5 / 27 ** 0.5), P["4.bias"] * 0.5, padding=1)
    return bias_act(h, P, "5")


# {'linear', 8, 4, eqlr = true, bias_init = 1, name = 's0'}, {'const', 4, 4, 4, input = 'x'},
# {'modconv', 4, 3, 3, with = 's0'}, {'noise', 3, mode = 'const', name = 'n0'}, {'bias_act', 3, clamp = 2, name = 'h'},
# {'linear', 8, 3, eqlr = true, bias_init = 1, input = 'x', name = 's1'},
# {'modconv', 3, 2, 3, with = 's1', up = 2, input = 'h', name = 'up'}, {'fir', pad = 1, gain = 4},
# {'noise', 2, mode = 'const', strength = 'channel', name = 'n1'}, {'bias_act', 2, name = 'h2'},
# {'linear', 8, 2, eqlr = true, bias_init = 1, input = 'x', name = 's2'},
# {'modconv', 2, 3, 1, demod = false, with = 's2', input = 'h2', name = 'rgb'},
# {'bias_act', 3, act = 'linear', clamp = 1}, input_shape = {8}
@case("synthesis", 3, (8,), True)
def synthesis(P, B, x, init):
    if init:
        P["s0.weight"], P["s0.bias"] = randn(4, 8), 1 + 0.2 * randn(4)
        P["1.const"] = randn(4, 4, 4)
        P["2.weight"] = randn(3, 4, 3, 3)
        P["n0.noise_strength"], B["n0.noise_const"] = 0.5 * randn(1), randn(4 * 4)     # one per layer (StyleGAN2)
        P["h.bias"] = 0.3 * randn(3)
        P["s1.weight"], P["s1.bias"] = randn(3, 8), 1 + 0.2 * randn(3)
        P["up.weight"] = randn(3, 2, 3, 3)     # (cin, cout, k, k)
        P["n1.noise_strength"], B["n1.noise_const"] = 0.5 * randn(2), randn(8 * 8)     # one per channel
        P["h2.bias"] = 0.3 * randn(2)
        P["s2.weight"], P["s2.bias"] = randn(2, 8), 1 + 0.2 * randn(2)
        P["rgb.weight"] = randn(3, 2, 1, 1)
        P["12.bias"] = 0.3 * randn(3)
        return
    n = x.shape[0]
    c = P["1.const"].unsqueeze(0).repeat(n, 1, 1, 1)
    h = modconv(c, P, "2", eq_linear(x, P, "s0"))
    h = bias_act(noise_const(h, P, B, "n0"), P, "h", clamp=2.0)
    h = modconv(h, P, "up", eq_linear(x, P, "s1"), up=2)
    h = upfirdn2d(h, pad=(1, 1), gain=4.0)
    h = bias_act(noise_const(h, P, B, "n1"), P, "h2")
    y = modconv(h, P, "rgb", eq_linear(x, P, "s2"), demod=False)
    return bias_act(y, P, "12", act="linear", clamp=1.0)


# luaconf/backbones/stylegan2_layers.lua, StyleGAN2-ADA's layer classes (the C test's Lua):
#   L.fc(t, 'm', 'x', 8, 8, {lr_mul = 0.01, act = 'lrelu'}); {'const', 4, 4, 4, input = 'x', name = 'c'}
#   L.synthesis(t, 'b0', 'c', 'm', 4, 4, {w_dim = 8, noise = 'const', clamp = 2})
#   L.synthesis(t, 'b1', 'b0', 'm', 4, 3, {w_dim = 8, up = 2, noise = 'const'})
#   L.torgb(t, 'rgb', 'b1', 'm', 3, 2, {w_dim = 8, clamp = 1}), input_shape = {8}
@case("helpers_g", 2, (8,), True)
def helpers_g(P, B, x, init):
    if init:
        P["m_fc.weight"], P["m_fc.bias"] = randn(8, 8, scale=100.0), randn(8, scale=10.0)
        P["c.const"] = randn(4, 4, 4)
        for b, cin, cout, hw, up in (("b0", 4, 4, 4, 1), ("b1", 4, 3, 8, 2)):
            P[b + "_affine.weight"], P[b + "_affine.bias"] = randn(cin, 8), 1 + 0.2 * randn(cin)
            P[b + "_conv.weight"] = randn(cout, cin, 3, 3) if up == 1 else randn(cin, cout, 3, 3)
            P[b + "_noise.noise_strength"], B[b + "_noise.noise_const"] = 0.5 * randn(1), randn(hw * hw)
            P[b + ".bias"] = 0.3 * randn(cout)
        P["rgb_affine.weight"], P["rgb_affine.bias"] = randn(3, 8), 1 + 0.2 * randn(3)
        P["rgb_conv.weight"], P["rgb.bias"] = randn(2, 3, 1, 1), 0.3 * randn(2)
        return
    n = x.shape[0]
    w = F.leaky_relu(F.linear(x, P["m_fc.weight"] * (0.01 / 8 ** 0.5), P["m_fc.bias"] * 0.01), 0.2) * SQRT2
    h = P["c.const"].unsqueeze(0).repeat(n, 1, 1, 1)
    h = modconv(h, P, "b0_conv", eq_linear(w, P, "b0_affine"))
    h = bias_act(noise_const(h, P, B, "b0_noise"), P, "b0", clamp=2.0)
    h = upfirdn2d(modconv(h, P, "b1_conv", eq_linear(w, P, "b1_affine"), up=2), pad=(1, 1), gain=4.0)
    h = bias_act(noise_const(h, P, B, "b1_noise"), P, "b1")
    return bias_act(modconv(h, P, "rgb_conv", eq_linear(w, P, "rgb_affine"), demod=False), P, "rgb", act="linear",
                    clamp=1.0)


# L.conv(t, 'fromrgb', 'x', 2, 4, {k = 1, clamp = 1}); L.conv(t, 'c0', 'fromrgb', 4, 4, {clamp = 1})
# L.conv(t, 'c1', 'c0', 4, 6, {down = 2, gain = math.sqrt(0.5), clamp = 1})
# L.conv(t, 'skip', 'fromrgb', 4, 6, {k = 1, down = 2, bias = false, act = 'linear', gain = math.sqrt(0.5)})
# {'add', input = 'skip', with = 'c1'}, {'mbstd', 2, 1}, {'flatten'}, L.fc(t, 'out', nil, 112, 1),
# input_shape = {2, 8, 8}
@case("helpers_d", 4, (2, 8, 8), True)
def helpers_d(P, B, x, init):
    if init:
        P["fromrgb_conv.weight"], P["fromrgb.bias"] = randn(4, 2, 1, 1), 0.3 * randn(4)
        P["c0_conv.weight"], P["c0.bias"] = randn(4, 4, 3, 3), 0.3 * randn(4)
        P["c1_conv.weight"], P["c1.bias"] = randn(6, 4, 3, 3), 0.3 * randn(6)
        P["skip_conv.weight"] = randn(6, 4, 1, 1)
        P["out_fc.weight"], P["out_fc.bias"] = randn(1, 112), randn(1)
        return
    g = 0.5 ** 0.5
    a = bias_act(eq_conv(x, P, "fromrgb_conv", bias=False), P, "fromrgb", clamp=1.0)
    h = bias_act(eq_conv(a, P, "c0_conv", pad=1, bias=False), P, "c0", clamp=1.0)
    h = eq_conv(upfirdn2d(h, pad=(2, 2)), P, "c1_conv", stride=2, bias=False)
    h = bias_act(h, P, "c1", gain=SQRT2 * g, clamp=g)
    sk = eq_conv(upfirdn2d(a, down=2, pad=(1, 1)), P, "skip_conv", bias=False) * g
    return eq_linear(torch.flatten(mbstd(sk + h, 2, 1), 1), P, "out_fc")


def mbstd(x, group, f):
    """StyleGAN2-ADA's MinibatchStdLayer."""
    n, c, h, w = x.shape
    g = min(group, n)
    y = x.reshape(g, -1, f, c // f, h, w)
    y = y - y.mean(dim=0)
    y = y.square().mean(dim=0)
    y = (y + 1e-8).sqrt()
    y = y.mean(dim=[2, 3, 4])
    y = y.reshape(-1, f, 1, 1)
    y = y.repeat(g, 1, h, w)
    return torch.cat([x, y], dim=1)


run_cases(CASES)

write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_sg2.py", "torch": torch.__version__})
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(CASES)} cases, {len(tensors)} tensors, {total} bytes; "
      f"modconv forms agree to {max(FORMS_CHECKED):.2g} (relative)")
