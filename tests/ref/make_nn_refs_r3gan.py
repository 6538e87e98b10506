#!/usr/bin/python3
"""References for R3GAN's networks (luaconf/backbones/r3gan.lua) and its
training step from the authors' own code (tests/test_nn_ref_r3gan.c,
test_networks and test_training_step).

usage (from the repository root, Debian's python3-torch 1.13):
    /usr/bin/python3 tests/ref/make_nn_refs_r3gan.py R3GAN_DIR [OUT]

R3GAN_DIR is a checkout of github.com/brownvc/R3GAN (NeurIPS 2024, "The
GAN is dead; long live the GAN!"), outside this repository: its
R3GAN/Networks.py builds the networks and R3GAN/Trainer.py runs their
training step, with R3GAN/FusedOperators.py, R3GAN/Resamplers.py,
torch_utils/ and dnnlib/ beside it. Nothing of it is
copied here; the script imports it and writes only its outputs to OUT
(default tests/ref/nn_ref_r3gan.safetensors, committed).

The authors' fused operators run on the CPU unchanged: torch_utils'
bias_act and upfirdn2d take their CUDA kernels only for CUDA tensors and
otherwise their reference paths (_bias_act_ref: x + b, LeakyReLU 0.2, gain
1 as BiasedActivationCUDA calls it; _upfirdn2d_ref: zero insertion, pad,
a depthwise conv2d with the flipped, here symmetric, 4x4 filter, through
conv2d_gradfix, which is F.conv2d off CUDA), so nothing is substituted.

Cases (x, labels, the output weighting w, the output y, the gradients of
L = <w, y> with respect to the input (dx) and every parameter (g.<view>),
and the double backward of P = 1/2 |dL/dx|^2 (P, dPdx, g2.<view>): D's R1
form, and for G the same through z):
  g       Generator(6, [8, 6, 6], [4, 2, 3], [1, 2, 1], 2) -> 3 x 16 x 16
  g_cond  the same with ConditionDimension 3, ConditionEmbeddingDimension 4
  d       Discriminator([6, 6, 8], [3, 2, 4], [1, 2, 1], 2) (train.py reverses G's lists)
  d_cond  the same with ConditionDimension 3, ConditionEmbeddingDimension 5
ganflow's tables: r3gan.G{ size = 16, z = 6, widths = {8, 6, 6},
cardinality = {4, 2, 3}, blocks = {1, 2, 1} [, classes = 3, embed = 4] }
and r3gan.D{ size = 16, widths = {8, 6, 6}, cardinality = {4, 2, 3},
blocks = {1, 2, 1} [, classes = 3, embed = 5] } (3 channels: the authors'
networks read and write RGB). The authors' initialisation starts every
block's last 1x1 conv and every bias at zero, where the gradients of the
layers before them vanish: those are redrawn (N(0, 1/fan_in), biases
N(0, 0.3^2)) before the weights are copied. Also printed: the parameter
counts of the authors' CIFAR-10 networks (test_nn_backbones checks
r3gan.lua's against them), and the agreement of tests/bench/
torch_backbones.py's R3_G and R3_D (the benchmark's peer, written from the
paper) with the authors' networks on the same weights (asserted).

The training step (test_training_step): the authors' R3GAN/Trainer.py
(AdversarialTraining) on the G and D of g and d (g_cond and d_cond), their
weights unchanged (asserted against the stored .p.<view>), one batch of 4
pairs (z, real x, for the conditional ones labels [2, 0, 1, 1]: G and both
halves of each pair take the real batch's labels, as their training loop
passes real_c), gamma = 10, gain (Scale) 1, each phase as
training_loop.py runs it (only that phase's network requires gradients):
  step[_cond].z, .x, .labels, .gamma; .fake = G(z), .d_out = [D(x); D(G(z))]
  AccumulateDiscriminatorGradients: .d_loss (the mean of softplus(-(D(x)
    - D(G(z))))), .r1 and .r2 (the means of |dD(x)/dx|^2 and
    |dD(G(z))/dG(z)|^2), .gd.<view> (D's gradients of the mean of the loss
    + gamma/2 (R1 + R2))
  AccumulateGeneratorGradients: .g_loss (the mean of softplus(-(D(G(z)) -
    D(x)))), .gg.<view> (G's gradients, through D; D's are left None)
These tensors come after all of the above, whose bytes they leave as they
were (the random draws they take follow every earlier one).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_file import put, store_case, tensors, write_safetensors  # noqa: E402

if len(sys.argv) < 2 or not os.path.isfile(os.path.join(sys.argv[1], "R3GAN", "Networks.py")):
    sys.exit("usage: make_nn_refs_r3gan.py R3GAN_DIR [OUT]  (R3GAN_DIR: a checkout of github.com/brownvc/R3GAN)")
sys.path.insert(0, os.path.abspath(sys.argv[1]))
import R3GAN.Networks as N  # noqa: E402  (the authors' code, from R3GAN_DIR)

OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/ref/nn_ref_r3gan.safetensors"
torch.set_num_threads(1)
torch.manual_seed(3)

WIDTHS, CARD, BLOCKS, Z, CLASSES, SIZE = [8, 6, 6], [4, 2, 3], [1, 2, 1], 6, 3, 16
RES = [4 * 2 ** i for i in range(len(WIDTHS))]


def block_names(prefix, blk, names):
    names[prefix + "_l1.weight"] = blk.LinearLayer1.Layer.weight
    names[prefix + "_a1.bias"] = blk.NonLinearity1.Bias
    names[prefix + "_l2.weight"] = blk.LinearLayer2.Layer.weight
    names[prefix + "_a2.bias"] = blk.NonLinearity2.Bias
    names[prefix + "_l3.weight"] = blk.LinearLayer3.Layer.weight


def g_names(g):
    """ganflow's view -> (the authors' parameter, how to map it): 't' transposes, 'r' reshapes to ganflow's shape."""
    names, how = {}, {}
    if hasattr(g, "EmbeddingLayer"):
        names["embed.weight"], how["embed.weight"] = g.EmbeddingLayer.weight, "t"   # (E, classes) -> (classes, E)
    for i, stage in enumerate(g.MainLayers):
        r = RES[i]
        first = stage.Layers[0]
        if i == 0:
            names["s4_basis_lin.weight"] = first.LinearLayer.weight
            names["s4_basis.weight"], how["s4_basis.weight"] = first.Basis, "r"     # (C, 4, 4) -> (C, 1, 4, 4)
        elif hasattr(first, "LinearLayer"):
            names[f"s{r}_up_conv.weight"] = first.LinearLayer.Layer.weight
        for j, blk in enumerate(stage.Layers[1:]):
            block_names(f"s{r}_b{j}", blk, names)
    names["out.weight"] = g.AggregationLayer.Layer.weight
    return names, how


