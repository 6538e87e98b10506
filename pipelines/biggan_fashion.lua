-- biggan_fashion: class-conditional BigGAN (Brock et al. 2019, the 32x32
-- architecture) on Fashion-MNIST: shared class embedding, hierarchical z
-- into conditional batch norms, spectral norm in G and D, projection D,
-- hinge loss; the paper's training choices as defaults: G lr 1e-4, D lr
-- 4e-4 (asymmetric, as ParaGAN), Adam betas (0, 0.999), n_dis = 4,
-- orthogonal regularisation 1e-4 in G (not on the shared embedding), the
-- EMA of G (0.9999 from step 1000 in the paper; here 0.999 from 200, for
-- runs of a few thousand steps), which the sample grids, the evaluator and
-- `ganflow sample` use. CPU default width ch = 8 (4 x 8 = 32 channels per
-- block; the paper's 32x32 config is ch = 64).
--
--   ./build/ganflow run pipelines/biggan_fashion.lua [steps=2000 eval=500 ...]
local gf = require "ganflow"
local gan = require "gan"
local biggan = require "backbones.biggan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  lr_g = 1e-4,
  lr_d = 4e-4,
  n_dis = 4,
  ch = 8,              -- block widths 4 ch (paper: ch = 64)
  attention = 0,       -- resolution of self-attention in G and D (e.g. 16), 0: none
  ortho = 1e-4,        -- orthogonal regularisation of G
  ema = 0.999,         -- G's moving average (0: none)
  ema_start = 200,
  augment = "",        -- DiffAugment policy for D
  lecam = 0.0,
  samples = 250,
  log = 50,
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
}

local attention = opt.attention > 0 and opt.attention or nil
local augment = opt.augment ~= "" and opt.augment or nil
local G = biggan.G { size = 32, ch = opt.ch, z = 128, shared = 128, channels = 1, classes = 10,
                     attention = attention }
local D = biggan.D { size = 32, ch = opt.ch, channels = 1, classes = 10, attention = attention, augment = augment }

local real = gan.data { path = opt.data, size = 32, batch = opt.batch }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = 10, eval = opt.eval,
                          eval_n = opt.eval_n, eval_real_n = opt.eval_real_n, classifier = opt.classifier,
                          data = opt.data }
local d = gf.stage "d_step" { name = "d", net = D, opt = gf.adam { lr = opt.lr_d, betas = { 0.0, 0.999 } },
                              loss = "hinge", d_steps = opt.n_dis, max_batch = opt.batch, lecam = opt.lecam,
                              precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch,
                              opt = gf.adam { lr = opt.lr_g, betas = { 0.0, 0.999 } }, loss = "hinge",
                              ortho = opt.ortho, ortho_skip = "shared", ema = opt.ema, ema_start = opt.ema_start,
                              dataset = opt.data, publish_every = out.publish, precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = opt.n_dis })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
