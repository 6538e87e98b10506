#!/usr/bin/python3
"""References for tests/test_nn_ref_sg2net.c's test_sg2ada: StyleGAN2's G as
StyleGAN2-ADA's own code builds it (training/networks.py of
github.com/NVlabs/stylegan2-ada-pytorch), not as a reference written here.

Their module is imported at generation time from a copy outside this
repository, given on the command line; nothing of theirs is committed, only
what this script writes:

    git clone https://github.com/NVlabs/stylegan2-ada-pytorch /tmp/sg2ada    (any copy outside the repo)
    /usr/bin/python3 tests/ref/make_nn_refs_sg2ada.py /tmp/sg2ada [tests/ref/nn_ref_sg2ada.safetensors]

On the CPU their custom ops take their reference paths (bias_act, upfirdn2d;
no plugin is compiled). Written:

- ada.count: the parameter count of their Generator(z_dim = 6, c_dim = 0,
  w_dim = 5, img_resolution = 8, img_channels = 2, 2 mapping layers,
  channel_max = 4, conv_clamp = 1, no fp16): ganflow's
  G{ size = 8, ch = 4, z = 6, w = 5, mapping = 2, channels = 2, clamp = 1 };
  ada.count32 / ada.count32c: theirs at stylegan2_fashion's CPU width
  (z = w = 64, 32x32, 1 channel, channel_max 32), unconditional and with
  10 classes (96,587 and 101,387: one noise strength per synthesis layer);
- that G's weights under ganflow's view names (ada.p.<view>; its zero
  biases and noise strengths drawn from N(0, 0.3^2) so that every term
  counts; the up-sampling layers' weights transposed to ganflow's (cin,
  cout, k, k), as their conv2d_resample transposes them for its
  transposed convolution), its buffers (ada.b.<view>: noise_const, and
  w_avg set to N(0, 1) values so that the truncation moves something);
- the input z (ada.x) and their outputs: eval with noise_mode = 'const'
  (ada.y; truncation_psi = 0.7: ada.y_trunc), then training mode with the
  constant noise (their fused_modconv = False path): ada.y_train, w_avg
  after it (ada.w_avg), and for L = <ada.w, y_train> the gradients with
  respect to z (ada.dx) and every parameter (ada.g.<view>).
"""
import os
import subprocess
import sys

import numpy as np
import torch

from ref_file import put, tensors, write_safetensors

if len(sys.argv) < 2:
    sys.exit(__doc__)
ADA = os.path.abspath(sys.argv[1])
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/ref/nn_ref_sg2ada.safetensors"
sys.path.insert(0, ADA)
from training import networks  # noqa: E402  (StyleGAN2-ADA's, from ADA)

torch.manual_seed(11)


def generator(z, w, res, channels, cmax, classes=0, clamp=256):
    return networks.Generator(z_dim=z, c_dim=classes, w_dim=w, img_resolution=res, img_channels=channels,
                              mapping_kwargs=dict(num_layers=2),
                              synthesis_kwargs=dict(channel_base=32768, channel_max=cmax, num_fp16_res=0,
                                                    conv_clamp=clamp))


def count(g):
    return sum(p.numel() for p in g.parameters())


def views(g):
    """(parameters, buffers): ganflow view name -> (their tensor, transpose to ganflow's layout)."""
    P, B = {}, {}
    m = g.mapping
    for i in range(m.num_layers):
        fc = getattr(m, f"fc{i}")
        P[f"map{i}_fc.weight"], P[f"map{i}_fc.bias"] = (fc.weight, 0), (fc.bias, 0)
    B["w.w_avg"] = (m.w_avg, 0)
    s = g.synthesis
    for res in s.block_resolutions:
        b = getattr(s, f"b{res}")
        if res == 4:
            P["b4_const.const"] = (b.const, 0)
        for k in ("conv0", "conv1"):
            if not hasattr(b, k):
                continue
            l, p = getattr(b, k), f"b{res}_{k}"
            P[p + "_affine.weight"], P[p + "_affine.bias"] = (l.affine.weight, 0), (l.affine.bias, 0)
            P[p + "_conv.weight"] = (l.weight, l.up == 2)
            P[p + "_noise.noise_strength"] = (l.noise_strength, 0)
            P[p + ".bias"] = (l.bias, 0)
            B[p + "_noise.noise_const"] = (l.noise_const, 0)
        t, p = b.torgb, f"b{res}_torgb"
        P[p + "_affine.weight"], P[p + "_affine.bias"] = (t.affine.weight, 0), (t.affine.bias, 0)
        P[p + "_conv.weight"], P[p + ".bias"] = (t.weight, 0), (t.bias, 0)
    assert len(P) == len(list(g.parameters())), (len(P), len(list(g.parameters())))
    return P, B


def ganflow_layout(t, transpose):
    return (t.transpose(0, 1) if transpose else t).reshape(-1) if t.dim() else t.reshape(1)


put("ada.count32", torch.tensor([count(generator(64, 64, 32, 1, 32))], dtype=torch.float64))
put("ada.count32c", torch.tensor([count(generator(64, 64, 32, 1, 32, classes=10))], dtype=torch.float64))

B_ = 4
g = generator(6, 5, 8, 2, 4, clamp=1.0)
put("ada.count", torch.tensor([count(g)], dtype=torch.float64))
with torch.no_grad():
    for p in g.parameters():
        if p.dim() <= 1 and not p.abs().sum():
            p.normal_(0, 0.3)
    g.mapping.w_avg.normal_(0, 1)
P, B = views(g)
for k, (t, tr) in P.items():
    put(f"ada.p.{k}", ganflow_layout(t.detach(), tr))
for k, (t, tr) in B.items():
    put(f"ada.b.{k}", ganflow_layout(t.detach(), tr))

z = torch.randn(B_, 6)
put("ada.x", z)
g.eval()
with torch.no_grad():
    put("ada.y", g(z, None, noise_mode="const"))
    put("ada.y_trunc", g(z, None, truncation_psi=0.7, noise_mode="const"))
g.train()
zr = z.clone().requires_grad_(True)
y = g(zr, None, noise_mode="const")
put("ada.y_train", y)
put("ada.w_avg", g.mapping.w_avg)
wt = torch.randn(*y.shape)
put("ada.w", wt)
params = [t for t, _ in P.values()]
grads = torch.autograd.grad((y * wt).sum(), [zr] + params)
put("ada.dx", grads[0])
for (k, (t, tr)), gr in zip(P.items(), grads[1:]):
    put(f"ada.g.{k}", ganflow_layout(gr, tr))

try:
    commit = subprocess.run(["git", "-C", ADA, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
write_safetensors(OUT, {"generator": "tests/ref/make_nn_refs_sg2ada.py", "torch": torch.__version__,
                        "stylegan2-ada-pytorch": commit or "unknown commit"})
print(f"{OUT}: {len(tensors)} tensors; their counts: tiny G {count(g)}, 32x32 {int(tensors['ada.count32'][0])}, "
      f"with 10 classes {int(tensors['ada.count32c'][0])}")