def d_names(d):
    names, how = {"in.weight": d.ExtractionLayer.Layer.weight}, {}
    n = len(d.MainLayers)
    for x, stage in enumerate(d.MainLayers):
        r = RES[n - 1 - x]
        for j, blk in enumerate(stage.Layers[:-1]):
            block_names(f"s{r}_b{j}", blk, names)
        last = stage.Layers[-1]
        if x == n - 1:
            names["basis.weight"], names["basis_lin.weight"] = last.Basis.weight, last.LinearLayer.weight
        elif hasattr(last, "LinearLayer"):
            names[f"s{r}_down_conv.weight"] = last.LinearLayer.Layer.weight
    if hasattr(d, "EmbeddingLayer"):
        names["embed.weight"], how["embed.weight"] = d.EmbeddingLayer.weight, "t"
    return names, how


def ganflow_form(t, how, view):
    if how.get(view) == "t":
        return t.t()
    if how.get(view) == "r":
        return t.reshape(t.shape[0], 1, 4, 4)
    return t


def redraw_zeros(m):
    """The authors' zero-initialised tensors (each block's last 1x1, the biases) redrawn so every gradient counts."""
    with torch.no_grad():
        for p in m.parameters():
            if not p.abs().sum():
                if p.dim() == 1:
                    p.normal_(0, 0.3)
                else:
                    p.normal_(0, (p.shape[1] * p[0][0].numel()) ** -0.5)


