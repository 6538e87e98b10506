-- perclass_fashion: per-class training of "Scalable Balanced Training of
-- Conditional GANs": one DC-GAN pair (G_c, D_c) per class c, each fed only
-- the images of its class (the reader's class filter reads just those
-- records through the dataset's label index), all pairs in one graph with
-- no communication between them. Sampling draws from the mixture of the
-- per-class generators (`ganflow sample CHECKPOINT` picks G_c for class c);
-- one checkpoint holds every pair; the sample grid has one row per class.
-- The run's step is the lowest pair's: every pair trains the full `steps`.
--
-- Under mpirun the pairs are placed round-robin on the ranks (class c on
-- rank c % world: with classes % world ~= 0 the first ranks take one class
-- more; more ranks than classes is an error); every rank reads only the
-- records of its own classes and trains its pairs with no gradient
-- exchange at all. Rank 0 keeps the books: the pairs' checkpoint parts,
-- sample weights and metrics cross to it over transport edges, so one
-- checkpoint holds every class, as in one process.
--
--   ./build/ganflow run pipelines/perclass_fashion.lua [steps=2000 classes=10 ...]
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/perclass_fashion.lua steps=500
local gf = require "ganflow"
local gan = require "gan"
local dcgan = require "backbones.dcgan"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  classes = 10,        -- pairs (classes 0 .. classes-1)
  batch = 64,
  lr = 2e-4,
  size = 32,
  samples = 250,
  log = 50,
  threads = 1,         -- compute threads per step stage (many pairs share the cores)
  init = "torch",
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
  eval = 0,            -- FID/IS/KID of the mixture (and per-class FID) every this many steps (0: off)
  eval_n = 2000,
  eval_real_n = 0,
  classifier = "data/fashion-mnist/classifier.safetensors",
  books = true,        -- false: no sample grid / metrics / evaluator stages (benchmarks)
}

local G = dcgan.G { z = 100, size = opt.size, channels = 1, init = opt.init }
local D = dcgan.D { size = opt.size, channels = 1, init = opt.init }
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, rows = opt.classes, cols = 8,
                          eval = opt.eval, eval_n = opt.eval_n, eval_real_n = opt.eval_real_n,
                          classifier = opt.classifier, data = opt.data, rank = 0, books = opt.books }
for c = 0, opt.classes - 1 do
  local r = gf.class_rank(c, opt.classes)
  local real = gan.data { path = opt.data, size = opt.size, batch = opt.batch, classes = { c }, suffix = c,
                          part = 0, parts = 1, rank = r }
  local d = gf.stage "d_step" { name = "d" .. c, net = D, opt = adam, class = c,
                                max_batch = opt.batch, threads = opt.threads, precision = opt.precision, rank = r }
  local g = gf.stage "g_step" { name = "g" .. c, net = G, d_net = D, batch = opt.batch, opt = adam, class = c,
                                publish_every = out.publish, threads = opt.threads, precision = opt.precision,
                                rank = r }
  gf.connect(real.batch, d.real)
  gf.connect(g.fakes, d.fakes, { depth = 1 })
  gf.connect(d.weights, g.d_weights, { depth = 1 })
  gan.attach(out, g, d)
end

gf.run { steps = 2000, checkpoint_every = 500 }
