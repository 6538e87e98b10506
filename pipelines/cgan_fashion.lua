-- cgan_fashion: the DC-CGAN of the seed paper (tables 3-4) on Fashion-MNIST:
-- G takes 100 noise values + a 10-value label embedding (110 inputs), D
-- sees the label as an extra image plane (docs/nn.md). Labels flow with the
-- real batches; G draws its labels uniformly (labels = "data" follows the
-- dataset's class histogram). Sample grids have one row per class.
--
--   ./build/ganflow run pipelines/cgan_fashion.lua [steps=2000 labels=data ...]
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  lr = 2e-4,
  size = 32,
  samples = 250,
  log = 50,
  eval = 0,            -- FID/IS/KID every this many steps while training (0: off; needs the classifier)
  eval_n = 2000,       -- generated images per evaluation
  eval_real_n = 0,     -- real images behind the reference statistics (0: the whole split; cached)
  classifier = "data/fashion-mnist/classifier.safetensors", -- pipelines/classifier_fashion.lua writes it
  labels = "uniform", -- uniform or data
  init = "torch",
}

local G = dcgan.CG { z = 100, size = opt.size, channels = 1, classes = 10, init = opt.init }
local D = dcgan.CD { size = opt.size, channels = 1, classes = 10, init = opt.init }
-- G's weights go to the sample grid (and the evaluator) every `publish` steps
local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end
local publish = opt.eval > 0 and gcd(opt.samples, opt.eval) or opt.samples
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = true }
local decode = gf.stage "jpeg_decode" { name = "decode", size = opt.size, channels = 1, resize = "bilinear" }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, max_batch = opt.batch }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam,
                              labels = opt.labels, dataset = opt.data, publish_every = publish }
local grid = gf.stage "sample_grid" { net = G, every = opt.samples, cols = 10 }
local metrics = gf.stage "metrics" { every = opt.log }
local ckpt = gf.stage "checkpoint" { keep = 3 }

gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
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
