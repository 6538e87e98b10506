#!/usr/bin/python3
"""The PyTorch peer of the seed DC-GAN benchmarks: the generator and
discriminator of "Scalable Balanced Training of Conditional GANs" (tables 1
and 2; luaconf/backbones/dcgan.lua builds the same layers), trained on one
fixed batch of uniform noise as the real images, so that only the GAN
iteration is timed: z ~ N(0, 1), fake = G(z); the G step (BCE(D(fake), 1)
through D into G, Adam on G), then the D step ((BCE(D(real), 1) +
BCE(D(fake), 0)) / 2, Adam on D), both Adam(2e-4, betas 0.5, 0.999).

usage:
  torch_dcgan.py BATCH ITERS [SIZE=32] [CHANNELS=1]
      bench_dcgan_step's peer (tests/bench/run dcgan_step): eager mode, on
      the GPU when torch sees one, else on the CPU with torch's thread count
      (OMP_NUM_THREADS); D ends with a sigmoid and the loss is BCELoss, as
      the pipeline's default D. Prints
      "torch VERSION DEVICE threads=T batch=B img=SxSxC: X images/s (Y ms/iter)".
  torch_dcgan.py gpu ITERS BATCH:MODE [BATCH:MODE ...]
      scripts/gpu-check's peer on the GPU (32x32x1), in the modes a PyTorch
      user picks, all in one process: eager (fp32 tensors, TF32
      convolutions: PyTorch's default), bf16 (autocast), compile
      (torch.compile) and compile-ro (torch.compile mode "reduce-overhead":
      CUDA graphs); fused Adam, cudnn.benchmark, logits and
      BCEWithLogitsLoss (BCELoss may not run under autocast). Fresh networks
      per pair, 5 warm-up iterations (compilation included, reported), then
      ITERS timed. One line per pair as it finishes:
      "torch VERSION cuda mode=MODE batch=B: X images/s (Y ms/iter; warm-up Zs)".
"""
import sys
import time

import torch
import torch.nn as nn

Z = 100
MODES = ("eager", "bf16", "compile", "compile-ro")


class Generator(nn.Module):
    """z -> linear 128 (S/4)^2 -> BN -> up, conv 128, BN(eps 0.8), LReLU -> up, conv 64, BN, LReLU -> conv C, tanh."""

    def __init__(self, size, channels):
        super().__init__()
        self.side = size // 4
        self.fc = nn.Linear(Z, 128 * self.side * self.side)
        self.body = nn.Sequential(
            nn.BatchNorm2d(128),
            nn.Upsample(scale_factor=2), nn.Conv2d(128, 128, 3, 1, 1), nn.BatchNorm2d(128, eps=0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2), nn.Conv2d(128, 64, 3, 1, 1), nn.BatchNorm2d(64, eps=0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(64, channels, 3, 1, 1), nn.Tanh())

    def forward(self, z):
        return self.body(self.fc(z).view(-1, 128, self.side, self.side))


class Discriminator(nn.Module):
    """Four stride-2 3x3 convs (C -> 16 -> 32 -> 64 -> 128), each LReLU 0.2 and Dropout2d 0.25, BN(eps 0.8)
    after all but the first; linear to one value, and a sigmoid unless `logits`."""

    def __init__(self, size, channels, logits):
        super().__init__()
        layers, cin = [], channels
        for cout in (16, 32, 64, 128):
            layers += [nn.Conv2d(cin, cout, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25)]
            if cin != channels:
                layers.append(nn.BatchNorm2d(cout, eps=0.8))
            cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(128 * (size // 16) ** 2, 1)
        self.out = nn.Identity() if logits else nn.Sigmoid()

    def forward(self, x):
        return self.out(self.fc(self.body(x).flatten(1)))


def iteration_fn(batch, size, channels, dev, mode=None):
    """The networks, optimisers and one GAN iteration; mode None: bench_dcgan_step's eager peer."""
    logits = mode is not None
    g, d = Generator(size, channels).to(dev), Discriminator(size, channels, logits).to(dev)
    extra = {"fused": True} if logits else {}
    og = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999), **extra)
    od = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999), **extra)
    loss = nn.BCEWithLogitsLoss() if logits else nn.BCELoss()
    real = torch.rand(batch, channels, size, size, device=dev) * 2 - 1
    ones, zeros = torch.ones(batch, 1, device=dev), torch.zeros(batch, 1, device=dev)
    gm, dm = g, d
    graphs = mode == "compile-ro"
    if mode in ("compile", "compile-ro"):
        gm = torch.compile(g, mode="reduce-overhead" if graphs else "default")
        dm = torch.compile(d, mode="reduce-overhead" if graphs else "default")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16") if logits else None

    def step_begin():
        if graphs:   # the outputs of the previous replay may be overwritten from here on
            torch.compiler.cudagraph_mark_step_begin()

    def iteration():
        step_begin()
        with autocast if autocast else torch.enable_grad():
            fake = gm(torch.randn(batch, Z, device=dev))
            if graphs:
                fake = fake.clone()
            lg = loss(dm(fake).float(), ones)
        og.zero_grad(set_to_none=True)
        lg.backward()
        og.step()
        step_begin()
        with autocast if autocast else torch.enable_grad():
            ld = (loss(dm(real).float(), ones) + loss(dm(fake.detach()).float(), zeros)) / 2
        od.zero_grad(set_to_none=True)
        ld.backward()
        od.step()

    return iteration


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def bench_peer(argv):
    batch, iters = int(argv[0]), int(argv[1])
    size = int(argv[2]) if len(argv) > 2 else 32
    channels = int(argv[3]) if len(argv) > 3 else 1
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    it = iteration_fn(batch, size, channels, dev)
    for _ in range(3):
        it()
    sync(dev)
    t = time.perf_counter()
    for _ in range(iters):
        it()
    sync(dev)
    dt = time.perf_counter() - t
    print(f"torch {torch.__version__} {dev} threads={torch.get_num_threads()} batch={batch} "
          f"img={size}x{size}x{channels}: {iters * batch / dt:.1f} images/s ({dt / iters * 1e3:.2f} ms/iter)")


def gpu_modes(argv):
    iters = int(argv[0])
    if not torch.cuda.is_available():
        sys.exit("torch_dcgan.py gpu: torch sees no CUDA device")
    torch.backends.cudnn.benchmark = True
    for pair in argv[1:]:
        b, _, mode = pair.partition(":")
        if mode not in MODES:
            sys.exit(f"torch_dcgan.py gpu: mode '{mode}' in '{pair}' (one of {', '.join(MODES)})")
        batch = int(b)
        if mode.startswith("compile"):
            torch._dynamo.reset()
        t0 = time.perf_counter()
        try:
            it = iteration_fn(batch, 32, 1, "cuda", mode)
            for _ in range(5):
                it()
            sync("cuda")
        except Exception as e:  # one mode failing (a compiler error, memory) leaves the others
            print(f"torch {torch.__version__} cuda mode={mode} batch={batch}: failed: "
                  f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            continue
        warm = time.perf_counter() - t0
        t = time.perf_counter()
        for _ in range(iters):
            it()
        sync("cuda")
        dt = time.perf_counter() - t
        print(f"torch {torch.__version__} cuda mode={mode} batch={batch}: {iters * batch / dt:.1f} images/s "
              f"({dt / iters * 1e3:.3f} ms/iter; warm-up {warm:.1f}s)", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "gpu":
        gpu_modes(sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] != "gpu":
        bench_peer(sys.argv[1:])
    else:
        sys.exit(__doc__)