def run(name, net, names, how, x, labels, classes):
    assert len(names) == len(list(net.parameters())), (name, len(names), len(list(net.parameters())))
    assert {id(p) for p in names.values()} == {id(p) for p in net.parameters()}, name
    y1h = F.one_hot(labels, classes).float() if classes else None
    store_case(name, lambda xr: net(xr, y1h), x, names, labels=labels, form=lambda view, t: ganflow_form(t, how, view))


# ---- the benchmark's peer (tests/bench/torch_backbones.py's R3_G, R3_D, written from the paper) computes
# the same functions as the authors' networks: checked here with the weights copied ----
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import torch_backbones as tb  # noqa: E402


def tb_block_names(prefix, blk, names):
    names[prefix + "_l1.weight"], names[prefix + "_a1.bias"] = blk.l1.weight, blk.a1.bias
    names[prefix + "_l2.weight"], names[prefix + "_a2.bias"] = blk.l2.weight, blk.a2.bias
    names[prefix + "_l3.weight"] = blk.l3.weight


def tb_g_names(g):
    names = {"s4_basis_lin.weight": g.basis_lin.weight, "s4_basis.weight": g.basis, "out.weight": g.out.weight}
    if g.embed is not None:
        names["embed.weight"] = g.embed.weight
    for i, st in enumerate(g.stages):
        if i and isinstance(g.ups[i - 1], torch.nn.Conv2d):
            names[f"s{RES[i]}_up_conv.weight"] = g.ups[i - 1].weight
        for j, blk in enumerate(st):
            tb_block_names(f"s{RES[i]}_b{j}", blk, names)
    return names


def tb_d_names(d):
    names = {"in.weight": d.inp.weight, "basis.weight": d.basis.weight, "basis_lin.weight": d.basis_lin.weight}
    if d.embed is not None:
        names["embed.weight"] = d.embed.weight
    n = len(d.stages)
    for x, st in enumerate(d.stages):
        r = RES[n - 1 - x]
        for j, blk in enumerate(st):
            tb_block_names(f"s{r}_b{j}", blk, names)
        if x < len(d.downs) and isinstance(d.downs[x], torch.nn.Conv2d):
            names[f"s{r}_down_conv.weight"] = d.downs[x].weight
    return names


def same_as_peer(net, names, peer, peer_names, x, labels, classes):
    """The peer with net's weights (the authors' layout, by ganflow's view names) computes net's output."""
    assert len(peer_names) == len(names) == len(list(peer.parameters()))
    with torch.no_grad():
        for view, p in peer_names.items():
            p.copy_(names[view])
    y1h = F.one_hot(labels, classes).float() if classes else None
    a, b = net(x, y1h), peer(x, labels if classes else None)
    err = ((a - b.reshape(a.shape)).abs().max() / a.abs().max()).item()
    assert err < 1e-5, err
    return err


B = 4
labels = torch.tensor([0, 2, 1, 2])
peer_err = []
nets = {}   # cond -> (G, D) of the cases, for the training step's cases below
for cond in (False, True):
    kw = {"ConditionDimension": CLASSES, "ConditionEmbeddingDimension": 4} if cond else {}
    g = N.Generator(Z, WIDTHS, CARD, BLOCKS, 2, **kw)
    redraw_zeros(g)
    names, how = g_names(g)
    z = torch.randn(B, Z)
    run("g_cond" if cond else "g", g, names, how, z, labels, CLASSES if cond else 0)
    pg = tb.R3_G(WIDTHS, CARD, BLOCKS, Z, 3, CLASSES if cond else 0, 4)
    peer_err.append(same_as_peer(g, names, pg, tb_g_names(pg), z, labels, CLASSES if cond else 0))
    kw = {"ConditionDimension": CLASSES, "ConditionEmbeddingDimension": 5} if cond else {}
    d = N.Discriminator(WIDTHS[::-1], CARD[::-1], BLOCKS[::-1], 2, **kw)
    redraw_zeros(d)
    names, how = d_names(d)
    x = torch.randn(B, 3, SIZE, SIZE)
    run("d_cond" if cond else "d", d, names, how, x, labels, CLASSES if cond else 0)
    nets[cond] = (g, d)
    pd = tb.R3_D(WIDTHS, CARD, BLOCKS, 3, CLASSES if cond else 0, 5)
    peer_err.append(same_as_peer(d, names, pd, tb_d_names(pd), x, labels, CLASSES if cond else 0))

