-- demo: the runtime's own test stages in a small graph, to see ganflow run
-- (live progress line, end-of-run edge table) in a few seconds:
--
--   count_source --> jitter (workers = "auto", random delays) --> check_sink
--
-- The sink fails the run if an item is missing or out of order.
-- Try:  ./build/ganflow run pipelines/demo.lua n=50000 dist=bursty
-- (This is the quick start's pipeline until the training pipelines land.)
local gf = require "ganflow"

local opt = gf.args {
  n = 10000,          -- items
  dist = "exponential", -- jitter delay distribution: none, uniform, exponential, bursty
  mean_us = 400,      -- mean delay per item, microseconds
  workers = "auto",   -- jitter workers: "auto" (as many as the sink takes, up to the cores) or a number
  width = 16,         -- floats carried (and checked) per item
}

local src  = gf.stage "count_source" { n = opt.n, width = opt.width }
local jit  = gf.stage "jitter" { dist = opt.dist, mean_us = opt.mean_us, workers = opt.workers,
                                 burst_every = 50, burst_us = 20 * opt.mean_us }
local sink = gf.stage "check_sink" { expect = opt.n }

gf.connect(src.out, jit.inp)
gf.connect(jit.out, sink.inp)
local r = gf.run { steps = 0 }
print(string.format("demo: %d items checked in %.2f s (%s)", r.items, r.seconds, r.reason))
