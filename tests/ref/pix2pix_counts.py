#!/usr/bin/python3
"""Parameter counts and output shapes of pix2pix's U-Net G and PatchGAN D
written in PyTorch 1.13 the way the authors' code builds them
(UnetGenerator / UnetSkipConnectionBlock / NLayerDiscriminator, written
here from the paper's description and that code's documented structure),
for the configurations test_nn_backbones checks luaconf/backbones/pix2pix.lua
against. Prints one line per configuration:
    name params out_shape
Run: /usr/bin/python3 tests/ref/pix2pix_counts.py
"""
import functools
import torch
import torch.nn as nn


def norm_of(kind):
    if kind == "batch":
        return functools.partial(nn.BatchNorm2d, affine=True, track_running_stats=True)
    return functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)


class Block(nn.Module):
    def __init__(self, outer, inner, cin=None, sub=None, outermost=False, innermost=False, norm="batch",
                 dropout=False):
        super().__init__()
        self.outermost = outermost
        use_bias = norm == "instance"
        N = norm_of(norm)
        cin = outer if cin is None else cin
        down = nn.Conv2d(cin, inner, 4, 2, 1, bias=use_bias)
        if outermost:
            up = nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1)
            layers = [down, sub, nn.ReLU(True), up, nn.Tanh()]
        elif innermost:
            up = nn.ConvTranspose2d(inner, outer, 4, 2, 1, bias=use_bias)
            layers = [nn.LeakyReLU(0.2, True), down, nn.ReLU(True), up, N(outer)]
        else:
            up = nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1, bias=use_bias)
            layers = [nn.LeakyReLU(0.2, True), down, N(inner), sub, nn.ReLU(True), up, N(outer)]
            if dropout:
                layers.append(nn.Dropout(0.5))
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


def unet(cin, cout, depth, ngf=64, norm="batch", ndrop=3):
    ch = lambda i: ngf * min(2 ** (i - 1), 8)
    # block i: encoder conv ch(i-1) -> ch(i), decoder back; dropout in decoder
    # blocks 2 .. 1 + ndrop from the bottleneck (k = depth - i + 1)
    b = Block(ch(depth - 1), ch(depth), innermost=True, norm=norm)
    for i in range(depth - 1, 1, -1):
        k = depth - i + 1
        b = Block(ch(i - 1), ch(i), sub=b, norm=norm, dropout=2 <= k <= 1 + ndrop)
    return Block(cout, ch(1), cin=cin, sub=b, outermost=True, norm=norm)


def patch_d(cin, ndf=64, n_layers=3, norm="batch"):
    use_bias = norm == "instance"
    N = norm_of(norm)
    seq = [nn.Conv2d(cin, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)]
    mult = 1
    for n in range(1, n_layers):
        prev, mult = mult, min(2 ** n, 8)
        seq += [nn.Conv2d(ndf * prev, ndf * mult, 4, 2, 1, bias=use_bias), N(ndf * mult), nn.LeakyReLU(0.2, True)]
    prev, mult = mult, min(2 ** n_layers, 8)
    seq += [nn.Conv2d(ndf * prev, ndf * mult, 4, 1, 1, bias=use_bias), N(ndf * mult), nn.LeakyReLU(0.2, True)]
    seq += [nn.Conv2d(ndf * mult, 1, 4, 1, 1)]
    return nn.Sequential(*seq)


def count(m):
    return sum(p.numel() for p in m.parameters())


CONFIGS = [
    # name, size, channels, norm, G depth, D n_layers
    ("g32_gray_batch", 32, 1, "batch", 5, None),
    ("g256_rgb_batch", 256, 3, "batch", 8, None),
    ("g256_rgb_instance", 256, 3, "instance", 8, None),
    ("d32_gray_batch", 32, 1, "batch", None, 3),
    ("d256_rgb_batch", 256, 3, "batch", None, 3),
    ("d256_rgb_instance", 256, 3, "instance", None, 3),
    ("d256_rgb_batch_n2", 256, 3, "batch", None, 2),
]

if __name__ == "__main__":
    torch.manual_seed(0)
    for name, size, c, norm, depth, nl in CONFIGS:
        if depth:
            m = unet(c, c, depth, norm=norm).eval()
            x = torch.zeros(2, c, size, size)
        else:
            m = patch_d(2 * c, n_layers=nl, norm=norm).eval()
            x = torch.zeros(2, 2 * c, size, size)
        with torch.no_grad():
            y = m(x)
        print(name, count(m), "x".join(str(d) for d in y.shape[1:]))