counts = {}
W, C, BL = [768] * 4, [96] * 4, [2] * 4
for cond in (False, True):
    gk = {"ConditionDimension": 10, "ConditionEmbeddingDimension": 64} if cond else {}
    dk = {"ConditionDimension": 10, "ConditionEmbeddingDimension": 768} if cond else {}
    sfx = "_cond" if cond else ""
    counts["cifar" + sfx + ".G"] = sum(p.numel() for p in N.Generator(64, W, C, BL, 2, **gk).parameters())
    counts["cifar" + sfx + ".D"] = sum(p.numel() for p in N.Discriminator(W, C, BL, 2, **dk).parameters())

# ---- the training step: the authors' R3GAN/Trainer.py on the cases' G and D (their weights, stored above) ----
import R3GAN.Trainer as T  # noqa: E402

GAMMA = 10.0   # R3GAN's 0.05 leaves R1 + R2 a small part of D's gradients; at 10 they weigh like the loss


def same_weights(case, names, how):
    """The network still holds the weights stored as <case>.p.<view>: the training step's cases load those."""
    for view, p in names.items():
        assert (tensors[f"{case}.p.{view}"] == ganflow_form(p, how, view).detach().numpy()).all(), (case, view)


def put_grads(prefix, names, how):
    for view, p in names.items():
        put(f"{prefix}.{view}", ganflow_form(p.grad, how, view))


def train_step(name, g, d, gcase, dcase, lab, classes):
    """AccumulateDiscriminatorGradients then AccumulateGeneratorGradients on one batch, each as
    training_loop.py calls it (only the phase's network requires gradients; gain 1: the whole batch at once)."""
    gn, ghow = g_names(g)
    dn, dhow = d_names(d)
    same_weights(gcase, gn, ghow)
    same_weights(dcase, dn, dhow)
    z, x = torch.randn(B, Z), torch.randn(B, 3, SIZE, SIZE)
    c = F.one_hot(lab, classes).float() if classes else None
    put(f"{name}.z", z)
    put(f"{name}.x", x)
    if classes:
        put(f"{name}.labels", lab.float())
    put(f"{name}.gamma", torch.tensor([GAMMA]))
    with torch.no_grad():
        fake = g(z, c)
        put(f"{name}.fake", fake)
        put(f"{name}.d_out", torch.cat([d(x, c), d(fake, c)]))
    tr = T.AdversarialTraining(g, d)
    for p in list(g.parameters()) + list(d.parameters()):
        p.grad = None
    g.requires_grad_(False)
    d.requires_grad_(True)
    adv, _, r1, r2 = tr.AccumulateDiscriminatorGradients(z, x, c, GAMMA)
    put(f"{name}.d_loss", adv.mean().reshape(1))
    put(f"{name}.r1", r1.mean().reshape(1))
    put(f"{name}.r2", r2.mean().reshape(1))
    assert all(p.grad is None for p in g.parameters())
    put_grads(f"{name}.gd", dn, dhow)
    for p in d.parameters():
        p.grad = None
    d.requires_grad_(False)
    g.requires_grad_(True)
    adv, _ = tr.AccumulateGeneratorGradients(z, x, c)
    put(f"{name}.g_loss", adv.mean().reshape(1))
    assert all(p.grad is None for p in d.parameters())
    put_grads(f"{name}.gg", gn, ghow)


for cond in (False, True):
    sfx = "_cond" if cond else ""
    train_step("step" + sfx, *nets[cond], "g" + sfx, "d" + sfx, torch.tensor([2, 0, 1, 1]), CLASSES if cond else 0)

meta = {"generator": "tests/ref/make_nn_refs_r3gan.py", "torch": torch.__version__}
meta.update({f"params.{k}": str(v) for k, v in counts.items()})
write_safetensors(OUT, meta)
total = sum(a.nbytes for a in tensors.values())
print(f"{OUT}: {len(tensors)} tensors, {total} bytes; the authors' CIFAR-10 parameter counts: " +
      ", ".join(f"{k} {v}" for k, v in counts.items()) +
      f"; torch_backbones.py's R3_G/R3_D agree with them to {max(peer_err):.2g} (relative)")
