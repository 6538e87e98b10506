-- gossip_dposg: decentralised GAN training (Liu et al., "A Decentralized
-- Parallel Algorithm for Training GANs", DPOSG). No central node and no
-- all-reduce: every rank trains its own G/D pair on its part of the data
-- with optimistic Adam (gf.oadam: the update uses 2 g_t - g_{t-1}), and
-- after each update the exchange averages the parameters with the two ring
-- neighbours, `rounds` rounds per step:
--     x_i <- (x_{i-1} + x_i + x_{i+1}) / 3
-- Each round shrinks the ranks' distance to their mean by the second
-- largest eigenvalue magnitude of the ring's mixing matrix (1/3 for 2 and
-- 4 ranks; measure=true logs it every round). Rank 0 keeps the books: its
-- checkpoint holds rank 0's networks (the ranks agree up to the consensus
-- distance); a resume starts every rank from them.
--
--   mpirun --allow-run-as-root --oversubscribe -np 4 ./build/ganflow run pipelines/gossip_dposg.lua steps=500 rounds=2
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,          -- images per rank per step
  lr = 2e-4,
  rounds = 1,          -- gossip rounds per step
  measure = false,     -- log the contraction of every round (an extra all-reduce: diagnostics only)
  timeout = 60,
  size = 32,
  samples = 250,
  log = 50,
  init = "torch",
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local oadam = gf.oadam { lr = opt.lr, betas = { 0.5, 0.999 } }

local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = true }
local decode = gf.stage "jpeg_decode" { name = "decode", size = opt.size, channels = 1, resize = "bilinear" }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local d = gf.stage "d_step" { name = "d", net = D, opt = oadam, max_batch = opt.batch }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = oadam,
                              publish_every = opt.samples }
local xd = gf.stage "exchange" { name = "xd", mode = "gossip", rounds = opt.rounds, measure = opt.measure,
                                 timeout = opt.timeout }
local xg = gf.stage "exchange" { name = "xg", mode = "gossip", rounds = opt.rounds, measure = opt.measure,
                                 timeout = opt.timeout }
local grid = gf.stage "sample_grid" { net = G, every = opt.samples, rank = 0 }
local metrics = gf.stage "metrics" { every = opt.log, rank = 0 }
local ckpt = gf.stage "checkpoint" { keep = 3, rank = 0 }

gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gf.connect(d.grads, xd.grads)
gf.connect(xd.reduced, d.reduced)
gf.connect(g.grads, xg.grads)
gf.connect(xg.reduced, g.reduced)
gf.connect(g.weights, grid.weights)
gf.connect(g.metrics, metrics.inp)
gf.connect(d.metrics, metrics.inp)
gf.connect(g.state, ckpt.state)
gf.connect(d.state, ckpt.state)

gf.run { steps = 2000, checkpoint_every = 500 }
