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
local gan = require "gan"

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
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local oadam = gf.oadam { lr = opt.lr, betas = { 0.5, 0.999 } }

local batch = gan.data { path = opt.data, size = opt.size, batch = opt.batch }
local d = gf.stage "d_step" { name = "d", net = D, opt = oadam, max_batch = opt.batch, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = oadam,
                              publish_every = opt.samples, precision = opt.precision }
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.exchange(g, d, { mode = "gossip", rounds = opt.rounds, measure = opt.measure, timeout = opt.timeout })
-- rank 0 keeps the books (its replicas are the others' twins)
gan.attach(gan.outputs { G = G, samples = opt.samples, log = opt.log, rank = 0 }, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
