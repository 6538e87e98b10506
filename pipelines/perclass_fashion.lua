-- perclass_fashion: per-class training of "Scalable Balanced Training of
-- Conditional GANs": one DC-GAN pair (G_c, D_c) per class c, each fed only
-- the images of its class (the reader's class filter reads just those
-- records through the dataset's label index), all pairs in one graph with
-- no communication between them. Sampling draws from the mixture of the
-- per-class generators (`ganflow sample CHECKPOINT` picks G_c for class c);
-- one checkpoint holds every pair; the sample grid has one row per class.
--
--   ./build/ganflow run pipelines/perclass_fashion.lua [steps=2000 classes=10 ...]
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  classes = 10,        -- pairs (classes 0 .. classes-1)
  batch = 64,
  lr = 2e-4,
  size = 32,
  samples = 250,
  log = 50,
  eval = 0,            -- FID/IS/KID every this many steps while training (0: off; needs the classifier)
  eval_n = 2000,       -- generated images per evaluation
  eval_real_n = 0,     -- real images behind the reference statistics (0: the whole split; cached)
  classifier = "data/fashion-mnist/classifier.safetensors", -- pipelines/classifier_fashion.lua writes it
  threads = 1,         -- compute threads per step stage (many pairs share the cores)
  init = "torch",
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
-- G's weights go to the sample grid (and the evaluator) every `publish` steps
local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end
local publish = opt.eval > 0 and gcd(opt.samples, opt.eval) or opt.samples
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local grid = gf.stage "sample_grid" { net = G, every = opt.samples, rows = opt.classes, cols = 8 }
local metrics = gf.stage "metrics" { every = opt.log }
local ckpt = gf.stage "checkpoint" { keep = 3 }
local ev = opt.eval > 0 and gf.stage "evaluator" { net = G, every = opt.eval, n = opt.eval_n,
                                                    classifier = opt.classifier, real = opt.data,
                                                    real_n = opt.eval_real_n } or nil
if ev then gf.connect(ev.metrics, metrics.inp) end

for c = 0, opt.classes - 1 do
  local reader = gf.stage "lmdb_reader" { name = "reader" .. c, path = opt.data, shuffle = true, classes = { c } }
  local decode = gf.stage "jpeg_decode" { name = "decode" .. c, size = opt.size, channels = 1, resize = "bilinear" }
  local batch = gf.stage "batch" { name = "batch" .. c, size = opt.batch, drop_last = true }
  local d = gf.stage "d_step" { name = "d" .. c, net = D, opt = adam, class = c, reader = "reader" .. c,
                                max_batch = opt.batch, threads = opt.threads }
  local g = gf.stage "g_step" { name = "g" .. c, net = G, d_net = D, batch = opt.batch, opt = adam, class = c,
                                publish_every = publish, threads = opt.threads }
  gf.connect(reader.samples, decode.records)
  gf.connect(decode.samples, batch.samples)
  gf.connect(batch.batch, d.real)
  gf.connect(g.fakes, d.fakes, { depth = 1 })
  gf.connect(d.weights, g.d_weights, { depth = 1 })
  gf.connect(g.weights, grid.weights)
  if ev then gf.connect(g.weights, ev.weights) end
  gf.connect(g.metrics, metrics.inp)
  gf.connect(d.metrics, metrics.inp)
  gf.connect(g.state, ckpt.state)
  gf.connect(d.state, ckpt.state)
end

gf.run { steps = 2000, checkpoint_every = 500 }
