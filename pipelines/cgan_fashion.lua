-- cgan_fashion: the DC-CGAN of the seed paper (tables 3-4) on Fashion-MNIST:
-- G takes 100 noise values + a 10-value label embedding (110 inputs), D
-- sees the label as an extra image plane (docs/nn.md). Labels flow with the
-- real batches; G draws its labels uniformly (labels = "data" follows the
-- dataset's class histogram). Sample grids have one row per class.
--
--   ./build/ganflow run pipelines/cgan_fashion.lua [steps=2000 labels=data eval=500 ...]
local gf = require "ganflow"
local gan = require "gan"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  lr = 2e-4,
  size = 32,
  samples = 250,
  log = 50,
  labels = "uniform",  -- uniform or data
  init = "torch",
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,            -- FID/IS/KID (and per-class FID) every this many steps (0: off)
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
}

local G = dcgan.CG { z = 100, size = opt.size, channels = 1, classes = 10, init = opt.init }
local D = dcgan.CD { size = opt.size, channels = 1, classes = 10, init = opt.init }
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local real = gan.data { path = opt.data, size = opt.size, batch = opt.batch }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = 10, eval = opt.eval,
                          eval_n = opt.eval_n, eval_real_n = opt.eval_real_n, classifier = opt.classifier,
                          data = opt.data }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, max_batch = opt.batch, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, labels = opt.labels,
                              dataset = opt.data, publish_every = out.publish, precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
