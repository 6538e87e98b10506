-- zero_fashion: data-parallel DC-GAN on Fashion-MNIST with ZeRO-1
-- optimiser-state sharding (the Colossal-AI study). Each rank keeps the
-- Adam state (m, v) of its 1/world shard of each network's parameters
-- only. After the backward pass the exchange reduce-scatters the
-- gradients (each rank gets the mean gradient of its shard, and the global
-- norm for clipping), each rank updates its shard, and the exchange
-- all-gathers the parameters, so every rank again holds the whole
-- networks. Results equal all-reduce + Adam (tests/dist/test_equal.sh
-- zero1). Checkpoints gather the shards into one ordinary checkpoint
-- (every rank takes part; rank 0 writes it), and a resume re-shards it.
--
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/zero_fashion.lua steps=500
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local gan = require "gan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,          -- images per rank per step, unless global_batch is set
  global_batch = 0,    -- images per step over all ranks (0: batch x world)
  lr = 2e-4,
  rule = "sqrt",       -- lr scaling with the world size
  warmup = 100,
  clip = 0.0,          -- global gradient-norm clipping (0: none); the norm is summed across shards
  timeout = 60,
  size = 32,
  samples = 250,
  log = 50,
  init = "torch",
}

local sc = gf.scale { global_batch = opt.global_batch > 0 and opt.global_batch or opt.batch * gf.world(),
                      lr = opt.lr, rule = opt.rule, warmup = opt.warmup }
local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local adam = gf.adam { lr = sc.lr, betas = { 0.5, 0.999 } }

local batch = gan.data { path = opt.data, size = opt.size, batch = sc.batch }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, max_batch = sc.batch, lr_warmup = sc.warmup,
                              clip = opt.clip }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = sc.batch, opt = adam, clip = opt.clip,
                              publish_every = opt.samples, lr_warmup = sc.warmup }
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.exchange(g, d, { mode = "zero1", timeout = opt.timeout })
-- rank 0 keeps the books (its replicas are the others' twins)
gan.attach(gan.outputs { G = G, samples = opt.samples, log = opt.log, rank = 0 }, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
