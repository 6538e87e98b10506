-- dcgan_fashion: the seed DC-GAN (tables 1-2 of "Scalable Balanced Training
-- of Conditional GANs") on Fashion-MNIST at 32x32, synchronous G/D steps,
-- Adam(2e-4, 0.5, 0.999), BCE. The quick start's default run.
--
--   reader -> decode -> batch -> d_step <-> g_step      (fakes, D weights)
--                                  |          |-> sample_grid (PNG grids)
--                                  +----------+-> metrics (JSONL), checkpoint
--
--   ./build/ganflow dataset fashion-mnist            (once)
--   ./build/ganflow run pipelines/dcgan_fashion.lua  [steps=2000 batch=64 lr=2e-4 ...]
--   ./build/ganflow run pipelines/dcgan_fashion.lua resume=runs/<dir>   (continue)
--
-- Everything the run writes goes to one run directory (runs/dcgan_fashion-<time>,
-- or dir=...): config.lua, metrics.jsonl, samples/*.png, checkpoints/.
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train", -- dataset (ganflow dataset fashion-mnist)
  batch = 64,          -- images per G step and per D step
  lr = 2e-4,           -- Adam learning rate of both networks
  size = 32,           -- image side (the backbone needs a multiple of 16)
  samples = 250,       -- sample grid every this many steps
  log = 50,
  eval = 0,            -- FID/IS/KID every this many steps while training (0: off; needs the classifier)
  eval_n = 2000,       -- generated images per evaluation
  eval_real_n = 0,     -- real images behind the reference statistics (0: the whole split; cached)
  classifier = "data/fashion-mnist/classifier.safetensors", -- pipelines/classifier_fashion.lua writes it            -- metrics line every this many steps
  init = "torch",      -- "torch" (PyTorch defaults, as the peer) or "dcgan" (N(0, 0.02))
  decoders = 1,        -- jpeg_decode workers
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
-- G's weights go to the sample grid (and the evaluator) every `publish` steps
local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end
local publish = opt.eval > 0 and gcd(opt.samples, opt.eval) or opt.samples
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = true }
local decode = gf.stage "jpeg_decode" { name = "decode", size = opt.size, channels = 1, resize = "bilinear",
                                        workers = opt.decoders }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = "bce", max_batch = opt.batch }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = "bce",
                              publish_every = publish }
local grid = gf.stage "sample_grid" { net = G, every = opt.samples }
local metrics = gf.stage "metrics" { every = opt.log }
local ckpt = gf.stage "checkpoint" { keep = 3 }

gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })       -- synchronous: one batch of fakes in flight
gf.connect(d.weights, g.d_weights, { depth = 1 }) -- and one set of D weights
gf.connect(g.weights, grid.weights)
gf.connect(g.metrics, metrics.inp)
gf.connect(d.metrics, metrics.inp)
gf.connect(g.state, ckpt.state)
gf.connect(d.state, ckpt.state)

if opt.eval > 0 then -- FID/IS/KID of G while it trains, into metrics.jsonl
  local ev = gf.stage "evaluator" { net = G, every = opt.eval, n = opt.eval_n, classifier = opt.classifier,
                                    real = opt.data, real_n = opt.eval_real_n }
  gf.connect(g.weights, ev.weights)
  gf.connect(ev.metrics, metrics.inp)
end

gf.run { steps = 2000, checkpoint_every = 500 }
