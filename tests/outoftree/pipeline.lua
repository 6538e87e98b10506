-- The out-of-tree test's pipeline: the runtime's count_source feeding the
-- stage built outside the tree (found through GANFLOW_STAGE_PATH).
local gf = require "ganflow"
local src = gf.stage "count_source" { n = 100 }
local sum = gf.stage "oot_sum" { out = gf.arg("out", "sum.txt"), scale = 2 }
gf.connect(src.out, sum.inp)
gf.run {}
