#!/usr/bin/python3
"""The GPU sibling of torch_backbones.py: two of ganflow's pipelines trained
in PyTorch with the same networks (torch_backbones.py's classes) and the
pipelines' training choices, on one fixed batch of noise as the real
images (only the GAN iteration is timed, no data path), in the modes a
PyTorch user picks: the peer of scripts/gpu-check's stylegan2 and biggan
rows. Runs on the GPU (PyTorch 2.x there) and, with tiny sizes, on the CPU
(Debian's 1.13, which has no torch.compile: the compile mode says skipped),
which is how `gpu-check run DIR dry=1` rehearses it.

usage: torch_backbones_gpu.py NET ITERS MODE[,MODE...] [key=value ...]

NET
  stylegan2   pipelines/stylegan2_fashion.lua: SG2_G / SG2_D (32x32x1;
              defaults: StyleGAN2-ADA's CIFAR width, ch = z = w = 512,
              mapping 2, mbstd 32, conv clamp 256), batch 64, logistic loss
              (non-saturating for G), Adam(0.0025, betas (0, 0.99), eps
              1e-8), lazy R1 (gamma 0.01 every 16 D steps, as its own
              phase, D's Adam adjusted by 16/17 as StyleGAN2-ADA does), G's
              moving average (half-life ema_kimg = 20 thousand images, ramp
              0.05) every step, and an ADA-style augmentation of every image
              D sees (per sample and transform with probability p: x-flip,
              90-degree rotations, integer and fractional translation,
              isotropic and anisotropic scaling, rotation through one
              affine_grid / grid_sample with reflection; brightness and
              contrast), p adjusted towards r_t = 0.6 every 4 D steps as
              ADA does. Not StyleGAN2-ADA's AugmentPipe (no 2x wavelet
              resampling around the warp: on 1x32x32 images its cost is
              negligible next to the 512-channel convolutions), and R1 is
              taken at the augmented image (grid_sample has no double
              backward in PyTorch; ganflow takes it before the
              augmentation). The compile mode runs the R1 phase eagerly
              (no double backward through compiled graphs).
  biggan128   pipelines/biggan_imagenet.lua: BigGAN_G / BigGAN_D at
              128x128x3 (ch 96, z 120, shared embedding 128, self-attention
              at 64, spectral norm as a parametrization computed in fp32),
              batch 32, hinge loss, n_dis 2 (each D step on a real and a
              fake batch, concatenated), Adam (G 1e-4, D 4e-4, betas
              (0, 0.999)), BigGAN's orthogonal regularisation 1e-4 on G's
              weights but the shared embedding; G's moving average starts
              at step 20000 in the pipeline, so not here.

MODE  eager | compile (torch.compile, default mode)
keys  stylegan2: batch ch z w mapping mbstd; biggan128: batch ch z classes
      (1000) attention (64; 0: none); both: warmup (5)
      precision = fp32 (strict) | tf32 (TF32 convolutions and GEMMs) |
      bf16 (autocast); stylegan2 defaults to tf32, biggan128 to bf16
      device = auto | cuda | cpu; seed (1); flops = 1 | 0

An iteration is n_dis D steps and one G step (ganflow's step); images/s =
iterations x batch / s over ITERS iterations after `warmup` (compilation
included in the warm-up, reported). With PyTorch >= 2.1 the FLOPs of an
iteration are counted once, eagerly, with torch.utils.flop_counter (the R1
phase counted apart and spread over its 16 steps). One line per mode:
  torch VERSION DEVICE net=NET mode=MODE precision=P batch=B: X images/s
      (Y ms/iter; warm-up Zs; F TFLOP/iter)
"""
import copy
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_backbones as tb  # noqa: E402

DEFAULTS = {
    "stylegan2": {"batch": 64, "ch": 512, "z": 512, "w": 512, "mapping": 2, "mbstd": 32, "precision": "tf32"},
    "biggan128": {"batch": 32, "ch": 96, "z": 120, "classes": 1000, "attention": 64, "precision": "bf16"},
}
COMMON = {"warmup": 5, "device": "auto", "seed": 1, "flops": 1}


# ---- ADA-style augmentation (stylegan2) ----

