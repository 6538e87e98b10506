-- classifier_fashion: trains the evaluator's classifier (a small CNN,
-- luaconf/backbones/classifier.lua) on the Fashion-MNIST train split at the
-- generators' image size (32x32, the same decode as the GAN pipelines),
-- reports its accuracy on the test split and writes it where `ganflow
-- eval` and the evaluator stage look by default:
--
--   ./build/ganflow run pipelines/classifier_fashion.lua
--   -> data/fashion-mnist/classifier.safetensors   (test accuracy >= 90%)
local gf = require "ganflow"
local cls = require "backbones.classifier"

local opt = gf.args {
  data = "data/fashion-mnist/train",
  test = "data/fashion-mnist/test",
  out = "data/fashion-mnist/classifier.safetensors",
  batch = 128,
  lr = 1e-3,
  size = 32,
  log = 100,
  precision = "fp32",  -- fp32, tf32 (TF32 tensor cores), or bf16 / fp16 mixed precision (backend=cuda)
}

local net = cls.classifier { size = opt.size, channels = 1, classes = 10 }
local reader = gf.stage "lmdb_reader" { name = "reader", path = opt.data, shuffle = true }
local decode = gf.stage "jpeg_decode" { name = "decode", size = opt.size, channels = 1, resize = "bilinear" }
local batch = gf.stage "batch" { size = opt.batch, drop_last = true }
local clf = gf.stage "classifier_step" { name = "clf", net = net, opt = gf.adam { lr = opt.lr },
                                         max_batch = opt.batch, size = opt.size, channels = 1,
                                         resize = "bilinear", test = opt.test, export = opt.out,
                                         precision = opt.precision }
local metrics = gf.stage "metrics" { every = opt.log }
local ckpt = gf.stage "checkpoint" { keep = 1 }

gf.connect(reader.samples, decode.records)
gf.connect(decode.samples, batch.samples)
gf.connect(batch.batch, clf.batch)
gf.connect(clf.metrics, metrics.inp)
gf.connect(clf.state, ckpt.state)

gf.run { steps = 3000 }
