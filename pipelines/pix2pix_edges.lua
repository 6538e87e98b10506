-- pix2pix_edges: pix2pix (Isola et al. 2017) on edges2fashion, (edge map,
-- image) pairs of Fashion-MNIST at 32x32: U-Net G maps the edge map A to
-- the image B, a PatchGAN D judges (A, B) against (A, G(A)); G's loss is
-- the adversarial loss plus l1 x mean |G(A) - B| (l1 = 100, the paper's).
-- Adam(2e-4, 0.5, 0.999), BCE on logits, synchronous G/D steps, batch 16.
--
--   reader -> decode (paired) -> batch -+-> d_step <-> g_step   (fakes (A, G(A)), D weights)
--                                       +-----------> g_step.real  (the same (A, B) batches)
--   test reader -> decode -> batch ------> sample_grid.pairs   (rows A | G(A) | B)
--
--   ./build/ganflow dataset edges2fashion              (once: data/edges2fashion/{train,test})
--   ./build/ganflow run pipelines/pix2pix_edges.lua    [steps=2000 batch=16 l1=100 ngf=32 ...]
--   ./build/ganflow run pipelines/pix2pix_edges.lua resume=runs/<dir>   (continue)
--
-- The CPU default is ngf = ndf = 32 (the paper's 64 is one option away:
-- ngf=64 ndf=64); at 32x32 the U-Net has 5 down/up blocks down to 1x1.
local gf = require "ganflow"
local gan = require "gan"
local p2p = require "backbones.pix2pix"

local opt = gf.args {
  data = "data/edges2fashion/train", -- (A, B) pairs (ganflow dataset edges2fashion, or ganflow dataset paired)
  test = "data/edges2fashion/test",  -- pairs shown in the sample grid (the first `rows`)
  batch = 16,          -- pairs per step
  lr = 2e-4,           -- Adam learning rate of both networks
  l1 = 100,            -- weight of the L1 term in G's loss (lambda)
  size = 32,           -- image side (a power of two)
  channels = 1,        -- of A and of B (3 for RGB pairs such as facades)
  ngf = 32,            -- G's first-layer channels (64 in the paper)
  ndf = 32,            -- D's first-layer channels (64 in the paper)
  n_layers = 3,        -- PatchGAN depth (3: 70x70 receptive field)
  norm = "batch",      -- "batch" or "instance"
  flip = false,        -- random horizontal flips of the pairs (both halves alike)
  mode = "sync",       -- "sync" (alternating G/D) or "async" (ParaGAN: fake cache, bounded staleness)
  staleness = 4,       -- async: D weights every k iterations; fakes at most k iterations stale
  samples = 250,       -- sample grid every this many steps
  rows = 8,            -- pairs in the grid
  log = 50,            -- metrics line every this many steps
  decoders = 1,        -- jpeg_decode workers
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local G = p2p.G { size = opt.size, channels = opt.channels, ngf = opt.ngf, norm = opt.norm }
local D = p2p.D { size = opt.size, channels = opt.channels, ndf = opt.ndf, n_layers = opt.n_layers, norm = opt.norm }
local adam = gf.adam { lr = opt.lr, betas = { 0.5, 0.999 } }

-- lmdb_reader -> jpeg_decode (paired) -> batch; test = true: in order, once, no flips
local function pairs_of(name, path, batch, test)
  local reader = gf.stage "lmdb_reader" { name = "reader" .. name, path = path, shuffle = not test,
                                          epochs = test and 1 or 0 }
  local decode = gf.stage "jpeg_decode" { name = "decode" .. name, size = opt.size, channels = opt.channels,
                                          resize = "bilinear", paired = true, flip = not test and opt.flip,
                                          workers = opt.decoders }
  local b = gf.stage "batch" { name = "batch" .. name, size = batch, drop_last = true }
  gf.connect(reader.samples, decode.records)
  gf.connect(decode.samples, b.samples)
  return b
end

local real = pairs_of("", opt.data, opt.batch, false)
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, rows = opt.rows, cols = 3 }
local sync = opt.mode == "sync"
assert(sync or opt.mode == "async", "mode must be \"sync\" or \"async\"")
local d = gf.stage "d_step" { name = "d", net = D, opt = adam, loss = "bce_logits", max_batch = opt.batch,
                              mode = opt.mode, staleness = opt.staleness, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch, opt = adam, loss = "bce_logits",
                              paired = true, l1 = opt.l1, mode = opt.mode, publish_every = out.publish,
                              precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(real.batch, g.real)                    -- G steps on the same (A, B) batches as D
if sync then
  gf.connect(g.fakes, d.fakes, { depth = 1 })       -- synchronous: one batch of fakes in flight
  gf.connect(d.weights, g.d_weights, { depth = 1 }) -- and one set of D weights
else
  gf.connect(g.fakes, d.fakes, { capacity = 16 })   -- the fake cache in flight, adaptive depth
  gf.connect(d.weights, g.d_weights, { capacity = 4 })
end
gan.attach(out, g, d)

-- the grid's fixed pairs: the first `rows` test pairs, read once
local test = pairs_of("_test", opt.test, opt.rows, true)
gf.connect(test.batch, out.grid.pairs)

gf.run { steps = 2000, checkpoint_every = 500 }