def augment(x, p):
    """Every transform drawn per sample, applied with probability p (a 0-d tensor: no host sync)."""
    n, dev = x.shape[0], x.device

    def gate(v, identity):   # v where a Bernoulli(p) says so, else the identity value
        return torch.where(torch.rand(n, device=dev) < p, v, torch.full_like(v, identity))

    sx = gate(1 - 2 * torch.randint(0, 2, (n,), device=dev).float(), 1.0)            # x-flip
    rot = gate(torch.randint(0, 4, (n,), device=dev).float() * (math.pi / 2), 0.0)   # 90-degree rotations
    tx = gate((torch.rand(n, device=dev) * 2 - 1) * 0.125, 0.0)                       # integer translation
    ty = gate((torch.rand(n, device=dev) * 2 - 1) * 0.125, 0.0)
    iso = gate(torch.exp2(torch.randn(n, device=dev) * 0.2), 1.0)                     # isotropic scaling
    ang = gate((torch.rand(n, device=dev) * 2 - 1) * math.pi, 0.0)                   # rotation
    ani = gate(torch.exp2(torch.randn(n, device=dev) * 0.2), 1.0)                     # anisotropic scaling
    fx = gate(torch.randn(n, device=dev) * 0.125, 0.0)                                # fractional translation
    fy = gate(torch.randn(n, device=dev) * 0.125, 0.0)
    a = rot + ang
    cos, sin = torch.cos(a), torch.sin(a)
    scx, scy = sx * iso * ani, iso / ani
    theta = torch.stack([torch.stack([cos * scx, -sin * scy, tx + fx], 1),
                         torch.stack([sin * scx, cos * scy, ty + fy], 1)], 1)
    grid = F.affine_grid(theta.to(x.dtype), list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    bright = gate(torch.randn(n, device=dev) * 0.2, 0.0)                              # brightness
    contrast = gate(torch.exp2(torch.randn(n, device=dev) * 0.5), 1.0)                # contrast
    return x * contrast.to(x.dtype)[:, None, None, None] + bright.to(x.dtype)[:, None, None, None]


def lerp_(dst, src, t):
    if hasattr(torch, "_foreach_lerp_"):
        torch._foreach_lerp_(dst, src, t)
    else:
        for a, b in zip(dst, src):
            a.lerp_(b, t)


def stylegan2(o, dev, mode):
    """Networks, optimisers and iteration(step) of stylegan2_fashion at o's width."""
    g = tb.SG2_G(32, o["ch"], o["z"], o["w"], o["mapping"], 1).to(dev).train()
    d = tb.SG2_D(32, o["ch"], 1, group=o["mbstd"]).to(dev).train()
    g_ema = copy.deepcopy(g).eval().requires_grad_(False)
    fused = {"fused": True} if dev == "cuda" else {}
    og = torch.optim.Adam(g.parameters(), 0.0025, betas=(0.0, 0.99), eps=1e-8, **fused)
    c = 16 / 17   # the lazy regulariser's share of D's updates (StyleGAN2-ADA)
    od = torch.optim.Adam(d.parameters(), 0.0025 * c, betas=(0.0, 0.99 ** c), eps=1e-8, **fused)
    batch, gamma, every = o["batch"], 0.01, 16
    real = torch.rand(batch, 1, 32, 32, device=dev) * 2 - 1
    gm, dm = g, d
    if mode == "compile":
        gm, dm = torch.compile(g), torch.compile(d)
    ac = o["autocast"]
    st = {"p": torch.zeros((), device=dev), "signs": torch.zeros((), device=dev), "seen": 0, "nimg": 0}
    ema_p, p_list = list(g_ema.parameters()), list(g.parameters())

    def iteration(step):
        p = st["p"]
        # G: non-saturating logistic loss through D (D's weights not updated)
        d.requires_grad_(False)
        with ac:
            gen = gm(torch.randn(batch, o["z"], device=dev))
            loss_g = F.softplus(-dm(augment(gen, p))).float().mean()
        og.zero_grad(set_to_none=True)
        loss_g.backward()
        og.step()
        d.requires_grad_(True)
        # D: logistic loss on a fresh fake batch and the real batch
        with ac:
            with torch.no_grad():
                fake = gm(torch.randn(batch, o["z"], device=dev))
            lf, lr = dm(augment(fake, p)).float(), dm(augment(real, p)).float()
            loss_d = F.softplus(lf).mean() + F.softplus(-lr).mean()
        od.zero_grad(set_to_none=True)
        loss_d.backward()
        od.step()
        st["signs"] += lr.detach().sign().mean()
        # lazy R1, its own phase (eager: no double backward through compiled graphs)
        if step % every == 0:
            x = augment(real, p).detach().requires_grad_(True)
            with ac:
                out = d(x).float()
            grad, = torch.autograd.grad(out.sum(), x, create_graph=True)
            od.zero_grad(set_to_none=True)
            (grad.float().square().sum([1, 2, 3]).mean() * (gamma / 2) * every).backward()
            od.step()
        # ADA: p towards r_t = 0.6 every 4 D steps (images seen / (500 kimg))
        st["seen"] += 1
        if st["seen"] == 4:
            rt = st["signs"] / 4
            st["p"] = (p + torch.sign(rt - 0.6) * (batch * 4) / 500e3).clamp(0, 1)
            st["signs"], st["seen"] = torch.zeros((), device=dev), 0
        # G's moving average: half-life 20 kimg, at most 0.05 of the images seen
        st["nimg"] += batch
        half = min(20e3, st["nimg"] * 0.05)
        lerp_(ema_p, p_list, 1 - 0.5 ** (batch / max(half, 1e-8)))

    r1_share = 1 / every
    return g, d, iteration, r1_share


def ortho_(model, strength, skip):
    """BigGAN's orthogonal regularisation, added to the gradients: 2 s ((W W^T) masked off the diagonal) W."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.grad is None or p.ndim < 2 or any(s in name for s in skip):
                continue
            w = p.view(p.shape[0], -1)
            ww = w @ w.t()
            ww.fill_diagonal_(0)
            p.grad += 2 * strength * (ww @ w).view_as(p)


class SpectralNorm(torch.nn.Module):
    """W / sigma(W), sigma = u^T W v from one power iteration per training forward (u, v buffers, no
    gradient through them), as torch.nn.utils.spectral_norm, as a parametrization (torch.compile traces
    it) computed in fp32 outside autocast (PyTorch's own has failed under CUDA autocast: an fp32 u
    against an autocast bf16 product, pytorch/pytorch#125544)."""

    def __init__(self, weight):
        super().__init__()
        m = weight.detach().flatten(1)
        self.register_buffer("u", F.normalize(m.new_empty(m.shape[0]).normal_(), dim=0))
        self.register_buffer("v", F.normalize(m.new_empty(m.shape[1]).normal_(), dim=0))

    def forward(self, w):
        with torch.autocast(w.device.type, enabled=False):
            m = w.flatten(1).float()
            if self.training:
                with torch.no_grad():
                    self.v.copy_(F.normalize(m.t() @ self.u, dim=0))
                    self.u.copy_(F.normalize(m @ self.v, dim=0))
            return w / (self.u @ (m @ self.v))


def spectral_norm(module):
    torch.nn.utils.parametrize.register_parametrization(module, "weight", SpectralNorm(module.weight))
    return module


def biggan128(o, dev, mode):
    """Networks, optimisers and iteration(step) of biggan_imagenet at o's width."""
    tb.SN = spectral_norm   # the same parameters as torch_backbones.py's (weight_orig: parametrizations...original)
    classes = o["classes"]
    g = tb.BigGAN_G(o["ch"], o["z"], 128, 3, classes, 128, o["attention"]).to(dev).train()
    d = tb.BigGAN_D(o["ch"], 3, classes, 128, o["attention"]).to(dev).train()
    fused = {"fused": True} if dev == "cuda" else {}
    og = torch.optim.Adam(g.parameters(), 1e-4, betas=(0.0, 0.999), **fused)
    od = torch.optim.Adam(d.parameters(), 4e-4, betas=(0.0, 0.999), **fused)
    batch, n_dis = o["batch"], 2
    real = torch.rand(batch, 3, 128, 128, device=dev) * 2 - 1
    gm, dm = g, d
    if mode == "compile":
        gm, dm = torch.compile(g), torch.compile(d)
    ac = o["autocast"]

    def labels():
        return torch.randint(0, classes, (batch,), device=dev)

    def iteration(step):
        for _ in range(n_dis):
            yr, yf = labels(), labels()
            with ac:
                with torch.no_grad():
                    fake = gm(torch.randn(batch, o["z"], device=dev), yf)
                out = dm(torch.cat([real, fake.to(real.dtype)]), torch.cat([yr, yf])).float()
                loss_d = F.relu(1 - out[:batch]).mean() + F.relu(1 + out[batch:]).mean()
            od.zero_grad(set_to_none=True)
            loss_d.backward()
            od.step()
        d.requires_grad_(False)
        y = labels()
        with ac:
            loss_g = -dm(gm(torch.randn(batch, o["z"], device=dev), y), y).float().mean()
        og.zero_grad(set_to_none=True)
        loss_g.backward()
        ortho_(g, 1e-4, ("shared",))
        og.step()
        d.requires_grad_(True)

    return g, d, iteration, 0.0


NETS = {"stylegan2": stylegan2, "biggan128": biggan128}


def count_flops(iteration, r1_share):
    """FLOPs of one iteration, counted eagerly (None where torch has no flop counter or it fails:
    the timing goes on without)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    try:
        with FlopCounterMode(display=False) as fc:
            iteration(1)
        plain = fc.get_total_flops()
        if not r1_share:
            return plain
        with FlopCounterMode(display=False) as fc:
            iteration(0)
        return plain + (fc.get_total_flops() - plain) * r1_share
    except Exception as e:  # noqa: BLE001 (a counter that cannot follow the double backward, say)
        print(f"torch_backbones_gpu.py: FLOPs not counted: {type(e).__name__}: {e}", flush=True)
        return None


def parse(argv):
    if len(argv) < 3 or argv[0] not in NETS:
        sys.exit(__doc__)
    net, iters, modes = argv[0], int(argv[1]), argv[2].split(",")
    o = dict(COMMON, **DEFAULTS[net])
    for a in argv[3:]:
        k, sep, v = a.partition("=")
        if not sep or k not in o:
            sys.exit(f"torch_backbones_gpu.py: unknown argument '{a}' (known: {', '.join(sorted(o))})")
        o[k] = v if k in ("precision", "device") else int(v)
    for m in modes:
        if m not in ("eager", "compile"):
            sys.exit(f"torch_backbones_gpu.py: mode '{m}' (eager or compile)")
    if o["precision"] not in ("fp32", "tf32", "bf16"):
        sys.exit(f"torch_backbones_gpu.py: precision={o['precision']} (fp32, tf32 or bf16)")
    return net, iters, modes, o


def main():
    net, iters, modes, o = parse(sys.argv[1:])
    dev = o["device"] if o["device"] != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    prec = o["precision"]
    if dev == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        torch.backends.cudnn.allow_tf32 = prec == "tf32"
    o["autocast"] = torch.autocast(dev, dtype=torch.bfloat16, enabled=prec == "bf16")
    head = f"torch {torch.__version__} {dev} net={net}"
    flops = None
    for mode in modes:
        what = f"{head} mode={mode} precision={prec} batch={o['batch']}"
        if mode == "compile" and not hasattr(torch, "compile"):
            print(f"{what}: skipped (torch.compile needs PyTorch 2; this is {torch.__version__})", flush=True)
            continue
        torch.manual_seed(o["seed"])
        t0 = time.perf_counter()
        try:
            if mode == "compile":
                torch._dynamo.reset()
            g, d, iteration, r1_share = NETS[net](o, dev, mode)
            if flops is None and o["flops"] and mode == "eager":
                flops = count_flops(iteration, r1_share)
            for i in range(o["warmup"]):
                iteration(i)
            if dev == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # a compiler error or too little memory in one mode leaves the others
            msg = str(e).strip().splitlines()
            print(f"{what}: failed: {type(e).__name__}: {msg[0] if msg else ''}", flush=True)
            continue
        warm = time.perf_counter() - t0
        t = time.perf_counter()
        for i in range(iters):
            iteration(o["warmup"] + i)
        if dev == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        fl = f"; {flops / 1e12:.4g} TFLOP/iter" if flops else ""
        print(f"{what}: {iters * o['batch'] / dt:.2f} images/s ({dt / iters * 1e3:.2f} ms/iter; "
              f"warm-up {warm:.1f}s{fl}) params G={sum(p.numel() for p in g.parameters())} "
              f"D={sum(p.numel() for p in d.parameters())}", flush=True)
        del g, d, iteration
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
