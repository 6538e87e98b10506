-- sngan_fashion: the SNGAN of Miyato et al. 2018 (ResNet G and D, spectral
-- norm everywhere in D, global sum pooling, hinge loss, n_dis = 5, Adam
-- (2e-4, 0, 0.9): the paper's CIFAR setting) on Fashion-MNIST at 32x32.
-- The CPU default widths are ch_g = ch_d = 32 (the paper's 256 / 128 are one
-- option away: ch_g=256 ch_d=128). classes=10 makes it class-conditional
-- (cBN in G, projection in D); attention=16 makes it SAGAN; augment= adds
-- DiffAugment to D; ema= averages G (sample grids and evaluation use it).
-- r1=, gp= (with loss=wgan) and pl= add the gradient penalties (docs/train.md).
--
--   ./build/ganflow run pipelines/sngan_fashion.lua [steps=2000 classes=10 eval=500 ...]
local gf = require "ganflow"
local gan = require "gan"
local sngan = require "backbones.sngan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  lr = 2e-4,           -- Adam learning rate of both networks, betas (0, 0.9)
  n_dis = 5,           -- D steps per G step
  ch_g = 32,           -- G width (paper: 256)
  ch_d = 32,           -- D width (paper: 128)
  classes = 0,         -- 10: class-conditional (cBN + projection)
  attention = 0,       -- resolution of a self-attention layer in G and D (SAGAN: 16), 0: none
  augment = "",        -- DiffAugment policy for D, e.g. "color,translation,cutout"
  ema = 0.0,           -- decay of G's moving average (0: none)
  lecam = 0.0,         -- LeCam regularisation of D (0: none)
  loss = "hinge",      -- hinge, or wgan (with gp), bce_logits, ls
  r1 = 0.0,            -- R1 penalty gamma on D (0: none)
  r1_every = 16,       -- R1 every this many D steps (lazy; 1: every step)
  gp = 0.0,            -- WGAN-GP lambda (loss = wgan; 0: none)
  pl = 0.0,            -- path-length penalty weight on G (unconditional G; 0: none)
  pl_every = 4,        -- path length every this many G steps
  samples = 250,
  log = 50,
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
  decoders = "auto",   -- jpeg_decode workers: "auto" (adapts to what batch takes) or a number
}

local attention = opt.attention > 0 and opt.attention or nil
local augment = opt.augment ~= "" and opt.augment or nil
local G = sngan.G { size = 32, ch = opt.ch_g, z = 128, channels = 1, classes = opt.classes, attention = attention }
local D = sngan.D { size = 32, ch = opt.ch_d, channels = 1, classes = opt.classes, attention = attention,
                    augment = augment }
local adam = gf.adam { lr = opt.lr, betas = { 0.0, 0.9 } }

local real = gan.data { path = opt.data, size = 32, batch = opt.batch, decoders = opt.decoders }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = opt.classes > 0 and opt.classes or nil,
                          eval = opt.eval, eval_n = opt.eval_n, eval_real_n = opt.eval_real_n,
                          classifier = opt.classifier, data = opt.data }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = opt.loss, d_steps = opt.n_dis,
                              max_batch = opt.batch, lecam = opt.lecam, r1 = opt.r1, r1_every = opt.r1_every,
                              gp = opt.gp, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = opt.loss,
                              ema = opt.ema, pl = opt.pl, pl_every = opt.pl_every, publish_every = out.publish,
                              precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = opt.n_dis })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
