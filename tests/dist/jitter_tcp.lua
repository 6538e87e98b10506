-- jitter_tcp: one cross-rank edge over TCP for the jitter test: numbered
-- items from rank 0 to a consumer of fixed speed on rank 1. depth=0 keeps
-- the receiving ring's adaptive depth; depth=N fixes it. Run as two
-- processes started by hand (GANFLOW_RANK / GANFLOW_WORLD), one per
-- network namespace; the edge table of rank 1 shows the depth the ring
-- reached and how often the consumer stalled.
local gf = require "ganflow"
local opt = gf.args { addr = "127.0.0.1:47000", n = 1200, depth = 0, service_us = 4000, width = 1024,
                      timeout = 30, dir = "" }
local src = gf.stage "count_source" { n = opt.n, width = opt.width, rank = 0 }
local sink = gf.stage "check_sink" { expect = opt.n, service_us = opt.service_us, rank = 1 }
local o = { transport = "tcp", address = opt.addr, timeout = opt.timeout, capacity = 64 }
if opt.depth > 0 then o.depth = opt.depth end
gf.connect(src.out, sink.inp, o)
gf.run { steps = 0, dir = opt.dir }
