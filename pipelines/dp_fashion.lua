-- dp_fashion: data-parallel DC-GAN on Fashion-MNIST (ParaGAN / Colossal-AI
-- data parallelism). Every rank runs the same G/D pair on its own part of
-- the data (the reader partitions by rank); an exchange stage per network
-- all-reduces the gradients in buckets while the backward pass runs, so
-- the ranks keep identical networks. The scaling manager (gf.scale) turns
-- the global batch into the per-rank batch and scales the learning rate
-- by the world size (rule=linear|sqrt|none, with lr_warmup steps of
-- warm-up). Rank 0 keeps the books: sample grids, metrics, checkpoints.
--
-- mode=zero1 (pipelines/zero_fashion.lua): ZeRO-1 optimiser-state sharding
-- (the Colossal-AI study). Each rank keeps the Adam state (m, v) of its
-- 1/world shard of each network's parameters only; the exchange
-- reduce-scatters the gradients (each rank gets the mean gradient of its
-- shard and the global norm for clipping), each rank updates its shard and
-- the exchange all-gathers the parameters. Results equal all-reduce + Adam
-- (tests/dist/test_equal.sh zero1). Checkpoints gather the shards into one
-- ordinary checkpoint (every rank takes part; rank 0 writes it), and a
-- resume re-shards it.
--
--   reader -> decode -> batch -> d_step <-> g_step        (every rank)
--                                  |  ^        |  ^
--                                  v  |        v  |
--                               exchange xd  exchange xg  (all-reduce across ranks)
--
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/dp_fashion.lua steps=500
--   ... resume=runs/<dir>                 (every rank resumes; each reader its own part)
--   ... mode=zero1 clip=1.0               (= pipelines/zero_fashion.lua; gossip: gossip_dposg.lua)
-- Without mpirun it runs as one rank (the exchange acknowledges without communicating).
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local gan = require "gan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  batch = 64,          -- images per rank per step (weak scaling), unless global_batch is set
  global_batch = 0,    -- images per step over all ranks (0: batch x world)
  lr = 2e-4,           -- Adam learning rate tuned for one rank
  rule = "sqrt",       -- lr scaling with the world size: linear, sqrt or none
  warmup = 100,        -- steps of learning-rate warm-up
  mode = "allreduce",  -- exchange mode: allreduce, zero1
  clip = 0.0,          -- global gradient-norm clipping (0: none); with zero1 the norm is summed across shards
  bucket_mb = 4,       -- all-reduce bucket size
  timeout = 60,        -- seconds a collective may stall before the ranks are probed
  size = 32,
  samples = 250,
  log = 50,
  init = "torch",
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local sc = gf.scale { global_batch = opt.global_batch > 0 and opt.global_batch or opt.batch * gf.world(),
                      lr = opt.lr, rule = opt.rule, warmup = opt.warmup }
local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local adam = gf.adam { lr = sc.lr, betas = { 0.5, 0.999 } }

local batch = gan.data { path = opt.data, size = opt.size, batch = sc.batch }
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = "bce", max_batch = sc.batch,
                              lr_warmup = sc.warmup, clip = opt.clip, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = sc.batch, opt = adam, loss = "bce",
                              publish_every = opt.samples, lr_warmup = sc.warmup, clip = opt.clip,
                              precision = opt.precision }
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.exchange(g, d, { mode = opt.mode, bucket_mb = opt.bucket_mb, timeout = opt.timeout })
-- rank 0 keeps the books (its replicas are the others' twins)
gan.attach(gan.outputs { G = G, samples = opt.samples, log = opt.log, rank = 0 }, g, d)

gf.run { steps = 2000, checkpoint_every = 500 }
