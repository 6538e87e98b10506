-- chain: numbered items through stages placed on different ranks (cross-
-- rank edges): count_source on rank 0 -> jitter on rank 1 -> jitter (two
-- workers) on rank 2 -> check_sink on rank 3 (ranks modulo the world), so
-- every item crosses up to three transport edges. check_sink fails on a
-- gap, a repeat, a reordering or a wrong value, and at the end when the
-- count is not n. tcp=HOST:PORT carries the first edge over TCP instead.
local gf = require "ganflow"
local opt = gf.args { n = 3000, width = 64, tcp = "", timeout = 30 }
local w = gf.world()
local src = gf.stage "count_source" { n = opt.n, width = opt.width, rank = 0 }
local j1 = gf.stage "jitter" { name = "j1", dist = "uniform", mean_us = 20, rank = 1 % w }
local j2 = gf.stage "jitter" { name = "j2", dist = "exponential", mean_us = 20, rank = 2 % w, workers = 2 }
local sink = gf.stage "check_sink" { expect = opt.n, rank = 3 % w }
local first = { timeout = opt.timeout }
if opt.tcp ~= "" then first = { transport = "tcp", address = opt.tcp, timeout = opt.timeout } end
gf.connect(src.out, j1.inp, first)
gf.connect(j1.out, j2.inp, { timeout = opt.timeout })
gf.connect(j2.out, sink.inp, { capacity = 16 })
gf.run { steps = 0, quiet = true }
