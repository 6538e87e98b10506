-- async_2rank: ParaGAN's asynchronous G/D update with G and D on different
-- ranks. Rank 0 runs G (and keeps the books: sample grids, metrics,
-- checkpoints); rank 1 runs the data path and D. The fakes travel from
-- rank 0 to rank 1 and D's weights back over cross-rank edges (transport
-- stages, MPI point-to-point); the receiving ring of the fakes keeps its
-- adaptive depth, so the fake cache in flight grows when the network or G
-- is bursty. D keeps a cache of recent fakes, reuses them rather than wait
-- for G, sends its weights every `staleness` iterations, and never trains
-- on fakes made with D weights more than `staleness` iterations old
-- (metrics.jsonl records the staleness it used).
--
--   rank 0: g_step, sample_grid, metrics, checkpoint
--   rank 1: reader -> decode -> batch -> d_step
--           g.fakes ==(rank 0 -> 1)==> d.fakes;  d.weights ==(1 -> 0)==> g.d_weights
--
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/async_2rank.lua steps=500
-- Without mpirun everything runs on rank 0 (then it is pipelines/async_fashion.lua).
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local gan = require "gan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,
  g_lr = 2e-4,
  d_lr = 2e-4,
  size = 32,
  staleness = 4,       -- D weights every k iterations; fakes at most k iterations stale
  cache = 8,           -- fake batches D keeps for reuse
  samples = 250,
  log = 50,
  init = "torch",
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local drank = gf.world() > 1 and 1 or 0
local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }

-- D's rank reads every record (part 0 of 1): the data feeds only D
local batch = gan.data { path = opt.data, size = opt.size, batch = opt.batch, part = 0, parts = 1, rank = drank }
local d = gf.stage "d_step" { name = "d", net = D, opt = gf.adam { lr = opt.d_lr, betas = { 0.5, 0.999 } },
                              mode = "async", staleness = opt.staleness, cache = opt.cache, max_batch = opt.batch,
                              rank = drank, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, mode = "async",
                              opt = gf.adam { lr = opt.g_lr, betas = { 0.5, 0.999 } }, publish_every = opt.samples,
                              rank = 0, precision = opt.precision }
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { capacity = 16 })     -- across ranks: the fake cache in flight
gf.connect(d.weights, g.d_weights, { capacity = 4 })
gan.attach(gan.outputs { G = G, samples = opt.samples, log = opt.log, rank = 0 }, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
