-- dcgan_fashion: the seed DC-GAN (tables 1-2 of "Scalable Balanced Training
-- of Conditional GANs") on Fashion-MNIST at 32x32, synchronous G/D steps,
-- Adam(2e-4, 0.5, 0.999), BCE. The quick start's default run.
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

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local real = gan.data { path = opt.data, size = opt.size, batch = opt.batch, decoders = opt.decoders }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, eval = opt.eval, eval_n = opt.eval_n,
                          eval_real_n = opt.eval_real_n, classifier = opt.classifier, data = opt.data,
                          eval_features = opt.eval_features, eval_weights = opt.eval_weights }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = "bce", max_batch = opt.batch,
                              precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = "bce",
                              publish_every = out.publish, precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })       -- synchronous: one batch of fakes in flight
gf.connect(d.weights, g.d_weights, { depth = 1 }) -- and one set of D weights
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
