-- gan: the parts every GAN pipeline shares, so that a pipeline file shows
-- only what makes it different (its networks, their G/D stages, their
-- wiring).
--
--   local gan = require "gan"
--   local real = gan.data { path = "data/fashion-mnist/train", size = 32, batch = 64 }
--   local out = gan.outputs { G = G, samples = 250, log = 50, eval = 0, data = path }
--   ... g = gf.stage "g_step" {...}; d = gf.stage "d_step" {...}
--   gf.connect(real.batch, d.real)
--   gan.attach(out, g, d)
local gf = require "ganflow"

local M = {}

--- gan.data { path, size, channels = 1, batch, classes = nil, suffix = "", decoders = "auto", max_decoders, rank,
---            part, parts } -> batch stage
-- lmdb_reader -> jpeg_decode -> batch for images of size x size, shuffled,
-- drop-last batches. decoders: jpeg_decode's workers, "auto" (a count that
-- follows what batch takes: more while it waits on the decoders and cores
-- are idle, fewer while their output stays full; at most max_decoders,
-- default the usable cores) or a fixed number (a number's text too, as
-- decoders=4 on the command line gives it). classes = {c, ...} reads only those classes (through
-- the dataset's label index). The reader is named "reader" .. suffix; the
-- d_step that consumes the batches checkpoints that reader's position (the
-- runtime finds it upstream of d_step's `real`). Under MPI, rank places the
-- three stages and part/parts choose the records (lmdb_reader's defaults:
-- part rank % parts of world parts).
function M.data(o)
  local s = o.suffix or ""
  local reader = gf.stage "lmdb_reader" { name = "reader" .. s, path = o.path, shuffle = true, classes = o.classes,
                                          part = o.part, parts = o.parts, rank = o.rank }
  local decode = gf.stage "jpeg_decode" { name = "decode" .. s, size = o.size, channels = o.channels or 1,
                                          resize = "bilinear", workers = o.decoders or "auto",
                                          max_workers = o.max_decoders, rank = o.rank }
  local batch = gf.stage "batch" { name = "batch" .. s, size = o.batch, drop_last = true, rank = o.rank }
  gf.connect(reader.samples, decode.records)
  gf.connect(decode.samples, batch.samples)
  return batch
end

--- gan.outputs { G, samples, log, eval = 0, eval_n, eval_real_n, classifier, eval_features, eval_weights, data, rows,
---               cols, rank, books } -> table
-- The stages that watch training: sample_grid (a grid every `samples`
-- steps), metrics (a JSONL line every `log` steps), checkpoint (every
-- checkpoint_every steps and at the end) and, when eval > 0, the evaluator
-- (FID/IS/KID every `eval` steps against the real split `data`, on the
-- classifier's features or, with eval_features = "inception" and
-- eval_weights = FILE, on the FID Inception's: docs/eval.md). The
-- table's `publish` is how often g_step must send its weights. Under MPI,
-- rank is the rank that keeps these books (rank 0 in the MPI pipelines).
-- books = false leaves out the grid, the metrics and the evaluator (only
-- checkpoints: benchmarks).
function M.outputs(o)
  local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end
  local out = {}
  out.publish = (o.eval or 0) > 0 and gcd(o.samples, o.eval) or o.samples
  if o.books ~= false then
    out.grid = gf.stage "sample_grid" { net = o.G, every = o.samples, rows = o.rows, cols = o.cols, rank = o.rank }
    out.metrics = gf.stage "metrics" { every = o.log, rank = o.rank }
  end
  out.ckpt = gf.stage "checkpoint" { keep = 3, rank = o.rank }
  if o.books ~= false and (o.eval or 0) > 0 then
    out.eval = gf.stage "evaluator" { net = o.G, every = o.eval, n = o.eval_n, classifier = o.classifier,
                                      features = o.eval_features, weights = o.eval_weights,
                                      real = o.data, real_n = o.eval_real_n, rank = o.rank }
    gf.connect(out.eval.metrics, out.metrics.inp)
  end
  return out
end

--- gan.attach(out, g, d): connects a G/D pair to the outputs: G's weights
-- to the grid (and the evaluator), both stages' metrics and checkpoint
-- state.
function M.attach(out, g, d)
  if out.grid then
    gf.connect(g.weights, out.grid.weights)
    gf.connect(g.metrics, out.metrics.inp)
    gf.connect(d.metrics, out.metrics.inp)
  end
  if out.eval then gf.connect(g.weights, out.eval.weights) end
  gf.connect(g.state, out.ckpt.state)
  gf.connect(d.state, out.ckpt.state)
end

--- gan.exchange(g, d, params): an exchange stage for each step stage's
-- gradients, "xd" for d and "xg" for g, each wired grads -> exchange ->
-- reduced; params (mode, bucket_mb, rounds, timeout, ...) go to both.
function M.exchange(g, d, params)
  for _, pair in ipairs { { "xd", d }, { "xg", g } } do
    local p = { name = pair[1] }
    for k, v in pairs(params) do p[k] = v end
    local x = gf.stage "exchange" (p)
    gf.connect(pair[2].grads, x.grads)
    gf.connect(x.reduced, pair[2].reduced)
  end
end

return M
