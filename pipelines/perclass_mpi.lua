-- perclass_mpi: per-class training of "Scalable Balanced Training of
-- Conditional GANs" (ORNL) across MPI ranks: one DC-GAN pair (G_c, D_c)
-- per class c, placed round-robin on the ranks (class c on rank
-- c % world: with classes % world ~= 0 the first ranks take one class
-- more; more ranks than classes is an error). Every rank reads only the
-- records of its own classes (the reader's class filter, whole classes:
-- part 0 of 1) and trains its pairs with no gradient exchange at all.
-- Rank 0 keeps the books: the pairs' checkpoint parts, sample weights and
-- metrics cross to it over transport edges, so one checkpoint holds every
-- class and `ganflow sample CHECKPOINT` draws from the mixture of the
-- per-class generators, as with pipelines/perclass_fashion.lua.
--
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/perclass_mpi.lua steps=500
--   ./build/ganflow sample runs/perclass_mpi-<time>/checkpoints/<latest> out=grid.png
local gf = require "ganflow"
local dcgan = require "backbones.dcgan"
local gan = require "gan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  classes = 10,        -- pairs (classes 0 .. classes-1)
  batch = 64,
  lr = 2e-4,
  size = 32,
  samples = 250,
  log = 50,
  threads = 1,         -- compute threads per step stage (several pairs share a rank's cores)
  init = "torch",
  books = true,        -- false: no sample grid / metrics stages (benchmarks)
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local grid = opt.books and gf.stage "sample_grid" { net = G, every = opt.samples, rows = opt.classes, cols = 8,
                                                     rank = 0 }
local metrics = opt.books and gf.stage "metrics" { every = opt.log, rank = 0 }
local ckpt = gf.stage "checkpoint" { keep = 3, rank = 0 }

for c = 0, opt.classes - 1 do
  local r = gf.class_rank(c, opt.classes)
  local batch = gan.data { path = opt.data, size = opt.size, batch = opt.batch, classes = { c }, suffix = c,
                          part = 0, parts = 1, rank = r }
  local d = gf.stage "d_step" { name = "d" .. c, net = D, opt = adam, class = c, reader = "reader" .. c,
                                max_batch = opt.batch, threads = opt.threads, rank = r }
  local g = gf.stage "g_step" { name = "g" .. c, net = G, d_net = D, batch = opt.batch, opt = adam, class = c,
                                publish_every = opt.samples, threads = opt.threads, rank = r }
  gf.connect(batch.batch, d.real)
  gf.connect(g.fakes, d.fakes, { depth = 1 })
  gf.connect(d.weights, g.d_weights, { depth = 1 })
  if opt.books then
    gf.connect(g.weights, grid.weights)   -- crosses to rank 0 when r ~= 0
    gf.connect(g.metrics, metrics.inp)
    gf.connect(d.metrics, metrics.inp)
  end
  gf.connect(g.state, ckpt.state)
  gf.connect(d.state, ckpt.state)
end

gf.run { steps = 2000, checkpoint_every = 500 }
