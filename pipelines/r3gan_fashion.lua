-- r3gan_fashion: R3GAN ("The GAN is dead; long live the GAN! A Modern GAN
-- Baseline", Huang, Gokaslan, Kuleshov, Tompkin, NeurIPS 2024) on
-- Fashion-MNIST at 32x32: the relativistic pairing loss (loss = "rpgan")
-- with R1 and R2 in every D step (gamma/2 (R1 + R2)), and the paper's
-- modern ResNet without normalisation (luaconf/backbones/r3gan.lua:
-- grouped convolutions, the generative and discriminative bases, the
-- [1, 2, 1] interpolative resampling), at a CPU width.
--
-- Everything R3GAN schedules follows the images seen along its cosine decay
-- (gf.cosine, docs/train.md "Schedules"), over decay_kimg thousand images:
-- the learning rate lr -> lr_to, Adam's beta2 (beta1 = 0) beta2 -> beta2_to,
-- gamma -> gamma_to, G's average's half-life 0 -> ema_kimg thousand images,
-- and the augmentation probability (StyleGAN2-ADA's pipe, ada = "bgc", at
-- a scheduled p, no controller) 0 -> aug.
--
-- The paper's CIFAR-10 configuration (their train.py preset CIFAR10):
--   widths 768, cardinality 96, 2 blocks per stage, expansion 2, z 64,
--   batch 512, gamma 0.05 -> 0.005, lr 2e-4 -> 5e-5, beta2 0.9 -> 0.99,
--   G's average 0 -> 5 M images and the augmentation 0 -> 0.55, all over 20 M
--   images (decay_kimg = 20000), conditional with classes = 10:
--   ./build/ganflow run pipelines/r3gan_fashion.lua width=768 cardinality=96 blocks=2 batch=512 \
--       lr=2e-4 lr_to=5e-5 out=linear decay_kimg=20000 ema_kimg=5000 aug=0.55 channels=3 \
--       data=<cifar10 shards> classes=10
-- The defaults are a CPU-sized version for Fashion-MNIST: width 32,
-- cardinality 4, 1 block a stage, the schedules over the default run's
-- 4000 x 64 images, no augmentation (aug = 0), and two departures that the
-- README's quality table measured:
-- - lr 1e-3 -> 2.5e-4, 5 times the paper's. Adam moves every weight by about
--   lr a step whatever its layer's fan-in, so a 1x1 conv's output moves by
--   about fan-in x lr: at width 32 (fan-in 32 and 64, the paper's 768 and
--   1536) the paper's lr learns some 20 times slower, and G stayed a blur
--   (FID 612.6 after 4000 updates at lr 2e-4, 106.9 at 1e-3 with the tanh);
-- - out = "tanh": G's pixels stay in [-1, 1]. The authors' linear output ran
--   far below -1 on Fashion-MNIST's black background.
--
--   ./build/ganflow dataset fashion-mnist            (once)
--   ./build/ganflow run pipelines/r3gan_fashion.lua  [steps=4000 classes=10 ...]
--
-- G's relativistic loss pairs its fakes with real images: the batch stage
-- feeds both d_step and g_step (each fake batch with the real batch D pairs
-- it with, whose labels a conditional G takes).
local gf = require "ganflow"
local gan = require "gan"
local r3 = require "backbones.r3gan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  channels = 1,        -- of the images (3 for CIFAR-10)
  batch = 64,          -- images per G step and per D step (paper, CIFAR-10: 512)
  width = 32,          -- channels at every stage (paper: 768)
  cardinality = 4,     -- groups of the blocks' kxk convolution (paper: 96)
  blocks = 1,          -- residual blocks per stage (paper: 2)
  expansion = 2,       -- the blocks' inner width factor
  z = 64,              -- noise dimension
  out = "tanh",        -- G's output: "tanh" (pixels in [-1, 1]) or "linear" (the authors' G)
  classes = 0,         -- 10: class-conditional (an embedding after z in G, a projection in D)
  lr = 1e-3,           -- Adam learning rate of both networks, betas (0, beta2) (paper: 2e-4; see above)
  lr_to = 2.5e-4,      -- ... at the end of the decay (paper: 5e-5)
  beta2 = 0.9,
  beta2_to = 0.99,
  gamma = 0.05,        -- R1 and R2 weight: gamma/2 (R1 + R2)
  gamma_to = 0.005,
  ema_kimg = 64.0,     -- G's average: half-life from 0 to this many thousand images (paper: 5000 of 20000)
  aug = 0.0,           -- augmentation probability at the end of the decay (paper, CIFAR-10: 0.55; 0: none)
  decay_kimg = 256.0,  -- the schedules run over this many thousand images (the default run: 4000 x 64)
  samples = 250,
  log = 50,
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
  decoders = "auto",   -- jpeg_decode workers: "auto" (adapts to what batch takes) or a number
}

local net = { size = 32, channels = opt.channels, widths = opt.width, cardinality = opt.cardinality,
              blocks = opt.blocks, expansion = opt.expansion, classes = opt.classes }
local G = r3.G(gf.merge(net, { z = opt.z, out = opt.out }))
local aug = opt.aug > 0
local D = r3.D(gf.merge(net, { ada = aug and "bgc" or nil, ada_p = aug and 0.0 or nil }))
local adam = gf.adam { lr = opt.lr, betas = { 0.0, opt.beta2 }, eps = 1e-8 }
local kimg = opt.decay_kimg
local sched = { lr = gf.cosine { from = opt.lr, to = opt.lr_to, kimg = kimg },
                beta2 = gf.cosine { from = opt.beta2, to = opt.beta2_to, kimg = kimg } }

local real = gan.data { path = opt.data, size = 32, channels = opt.channels, batch = opt.batch,
                        decoders = opt.decoders }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = opt.classes > 0 and opt.classes or nil,
                          eval = opt.eval, eval_n = opt.eval_n, eval_real_n = opt.eval_real_n,
                          classifier = opt.classifier, data = opt.data }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = "rpgan", max_batch = opt.batch,
                              r1 = opt.gamma, r2 = opt.gamma, precision = opt.precision,
                              schedule = gf.merge(sched, {
                                r1 = gf.cosine { from = opt.gamma, to = opt.gamma_to, kimg = kimg },
                                r2 = gf.cosine { from = opt.gamma, to = opt.gamma_to, kimg = kimg },
                                ada_p = aug and gf.cosine { from = 0.0, to = opt.aug, kimg = kimg } or nil }) }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = "rpgan",
                              ema_kimg = opt.ema_kimg, publish_every = out.publish, precision = opt.precision,
                              schedule = gf.merge(sched, {
                                ema_kimg = gf.cosine { from = 0.0, to = opt.ema_kimg, kimg = kimg } }) }

gf.connect(real.batch, d.real)
gf.connect(real.batch, g.real)                 -- G's loss pairs its fakes with these real images
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 4000, checkpoint_every = 500 }
