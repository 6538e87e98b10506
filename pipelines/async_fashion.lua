-- async_fashion: ParaGAN's asynchronous G/D update on Fashion-MNIST. G and
-- D run at their own pace: D keeps a cache of recent fakes and reuses them
-- rather than wait for G, sends its weights every `staleness` iterations,
-- and never trains on fakes made with D weights more than `staleness`
-- iterations old (the staleness used goes to metrics.jsonl as staleness
-- and staleness_max). The fakes edge is deep (a fake cache in flight).
--
--   ./build/ganflow run pipelines/async_fashion.lua [steps=2000 staleness=4 ...]
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  g_lr = 2e-4,         -- asymmetric optimisers: G's and D's learning rates
  d_lr = 2e-4,
  size = 32,
  staleness = 4,       -- D weights every k iterations; fakes at most k iterations stale
  cache = 8,           -- fake batches D keeps for reuse
  samples = 250,
  log = 50,
  init = "torch",
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }

local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = true }
local decode = gf.stage "jpeg_decode" { name = "decode", size = opt.size, channels = 1, resize = "bilinear" }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local d = gf.stage "d_step" { name = "d", net = D, opt = gf.adam { lr = opt.d_lr, betas = { 0.5, 0.999 } },
                              mode = "async", staleness = opt.staleness, cache = opt.cache, max_batch = opt.batch }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, mode = "async",
                              opt = gf.adam { lr = opt.g_lr, betas = { 0.5, 0.999 } }, publish_every = opt.samples }
local grid = gf.stage "sample_grid" { net = G, every = opt.samples }
local metrics = gf.stage "metrics" { every = opt.log }
local ckpt = gf.stage "checkpoint" { keep = 3 }

gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { capacity = 16 })  -- the fake cache in flight, adaptive depth
gf.connect(d.weights, g.d_weights, { capacity = 4 })
gf.connect(g.weights, grid.weights)
gf.connect(g.metrics, metrics.inp)
gf.connect(d.metrics, metrics.inp)
gf.connect(g.state, ckpt.state)
gf.connect(d.state, ckpt.state)

gf.run { steps = 2000, checkpoint_every = 500 }
