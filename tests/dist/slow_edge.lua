-- slow_edge: a few numbered items, `rate` per second, from rank 0 to
-- rank 1 over one cross-rank edge with the given latency (low or
-- relaxed): the receiving end waits ~1/rate seconds for each and reports
-- how many times it polled MPI.
local gf = require "ganflow"
local opt = gf.args { n = 6, rate = 5, latency = "low" }
local src = gf.stage "count_source" { n = opt.n, rate = opt.rate, width = 4, rank = 0 }
local sink = gf.stage "check_sink" { expect = opt.n, rank = 1 % gf.world() }
gf.connect(src.out, sink.inp, { latency = opt.latency })
gf.run { steps = 0, quiet = true }
