-- dcgan_fashion: the seed DC-GAN (tables 1-2 of "Scalable Balanced Training
-- of Conditional GANs") on Fashion-MNIST at 32x32, synchronous G/D steps,
-- Adam(2e-4, 0.5, 0.999), BCE. The quick start's default run.
--
-- Gradient penalties (docs/train.md): r1=10 (R1 on D, lazy every r1_every
-- D steps); loss=wgan gp=10 is WGAN-GP (D a critic: no sigmoid, and no batch
-- norm unless d_bn=true); pl=2 adds StyleGAN2's path length to G. WGAN-GP
-- with five critic steps, Adam(2e-4, 0.5, 0.9) and no dropout in the critic
-- passes the BCE DC-GAN in 2000 steps (README "Quality: WGAN-GP vs DC-GAN"):
--   ./build/ganflow run pipelines/dcgan_fashion.lua loss=wgan gp=10 n_dis=5 lr=2e-4 beta1=0.5 beta2=0.9 d_dropout=0
-- ada=bgc puts StyleGAN2-ADA's adaptive augmentation first in D (p adjusted
-- towards r_t = ada_target, ada_p and ada_rt in metrics.jsonl).
--
--   reader -> decode -> batch -> d_step <-> g_step      (fakes, D weights)
--                                  |          |-> sample_grid (PNG grids), evaluator (eval=N)
--                                  +----------+-> metrics (JSONL), checkpoint
--
--   ./build/ganflow dataset fashion-mnist            (once)
--   ./build/ganflow run pipelines/dcgan_fashion.lua  [steps=2000 batch=64 lr=2e-4 ...]
--   ./build/ganflow run pipelines/dcgan_fashion.lua resume=runs/<dir>   (continue)
--
-- Everything the run writes goes to one run directory (runs/dcgan_fashion-<time>,
-- or dir=...): pipeline.lua, args.txt, metrics.jsonl, samples/*.png, checkpoints/.
local gf = require "ganflow"
local gan = require "gan"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train", -- dataset (ganflow dataset fashion-mnist)
  batch = 64,          -- images per G step and per D step
  lr = 2e-4,           -- Adam learning rate of both networks
  beta1 = 0.5,         -- Adam's betas of both networks
  beta2 = 0.999,
  loss = "bce",        -- bce (D ends in a sigmoid) or wgan (a critic: gp = lambda for WGAN-GP), bce_logits, hinge, ls
  n_dis = 1,           -- D steps per G step
  r1 = 0.0,            -- R1 penalty gamma on D (0: none)
  r1_every = 16,       -- R1 every this many D steps (StyleGAN2's lazy regularisation; 1: every step)
  gp = 0.0,            -- WGAN-GP lambda (loss = wgan; 0: none)
  pl = 0.0,            -- path-length penalty weight on G (0: none)
  pl_every = 4,        -- path length every this many G steps
  ada = "",            -- StyleGAN2-ADA's augmentation of D's images, e.g. "bgc" (empty: none)
  ada_target = 0.6,    -- ADA: target of r_t = E[sign(D(x_real))]
  ada_kimg = 500.0,    -- ADA: p can go from 0 to 1 in this many thousand images (0: p fixed at ada_p)
  ada_p = 0.0,         -- ADA: p at the start
  d_bn = "auto",       -- D's batch norms: true, false; auto = true unless gp > 0
  d_dropout = 0.25,    -- D's dropout2d probability after each block (0: none)
  clip = 0.0,          -- clip each network's gradient to this global L2 norm (0: none)
  size = 32,           -- image side (the backbone needs a multiple of 16)
  samples = 250,       -- sample grid every this many steps
  log = 50,            -- metrics line every this many steps
  init = "torch",      -- "torch" (PyTorch defaults, as the peer) or "dcgan" (N(0, 0.02))
  decoders = "auto",   -- jpeg_decode workers: "auto" (adapts to what batch takes) or a number
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,            -- FID/IS/KID every this many steps while training (0: off; needs the classifier)
  eval_n = 2000,       -- generated images per evaluation
  eval_real_n = 0,     -- real images behind the reference statistics (0: the whole split; cached)
  classifier = "data/fashion-mnist/classifier.safetensors", -- pipelines/classifier_fashion.lua writes it
  eval_features = "classifier", -- or "inception": standard FID/IS/KID (eval_weights, docs/eval.md)
  eval_weights = "",   -- eval_features = "inception": the file of ganflow weights import
}

local d_bn = opt.d_bn == "auto" and opt.gp == 0 or opt.d_bn == true or opt.d_bn == "true"
local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local ada = opt.ada ~= ""
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init, sigmoid = opt.loss == "bce", bn = d_bn,
                    dropout = opt.d_dropout,
                    ada = ada and opt.ada or nil, ada_p = ada and opt.ada_p or nil }
local adam = gf.adam { lr = opt.lr, betas = { opt.beta1, opt.beta2 } }

local real = gan.data { path = opt.data, size = opt.size, batch = opt.batch, decoders = opt.decoders }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, eval = opt.eval, eval_n = opt.eval_n,
                          eval_real_n = opt.eval_real_n, classifier = opt.classifier, data = opt.data,
                          eval_features = opt.eval_features, eval_weights = opt.eval_weights }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = opt.loss, max_batch = opt.batch,
                              d_steps = opt.n_dis, r1 = opt.r1, r1_every = opt.r1_every, gp = opt.gp,
                              precision = opt.precision, clip = opt.clip,
                              ada_target = opt.ada_target, ada_kimg = opt.ada_kimg }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = opt.loss,
                              pl = opt.pl, pl_every = opt.pl_every, publish_every = out.publish,
                              precision = opt.precision, clip = opt.clip }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = opt.n_dis }) -- synchronous: one G step's fakes in flight
gf.connect(d.weights, g.d_weights, { depth = 1 }) -- and one set of D weights
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
