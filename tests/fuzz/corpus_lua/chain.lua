local gf = require "ganflow"
local src = gf.stage "count_source" { n = gf.arg("n", 100), name = "src" }
local j = gf.stage "jitter" { name = "j", workers = 2, mean_us = 10 }
local sink = gf.stage "check_sink" { name = "sink" }
gf.connect(src.out, j.inp, { depth = 4, capacity = 64, min = 2 })
gf.connect(j.out, sink.inp)
gf.run { steps = 10, seed = 3, quiet = true, grace = 1.5, stall = 2, stall_stop = 7, backend = "cpu" }
