-- async_fashion: ParaGAN's asynchronous G/D update on Fashion-MNIST. G and
-- D run at their own pace: D keeps a cache of recent fakes and lets each
-- serve up to `reuse` D steps rather than wait for G, sends its weights
-- every `staleness` iterations, and never trains on fakes made with D
-- weights more than `staleness` iterations old (the staleness used goes to
-- metrics.jsonl as staleness and staleness_max). The fakes edge is deep (a
-- fake cache in flight, adaptive depth). Asymmetric: G and D have their own
-- learning rates. G's updates are the run's steps.
--
--   ./build/ganflow run pipelines/async_fashion.lua [steps=2000 staleness=4 reuse=2 ...]
local gf = require "ganflow"
local gan = require "gan"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  g_lr = 2e-4,         -- asymmetric optimisers: G's and D's learning rates
  d_lr = 2e-4,
  size = 32,
  staleness = 4,       -- D weights every k iterations; fakes at most k iterations stale
  reuse = 2,           -- D steps one fake batch may serve
  cache = 8,           -- fake batches D keeps for reuse
  samples = 250,
  log = 50,
  init = "torch",
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }

local real = gan.data { path = opt.data, size = opt.size, batch = opt.batch }
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log }
local d = gf.stage "d_step" { name = "d", net = D, opt = gf.adam { lr = opt.d_lr, betas = { 0.5, 0.999 } },
                              mode = "async", staleness = opt.staleness, reuse = opt.reuse, cache = opt.cache,
                              max_batch = opt.batch, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, mode = "async",
                              opt = gf.adam { lr = opt.g_lr, betas = { 0.5, 0.999 } }, publish_every = out.publish,
                              precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { capacity = 16 })  -- the fake cache in flight, adaptive depth
gf.connect(d.weights, g.d_weights, { capacity = 4 })
gan.attach(out, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
