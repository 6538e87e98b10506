local gf = require "ganflow"
local src = gf.stage "count_source" { n = 5, name = "src", rank = 0 }
local sink = gf.stage "check_sink" { name = "sink", rank = 1 }
gf.connect(src.out, sink.inp, { transport = "tcp", address = "127.0.0.1:0", timeout = 5, latency = "relaxed" })
gf.run { dir = "x", resume = "", force = true, checkpoint_every = 2, threads = 1 }
