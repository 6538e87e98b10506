-- biggan_imagenet: BigGAN at 128x128 RGB (Brock et al. 2019, the 128
-- architecture: ch = 96, self-attention at 64x64, shared embedding,
-- hierarchical z, ccbn, SN in G and D, projection D) over any labelled
-- image dataset: an ImageNet-style tree converted with `ganflow dataset
-- folder`, or the synthetic stand-in `ganflow dataset synth`. The class
-- count comes from the dataset. Training choices as the paper: hinge,
-- G lr 1e-4 / D lr 4e-4, Adam (0, 0.999), n_dis 2, orthogonal
-- regularisation 1e-4 in G, EMA of G (0.9999 from step 20000), batch 256
-- on 8 GPUs in the paper (here per process: `batch`).
--
-- This is the pipeline a GPU user starts from (backend=cuda precision=bf16);
-- on a CPU it runs a few steps to prove the path (ch=8 batch=4 steps=2), also
-- on an ImageNet-sized set (1,281,167 records, 1000 classes, 64x64: 5 GiB):
--
--   ./build/ganflow dataset synth data/synth count=64 classes=4
--   ./build/ganflow run pipelines/biggan_imagenet.lua data=data/synth ch=8 batch=4 steps=2
--   ./build/ganflow dataset synth data/in64 count=1281167 classes=1000 width=64 height=64
--   ./build/ganflow run pipelines/biggan_imagenet.lua data=data/in64 ch=8 batch=4 steps=20
--   ./build/ganflow run pipelines/biggan_imagenet.lua data=data/imagenet/train backend=cuda precision=bf16
local gf = require "ganflow"
local gan = require "gan"
local biggan = require "backbones.biggan"

local opt = gf.args {
  data = "data/imagenet/train",  -- a labelled dataset (ganflow dataset folder / synth)
  batch = 32,          -- images per D step and per G step (per process)
  ch = 96,             -- width (the paper's 128x128 config: 96)
  attention = 64,      -- self-attention resolution (0: none)
  lr_g = 1e-4,
  lr_d = 4e-4,
  n_dis = 2,
  ortho = 1e-4,
  ema = 0.9999,
  ema_start = 20000,
  augment = "",        -- DiffAugment policy for D
  decoders = "auto",   -- jpeg_decode workers: "auto" (adapts to what batch takes) or a number
  samples = 1000,
  log = 50,
  precision = "fp32",  -- tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision with backend=cuda
}

local info = gf.dataset(opt.data)
if info.classes < 1 then
  error(string.format("biggan_imagenet: %s has no classes (BigGAN is class-conditional: convert a folder tree "
                      .. "with one folder per class)", opt.data))
end
local attention = opt.attention > 0 and opt.attention or false
local G = biggan.G { size = 128, ch = opt.ch, z = 120, shared = 128, channels = 3, classes = info.classes,
                     attention = attention }
local D = biggan.D { size = 128, ch = opt.ch, channels = 3, classes = info.classes, attention = attention,
                     augment = opt.augment ~= "" and opt.augment or nil }

local real = gan.data { path = opt.data, size = 128, channels = 3, batch = opt.batch, decoders = opt.decoders }
-- the grid: a row per class for the first 8 classes, 4 images each, in one
-- batch through G (a row for each of ImageNet's 1000 classes was 8000
-- images, 560 GB on a CPU; the attention maps at 64x64 take 67 MB an image)
local out = gan.outputs { G = G, samples = opt.samples, log = opt.log, cols = math.min(info.classes, 4),
                          rows = math.min(info.classes, 8) }
local d = gf.stage "d_step" { name = "d", net = D, opt = gf.adam { lr = opt.lr_d, betas = { 0.0, 0.999 } },
                              loss = "hinge", d_steps = opt.n_dis, max_batch = opt.batch, precision = opt.precision }
local g = gf.stage "g_step" { name = "g", net = G, d_net = D, batch = opt.batch,
                              opt = gf.adam { lr = opt.lr_g, betas = { 0.0, 0.999 } }, loss = "hinge",
                              ortho = opt.ortho, ortho_skip = "shared", ema = opt.ema, ema_start = opt.ema_start,
                              labels = "data", dataset = opt.data, publish_every = out.publish,
                              precision = opt.precision }

gf.connect(real.batch, d.real)
gf.connect(g.fakes, d.fakes, { depth = opt.n_dis })
gf.connect(d.weights, g.d_weights, { depth = 1 })
gan.attach(out, g, d)

gf.run { steps = 250000, checkpoint_every = 2000 }
