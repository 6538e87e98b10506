-- stylegan2_fashion: StyleGAN2 (Karras et al. 2020, StyleGAN2-ADA's networks
-- and training loop: luaconf/backbones/stylegan2.lua) on Fashion-MNIST at
-- 32x32: non-saturating logistic loss, lazy R1 on D (gamma 0.01, every 16
-- D steps, Adam adjusted), no path length (pl=2: StyleGAN2's FFHQ weight,
-- on the ws as StyleGAN2 does, every pl_every G steps), style mixing off (mixing=0.9:
-- StyleGAN2-ADA's style_mixing_prob of its other configs; the ADA paper's
-- CIFAR config has it off), Adam(0.0025,
-- betas 0, 0.99) for both networks, one D step per G step, batch 64, the
-- moving average of G with StyleGAN2's ramp (half-life ema_kimg thousand
-- images, at most ema_rampup of the images seen), which the grids, the
-- evaluator and `ganflow sample` use (`truncation=0.7` there is the
-- truncation trick in w-space, towards the tracked mean of w), and
-- StyleGAN2-ADA's adaptive augmentation of every image D sees (ada = "bgc":
-- blit, geometric, colour; p adjusted towards r_t = 0.6 every 4 D steps,
-- 0 to 1 in 500k images; ada_p and ada_rt in metrics.jsonl; ada= off).
-- CPU width: ch = 32 channels at every resolution, z = w = 64 (the ADA
-- paper's CIFAR config is ch=512 z=512 w=512). classes=10 makes it
-- class-conditional (the label's embedding in the mapping, cmap in D).
--
--   ./build/ganflow run pipelines/stylegan2_fashion.lua [steps=2000 classes=10 eval=500 ...]
local gf = require "ganflow"
local gan = require "gan"
local sg2 = require "backbones.stylegan2"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  lr = 0.0025,         -- Adam learning rate of both networks, betas (0, 0.99)
  ch = 32,             -- channels at every resolution (CIFAR config: 512)
  z = 64,              -- z and w dimensions (CIFAR config: 512)
  w = 64,
  mapping = 2,         -- mapping network layers
  mbstd = 4,           -- minibatch stddev group (CIFAR config: 32)
  classes = 0,         -- 10: class-conditional
  loss = "bce_logits", -- StyleGAN2's logistic loss (non-saturating for G)
  r1 = 0.01,           -- R1 gamma (CIFAR config: 0.01)
  r1_every = 16,       -- lazy R1: every this many D steps (1: in every step)
  pl = 0.0,            -- path-length weight, w.r.t. the ws (StyleGAN2's FFHQ config: 2; 0: none)
  pl_every = 4,
  mixing = 0.0,        -- style mixing probability per batch (StyleGAN2-ADA: 0.9; CIFAR config: 0)
  noise_strength = "scalar", -- one noise strength per synthesis layer (StyleGAN2); "channel": one per channel,
                       -- what runs made before the scalar hold (resume them with it)
  ema_kimg = 20.0,     -- G's moving average: half-life in thousands of images (StyleGAN2: batch x 10/32)
  ema_rampup = 0.05,   -- ... at most this fraction of the images seen (0: none)
  ada = "bgc",         -- StyleGAN2-ADA's adaptive augmentation of D's images (empty: none)
  ada_target = 0.6,    -- ADA: target of r_t = E[sign(D(x_real))]
  ada_kimg = 500.0,    -- ADA: p can go from 0 to 1 in this many thousand images (0: p fixed at ada_p)
  ada_p = 0.0,         -- ADA: p at the start
  samples = 250,
  log = 50,
  precision = "fp32",
  eval = 0,
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
}

local G = sg2.G { size = 32, channels = 1, ch = opt.ch, z = opt.z, w = opt.w, mapping = opt.mapping,
                  classes = opt.classes, mixing = opt.mixing, pl = opt.pl > 0, noise_strength = opt.noise_strength }
local ada = opt.ada ~= ""
local D = sg2.D { size = 32, channels = 1, ch = opt.ch, classes = opt.classes, mbstd = opt.mbstd,
                  ada = ada and opt.ada or nil, ada_p = ada and opt.ada_p or nil }
local adam = gf.adam { lr = opt.lr, betas = { 0.0, 0.99 }, eps = 1e-8 }

local real = gan.data { path = opt.data, size = 32, batch = opt.batch }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = opt.classes > 0 and opt.classes or nil,
                          eval = opt.eval, eval_n = opt.eval_n, eval_real_n = opt.eval_real_n,
                          classifier = opt.classifier, data = opt.data }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = opt.loss, d_steps = 1, max_batch = opt.batch,
                              r1 = opt.r1, r1_every = opt.r1_every, precision = opt.precision,
                              ada_target = opt.ada_target, ada_kimg = opt.ada_kimg }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = opt.loss,
                              ema_kimg = opt.ema_kimg, ema_rampup = opt.ema_rampup, pl = opt.pl,
                              pl_every = opt.pl_every, publish_every = out.publish, precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
