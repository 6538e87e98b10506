-- dp_small: a small data-parallel GAN for the distributed tests: MLP G and
-- D (no batchnorm, no dropout, so N ranks with batch B compute exactly
-- what one process with batch N B computes, up to the order of float
-- sums), 8x8 grey images, Adam, a checkpoint at the end on rank 0.
--   mode=single     no exchange stage at all (the single-process reference)
--   mode=allreduce | zero1 | gossip | none   one exchange stage per network
local gf = require "ganflow"

local opt = gf.args {
  data = "",            -- dataset (ganflow dataset idx ...)
  batch = 8,            -- per-rank batch
  mode = "allreduce",
  lr = 1e-3,
  optim = "adam",       -- adam or oadam
  rounds = 1,           -- gossip rounds
  measure = false,      -- gossip: log the contraction per round
  clip = 0.0,
  timeout = 60,
  bucket_mb = 0.001,    -- tiny buckets: several per backward, so overlap is exercised
  ckpt = true,
  steps = 6,
  mismatch = false,     -- (test) build a D whose width depends on the rank
}

local G = { { "linear", 8, 32 }, { "lrelu", 0.2 }, { "linear", 32, 64 }, { "tanh" }, { "reshape", 1, 8, 8 },
            input_shape = { 8 } }
local h = opt.mismatch and 16 + gf.rank() or 16
local D = { { "flatten" }, { "linear", 64, 32 }, { "lrelu", 0.2 }, { "linear", 32, h }, { "lrelu", 0.2 },
            { "linear", h, 1 }, { "sigmoid" }, input_shape = { 1, 8, 8 } }
local o = (opt.optim == "oadam" and gf.oadam or gf.adam) { lr = opt.lr, betas = { 0.5, 0.999 } }

local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = false }
local decode = gf.stage "jpeg_decode" { name = "decode", size = 8, channels = 1 }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local d = gf.stage "d_step" { name = "d", net = D, opt = o, max_batch = opt.batch, clip = opt.clip, threads = 1 }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = o, clip = opt.clip,
                              threads = 1 }
gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = 1 })
gf.connect(d.weights, g.d_weights, { depth = 1 })
if opt.mode ~= "single" then
  local xd = gf.stage "exchange" { name = "xd", mode = opt.mode, rounds = opt.rounds, measure = opt.measure,
                                   timeout = opt.timeout, bucket_mb = opt.bucket_mb }
  local xg = gf.stage "exchange" { name = "xg", mode = opt.mode, rounds = opt.rounds, measure = opt.measure,
                                   timeout = opt.timeout, bucket_mb = opt.bucket_mb }
  gf.connect(d.grads, xd.grads)
  gf.connect(xd.reduced, d.reduced)
  gf.connect(g.grads, xg.grads)
  gf.connect(xg.reduced, g.reduced)
end
if opt.ckpt then
  local ckpt = gf.stage "checkpoint" { keep = 2, rank = 0 }
  gf.connect(g.state, ckpt.state)
  gf.connect(d.state, ckpt.state)
end
gf.run { steps = opt.steps, quiet = true }
