local gf = require "ganflow"
local s = gf.stage "count_source" { nn = 3 }
local r = gf.stage "lmdb_reader" { name = "reader", path = "nowhere", readahead = 0 }
local d = gf.stage "jpeg_decode" { name = "decode", crop = "centr" }
gf.connect(s.stats, d.records)
gf.run { stepz = 1 }
